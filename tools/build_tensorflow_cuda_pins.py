"""Rebuild src/gpucompat/knowledge/data/tensorflow_cuda_pins.csv: the nvidia-* wheels tensorflow[and-cuda] pins.

From 2.14, `pip install tensorflow[and-cuda]` brings CUDA as NVIDIA's wheels, pinned in the extra's Requires-Dist of
TensorFlow's own wheel (`nvidia-cuda-runtime-cu12==12.3.101; extra == "and-cuda"`, from 2.20 ranges such as
`>=12.5.82,<13.0`). So the CUDA a tensorflow[and-cuda] release runs is what those pins resolve to, not the CUDA of its
tested build configuration. For every final tensorflow release from 2.14.0, this reads the Linux x86_64 wheel's METADATA
(cp311 where there is one) through HTTP range requests (gpucompat.knowledge.pyindex; PyPI's per-release JSON answers 404
from the machine this was built on), and resolves each pin to the newest not-yanked release with a Linux x86_64 wheel
that https://pypi.org/simple/<package>/ lists inside it (what uv picks).

    python tools/build_tensorflow_cuda_pins.py [--date YYYY-MM-DD] [--since 2.14.0]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import sys
import zipfile
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "src" / "gpucompat" / "knowledge" / "data"
sys.path.insert(0, str(REPO / "src"))
from gpucompat.knowledge.pyindex import Index  # noqa: E402

LINUX_X86 = re.compile(r"(manylinux[0-9_]*|linux)_x86_64", re.ASCII)
LINUX = {"platform_system": "Linux", "sys_platform": "linux", "platform_machine": "x86_64", "os_name": "posix"}


def releases(index: Index, project: str, any_platform: bool = False) -> dict[Version, list]:
    found: dict[Version, list] = {}
    for item in index.files(project) or []:
        if item.yanked or not item.filename.endswith(".whl") or not (any_platform or LINUX_X86.search(item.filename)):
            continue
        try:
            version = Version(item.filename.split("-")[1])
        except InvalidVersion:
            continue
        if not version.is_prerelease and not version.is_devrelease:
            found.setdefault(version, []).append(item)
    return found


def pins(index: Index, item) -> list[Requirement]:
    with zipfile.ZipFile(index.open(item)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = wheel.read(member).decode("utf-8")
    tag = re.search(r"-cp3([0-9]+)-", item.filename)
    python = f"3.{tag.group(1)}" if tag else "3.11"
    found = []
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:"):
            continue
        try:
            requirement = Requirement(line.split(":", 1)[1].strip())
        except InvalidRequirement:
            continue
        environment = {**LINUX, "python_version": python, "python_full_version": f"{python}.0", "extra": "and-cuda"}
        if requirement.name.lower().startswith("nvidia-") and requirement.marker is not None and "extra" in str(requirement.marker) \
                and requirement.marker.evaluate(environment):
            found.append(requirement)
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--since", default="2.14.0", help="the first release with the and-cuda extra")
    args = parser.parse_args()
    index = Index("https://pypi.org/simple/")
    available: dict[str, list[Version]] = {}
    rows = []
    for release, items in sorted(releases(index, "tensorflow").items()):
        if release < Version(args.since):
            continue
        item = next((i for i in items if "-cp311-" in i.filename), max(items, key=lambda i: i.filename))
        for requirement in pins(index, item):
            name = requirement.name.lower()
            if name not in available:  # NVIDIA's wheels: Linux x86_64 ones (some releases are py3-none-manylinux)
                available[name] = sorted(releases(index, name))
            inside = [v for v in available[name] if requirement.specifier.contains(v)]
            rows.append({"release": str(release), "package": name, "requirement": f"{name}{requirement.specifier}",
                         "resolves_to": str(max(inside)) if inside else "",
                         "source": f"Requires-Dist (extra 'and-cuda') of {item.filename} METADATA (read by HTTP range requests from the "
                                   f"wheel listed at https://pypi.org/simple/tensorflow/, {args.date}, tools/build_tensorflow_cuda_pins.py); "
                                   f"resolves_to: the newest not-yanked Linux x86_64 release of https://pypi.org/simple/{name}/ inside it"})
        print(release, file=sys.stderr)
    with (DATA / "tensorflow_cuda_pins.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["release", "package", "requirement", "resolves_to", "source"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows, {index.fetched >> 20} MiB read", file=sys.stderr)


if __name__ == "__main__":
    main()
