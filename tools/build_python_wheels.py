#!/usr/bin/env python3
"""Build python_wheels.csv and cupy_packages.csv from PyPI's own file lists.

For every release of the GPU frameworks (torch, tensorflow, tensorflow-gpu,
jaxlib, the jax CUDA plugins) and of every CuPy CUDA binary package
(cupy-cuda80 ... cupy-cuda13x) this reads the package's PyPI JSON
(``https://pypi.org/pypi/<package>/json``, its ``releases`` mapping: one list
of uploaded files per version) and keeps only the Linux x86_64 wheels.

Rebuild (needs network access to pypi.org; stdlib + ``packaging`` only)::

    cd /work/main && python tools/build_python_wheels.py
    # or, reusing / filling a cache of the raw JSON (one file per package):
    python tools/build_python_wheels.py --cache /tmp/pypi-json
    # or fully offline from such a cache:
    python tools/build_python_wheels.py --cache /tmp/pypi-json --offline

It prints one line per package and rewrites both CSVs from scratch, so it can
be rerun at any time.

What is written
---------------
``src/gpucompat/knowledge/data/python_wheels.csv`` -- package,version,pythons,source

* one row per (package, release) as listed by PyPI, pre-releases included;
* a wheel counts when its platform tag is ``manylinux*_x86_64`` (manylinux1,
  manylinux2010, manylinux2014, manylinux_2_NN) or ``linux_x86_64``.
  musllinux, aarch64, ppc64le, macOS and Windows wheels are ignored;
* ``pythons`` is the ``;``-joined sorted list of CPython versions ``X.Y``
  (``cp37-cp37m`` -> ``3.7``, ``cp27mu`` -> ``2.7``).  Extra tokens, sorted
  after the plain versions:

  - ``3.13t`` etc.: a free-threaded build (abi tag ``cp313t``), recorded
    separately from ``3.13``;
  - ``abi3 from 3.X``: a stable-ABI wheel (``cp3X-abi3``), usable on 3.X and
    later;
  - ``py3`` / ``py2``: a pure-Python-tag wheel with a Linux x86_64 platform tag
    (``py3-none-manylinux...``), usable on any 3.x.

* yanked files are left out; a release whose every file is yanked gets an
  empty ``pythons`` and ``(release yanked: not installable)`` in its source;
  when only some Linux files are yanked the source says so;
* a release with no Linux x86_64 wheel at all (sdist-only, or wheels only for
  other platforms) gets an empty ``pythons`` and the source says which kinds
  of files it did have.

``src/gpucompat/knowledge/data/cupy_packages.csv`` --
package,variant,cuda,first_version,last_version,series,source

* one row per (cupy-cudaXX package, CuPy major series = the release's major
  version) with the first and last release of that package in that series;
* only releases with at least one non-yanked Linux x86_64 wheel count (that is
  what ``pip install cupy-cudaXX==V`` can get on Linux x86_64); final releases
  are preferred, a series that only has pre-releases (e.g. alphas) uses those
  and says so in the source;
* ``cuda`` is the toolkit the package targets: ``cuda102`` -> ``10.2``,
  ``cuda11x`` -> ``11.x``.

ROCm packages (cupy-rocm-*) and jax's ``*-pjrt`` packages are not read.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from packaging.version import InvalidVersion, Version

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "gpucompat" / "knowledge" / "data"

FRAMEWORKS = [
    "torch",
    "tensorflow",
    "tensorflow-gpu",
    "jaxlib",
    "jax-cuda11-plugin",
    "jax-cuda12-plugin",
    "jax-cuda13-plugin",
]

# Every CuPy CUDA binary package name that CuPy's install docs and release
# notes have used.  A 404 means the name was never published; it is reported
# and skipped.
CUPY_PACKAGES = [
    "cupy-cuda80",
    "cupy-cuda90",
    "cupy-cuda91",
    "cupy-cuda92",
    "cupy-cuda100",
    "cupy-cuda101",
    "cupy-cuda102",
    "cupy-cuda110",
    "cupy-cuda111",
    "cupy-cuda112",
    "cupy-cuda113",
    "cupy-cuda114",
    "cupy-cuda115",
    "cupy-cuda116",
    "cupy-cuda117",
    "cupy-cuda11x",
    "cupy-cuda12x",
    "cupy-cuda13x",
]

JSON_URL = "https://pypi.org/pypi/{package}/json"


# --------------------------------------------------------------------------
# Wheel-name parsing
# --------------------------------------------------------------------------

# The wheel-name readers live in the package: `gpucompat knowledge update` reads new releases the same way.
sys.path.insert(0, str(ROOT / "src"))
from gpucompat.knowledge.wheeltags import is_linux_x86_64, python_tokens, sort_tokens, wheel_tags  # noqa: E402


def _file_kind(filename: str, packagetype: str) -> str:
    if packagetype == "sdist" or filename.endswith((".tar.gz", ".zip", ".tar.bz2")):
        return "sdist"
    tags = wheel_tags(filename)
    if tags is None:
        return packagetype or "other"
    plats = tags[2]
    if is_linux_x86_64(plats):
        return "linux-x86_64 wheel"
    if any(p.startswith("musllinux") for p in plats):
        return "musllinux wheel"
    if any("linux" in p for p in plats):
        return "other-Linux-arch wheel"
    if any(p.startswith("macosx") for p in plats):
        return "macOS wheel"
    if any(p.startswith("win") for p in plats):
        return "Windows wheel"
    if plats == ["any"]:
        return "pure-Python wheel"
    return "other wheel"


def summarize_release(files: list[dict]) -> dict:
    """Read one release's file list (a PyPI JSON ``releases[v]`` value)."""
    tokens: set[str] = set()
    yanked_linux = 0
    linux = 0
    kinds: set[str] = set()
    all_yanked = bool(files) and all(f.get("yanked") for f in files)
    for f in files:
        name = f["filename"]
        kind = _file_kind(name, f.get("packagetype", ""))
        kinds.add(kind)
        if kind != "linux-x86_64 wheel":
            continue
        if f.get("yanked"):
            yanked_linux += 1
            continue
        linux += 1
        pys, abis, _ = wheel_tags(name)
        tokens |= python_tokens(pys, abis)
    return {
        "pythons": sort_tokens(tokens),
        "linux_wheels": linux,
        "yanked_linux": yanked_linux,
        "all_yanked": all_yanked,
        "no_files": not files,
        "kinds": sorted(kinds),
    }


