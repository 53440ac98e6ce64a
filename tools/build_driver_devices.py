"""Build src/gpucompat/knowledge/data/driver_devices.csv and driver_readmes.csv: which driver releases list
which PCI device IDs.

A driver binds only the PCI device IDs its release knows, so the first (and last) driver release that lists a
device ID is the fact, not the architecture's first branch (an RTX 4070 SUPER, Ada, is in no R535 or R545
release; Ada's first branch is R520). NVIDIA's open-gpu-kernel-modules repository tags every Linux driver release
since R515, and its README.md has, per tag, a "Compatible GPUs" table of product names and PCI device IDs
(device, or device subsystem-vendor subsystem-device):

    | NVIDIA GeForce RTX 4070 SUPER                           | 2783           |
    | NVIDIA RTX PRO 5000 Blackwell                           | 2BB3 10DE 204D |

This tool reads that table at every tag of a local clone (or a bare mirror) and writes:

- driver_readmes.csv: release,commit,devices,source — one row per tag whose README has the table (515.43.04's
  README has none, so the first read is 515.48.07). A release listed here is "read": its list is known.
- driver_devices.csv: device,names,first,first_commit,last,last_commit,source — one row per *run*: the device ID
  is listed by every read release from `first` to `last` in version order (`last` empty where the run reaches
  the newest read release). Releases are numbered per branch, and the branches are maintained side by side
  (535.43.23 came out after 535.54.03; 535.171.04 after 550.40.07), so a device can have several runs: a read
  release lists a device exactly when it falls inside one of its runs. The first row's `first` is the first
  release that lists the device; where the last run ends before the newest read release, a later README drops it.

Before R515 nothing is read: gpucompat falls back to the architecture rows of gpu_driver_branches.csv.
The open modules drive Turing and later only, so pre-Turing devices (Maxwell, Pascal, Volta) are not here either.

To rebuild (the knowledge is a snapshot; CI has no network):

    git clone https://github.com/NVIDIA/open-gpu-kernel-modules   # or any mirror with its tags
    python tools/build_driver_devices.py open-gpu-kernel-modules    # writes both CSVs, prints counts
    PYTHONPATH=src python -m pytest tests/test_driver_devices.py -q
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
REPO = "NVIDIA/open-gpu-kernel-modules"
ROW = re.compile(r"^\|\s*(?P<name>[^|]+?)\s*\|\s*(?P<device>[0-9A-Fa-f]{4})(?:\s+[0-9A-Fa-f]{4}\s+[0-9A-Fa-f]{4})?\s*\|\s*$")
RELEASE = re.compile(r"^[0-9]{3}(\.[0-9]+)+$")


def version(release: str) -> tuple[int, ...]:
    return tuple(int(part) for part in release.split("."))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


def compatible_gpus(readme: str) -> dict[str, list[str]] | None:
    """{device ID (upper-case hex): [names, as the README spells them]} from the README's Compatible GPUs table;
    None where the README has no such table."""
    _, found, rest = readme.partition("## Compatible GPUs")
    if not found:
        return None
    devices: dict[str, list[str]] = {}
    for line in rest.splitlines():
        if line.startswith("## "):
            break
        match = ROW.match(line)
        if match:
            names = devices.setdefault(match["device"].upper(), [])
            if match["name"] not in names:
                names.append(match["name"])
    return devices or None


def read(repo: Path) -> list[tuple[str, str, dict[str, list[str]]]]:
    """(release, commit, its list) for every release tag whose README has the table, oldest version first."""
    tags = sorted((t for t in git(repo, "tag").split() if RELEASE.match(t)), key=version)
    out = []
    for tag in tags:
        try:
            readme = git(repo, "show", f"{tag}:README.md")
        except subprocess.CalledProcessError:
            continue
        devices = compatible_gpus(readme)
        if devices:
            out.append((tag, git(repo, "rev-parse", f"{tag}^{{commit}}").strip(), devices))
    return out


def runs(releases: list[tuple[str, str, dict]]) -> list[dict]:
    """The driver_devices.csv rows: per device ID, each maximal run of consecutive read releases that list it."""
    names: dict[str, list[str]] = {}
    for _tag, _commit, devices in releases:
        for device, spelled in devices.items():
            names.setdefault(device, [])
            names[device] += [n for n in spelled if n not in names[device]]
    rows = []
    for device in sorted(names, key=lambda d: int(d, 16)):
        start = None
        for i, (tag, commit, devices) in enumerate(releases + [("", "", {})]):
            listed = device in devices
            if listed and start is None:
                start = i
            elif not listed and start is not None:
                first, end = releases[start], releases[i - 1]
                newest = i == len(releases)
                rows.append({"device": device, "names": "; ".join(names[device]), "first": first[0], "first_commit": first[1],
                             "last": "" if newest else end[0], "last_commit": "" if newest else end[1],
                             "source": f"{REPO}@{first[0]} README.md, Compatible GPUs ('{releases[start][2][device][0]} | {device}')"
                                       + ("" if newest else f"; listed through {end[0]}, not in {releases[i][0]}")})
                start = None
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("repo", type=Path, help="a clone or bare mirror of NVIDIA/open-gpu-kernel-modules, with its tags")
    parser.add_argument("--out", type=Path, default=DATA)
    args = parser.parse_args()
    releases = read(args.repo)
    if not releases:
        print("no release tag with a Compatible GPUs table", file=sys.stderr)
        return 1
    with (args.out / "driver_readmes.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["release", "commit", "devices", "source"])
        for tag, commit, devices in releases:
            writer.writerow([tag, commit, len(devices), f"https://github.com/{REPO}/blob/{commit}/README.md (tag {tag})"])
    rows = runs(releases)
    with (args.out / "driver_devices.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(releases)} releases read ({releases[0][0]} to {releases[-1][0]}), {len({r['device'] for r in rows})} device IDs, "
          f"{len(rows)} runs, {sum(1 for r in rows if r['last'])} ending before the newest release")
    return 0


if __name__ == "__main__":
    sys.exit(main())
