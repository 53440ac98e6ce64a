"""Rebuild src/gpucompat/knowledge/data/*.csv from the sourced facts in ../shared/knowledge.

Every output row keeps its source. One table is measured rather than copied: which
CUDA build PyPI's default torch wheel is, read from the nvidia-cuda-runtime pin that
`uv pip compile torch==V` gives (needs network; --skip-pypi keeps the old file).

    python tools/build_knowledge.py [--shared ../shared/knowledge] [--skip-pypi]

Last it rewrites newest_releases.csv (tools/build_newest_releases.py: the newest PyPI release each framework's
tables include, with its upload date; --skip-pypi keeps the dates the file has).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import re
import subprocess
from pathlib import Path

import build_newest_releases  # tools/, beside this script

OUT = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "knowledge" / "data"
FACTS = Path(__file__).resolve().parent / "facts"
COMPAT_MIN = {  # minor-version compatibility floors (CUDA Compatibility guide, table 1)
    "11": "450.80.02", "12": "525.60.13", "13": "580.65.06",
}


def read(shared: Path, name: str) -> list[dict]:
    with (shared / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def write(name: str, fields: list[str], rows: list[dict]) -> None:
    with (OUT / name).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{name}: {len(rows)} rows")


def _driver_key(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"\d+", text))


# the shared file read the exact 12.x floor from copies of NVIDIA's table; NVIDIA's own repository gives it
COPIED_FLOOR = "exact 525.60.13/527.41 from copies of NVIDIA compat table"
NVIDIA_FLOOR = ("exact 525.60.13 (Linux) / 527.41 (Windows) for 12.x from NVIDIA/cuda-python @08ac62f5 cuda_core/docs/source/install.rst "
                "('Driver: 525.60.13+ (Linux), 527.41+ (Windows)' for CUDA 12; '580.65+ (Linux), 580.88+ (Windows)' for CUDA 13)")


def cuda_drivers(shared: Path) -> None:
    best: dict[str, dict] = {}
    for row in read(shared, "A_cuda_toolkit_driver_min.csv"):
        found = re.search(r"(\d+(?:\.\d+)+)", row["linux_x86_64_toolkit_driver_min"])
        if not found:
            continue
        cuda, driver = row["cuda_major_minor"], found.group(1)
        if cuda not in best or _driver_key(driver) < _driver_key(best[cuda]["toolkit_driver_min"]):
            best[cuda] = {
                "cuda": cuda, "toolkit_driver_min": driver, "compat_driver_min": COMPAT_MIN.get(cuda.split(".")[0], ""),
                "confidence": row["confidence"], "source": row["source"].replace(COPIED_FLOOR, NVIDIA_FLOOR),
            }
    for row in _facts("cuda_drivers.csv"):  # releases the shared file lacks or cites from a third party (tools/facts)
        best[row["cuda"]] = {"cuda": row["cuda"], "toolkit_driver_min": row["toolkit_driver_min"],
                             "compat_driver_min": COMPAT_MIN.get(row["cuda"].split(".")[0], ""),
                             "confidence": row["confidence"], "source": row["source"]}
    rows = sorted(best.values(), key=lambda r: tuple(int(p) for p in r["cuda"].split(".")))
    write("cuda_drivers.csv", ["cuda", "toolkit_driver_min", "compat_driver_min", "confidence", "source"], rows)


def cuda_archs() -> None:
    """The sm_XY targets each CUDA release's compiler accepts, measured from NVIDIA's nvcc wheels (11.7 on) and
    derived with the oldest wheel's ptxas for 9.0-11.6 (tools/build_cuda_archs.py writes tools/facts/cuda_archs.csv;
    evidence in docs/evidence/cuda-archs/). Replaces the shared B file, which copied CMake's table."""
    write("cuda_archs.csv", ["cuda", "sm", "source"], _facts("cuda_archs.csv"))


def gpus(shared: Path) -> None:
    rows = []
    for r in read(shared, "C_gpu_compute_capability.csv"):
        for name in r["gpu_name"].split(" / "):
            rows.append({"name": name.strip(), "cc": r["compute_capability"], "architecture": r["architecture"],
                         "confidence": r["confidence"], "source": r["source"]})
    # tools/facts/gpus.csv re-sources rows the shared file cites from blog/gist/model-card copies (issue 35 item 7):
    # a row there replaces the shared row of the same name (a new name is appended)
    fixed = {r["name"]: r for r in _facts("gpus.csv")}
    rows = [fixed.pop(r["name"], r) for r in rows] + list(fixed.values())
    write("gpus.csv", ["name", "cc", "architecture", "confidence", "source"], rows)


