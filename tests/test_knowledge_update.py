"""`gpucompat knowledge update` against a local index made here: small wheels holding real CUDA libraries (built
with nvcc where it is on PATH, else a fat-binary container laid out as nvcc writes it inside an ELF .nv_fatbin
section, as tests/test_inspect.py builds one), served over HTTP on 127.0.0.1 by a threaded server that honours
range requests, with PEP 691 JSON and PEP 503 HTML project pages. uv resolves the new torch's pins against it."""

from __future__ import annotations

import base64
import csv
import hashlib
import json
import os
import re
import shutil
import struct
import subprocess
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from gpucompat.knowledge.archive import FatbinStream
from gpucompat.knowledge.pyindex import Index, IndexFile, wheel_archs
from gpucompat.probe.fatbin import KIND_ELF, KIND_PTX, fatbin_section, inspect_bytes
from test_inspect import fatbin_entry, synthetic_elf

NVCC = shutil.which("nvcc")
KERNEL = "__global__ void add(float *a, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += 1; }\n" \
         'extern "C" void launch(float *a, int n) { add<<<(n + 255) / 256, 256>>>(a, n); }\n'
TORCH_ARCHS = (["sm_80", "sm_90"], ["compute_90"])  # what the new torch's library is built for
JAX_ARCHS = (["sm_75", "sm_90"], ["compute_90"])
TF_ARCHS = (["sm_75", "sm_80"], ["compute_80"])  # nvcc 13 builds nothing below sm_75


# -- CUDA libraries: nvcc's, or the container nvcc writes ---------------------------------------------------

def synthetic_library(sass: list[str], ptx: list[str]) -> bytes:
    """test_inspect.py's ELF image with .shstrtab and a .nv_fatbin, holding these entries."""
    return synthetic_elf(b"".join(fatbin_entry(KIND_ELF, int(a[3:])) for a in sass)
                         + b"".join(fatbin_entry(KIND_PTX, int(a[8:]), code_version=9 << 16) for a in ptx))


def cuda_library(work: Path, name: str, sass: list[str], ptx: list[str]) -> bytes:
    if not NVCC:
        return synthetic_library(sass, ptx)
    (work / "k.cu").write_text(KERNEL)
    flags = [f for a in sass for f in ("-gencode", f"arch=compute_{a[3:]},code={a}")] + \
            [f for a in ptx for f in ("-gencode", f"arch={a},code={a}")]
    subprocess.run([NVCC, "-shared", "-Xcompiler", "-fPIC", "-o", str(work / name), str(work / "k.cu"), *flags], check=True, capture_output=True)
    return (work / name).read_bytes()


# -- wheels and the index ----------------------------------------------------------------------------------

