#!/usr/bin/env python3
"""Write src/gpucompat/knowledge/data/newest_releases.csv: for each framework the tables cover, the newest release
on PyPI that the packaged tables include, the day PyPI got it, and the day the index was checked.

A release counts as included when PyPI's file list for it is in python_wheels.csv (tools/build_python_wheels.py) and
the build tables describe its series:

- torch: torch_pypi_default.csv names the series' PyPI build and torch_builds.csv has that build's row;
- jax (jaxlib): jax_builds.csv rows hold from their version on, so the tables describe jax up to the newest series
  whose CUDA plugin wheels were read (docs/evidence/wheels/jax_cuda*_plugin-*.json); past it `tables.past_newest`
  makes the rules say "uncertain";
- tensorflow: tensorflow_builds.csv has the series;
- cupy (cupy-cuda12x/-cuda13x): cupy_archs.csv has the CuPy major.

The upload date is the earliest upload time of the release's files in PyPI's JSON API
(https://pypi.org/pypi/NAME/json). tests/test_knowledge_freshness.py compares this file with PyPI.

    python tools/build_newest_releases.py [--offline]

--offline keeps the upload dates of releases the current file already names (the others are left empty) and
fetches nothing. `python tools/build_knowledge.py` runs this last (offline with --skip-pypi).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import re
import sys
import urllib.request
from pathlib import Path

from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "gpucompat" / "knowledge" / "data"
EVIDENCE_WHEELS = REPO / "docs" / "evidence" / "wheels"
FIELDS = ["framework", "newest", "source", "release", "package", "uploaded", "checked"]
# the PyPI projects whose releases are each framework's (jaxlib: the compiled half of jax, whose releases the plugins follow)
PACKAGES = {"torch": ["torch"], "jax": ["jaxlib"], "tensorflow": ["tensorflow"], "cupy": ["cupy-cuda13x", "cupy-cuda12x"]}
JSON_URL = "https://pypi.org/pypi/{package}/json"
REGENERATE = ("python tools/build_python_wheels.py && python tools/build_knowledge.py && python tools/build_install_checks.py "
              "(read the new release's wheels first: docs/evidence/wheels/README.md)")


def _csv(name: str) -> list[dict]:
    with (DATA / name).open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _series(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def _key(text: str) -> tuple:
    return tuple(int(p) for p in re.findall(r"[0-9]+", text))


def coverage() -> dict:
    """framework -> (does the packaged build tables' knowledge include this release?, what says so)."""
    defaults = {r["release"]: r["variant"] for r in _csv("torch_pypi_default.csv")}
    torch_rows = {(r["release"], r["variant"]) for r in _csv("torch_builds.csv")}
    torch_series = {s for s, variant in defaults.items() if (s, variant) in torch_rows}
    jax_read = [Version(m.group(1)) for p in EVIDENCE_WHEELS.glob("jax_cuda*_plugin-*.json")
                if (m := re.match(r"jax_cuda1[0-9]_plugin-([0-9.]+)-", p.name))]
    jax_newest = max(jax_read, default=None)
    tf_series = {r["release"] for r in _csv("tensorflow_builds.csv")}
    cupy_majors = {r["series"].split(".")[0] for r in _csv("cupy_archs.csv")}
    return {
        "torch": (lambda v: _series(v) in torch_series,
                  "torch_pypi_default.csv names the series' PyPI build and torch_builds.csv has its row"),
        "jax": (lambda v: jax_newest is not None and _key(_series(v)) <= _key(_series(jax_newest)),
                f"jax_builds.csv rows hold from their version on; the newest CUDA plugin wheels read are jax_cuda12/13_plugin {jax_newest} "
                "(docs/evidence/wheels/)"),
        "tensorflow": (lambda v: _series(v) in tf_series, "tensorflow_builds.csv has the series"),
        "cupy": (lambda v: str(v.major) in cupy_majors, "cupy_archs.csv has the CuPy major"),
    }


def listed(package: str) -> list[Version]:
    """Final releases of the package that python_wheels.csv (PyPI's file lists when the tables were built) holds
    with a Linux x86_64 wheel."""
    found = []
    for row in _csv("python_wheels.csv"):
        if row["package"] != package or not row["pythons"]:
            continue
        try:
            version = Version(row["version"])
        except InvalidVersion:
            continue
        if not (version.is_prerelease or version.is_devrelease):
            found.append(version)
    return found


def pypi_json(package: str, timeout: float = 60) -> dict:
    request = urllib.request.Request(JSON_URL.format(package=package), headers={"User-Agent": "gpucompat-build-newest-releases"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read())


def uploaded(data: dict, release: str) -> str | None:
    """The day PyPI got the release (its earliest file), or None where it lists no file."""
    times = [f.get("upload_time_iso_8601") or f.get("upload_time") or "" for f in data.get("releases", {}).get(release, [])]
    times = [t for t in times if t]
    return min(times)[:10] if times else None


def build(offline: bool = False, today: str | None = None) -> list[dict]:
    today = today or datetime.date.today().isoformat()
    kept = {}
    if (DATA / "newest_releases.csv").exists():
        kept = {(r["framework"], r.get("release", "")): r for r in _csv("newest_releases.csv")}
    rows = []
    for framework, (covered, why) in coverage().items():
        best = None
        for package in PACKAGES[framework]:
            for version in listed(package):
                if covered(version) and (best is None or version > best[0]):
                    best = (version, package)
        if best is None:
            print(f"{framework}: no release on PyPI that the tables include", file=sys.stderr)
            continue
        version, package = best
        release = str(version)
        if offline:
            old = kept.get((framework, release), {})
            day, checked = old.get("uploaded", ""), old.get("checked", "")
        else:
            data = pypi_json(package)
            day, checked = uploaded(data, release) or "", today
        url = JSON_URL.format(package=package)
        rows.append({"framework": framework, "newest": _series(version),
                     "source": f"{url} (releases[\"{release}\"]: uploaded {day or 'unknown'}, read {checked or 'unknown'}) ; included: "
                               f"python_wheels.csv lists it and {why}",
                     "release": release, "package": package, "uploaded": day, "checked": checked})
    with (DATA / "newest_releases.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    named = ", ".join(f"{r['framework']} {r['release']}" for r in rows)
    print(f"newest_releases.csv: {len(rows)} rows ({named})")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--offline", action="store_true", help="fetch nothing; keep the upload dates the current file gives")
    args = parser.parse_args()
    build(offline=args.offline)


if __name__ == "__main__":
    main()