def _arch_list(text: str) -> tuple[str, str]:
    """'5.0;6.0;9.0+PTX' -> ('sm_50;sm_60;sm_90', 'compute_90')."""
    text = text.split("(")[0].strip()
    sass, ptx = [], []
    for item in re.findall(r"(\d+\.\d)(\+PTX)?", text):
        arch = item[0].replace(".", "")
        sass.append(f"sm_{arch}")
        if item[1]:
            ptx.append(f"compute_{arch}")
    return ";".join(sass), ";".join(ptx)


def torch_builds(shared: Path) -> None:
    rows = []
    for r in read(shared, "D_pytorch_cuda_variants_arch.csv"):
        release = re.match(r"\d+\.\d+", r["torch_release"]).group(0)
        sass, ptx = _arch_list(r["linux_x86_64_torch_cuda_arch_list"])
        if not sass:
            continue
        rows.append({"release": release, "variant": r["cuda_variant"], "cuda": r["cuda_version"], "sass": sass, "ptx": ptx,
                     "confidence": r["confidence"], "source": f"{r['source']} ({r['arch_list_evidence_type']})"})
    old = _facts("torch_builds_old.csv")  # 1.0-1.7: arch lists from pytorch/builder history, sourced per row
    # rows a primary source corrects in the shared file (each says what it corrects and whether it is inferred): in its place
    new = {(r["release"], r["variant"]): r for r in _facts("torch_builds_new.csv")}
    rows = [new.pop((r["release"], r["variant"]), r) for r in rows] + list(new.values())
    seen, unique = set(), []
    for row in old + rows:  # patch releases share their minor series' build
        if (row["release"], row["variant"]) not in seen:
            seen.add((row["release"], row["variant"]))
            unique.append(row)
    write("torch_builds.csv", ["release", "variant", "cuda", "sass", "ptx", "confidence", "source"], unique)