def make_wheel(folder: Path, name: str, version: str, tag: str, members: dict[str, bytes], requires: tuple[str, ...] = (),
               python: str = ">=3.10") -> Path:
    dist = f"{name.replace('-', '_')}-{version}"
    extras = sorted({m.group(1) for r in requires if (m := re.search(r'extra == "([a-z-]+)"', r))})
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\nRequires-Python: {python}\n" + \
        "".join(f"Provides-Extra: {e}\n" for e in extras) + "".join(f"Requires-Dist: {r}\n" for r in requires)
    files = {**members, f"{dist}.dist-info/METADATA": metadata.encode(),
             f"{dist}.dist-info/WHEEL": f"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()}
    record = "".join(f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
                     for path, data in files.items()) + f"{dist}.dist-info/RECORD,,\n"
    path = folder / f"{dist}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for member, data in {**files, f"{dist}.dist-info/RECORD": record.encode()}.items():
            archive.writestr(member, data, zipfile.ZIP_STORED if member.endswith(".bin") else zipfile.ZIP_DEFLATED)
    return path


@pytest.fixture(scope="module")
def wheelhouse(tmp_path_factory) -> Path:
    work, folder = tmp_path_factory.mktemp("cuda"), tmp_path_factory.mktemp("wheelhouse")
    torch_lib = cuda_library(work, "libtorch_cuda.so", *TORCH_ARCHS)
    jax_lib = cuda_library(work, "xla_cuda_plugin.so", *JAX_ARCHS)
    filler = os.urandom(3 << 20)  # the CPU half of a torch wheel: bytes a kernel reader has no reason to fetch
    # releases one past the newest the packaged tables include (newest_releases.csv: torch 2.15, jax 0.12)
    make_wheel(folder, "torch", "2.16.0", "cp312-cp312-manylinux_2_28_x86_64",
               {"torch/__init__.py": b"", "torch/lib/libtorch_cuda.so": torch_lib, "torch/lib/libtorch_cpu.bin": filler},
               ("nvidia-cuda-runtime==13.0.96",))
    make_wheel(folder, "nvidia-cuda-runtime", "13.0.96", "py3-none-manylinux_2_28_x86_64", {"nvidia/cu13/__init__.py": b""}, python=">=3")
    make_wheel(folder, "jaxlib", "0.13.0", "cp312-cp312-manylinux_2_28_x86_64", {"jaxlib/__init__.py": b""})
    make_wheel(folder, "jax-cuda13-plugin", "0.13.0", "cp312-cp312-manylinux_2_28_x86_64",
               {"jax_cuda13_plugin/__init__.py": b"", "jax_cuda13_plugin/xla_cuda_plugin.so": jax_lib})
    # TensorFlow 2.22 (its [and-cuda] extra pins CUDA 12.5 and cuDNN 9.3) and a CuPy release past the tables
    tf_lib = cuda_library(work, "libtensorflow_cc.so", *TF_ARCHS)
    make_wheel(folder, "tensorflow", "2.22.0", "cp312-cp312-manylinux_2_27_x86_64", {"tensorflow/libtensorflow_cc.so.2": tf_lib},
               ('nvidia-cuda-runtime-cu12==12.5.82; extra == "and-cuda"', 'nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"'))
    make_wheel(folder, "nvidia-cuda-runtime-cu12", "12.5.82", "py3-none-manylinux2014_x86_64", {"nvidia/cuda_runtime/__init__.py": b""}, python=">=3")
    make_wheel(folder, "nvidia-cudnn-cu12", "9.3.0.75", "py3-none-manylinux2014_x86_64", {"nvidia/cudnn/__init__.py": b""}, python=">=3")
    make_wheel(folder, "cupy-cuda13x", "14.3.0", "cp312-cp312-manylinux2014_x86_64", {"cupy/__init__.py": b""})
    return folder


def wheel_metadata(path: Path) -> bytes:
    """A wheel's METADATA, as an index serves it beside the wheel (PEP 658)."""
    with zipfile.ZipFile(path) as archive:
        return archive.read(next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA")))


class IndexServer:
    """A simple-API index of a wheelhouse on 127.0.0.1: JSON (PEP 691) or HTML (PEP 503) project pages, files with
    Range support and their PEP 658 metadata (<file>.metadata, its sha256 on the page). `ranges=False` answers a range
    request with the whole file; `metadata=False` serves and declares none; `failing` paths answer 500; `missing`
    file names are listed but answer 404; `extra` links ({project: [(filename, href)]}) are listed as they are;
    `wrong_hash` file names are listed with another sha256 (and metadata hash)."""

    def __init__(self, folder: Path):
        self.folder, self.ranges, self.failing, self.requests, self.json_pages = folder, True, (), [], True
        self.metadata, self.missing, self.extra, self.wrong_hash = True, set(), {}, set()
        self.methods = []  # (method, path) of every request
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self.do_GET(body=False)

            def do_GET(self, body=True):
                server.requests.append(self.path)
                server.methods.append((self.command, self.path))
                if any(part in self.path for part in server.failing):
                    return self._send(500, b"broken", "text/plain", body)
                found = re.fullmatch(r"/simple/([a-z0-9-]+)/", self.path)
                if found:
                    return self._project(found.group(1), body)
                name = self.path[7:].removesuffix(".metadata")
                if self.path.startswith("/files/") and name not in server.missing and (server.folder / name).is_file():
                    if self.path.endswith(".metadata"):
                        if not server.metadata:
                            return self._send(404, b"not found", "text/plain", body)
                        return self._send(200, wheel_metadata(server.folder / name), "application/octet-stream", body)
                    return self._file(server.folder / name, body)
                self._send(404, b"not found", "text/plain", body)

            def _project(self, project: str, body: bool):
                wheels = sorted(p for p in server.folder.glob("*.whl") if p.name.split("-")[0].replace("_", "-") == project)
                if not wheels and project not in server.extra:
                    return self._send(404, b"not found", "text/plain", body)
                def sha(data, name):
                    return hashlib.sha256(data + (b"tampered" if name in server.wrong_hash else b"")).hexdigest()
                files = [{"filename": p.name, "url": f"/files/{p.name}", "hashes": {"sha256": sha(p.read_bytes(), p.name)},
                          "size": p.stat().st_size, **({"core-metadata": {"sha256": sha(wheel_metadata(p), p.name)}} if server.metadata else {})}
                         for p in wheels]
                files += [{"filename": name, "url": href, "hashes": {}} for name, href in server.extra.get(project, [])]
                if server.json_pages and "json" in self.headers.get("Accept", ""):
                    page = json.dumps({"meta": {"api-version": "1.1"}, "name": project, "files": files, "versions": []}).encode()
                    return self._send(200, page, "application/vnd.pypi.simple.v1+json", body)
                links = "".join(f'<a href="{f["url"]}{"#sha256=" + f["hashes"]["sha256"] if f["hashes"] else ""}"'
                                + (f' data-dist-info-metadata="sha256={f["core-metadata"]["sha256"]}"' if "core-metadata" in f else "")
                                + f'>{f["filename"]}</a>\n' for f in files)
                self._send(200, f"<html><body>{links}</body></html>".encode(), "text/html", body)

            def _file(self, path: Path, body: bool):
                data = path.read_bytes()
                asked = re.fullmatch(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
                if not asked or not server.ranges:
                    return self._send(200, data, "application/octet-stream", body)
                first, last = asked.groups()
                start = len(data) - int(last) if not first else int(first)
                end = len(data) - 1 if not first or not last else min(int(last), len(data) - 1)
                self._send(206, data[max(start, 0):end + 1], "application/octet-stream", body,
                           {"Content-Range": f"bytes {max(start, 0)}-{end}/{len(data)}"})

            def _send(self, code, data, kind, body, headers=None):
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.send_header("Accept-Ranges", "bytes")
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                if body:
                    self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/simple/"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(wheelhouse):
    running = IndexServer(wheelhouse)
    yield running
    running.close()


@pytest.fixture
def env(isolated):
    return {"GPUCOMPAT_KNOWLEDGE": str(isolated / "data" / "gpucompat" / "knowledge"), "NO_COLOR": "1"}


def update(env, *args, check=0):
    proc = run_cli("knowledge", "update", *args, "--json", env=env, check=check)
    return json.loads(proc.stdout) if check == 0 else proc


def overlay_files(env) -> dict[str, bytes]:
    root = Path(env["GPUCOMPAT_KNOWLEDGE"])
    return {p.name: p.read_bytes() for p in root.iterdir()} if root.exists() else {}


# -- the update, end to end ---------------------------------------------------------------------------------

def test_update_learns_a_new_torch_and_jax_and_explain_answers_from_it(server, wheelhouse, env, tmp_path):
    result = update(env, "--index", server.url, "--plan", str(tmp_path / "new.toml"))
    torch = next(e for e in result["learned"] if e["package"] == "torch")
    assert (torch["release"], torch["versions"]) == ("2.16", ["2.16.0"])
    default = torch["variants"][0]
    assert (default["variant"], default["cuda"], default["how"]) == ("cu130", "13.0", "read")  # from uv's pin nvidia-cuda-runtime==13.0.96
    assert default["sass"].split(";") == TORCH_ARCHS[0] and default["ptx"].split(";") == TORCH_ARCHS[1]
    jax = next(e for e in result["learned"] if e["package"] == "jax")
    assert [(v["variant"], v["sass"].split(";"), v["how"]) for v in jax["variants"]] == [("cuda13", JAX_ARCHS[0], "read")]
    # range requests: the torch wheel's CPU half (3 MiB, stored) was never fetched
    torch_wheel = next(wheelhouse.glob("torch-*.whl")).stat().st_size
    assert 0 < torch["bytes"] < torch_wheel - (2 << 20)
    assert result["range_requests"] is True and result["rows"]["torch_builds"] == 1

    proc = run_cli("explain", "torch==2.16.0", "--gpu", "H100", "--driver", "580.95.05", "--json", env=env, check=0)
    answer = json.loads(proc.stdout)
    assert answer["verdict"] == "pass"
    learned = [r for r in answer["reasons"] if r["source"].startswith(f"learned from {server.url.rstrip('/')} on ")]
    assert {r["rule"] for r in learned} >= {"PyPI default build", "architecture"}, answer["reasons"]
    proc = run_cli("explain", "jax[cuda13]==0.13.0", "--gpu", "T4", "--driver", "580.95.05", "--python", "3.12", "--json", env=env, check=0)
    assert json.loads(proc.stdout)["verdict"] == "pass"  # sm_75 read from the plugin's own library
    proc = run_cli("explain", "jax[cuda13]==0.13.0", "--gpu", "A100", "--driver", "580.95.05", "--python", "3.12", "--json", env=env, check=0)
    failed = json.loads(proc.stdout)  # sm_75 SASS does not run on CC 8.0 and compute_90 PTX cannot be JIT-compiled down to it
    assert (failed["verdict"], failed["code"]) == ("fail", "ARCH_UNSUPPORTED")
    assert any(r["rule"] == "architecture" and r["verdict"] == "fail" and "learned from" in r["source"] for r in failed["reasons"])

    # a release the index does not have is no such release, naming the newest known, not an uncertain answer
    proc = run_cli("explain", "torch==2.17.0", "--gpu", "H100", "--driver", "580.95.05", env=env, check=2)
    assert "no such release" in proc.stderr and "2.16.0" in proc.stderr and "gpucompat knowledge update" in proc.stderr
    proc = run_cli("explain", "torch==2.4.7", "--gpu", "H100", "--driver", "580.95.05", env=env, check=2)
    assert "no such release" in proc.stderr and "knowledge update" not in proc.stderr  # older than the newest: it never will be

    # the plan of what is new: `gpucompat sweep` accepts it (a dry run resolves it against the same index)
    plan = (tmp_path / "new.toml").read_text()
    assert 'framework = "torch"' in plan and 'versions = ["2.16.0"]' in plan and 'variants = ["cuda13"]' in plan
    assert 'targets = "local"' in plan
    out = tmp_path / "dry"
    proc = run_cli("sweep", str(tmp_path / "new.toml"), "--dry-run", "--out", str(out), env={**env, "UV_DEFAULT_INDEX": server.url}, check=0)
    assert any(out.rglob("*")), proc.stderr


def test_a_second_update_keeps_what_it_read_and_fetches_no_wheel(server, env):
    update(env, "--index", server.url)
    before = overlay_files(env)
    again = update(env, "--index", server.url)
    assert again["bytes_fetched"] == 0  # torch 2.16 and jax 0.13 were read the first time: only the index pages are read
    assert {(e["package"], v["how"]) for e in again["learned"] for v in e["variants"] if e["package"] != "cupy-cuda13x"} == {
        ("torch", "kept from the last update"), ("jax", "kept from the last update"), ("tensorflow", "kept from the last update")}
    assert overlay_files(env)["torch_builds.csv"] == before["torch_builds.csv"]


def test_a_server_failing_midway_changes_nothing(server, env):
    server.ranges = False  # a first update that could only infer: the next one reads the wheels again
    update(env, "--index", server.url)
    before, target = overlay_files(env), os.readlink(env["GPUCOMPAT_KNOWLEDGE"])
    server.ranges, server.failing = True, ("/files/jax_cuda13_plugin",)  # torch is read, then the plugin's wheel fails
    proc = update(env, "--index", server.url, check=2)
    assert "answered 500" in proc.stderr and "nothing was changed" in proc.stderr and "Traceback" not in proc.stderr
    assert any(path.startswith("/files/torch-") for path in server.requests)  # it failed midway, after reading torch
    assert os.readlink(env["GPUCOMPAT_KNOWLEDGE"]) == target and overlay_files(env) == before
    assert [p.name for p in Path(env["GPUCOMPAT_KNOWLEDGE"]).parent.iterdir() if p.name.startswith(".")] == [target]  # no half-written folder


def test_without_range_requests_the_kernels_are_inferred_and_nothing_is_downloaded(server, env):
    server.ranges = False
    result = update(env, "--index", server.url)
    torch = next(e for e in result["learned"] if e["package"] == "torch")
    assert torch["variants"][0]["how"] == "inferred" and result["range_requests"] is False
    assert result["bytes_fetched"] == 0
    rows = Path(env["GPUCOMPAT_KNOWLEDGE"], "torch_builds.csv").read_text()
    assert "inferred from torch 2.15 cu130" in rows and "range requests" in rows  # the previous release of the same variant
    assert ",low," in rows  # 2.15 cu130 is itself inferred (low confidence): so is what is inferred from it


def test_offline_answers_from_what_is_there(server, wheelhouse, env, tmp_path):
    # no overlay yet: explain still knows the release list it shipped with, offline
    proc = run_cli("explain", "torch==9.9", "--gpu", "H100", "--driver", "580.95.05", env=env, check=2)
    assert "no such release" in proc.stderr and "2.15.0" in proc.stderr
    proc = run_cli("explain", "torch==2.15.0", "--gpu", "H100", "--driver", "580.95.05", "--json", env=env, check=0)
    shipped = json.loads(proc.stdout)  # the newest release on the shipped list is one the shipped tables describe
    assert shipped["verdict"] == "pass" and not any("gpucompat knowledge update" in n for n in shipped["notes"])
    # --offline with an index asks nothing and changes nothing
    shown = update(env, "--index", server.url, "--offline")
    assert shown["changed"] is False and server.requests == [] and overlay_files(env) == {}
    # --offline from a wheelhouse: learned with uv offline against the folder, no server at all
    learned = update(env, "--wheelhouse", str(wheelhouse), "--offline")
    assert learned["index"] == f"the wheelhouse {wheelhouse}" and server.requests == []
    assert next(e for e in learned["learned"] if e["package"] == "torch")["variants"][0]["sass"].split(";") == TORCH_ARCHS[0]


def test_nothing_new_says_how_current_the_tables_are(env, tmp_path):
    """An index with nothing past the tables (issue 39 section 8): the newest release of each framework they hold, and the day checked."""
    empty = tmp_path / "wheelhouse"
    empty.mkdir()
    result = update(env, "--wheelhouse", str(empty))
    assert result["learned"] == []
    with (REPO / "src" / "gpucompat" / "knowledge" / "data" / "newest_releases.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))  # torch 2.15.0, jax 0.12.0.1, ... checked 2026-11-27 when this was written
    assert len({r["checked"] for r in rows}) == 1
    held = ", ".join(f"{r['framework']} {r['release']}" for r in rows)
    assert result["current"] == f"nothing new on the wheelhouse {empty} past the tables: they hold {held} (checked {rows[0]['checked']})"
    assert "torch 2." in held
    said = run_cli("knowledge", "update", "--wheelhouse", str(empty), env=env, check=0).stdout
    assert result["current"] in said.splitlines()


def test_bad_inputs_are_one_sentence(env, tmp_path):
    proc = update(env, "--index", "http://127.0.0.1:9/simple/", check=2)
    assert "does not answer" in proc.stderr and "Traceback" not in proc.stderr
    proc = update(env, "--wheelhouse", str(tmp_path / "missing"), check=2)
    assert "is not a directory" in proc.stderr
    proc = update(env, "--wheelhouse", str(tmp_path), "--index", "http://127.0.0.1:9/simple/", check=2)
    assert "not both" in proc.stderr
    proc = update(env, "--wheelhouse", str(tmp_path), "--plan", str(tmp_path / "no" / "such" / "new.toml"), check=2)
    assert "does not exist" in proc.stderr


# -- the readers ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("piece", [1, 13, 4096, 1 << 20])
def test_the_streamed_walk_agrees_with_the_probes_reader(wheelhouse, piece):
    with zipfile.ZipFile(next(wheelhouse.glob("torch-*.whl"))) as archive:
        data = archive.read("torch/lib/libtorch_cuda.so")
    stream = FatbinStream()
    for start in range(0, len(data), piece):
        stream.feed(data[start:start + piece])
    section = fatbin_section(data)
    found = stream.within(section[0], section[0] + section[1])
    expected = inspect_bytes(data)
    assert found is not None and (found.sass, found.ptx, found.ptx_isa, found.entries) == (expected.sass, expected.ptx, expected.ptx_isa, expected.entries)
    assert set(TORCH_ARCHS[0]) <= found.sass


def test_range_reading_fetches_the_libraries_not_the_wheel(server, wheelhouse):
    index = Index(server.url)
    files = index.files("torch")
    assert [f.filename for f in files] == [p.name for p in wheelhouse.glob("torch-*.whl")]
    archs, members = wheel_archs(index, files[0], lambda name: "libtorch_cuda" in name)
    assert set(TORCH_ARCHS[0]) <= archs.sass and members == ["libtorch_cuda.so (streamed)"]
    assert 0 < index.fetched < files[0].size - (2 << 20)
    server.json_pages = False  # a PEP 503 HTML page lists the same files
    assert [f.filename for f in Index(server.url).files("jax-cuda13-plugin")] == [p.name for p in wheelhouse.glob("jax_cuda13_plugin-*.whl")]
    assert Index(server.url).files("no-such-project") is None


def forge_size(wheel: Path, member: str, size: int) -> None:
    """Declare `size` inflated bytes for `member` in the wheel's central directory (its local header and data stay)."""
    data = bytearray(wheel.read_bytes())
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        length, = struct.unpack_from("<H", data, at + 28)
        if data[at + 46:at + 46 + length] == member.encode():
            struct.pack_into("<I", data, at + 24, size)
        at = data.find(b"PK\x01\x02", at + 4)
    wheel.write_bytes(bytes(data))


def test_a_zip_bomb_in_a_wheel_stops_the_update_in_one_sentence(wheelhouse, env, tmp_path):
    """The update reads a wheel's libraries through inspect's bounded reader (knowledge/archive.py): a libtorch_cuda.so
    whose central directory says it inflates to 4 GiB, thousands of times its compressed size, is one sentence and
    exit 2 before a byte of it is inflated, from a wheelhouse and over range requests alike, and nothing is learned."""
    folder = tmp_path / "wheelhouse"
    shutil.copytree(wheelhouse, folder)
    torch = next(folder.glob("torch-*.whl"))
    forge_size(torch, "torch/lib/libtorch_cuda.so", 0xFFFFFFF0)
    running = IndexServer(folder)
    try:
        for where, args in ((f"the wheelhouse {folder}", ("--wheelhouse", str(folder), "--offline")), (running.url.rstrip("/"), ("--index", running.url))):
            proc = update(env, *args, check=2)
            said = proc.stderr.strip().splitlines()[-1]  # after the lines that say what the update is doing
            assert said.startswith(f"error: {torch.name} from {where}: 'torch/lib/libtorch_cuda.so' inflates from ")
            assert "Traceback" not in proc.stderr
            assert "to 4.0 GiB (" in said and said.endswith("past the 100:1 that no real library comes near (they compress at most "
                                                           "7:1 above 16 MiB), so it is a zip bomb; nothing was changed.")
            assert overlay_files(env) == {}
    finally:
        running.close()


def test_a_wheel_name_gives_its_release_and_pythons():
    from gpucompat.learn import releases

    found = releases([IndexFile("torch-2.15.0-cp312-cp312-manylinux_2_28_x86_64.whl", "u"), IndexFile("torch-2.15.0+cu126-cp313-cp313-manylinux_2_28_x86_64.whl", "u"),
                      IndexFile("torch-2.15.0-cp312-cp312-win_amd64.whl", "u"), IndexFile("torch-2.15.0-cp314-cp314t-manylinux_2_28_x86_64.whl", "u", yanked=True)], "torch")
    assert sorted(found["2.15.0"]) == ["", "cu126"]
    assert found["2.15.0"][""].pythons == {"3.12"} and found["2.15.0"]["cu126"].pythons == {"3.13"}


def test_a_release_past_the_packaged_list_is_learned_from_a_wheelhouse(wheelhouse, env, tmp_path):
    """torch 2.17.0 is on no list the tables shipped with: the update adds its Python window and release list, so
    explain knows it exists (and that 2.18.0, past it, does not), offline."""
    folder = tmp_path / "wheelhouse"
    shutil.copytree(wheelhouse, folder)
    with zipfile.ZipFile(next(wheelhouse.glob("torch-*.whl"))) as archive:
        library = archive.read("torch/lib/libtorch_cuda.so")
    make_wheel(folder, "torch", "2.17.0", "cp313-cp313-manylinux_2_28_x86_64", {"torch/lib/libtorch_cuda.so": library},
               ("nvidia-cuda-runtime==13.0.96",))
    result = update(env, "--wheelhouse", str(folder), "--offline")
    assert [e["release"] for e in result["learned"] if e["package"] == "torch"] == ["2.16", "2.17"]
    assert "torch,2.17.0,3.13," in Path(env["GPUCOMPAT_KNOWLEDGE"], "python_wheels.csv").read_text()
    proc = run_cli("explain", "torch==2.17.0", "--gpu", "H100", "--driver", "580.95.05", "--python", "3.13", "--json", env=env, check=0)
    answer = json.loads(proc.stdout)
    assert answer["verdict"] == "pass" and any(r["rule"] == "wheel for this Python" and "learned from the wheelhouse" in r["source"]
                                               for r in answer["reasons"])
    proc = run_cli("explain", "torch==2.18.0", "--gpu", "H100", "--driver", "580.95.05", env=env, check=2)
    assert "no such release" in proc.stderr and "go up to 2.17.0" in proc.stderr


def test_tensorflow_and_cupy_releases_past_the_tables(server, env):
    result = update(env, "--index", server.url)
    tf = next(e for e in result["learned"] if e["package"] == "tensorflow")
    assert (tf["release"], tf["variants"][0]["cuda"], tf["variants"][0]["how"]) == ("2.22", "12.5", "read")
    row = next(r for r in csv.DictReader(Path(env["GPUCOMPAT_KNOWLEDGE"], "tensorflow_builds.csv").open()))
    assert (row["cudnn"], row["pythons"], row["sass"], row["ptx"], row["min_cc"]) == ("9.3", "3.12-3.12", "sm_75;sm_80", "compute_80", "7.5")
    cupy = next(e for e in result["learned"] if e["package"] == "cupy-cuda13x")
    assert cupy["versions"] == ["14.3.0"]
    answer = json.loads(run_cli("explain", "tensorflow[and-cuda]==2.22.0", "--gpu", "A100", "--driver", "580.95.05", "--python", "3.12", "--json",
                                env=env, check=0).stdout)
    assert answer["verdict"] == "pass" and answer["spec"] == "tensorflow[and-cuda]==2.22.0"
    assert any(r["rule"] == "architecture" and "learned from" in r["source"] for r in answer["reasons"])
    answer = json.loads(run_cli("explain", "cupy-cuda13x==14.3.0", "--gpu", "H100", "--driver", "580.95.05", "--python", "3.12", "--json",
                                env=env, check=0).stdout)
    # installable as learned; without [ctk] it needs the system's CUDA toolkit for NVRTC (issue 40.3): conditional
    assert answer["verdict"] == "conditional" and any("learned from" in r["source"] for r in answer["reasons"])



def test_a_release_with_no_plain_cpython_wheel_is_one_sentence():
    from gpucompat.errors import UserError
    from gpucompat.learn import _resolving_python

    assert _resolving_python("torch", "2.99.0", ["3.11", "3.12", "3.13"]) == "3.12"
    assert _resolving_python("torch", "2.99.0", ["3.13", "3.14"]) == "3.14"
    with pytest.raises(UserError, match=r"torch 2.99.0 on the index has no wheel for a plain CPython, .*nothing was changed"):
        _resolving_python("torch", "2.99.0", [])
