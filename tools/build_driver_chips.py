"""Build src/gpucompat/knowledge/data/driver_chips.csv: which GPU chips each driver release's own code recognises.

A README's "Compatible GPUs" table (driver_devices.csv) is what NVIDIA lists as supported, not what the code drives:
boards vanish from it and come back between tags of one branch, and a new board of a chip the release already knows
may be absent. The resource manager identifies a GPU by its chip (the architecture and implementation it reads from
the GPU), so what a release drives is the chips its code has a HAL for: src/nvidia/generated/g_chips2halspec_nvoc.c,
whose __nvoc_init_halspec_ChipHal has one branch per chip, each named in a comment:

    // GB206
    else if(arch == 0x1b && impl == 0x6)

This tool reads that file at every release tag of NVIDIA/open-gpu-kernel-modules (R515 on, the open kernel modules'
source) and writes one row per tag: release,commit,chips,ccs,architectures,open_geforce,source. `chips` are the
GPU chips (virtual functions and display-only Tegra entries left out); `ccs` and `architectures` come from
tools/facts/gpu_chips.csv (a chip not there
has none); `open_geforce` is 'alpha' where the tag's README says GeForce and workstation support of
the open modules is alpha-quality, enabled only with the nvidia.ko parameter NVreg_OpenRmEnableUnsupportedGpus=1
(R515 to R535), else empty. Both flavours of a release are built from the same source (NVIDIA's driver README,
chapter "Open Linux Kernel Modules"), so the chips of Turing and later that a tag recognises are the release's.

To rebuild (the knowledge is a snapshot; CI has no network):

    git clone https://github.com/NVIDIA/open-gpu-kernel-modules   # or any mirror with its tags
    python tools/build_driver_chips.py open-gpu-kernel-modules      # writes driver_chips.csv, prints counts
    PYTHONPATH=src python -m pytest tests/test_kernel_modules.py -q
"""

from __future__ import annotations

import argparse
import csv
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "src" / "gpucompat" / "knowledge" / "data"
FACTS = ROOT / "tools" / "facts" / "gpu_chips.csv"
REPO = "NVIDIA/open-gpu-kernel-modules"
HALSPEC = "src/nvidia/generated/g_chips2halspec_nvoc.c"
CHIP = re.compile(r"^\s*//\s*([A-Z]{2}[0-9]{2,3}[A-Z]?)\s*$", re.MULTILINE)  # 'TU102', 'GB20B'; not 'VF', 'T234D'
RELEASE = re.compile(r"^[0-9]{3}(\.[0-9]+)+$")


def version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def chips(halspec: str) -> list[str]:
    """The chips __nvoc_init_halspec_ChipHal has a branch for, in the file's order."""
    body = halspec.partition("__nvoc_init_halspec_ChipHal")[2].partition("\n}\n")[0]
    return list(dict.fromkeys(CHIP.findall(body)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone or bare mirror of NVIDIA/open-gpu-kernel-modules, with its tags")
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()
    facts = {r["chip"]: r for r in csv.DictReader(FACTS.open(encoding="utf-8"))}
    rows, unmapped = [], set()
    for tag in sorted((t for t in git(args.repo, "tag").split() if RELEASE.match(t)), key=version):
        try:
            found = chips(git(args.repo, "show", f"{tag}:{HALSPEC}"))
            readme = git(args.repo, "show", f"{tag}:README.md")
        except subprocess.CalledProcessError:
            continue
        unmapped.update(c for c in found if c not in facts)  # kept in `chips`; no CC or architecture is guessed for it
        commit = git(args.repo, "rev-parse", f"{tag}^{{commit}}").strip()
        alpha = "alpha-quality" in readme and "OpenRmEnableUnsupportedGpus" in readme
        rows.append({"release": tag, "commit": commit, "chips": " ".join(found),
                     "ccs": ";".join(dict.fromkeys(facts[c]["cc"] for c in found if c in facts)),
                     "architectures": ";".join(dict.fromkeys(facts[c]["architecture"] for c in found if c in facts)),
                     "open_geforce": "alpha" if alpha else "",
                     "source": f"https://github.com/{REPO}/blob/{commit}/{HALSPEC} (tag {tag})"
                               + (f"; https://github.com/{REPO}/blob/{commit}/README.md (GeForce and Workstation support "
                                  "alpha-quality, NVreg_OpenRmEnableUnsupportedGpus=1)" if alpha else "")})
    if not rows:
        print(f"no release tag with {HALSPEC}", file=sys.stderr)
        return 1
    with (args.out / "driver_chips.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} releases read ({rows[0]['release']} to {rows[-1]['release']}), {len({c for r in rows for c in r['chips'].split()})} chips, "
          f"{sum(1 for r in rows if r['open_geforce'])} with GeForce alpha")
    if unmapped:
        print(f"chips not in {FACTS.name} (no CC or architecture given for them): {' '.join(sorted(unmapped))}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
