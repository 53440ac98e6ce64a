"""`gpucompat knowledge update` learns only what it read and checked (issue 35 item 8), against real local HTTP
servers on 127.0.0.1 (test_knowledge_update.py's index): a file the index lists but does not serve, a hash that does
not match, links that are no file of the index (javascript:, file:, another host), --dry-run's listing and the bytes
a real run says first; and the overlay read back: damaged or hand-edited files are one warning naming the file while
the packaged tables answer, `knowledge reset`, learned.json nested too deep."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import run_cli
from gpucompat.knowledge.pyindex import Index, NotServed
from test_knowledge_update import IndexServer, env, make_wheel, update, wheelhouse  # noqa: F401 (fixtures)

CUPY_98 = "cupy_cuda12x-98.0.0-cp312-cp312-manylinux2014_x86_64.whl"


@pytest.fixture
def folder(wheelhouse, tmp_path):  # noqa: F811
    """The test index's wheels plus cupy-cuda12x 98.0.0, in a folder of this test's own."""
    copy = tmp_path / "wheels"
    shutil.copytree(wheelhouse, copy)
    make_wheel(copy, "cupy-cuda12x", "98.0.0", "cp312-cp312-manylinux2014_x86_64", {"cupy/__init__.py": b""})
    return copy


@pytest.fixture
def served(folder):
    running = IndexServer(folder)
    yield running
    running.close()


# -- what the index lists is not what it serves --------------------------------------------------------------

@pytest.mark.parametrize("metadata", [True, False])
def test_a_listed_file_the_index_does_not_serve_is_not_learned(served, env, metadata):  # noqa: F811
    served.missing, served.metadata = {CUPY_98}, metadata  # listed on the page; the file (and its metadata) answers 404
    result = update(env, "--index", served.url)
    assert not any(e["package"] == "cupy-cuda12x" for e in result["learned"])
    assert any("cupy-cuda12x 98.0.0 is not learned" in s for s in result["not_learned"])
    assert any(CUPY_98 in s and "404" in s for s in result["refused"]), result["refused"]
    assert "98.0.0" not in result["releases"].get("cupy-cuda12x", [])
    assert "cupy-cuda12x" not in Path(env["GPUCOMPAT_KNOWLEDGE"], "cupy_packages.csv").read_text()
    # what it did serve is learned as before
    assert any(e["package"] == "torch" and e["variants"][0]["how"] == "read" for e in result["learned"])
    proc = run_cli("explain", "cupy-cuda12x==98.0.0", "--gpu", "H100", "--driver", "580.95.05", env=env, check=2)
    assert "no such release" in proc.stderr
    proc = run_cli("advise", "cupy", "--gpu", "H100", "--driver", "580.95.05", env=env)
    assert "98.0.0" not in proc.stdout


def test_the_same_file_served_is_learned(served, env):  # noqa: F811
    result = update(env, "--index", served.url)
    cupy = next(e for e in result["learned"] if e["package"] == "cupy-cuda12x")
    assert cupy["versions"] == ["98.0.0"] and result["checked_bytes"] > 0 and result["refused"] == []


def test_a_hash_the_file_does_not_match_is_refused(served, env, folder):
    served.wrong_hash = {CUPY_98}
    item = next(f for f in Index(served.url).files("cupy-cuda12x") if f.filename == CUPY_98)
    with pytest.raises(NotServed, match=r"metadata .* does not match the index's sha256 hash"):
        Index(served.url).check(item)
    served.metadata, served.ranges = False, False  # no metadata, no ranges: the file is fetched whole and its hash checked
    item = next(f for f in Index(served.url).files("cupy-cuda12x") if f.filename == CUPY_98)
    index = Index(served.url)
    with pytest.raises(NotServed, match=r"does not match the index's sha256 hash"):
        index.check(item)
    assert index.fetched == (folder / CUPY_98).stat().st_size
    result = update(env, "--index", served.url)
    assert not any(e["package"] == "cupy-cuda12x" for e in result["learned"])
    assert any("does not match the index's sha256 hash" in s for s in result["refused"])
    served.wrong_hash = set()  # the same, with the right hash: learned from the whole file
    index = Index(served.url)
    assert index.check(next(f for f in index.files("cupy-cuda12x") if f.filename == CUPY_98)) == "whole"


def test_links_that_are_no_file_of_the_index_are_refused(served, env):  # noqa: F811
    name = "cupy_cuda13x-99.0.0-cp312-cp312-manylinux2014_x86_64.whl"
    served.extra = {"cupy-cuda13x": [(name, "javascript:alert(1)"), (name, "file:///etc/passwd"),
                                     (name, "http://198.51.100.7/files/" + name)]}
    for json_pages in (True, False):
        served.json_pages = json_pages
        index = Index(served.url)
        assert name not in [f.filename for f in index.files("cupy-cuda13x")]
        assert len(index.refused) == 3, index.refused
        javascript, local, elsewhere = index.refused
        assert "a javascript: link" in javascript and "a file: link" in local and "this machine's own files" in local
        assert "leaves the index's host 127.0.0.1" in elsewhere and "198.51.100.7" in elsewhere
        assert all(s.count(". ") == 0 and s.endswith(".") for s in index.refused)  # one sentence each
    result = update(env, "--index", served.url)
    assert len([s for s in result["refused"] if name[:20] in s or "javascript" in s or "file:" in s or "198.51" in s]) == 3
    assert all(v != "99.0.0" for e in result["learned"] for v in e["versions"])
    proc = run_cli("knowledge", "update", "--index", served.url, env=env, check=0)  # the text report says them too
    assert proc.stdout.count("refused: ") == 3 and "javascript:" in proc.stdout


def test_pypis_file_host_is_the_index_s_own():
    index = Index("https://pypi.org/simple/")
    assert index._link("torch", "https://files.pythonhosted.org/packages/x/torch.whl", "https://pypi.org/simple/torch/")
    assert index._link("torch", "http://files.pythonhosted.org/packages/x/torch.whl", "https://pypi.org/simple/torch/") is None
    assert "https to http" in index.refused[0]
    assert Index("http://127.0.0.1:1/simple/", hosts=("files.example",))._link("x", "http://files.example/a.whl", "http://127.0.0.1:1/simple/x/")


# -- what it will fetch, said first -----------------------------------------------------------------------------

@pytest.mark.parametrize("json_pages", [True, False])
def test_dry_run_lists_the_wheels_and_their_bytes_and_fetches_none(served, env, folder, json_pages):  # noqa: F811
    served.json_pages = json_pages  # JSON pages give sizes; HTML pages do not: then a HEAD request's Content-Length
    result = update(env, "--index", served.url, "--dry-run")
    assert result["dry_run"] is True and result["changed"] is False
    reads = {r["file"]: r["bytes"] for r in result["fetch"]["reads"]}
    sizes = {p.name: p.stat().st_size for p in folder.glob("*.whl")}
    expected = [n for n in sizes if n.startswith(("torch-", "jax_cuda13_plugin-", "tensorflow-"))]
    assert sorted(reads) == sorted(expected) and all(reads[n] == sizes[n] for n in expected)
    assert result["fetch"]["bytes"] == sum(sizes[n] for n in expected)
    assert CUPY_98 in result["fetch"]["checks"]
    assert not [(m, p) for m, p in served.methods if m == "GET" and p.startswith("/files/")]  # no file fetched, HEAD at most
    assert bool([m for m, p in served.methods if m == "HEAD"]) is not json_pages
    assert not Path(env["GPUCOMPAT_KNOWLEDGE"]).exists()
    proc = run_cli("knowledge", "update", "--index", served.url, "--dry-run", env=env, check=0)
    assert "dry run:" in proc.stdout and f"at most {result['fetch']['bytes']:,} bytes" in proc.stdout and "torch-2.16.0" in proc.stdout


def test_a_real_run_says_the_bytes_before_it_fetches(served, env):  # noqa: F811
    planned = update(env, "--index", served.url, "--dry-run")["fetch"]["bytes"]
    proc = run_cli("knowledge", "update", "--index", served.url, "--json", env=env, check=0)
    assert f"fetching up to {planned:,} bytes from" in proc.stderr
    result = json.loads(proc.stdout)
    assert result["planned_bytes"] == planned and result["bytes_fetched"] <= planned
    proc = run_cli("knowledge", "update", "--index", served.url, "--dry-run", "--plan", "x.toml", env=env, check=2)
    assert "takes no --plan" in proc.stderr


# -- the overlay read back -------------------------------------------------------------------------------------

TORCH_COLUMNS = "release,variant,cuda,sass,ptx,confidence,source\n"
ROW = "2.15,cu130,{cuda},sm_80;sm_90,compute_90,high,learned from PyPI on 2026-11-26: by hand\n"


def _overlay(env, files: dict[str, bytes]) -> Path:
    """An overlay as an update leaves it: a link to a folder beside it, holding these files."""
    link = Path(env["GPUCOMPAT_KNOWLEDGE"])
    folder = link.parent / f".{link.name}-test"
    folder.mkdir(parents=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    os.symlink(folder.name, link)
    return folder


@pytest.mark.parametrize("data, why", [
    ((TORCH_COLUMNS + ROW.format(cuda="13.0")).encode().replace(b"by hand", b"by h\xff\xfend"), "is not UTF-8 text"),
    ((TORCH_COLUMNS + ROW.format(cuda="banana")).encode(), "cuda 'banana' is not a CUDA version"),
    ((TORCH_COLUMNS + ROW.format(cuda="10.0")).encode(), "cuda 10.0 is outside CUDA 11 to 19"),
    ((TORCH_COLUMNS + ROW.format(cuda="12.6")).encode(), "CUDA 12.6 is not the CUDA of the variant cu130"),
    ((TORCH_COLUMNS + ROW.format(cuda="13.0").replace("sm_90", "sm_nine")).encode(), "sass 'sm_nine' is not an architecture"),
    (b"release,variant\n2.15,cu130\n", "has the columns"),
])
def test_a_damaged_or_hand_edited_overlay_is_one_sentence_and_the_packaged_tables_answer(env, data, why):  # noqa: F811
    folder = _overlay(env, {"torch_builds.csv": data})
    proc = run_cli("explain", "torch==2.4.1", "--gpu", "H100", "--driver", "580.95.05", "--json", env=env, check=0)
    assert json.loads(proc.stdout)["verdict"] == "pass"  # the packaged tables answer
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and why in warnings[0], proc.stderr
    assert str(folder / "torch_builds.csv") in warnings[0] or "torch_builds.csv" in warnings[0]
    assert "gpucompat knowledge reset" in warnings[0] and "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    proc = run_cli("knowledge", "update", "--offline", env=env, check=2)  # showing the overlay: the sentence, exit 2
    assert why in proc.stderr and "gpucompat knowledge reset" in proc.stderr
    proc = run_cli("knowledge", "reset", env=env, check=0)
    assert "removed the learned knowledge" in proc.stdout
    assert not Path(env["GPUCOMPAT_KNOWLEDGE"]).exists() and not folder.exists()
    proc = run_cli("explain", "torch==2.4.1", "--gpu", "H100", "--driver", "580.95.05", env=env, check=0)
    assert "warning:" not in proc.stderr


def test_a_damaged_overlay_is_replaced_by_the_next_update(served, env):  # noqa: F811
    _overlay(env, {"torch_builds.csv": (TORCH_COLUMNS + ROW.format(cuda="banana")).encode()})
    result = update(env, "--index", served.url)
    assert "banana" in result["replaced_damaged"]
    proc = run_cli("explain", "torch==2.16.0", "--gpu", "H100", "--driver", "580.95.05", "--json", env=env, check=0)
    assert json.loads(proc.stdout)["verdict"] == "pass" and "warning:" not in proc.stderr


def test_learned_json_nested_too_deep_is_refused_in_one_sentence(env):  # noqa: F811
    _overlay(env, {"learned.json": b'{"releases": ' + b"[" * 200000 + b"]" * 200000 + b"}"})
    proc = run_cli("explain", "torch==2.4.1", "--gpu", "H100", "--driver", "580.95.05", env=env, check=0)
    assert "nests JSON deeper than 32 levels" in proc.stderr and "learned.json" in proc.stderr and "Traceback" not in proc.stderr
    proc = run_cli("knowledge", "update", "--offline", env=env, check=2)
    assert "nests JSON deeper than 32 levels" in proc.stderr


def test_reset_with_nothing_learned_and_a_folder_that_is_not_ours(env):  # noqa: F811
    proc = run_cli("knowledge", "reset", env=env, check=0)
    assert "nothing learned to remove" in proc.stdout
    Path(env["GPUCOMPAT_KNOWLEDGE"]).mkdir(parents=True)
    (Path(env["GPUCOMPAT_KNOWLEDGE"]) / "mine.txt").write_text("keep")
    proc = run_cli("knowledge", "reset", env=env, check=2)
    assert "leaves it alone" in proc.stderr and (Path(env["GPUCOMPAT_KNOWLEDGE"]) / "mine.txt").exists()
