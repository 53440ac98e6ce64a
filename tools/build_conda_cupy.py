"""Rebuild src/gpucompat/knowledge/data/conda_cupy_builds.csv: which CUDA each conda-forge `cupy` release was built for.

conda-forge's `cupy` is not PyPI's cupy-cuda12x: each release has one build per CUDA compiler version, and each build's
run requirements tie it to that CUDA (from CUDA 12: `cuda-version >=12,<13` by pin_compatible("cuda-version",
min_pin="x"), cuda-version itself needing `__cuda >=12`, the driver's; before: the compiler's run_exports,
`cudatoolkit >=11.2,<12` or `cudatoolkit >=10.2,<10.3`). conda resolves the build whose CUDA the environment's
cuda-version (or cudatoolkit) pin and the driver allow.

conda-forge's repodata (conda.anaconda.org) cannot be reached from the machine this was built on, so the facts come from
the feedstock's own history instead: for every commit of conda-forge/cupy-feedstock's default branch, the version in
recipe/meta.yaml and the linux_64 CUDA compiler versions conda-smithy rendered into .ci_support/ (one CI job, so one
published build, per file). A release's row lists every CUDA any of its commits rendered.

    python tools/build_conda_cupy.py /path/to/cupy-feedstock.git

(the repository as `git clone --mirror` or any clone; only `git log` and `git ls-tree`/`git show` are run.)
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

from packaging.version import InvalidVersion, Version

DATA = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "knowledge" / "data"
FEEDSTOCK = "https://github.com/conda-forge/cupy-feedstock"
VERSION = re.compile(r'{%\s*set\s+version\s*=\s*"([^"]+)"\s*%}')
LINUX_CUDA = re.compile(r"^\.ci_support/linux_64_.*?cuda_compiler_version([0-9]+\.[0-9]+|None)", re.ASCII)


def git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def main() -> None:
    repo = sys.argv[1]
    found: dict[Version, dict] = {}
    for line in git(repo, "log", "--first-parent", "--format=%H %ad", "--date=short").splitlines():
        commit, day = line.split()
        try:
            recipe = git(repo, "show", f"{commit}:recipe/meta.yaml")
        except subprocess.CalledProcessError:
            continue
        named = VERSION.search(recipe)
        try:
            version = Version(named.group(1)) if named else None
        except InvalidVersion:
            version = None
        if version is None:
            continue
        names = git(repo, "ls-tree", "--name-only", f"{commit}", ".ci_support/").splitlines()
        cudas = {m.group(1) for m in (LINUX_CUDA.match(n) for n in names) if m and m.group(1) != "None"}
        entry = found.setdefault(version, {"cudas": set(), "first": (day, commit), "last": (day, commit)})
        entry["cudas"] |= cudas
        entry["first"] = min(entry["first"], (day, commit))
        entry["last"] = max(entry["last"], (day, commit))
    rows = []
    for version, entry in sorted(found.items()):
        cudas = sorted(entry["cudas"], key=Version)
        if not cudas:
            continue  # rendered with no linux_64 CUDA job: nothing conda-forge built for the GPU on Linux x86_64
        rows.append({"version": str(version), "cuda_builds": ";".join(cudas),
                     "source": f"{FEEDSTOCK} recipe/meta.yaml version {version} and .ci_support/linux_64_*cuda_compiler_version* at "
                               f"{entry['first'][1][:12]} ({entry['first'][0]}) to {entry['last'][1][:12]} ({entry['last'][0]}); "
                               "conda-forge's repodata was not read (conda.anaconda.org unreachable here): a rendered CI job, not a listed "
                               "file (tools/build_conda_cupy.py)"})
    with (DATA / "conda_cupy_builds.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["version", "cuda_builds", "source"], lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} releases", file=sys.stderr)


if __name__ == "__main__":
    main()