def describe(summary: dict) -> str:
    if summary["no_files"]:
        return "release lists no files"
    if summary["all_yanked"]:
        return "release yanked: not installable"
    if summary["linux_wheels"] == 0:
        others = [k for k in summary["kinds"] if k != "linux-x86_64 wheel"]
        what = ", ".join(others) if others else "nothing"
        extra = "; its Linux x86_64 wheels are yanked" if summary["yanked_linux"] else ""
        return f"no Linux x86_64 wheel; files: {what}{extra}"
    note = "Linux x86_64 wheels"
    if summary["yanked_linux"]:
        note += f"; {summary['yanked_linux']} yanked Linux x86_64 file(s) left out"
    return note


# --------------------------------------------------------------------------
# Fetching
# --------------------------------------------------------------------------

def fetch_json(package: str, cache: Path | None, offline: bool) -> dict | None:
    """The package's PyPI JSON, or None when PyPI answers 404."""
    cpath = cache / f"{package}.json" if cache else None
    if cpath and cpath.exists():
        data = json.loads(cpath.read_text())
        return data or None
    if offline:
        raise SystemExit(f"--offline: no cached JSON for {package} in {cache}")
    url = JSON_URL.format(package=package)
    req = urllib.request.Request(url, headers={"User-Agent": "gpucompat-build-python-wheels"})
    for attempt in range(4):
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                raw = resp.read()
            data = json.loads(raw)
            break
        except urllib.error.HTTPError as e:
            if e.code == 404:
                data = {}
                break
            if attempt == 3:
                raise
        except (urllib.error.URLError, TimeoutError):
            if attempt == 3:
                raise
        time.sleep(2 * (attempt + 1))
    if cpath:
        cpath.parent.mkdir(parents=True, exist_ok=True)
        cpath.write_text(json.dumps(data))
    return data or None


