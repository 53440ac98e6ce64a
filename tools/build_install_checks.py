"""Resolve every release's GPU install line with uv, as a user's pip would run it, into
src/gpucompat/knowledge/data/install_checks.csv: a PASS is given only for what installs (issue 35, item 3).

For each framework release the tables know (PyPI's Linux x86_64 wheels, python_wheels.csv) and each of its
GPU builds (answers.questions.gpu_variants: tensorflow[and-cuda] from 2.14, plain tensorflow 2.1-2.13, jax[cudaNN],
cupy-cudaNNx, torch's PyPI default build), `uv pip compile` of that build's requirements (space.requirements_for)
for the newest Python the release has wheels for, on Linux x86_64 (manylinux_2_28), against PyPI. An install
line that does not resolve is tried again for the release's other Pythons, oldest first, so a row says for
which Pythons it failed. Builds on other indexes (torch's +cuXXX builds on download.pytorch.org) are not
reachable from here and are left out: the rule says nothing of them.

    python tools/build_install_checks.py [--jobs 4] [--frameworks tensorflow,jax,cupy,torch]
    python tools/build_install_checks.py --releases jax==0.12.0,jax==0.12.0.1,torch==2.15.0   # only these; other rows kept
"""

from __future__ import annotations

import argparse
import csv
import datetime
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from packaging.version import InvalidVersion, Version

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from gpucompat.answers.questions import gpu_variants  # noqa: E402
from gpucompat.envs.uv import uv_bin  # noqa: E402
from gpucompat.knowledge import tables  # noqa: E402
from gpucompat.space import requirements_for  # noqa: E402

OUT = REPO / "src" / "gpucompat" / "knowledge" / "data" / "install_checks.csv"
PACKAGES = {"torch": ["torch"], "tensorflow": ["tensorflow"], "jax": ["jaxlib"], "cupy": ["cupy-cuda11x", "cupy-cuda12x", "cupy-cuda13x"]}
FIRST = {"tensorflow": Version("2.1"), "jax": Version("0.4.0"), "torch": Version("1.8.0"), "cupy": Version("10.0.0")}


def releases(framework: str) -> list[tuple[str, str, list[str]]]:
    """(release, variant, Pythons with wheels) for each GPU build of each final release the tables know."""
    found = {}
    for row in tables.table("python_wheels"):
        if row["package"] not in PACKAGES[framework]:
            continue
        try:
            plain = Version(row["version"])
        except InvalidVersion:
            continue
        if plain.is_prerelease or plain.is_devrelease or plain < FIRST[framework]:
            continue
        pythons = [p for p in row["pythons"].split(";") if p and p[-1].isdigit()]
        variants = [row["package"][len("cupy-"):]] if framework == "cupy" else gpu_variants(framework, row["version"])
        for variant in variants:
            found[(row["version"], variant)] = pythons
    return [(release, variant, pythons) for (release, variant), pythons in sorted(found.items(), key=lambda kv: (Version(kv[0][0]), kv[0][1]))]


def compile_one(requirements: tuple[str, ...], python: str) -> tuple[bool, str]:
    command = [uv_bin(), "pip", "compile", "-", "--quiet", "--no-header", "--python-version", python,
               "--python-platform", "x86_64-manylinux_2_28", "--no-annotate", "--index-strategy", "first-index"]
    done = subprocess.run(command, input="\n".join(requirements) + "\n", capture_output=True, text=True, timeout=300)
    if done.returncode == 0:
        return True, ""
    lines = [line.strip().removeprefix("cause:").removeprefix("╰─▶").strip() for line in done.stderr.splitlines()]
    reason = next((line for line in lines if line.startswith("Because")), None) or next((line for line in lines if line), "uv found no solution")
    return False, reason[:400]


def check(framework: str, release: str, variant: str, pythons: list[str]) -> dict:
    requirements, index = requirements_for(framework, release, "default" if variant == "plain" else variant)
    if index or (framework == "jax" and (variant == "cuda" or Version(release) < Version("0.4.23"))):
        return {}  # another index (PyTorch's; JAX's CUDA builds before 0.4.23, installed with -f from Google's storage)
    ordered = sorted(pythons, key=lambda p: tuple(int(x) for x in p.split(".")))
    if not ordered:
        return {}
    ok, reason = compile_one(requirements, ordered[-1])
    failed = [] if ok else [ordered[-1]]
    if not ok:
        for python in ordered[:-1]:
            if compile_one(requirements, python)[0]:
                break
            failed.append(python)
    return {"framework": framework, "release": release, "variant": "default" if variant == "plain" else variant, "requirement": " ".join(requirements),
            "resolves": "yes" if ok else ("no" if len(failed) == len(ordered) else "some"),
            "failing_pythons": ";".join(sorted(failed, key=lambda p: tuple(int(x) for x in p.split(".")))), "reason": reason,
            "source": f"uv pip compile '{' '.join(requirements)}' --python-version {ordered[-1]} --python-platform x86_64-manylinux_2_28 "
                      f"against PyPI, {datetime.date.today().isoformat()} (tools/build_install_checks.py)"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=4)
    parser.add_argument("--frameworks", default="tensorflow,jax,cupy,torch")
    parser.add_argument("--releases", default="", help="framework==version,...: resolve only these releases' builds and keep "
                        "every other row of the current file (for a release new to the tables)")
    args = parser.parse_args()
    only = {tuple(item.split("==", 1)) for item in args.releases.split(",") if item}
    frameworks = list(dict.fromkeys(f for f, _v in only)) if only else args.frameworks.split(",")
    work = [(framework, *item) for framework in frameworks for item in releases(framework) if not only or (framework, item[0]) in only]
    print(f"{len(work)} install lines to resolve", file=sys.stderr)
    with ThreadPoolExecutor(args.jobs) as pool:
        rows = [row for row in pool.map(lambda item: check(*item), work) if row]
    if only:  # the other rows stay as they are, in the file's order (framework as listed, then release, then variant)
        with OUT.open(newline="") as handle:
            kept = [r for r in csv.DictReader(handle) if (r["framework"], r["release"]) not in only]
        order = list(dict.fromkeys([r["framework"] for r in kept] + [r["framework"] for r in rows]))
        rows = sorted(kept + rows, key=lambda r: (order.index(r["framework"]), Version(r["release"]), r["variant"]))
    with OUT.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, ["framework", "release", "variant", "requirement", "resolves", "failing_pythons", "reason", "source"])
        writer.writeheader()
        writer.writerows(rows)
    bad = [r for r in rows if r["resolves"] != "yes"]
    print(f"{len(rows)} resolved, {len(bad)} do not resolve for every Python: " + ", ".join(f"{r['requirement']} ({r['failing_pythons']})" for r in bad),
          file=sys.stderr)


if __name__ == "__main__":
    main()