def _facts(name: str) -> list[dict]:
    """A sourced fact file kept in tools/facts (facts the shared folder does not hold)."""
    with (FACTS / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def torch_pypi_default(measure: bool = True) -> None:
    """1.2-1.12 from tools/facts (PyPI's old wheels carry no nvidia-* pins to measure); 1.13+ measured
    with uv, or, with measure=False (--skip-pypi), kept from the current file."""
    fields = ["release", "variant", "cuda", "source"]
    old = _facts("torch_pypi_default_old.csv")
    known = {r["release"] for r in old}
    if not measure:
        with (OUT / "torch_pypi_default.csv").open(newline="", encoding="utf-8") as handle:
            kept = [r for r in csv.DictReader(handle) if r["release"] not in known]
        write("torch_pypi_default.csv", fields, old + kept)
        return
    today = datetime.date.today().isoformat()
    rows = []
    for version, python in [("1.13.1", "3.10"), ("2.0.1", "3.11"), ("2.1.2", "3.11"), ("2.2.2", "3.12"), ("2.3.1", "3.12"),
                            ("2.4.1", "3.12"), ("2.5.1", "3.12"), ("2.6.0", "3.12"), ("2.7.1", "3.12"), ("2.8.0", "3.12"),
                            ("2.9.1", "3.12"), ("2.10.0", "3.12"), ("2.11.0", "3.12"), ("2.12.0", "3.12"), ("2.13.0", "3.12"),
                            ("2.14.0", "3.12"), ("2.15.0", "3.12")]:
        proc = subprocess.run(
            ["uv", "pip", "compile", "-", "--python-version", python, "--python-platform", "x86_64-manylinux_2_28",
             "--no-header", "--no-annotate", "--no-build"],
            input=f"torch=={version}\n", capture_output=True, text=True, env={**os.environ, "UV_PYTHON_DOWNLOADS": "never"},
        )
        pin = re.search(r"^nvidia-cuda-runtime(?:-cu\d+)?==(\d+)\.(\d+)", proc.stdout, re.M)
        if not pin:
            print(f"torch {version}: no CUDA runtime pin ({proc.stderr.strip()[:200]})")
            continue
        cuda = f"{pin.group(1)}.{pin.group(2)}"
        rows.append({"release": ".".join(version.split(".")[:2]), "variant": f"cu{pin.group(1)}{pin.group(2)}", "cuda": cuda,
                     "source": f"uv pip compile torch=={version} --python-version {python} against PyPI, {today}: pins nvidia-cuda-runtime {cuda}"})
    write("torch_pypi_default.csv", fields, old + [r for r in rows if r["release"] not in known])


def jax_builds() -> None:
    """The whole jax table: tools/facts/jax_builds.csv (jax[cuda...] extras from 0.2.11 on, sourced per row)."""
    rows = _facts("jax_builds.csv")
    write("jax_builds.csv", list(rows[0].keys()), rows)


def tensorflow_builds(shared: Path) -> None:
    rows = []
    for r in read(shared, "E_tensorflow_tested_cuda_cudnn.csv"):
        found = re.match(r"tensorflow(?:_gpu)?-(\d+\.\d+)", r["tf_package_version"])
        if r["platform"] != "Linux" or not found:
            continue
        rows.append({"release": found.group(1), "cuda": r["cuda"], "cudnn": r["cudnn"], "pythons": r["python_versions"], "source": r["source"]})
    known = {r["release"] for r in rows}  # series the shared facts lack (tools/facts/tensorflow_builds_old.csv)
    if (FACTS / "tensorflow_builds_old.csv").exists():
        rows += [r for r in _facts("tensorflow_builds_old.csv") if r["release"] not in known]
    archs = {r["release"]: r for r in _facts("tensorflow_archs.csv")}  # SASS/PTX of the official Linux wheels
    for row in rows:
        arch = archs.get(row["release"])
        row.update(sass=arch["sass"] if arch else "", ptx=arch["ptx"] if arch else "", min_cc=arch["min_cc"] if arch else "")
        if arch:
            row["source"] = f"{row['source']} ; archs: {arch['source']}"
    rows.sort(key=lambda r: [-int(p) for p in r["release"].split(".")])
    write("tensorflow_builds.csv", ["release", "cuda", "cudnn", "pythons", "sass", "ptx", "min_cc", "source"], rows)


def cupy_archs() -> None:
    """CuPy wheels' precompiled SASS/PTX (tools/facts/cupy_archs.csv, copied as is)."""
    rows = _facts("cupy_archs.csv")
    write("cupy_archs.csv", ["series", "cuda_major", "sass", "ptx", "min_cc", "source"], rows)


def runtime_compilers() -> None:
    """Run-time compilers (issue 35): ptxas/NVRTC targets measured from NVIDIA's wheels, and which one a JAX or CuPy
    install brings (tools/facts/runtime_compilers.csv, compiler_pins.csv; evidence in docs/evidence/runtime-compilers/)."""
    write("runtime_compilers.csv", ["compiler", "package", "version", "sm", "source"], _facts("runtime_compilers.csv"))
    write("compiler_pins.csv", ["framework", "variant", "from_version", "compiler", "requirement", "resolves_to", "source"],
          _facts("compiler_pins.csv"))


def known_defects() -> None:
    """Upstream defects that break a release on some GPUs (tools/facts/known_defects.csv, each row sourced to its issue)."""
    rows = _facts("known_defects.csv")
    write("known_defects.csv", ["framework", "versions", "variants", "cc", "code", "stage", "text", "source"], rows)


EVIDENCE_WHEELS = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "wheels"
WHEEL = re.compile(r"(torch|tensorflow|jax_cuda1[0-9]_plugin|cupy_cuda[0-9]+x?)-([0-9]+(?:\.[0-9]+){1,3})-", re.ASCII)


def _read(name: str) -> tuple[list[str], list[dict]]:
    with (OUT / name).open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return list(reader.fieldnames or []), list(reader)


def _row_for_wheel(package: str, version: str, tables: dict) -> tuple[str, dict] | None:
    series = ".".join(version.split(".")[:2])
    if package == "torch":  # the PyPI wheel is the release's default build
        default = next((r for r in tables["torch_pypi_default.csv"][1] if r["release"] == series), None)
        if default is None:
            return None
        row = next((r for r in tables["torch_builds.csv"][1] if r["release"] == series and r["variant"] == default["variant"]), None)
        if row is None:  # a release no document gives a list for yet: the wheel alone makes its row
            row = {"release": series, "variant": default["variant"], "cuda": default["cuda"], "sass": "", "ptx": "", "confidence": "high",
                   "source": f"read from the wheel ; documented: - / - (no document read gives this build's list; PyPI's default build "
                             f"is {default['variant']} per torch_pypi_default.csv: {default['source']})"}
            tables["torch_builds.csv"][1].append(row)
        return "torch_builds.csv", row
    if package == "tensorflow":
        return next((("tensorflow_builds.csv", r) for r in tables["tensorflow_builds.csv"][1] if r["release"] == series), None)
    if package.startswith("jax_cuda"):  # the row in force for that version (rows hold from their version on)
        variant = "cuda" + package[len("jax_cuda"):].split("_")[0]
        rows = [r for r in tables["jax_builds.csv"][1] if r["variant"] == variant and _driver_key(r["from_version"]) <= _driver_key(version)]
        return ("jax_builds.csv", max(rows, key=lambda r: _driver_key(r["from_version"]))) if rows else None
    major = package[len("cupy_cuda"):].rstrip("x")
    major = major[:-1] if len(major) == 3 else major[:2]  # cupy_cuda102 -> 10, cupy_cuda12x -> 12
    rows = [r for r in tables["cupy_archs.csv"][1] if r["cuda_major"] == major and _driver_key(r["series"]) <= _driver_key(version)]
    return ("cupy_archs.csv", max(rows, key=lambda r: _driver_key(r["series"]))) if rows else None


def _archs(files: list[dict], kind: str) -> list[str]:
    # keeps arch-specific (sm_90a, compute_90a) and family (compute_110f) names apart from the plain ones
    return sorted({a for f in files for a in f[kind]}, key=lambda a: (int(re.sub(r"[^0-9]", "", a)), a))


def _wheel_order(path: Path) -> tuple:
    found = WHEEL.match(path.name)
    return (found.group(1), _driver_key(found.group(2)), path.name) if found else (path.name, (), "")


def inspected_wheels() -> None:
    """Where a published wheel was read with `gpucompat inspect` (docs/evidence/wheels/), its kernels are ground
    truth: the row takes the wheel's SASS/PTX and cites it, keeping what the documents said. For torch only
    libtorch_cuda*.so count (the bundled cuBLAS/cuDNN carry more architectures than torch's own kernels).
    Several wheels may fall on one row (patch releases of a torch series, the JAX releases a row holds for): they
    must carry the same lists, or the row is wrong for some of them and the build stops saying which."""
    tables = {name: _read(name) for name in ("torch_pypi_default.csv", "torch_builds.csv", "tensorflow_builds.csv", "jax_builds.csv", "cupy_archs.csv")}
    read: dict[int, tuple[str, dict, list]] = {}  # id(row) -> (table, row, [(wheel, json name, sass, ptx)])
    for path in sorted(EVIDENCE_WHEELS.glob("*.json"), key=_wheel_order):
        data = json.loads(path.read_text())
        wheel = Path(data["target"]).name
        found = WHEEL.match(wheel)
        target = found and _row_for_wheel(found.group(1), found.group(2), tables)
        if not target:
            continue
        files = [f for f in data["files"] if found.group(1) != "torch" or "libtorch_cuda" in f["file"]]
        name, row = target
        read.setdefault(id(row), (name, row, []))[2].append((wheel, path.name, _archs(files, "sass"), _archs(files, "ptx")))
    changed = set()
    for name, row, wheels in read.values():
        lists = {(tuple(sass), tuple(ptx)) for _w, _j, sass, ptx in wheels}
        if len(lists) > 1:
            raise SystemExit(f"{name}: the wheels {', '.join(w for w, *_ in wheels)} fall on one row but carry different kernels "
                             f"({'; '.join(' '.join(s + p) for s, p in sorted(lists))}): split the row in its facts")
        (sass, ptx), = lists
        documented = row["source"].split(" ; documented: ", 1)[-1] if row["source"].startswith("read from ") else \
            f"{row['sass'] or '-'} / {row['ptx'] or '-'} ({row['source']})"
        if "confidence" in row:
            row["confidence"] = "high"  # the kernels themselves, not a document about them
        names = [w for w, *_ in wheels]
        cited = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
        where = f"docs/evidence/wheels/{wheels[0][1]}" if len(wheels) == 1 else "docs/evidence/wheels/, one JSON each; identical lists"
        row.update(sass=";".join(sass), ptx=";".join(ptx), source=f"read from {cited} with gpucompat inspect ({where}) ; documented: {documented}")
        changed.add(name)
    for name in sorted(changed):
        write(name, *tables[name])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shared", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "knowledge"))
    parser.add_argument("--skip-pypi", action="store_true")
    args = parser.parse_args()
    shared = Path(args.shared)
    cuda_drivers(shared)
    cuda_archs()
    gpus(shared)
    torch_builds(shared)
    tensorflow_builds(shared)
    cupy_archs()
    torch_pypi_default(measure=not args.skip_pypi)
    jax_builds()
    runtime_compilers()
    known_defects()
    inspected_wheels()  # it corrects the rows above where a wheel was read
    build_newest_releases.build(offline=args.skip_pypi)  # last: which releases the tables now include


if __name__ == "__main__":
    main()