def _vkey(v: str):
    try:
        return (0, Version(v))
    except InvalidVersion:
        return (1, v)


# --------------------------------------------------------------------------
# CuPy package table
# --------------------------------------------------------------------------

def cupy_cuda(variant: str) -> str:
    m = re.fullmatch(r"cuda(\d+)x", variant)
    if m:
        return f"{m.group(1)}.x"
    m = re.fullmatch(r"cuda(\d+)(\d)", variant)
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    return ""


def cupy_rows(package: str, releases: dict[str, dict], url: str, today: str) -> list[dict]:
    variant = package[len("cupy-"):]
    series: dict[int, list[Version]] = {}
    for v, summary in releases.items():
        if summary["linux_wheels"] == 0:
            continue
        try:
            ver = Version(v)
        except InvalidVersion:
            continue
        series.setdefault(ver.major, []).append(ver)
    rows = []
    for major in sorted(series):
        vers = sorted(series[major])
        finals = [v for v in vers if not v.is_prerelease]
        note = "releases with a Linux x86_64 wheel"
        if finals:
            pre = len(vers) - len(finals)
            if pre:
                note += f"; {pre} pre-release(s) not counted"
            use = finals
        else:
            use = vers
            note += "; pre-releases only"
        rows.append({
            "package": package,
            "variant": variant,
            "cuda": cupy_cuda(variant),
            "first_version": str(use[0]),
            "last_version": str(use[-1]),
            "series": str(major),
            "source": f"{url} (releases, {note}, read {today})",
        })
    return rows


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, help="folder of raw PyPI JSON, read if present, written if fetched")
    ap.add_argument("--offline", action="store_true", help="use only --cache, fetch nothing")
    ap.add_argument("--out", type=Path, default=DATA, help="folder for the two CSVs")
    ap.add_argument("--date", default=_dt.date.today().isoformat(), help="the 'read' date written in sources")
    args = ap.parse_args(argv)
    if args.offline and not args.cache:
        ap.error("--offline needs --cache")

    wheel_rows: list[dict] = []
    pkg_rows: list[dict] = []
    for package in FRAMEWORKS + CUPY_PACKAGES:
        data = fetch_json(package, args.cache, args.offline)
        url = JSON_URL.format(package=package)
        if data is None:
            print(f"{package:20s} not on PyPI (404): skipped", flush=True)
            continue
        releases = {v: summarize_release(files) for v, files in data.get("releases", {}).items()}
        with_linux = 0
        for v in sorted(releases, key=_vkey):
            s = releases[v]
            with_linux += bool(s["linux_wheels"])
            wheel_rows.append({
                "package": package,
                "version": v,
                "pythons": ";".join(s["pythons"]),
                "source": f'{url} (releases["{v}"]: {describe(s)}, read {args.date})',
            })
        line = f"{package:20s} {len(releases):4d} releases, {with_linux:4d} with Linux x86_64 wheels"
        if package.startswith("cupy-"):
            rows = cupy_rows(package, releases, url, args.date)
            pkg_rows.extend(rows)
            line += f", CuPy series {','.join(r['series'] for r in rows) or '-'}"
        print(line, flush=True)

    args.out.mkdir(parents=True, exist_ok=True)
    _write(args.out / "python_wheels.csv", ["package", "version", "pythons", "source"], wheel_rows)
    _write(args.out / "cupy_packages.csv",
           ["package", "variant", "cuda", "first_version", "last_version", "series", "source"], pkg_rows)
    print(f"wrote {len(wheel_rows)} rows to python_wheels.csv, {len(pkg_rows)} rows to cupy_packages.csv",
          flush=True)
    return 0


def _write(path: Path, fields: list[str], rows: list[dict]) -> None:
    tmp = path.with_suffix(".csv.tmp")
    with open(tmp, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())
