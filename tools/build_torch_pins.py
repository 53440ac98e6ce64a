"""Rebuild src/gpucompat/knowledge/data/torch_cuda_pins.csv: the exact nvidia-* wheels (and, from CUDA 13,
the cuda-toolkit metapackage) that PyPI's default torch wheel (Linux x86_64) pins, for the newest patch release of each minor series from 2.1
on (torch's Requires-Dist pins them with ==, so `uv pip compile` of torch alone reproduces them).

    python tools/build_torch_pins.py [--date YYYY-MM-DD]

Needs uv and an index that answers for torch (PyPI); writes the CSV in place.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
import tempfile
from pathlib import Path

from packaging.version import Version

DATA = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "knowledge" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
from gpucompat.learn import torch_pins  # noqa: E402  (nvidia-* and cuda-toolkit pins marked `# via torch`)


def newest_patches() -> dict[str, tuple[str, str]]:
    """Minor series (2.1 on) -> (its newest release, the newest Python it has Linux wheels for)."""
    found: dict[str, tuple[Version, str]] = {}
    with (DATA / "python_wheels.csv").open(newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            version = Version(row["version"])
            if row["package"] != "torch" or version < Version("2.1") or version.is_prerelease or not row["pythons"]:
                continue
            series = f"{version.major}.{version.minor}"
            pythons = [p for p in row["pythons"].split(";") if p[-1:].isdigit()]
            if pythons and (series not in found or version > found[series][0]):
                found[series] = (version, max(pythons, key=Version))
    return {series: (str(v), python) for series, (v, python) in found.items()}


def pins(release: str, python: str) -> list[tuple[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        request = Path(tmp) / "requirements.in"
        request.write_text(f"torch=={release}\n")
        proc = subprocess.run(["uv", "pip", "compile", str(request), "--python-version", python, "--python-platform",
                               "x86_64-manylinux_2_28", "--no-header"], capture_output=True, text=True, timeout=300, check=True)
    return torch_pins(proc.stdout)  # the same reading `gpucompat knowledge update` uses for releases newer than this table


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    args = parser.parse_args()
    rows = []
    for series, (release, python) in sorted(newest_patches().items(), key=lambda item: Version(item[0])):
        source = (f"uv pip compile 'torch=={release}' --python-version {python} --python-platform x86_64-manylinux_2_28 against PyPI, "
                  f"{args.date} (tools/build_torch_pins.py): the nvidia-* wheels torch's own Requires-Dist pins")
        rows += [{"release": release, "package": package, "version": version, "source": source} for package, version in pins(release, python)]
    with (DATA / "torch_cuda_pins.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["release", "package", "version", "source"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} pins of {len({r['release'] for r in rows})} releases")


if __name__ == "__main__":
    main()
