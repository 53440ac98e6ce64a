"""Rebuild src/gpucompat/knowledge/data/jax_pins.csv: what each jax release's own metadata pins, per CUDA extra.

jax is pure Python; its CUDA comes from jaxlib and the jax-cudaNN-plugin (jax-cudaNN-pjrt), which each release pins
by a range in its Requires-Dist (jax 0.4.37's [cuda12] pins jaxlib==0.4.36: there is no jaxlib 0.4.37). So a jax
release is judged by what its pins resolve to, never by a jaxlib of the same number.

    python tools/build_jax_pins.py [--date YYYY-MM-DD]

For every final jax release PyPI lists with a wheel, it reads the wheel's METADATA through HTTP range requests (the zip's
directory and one member, about 120 KB a release; gpucompat.knowledge.pyindex, as `gpucompat knowledge update` reads
wheels). PyPI's per-release JSON (https://pypi.org/pypi/jax/<version>/json) answers 404 from the machine this was built
on, and jax's files carry no PEP 658 metadata, so the wheel itself is read. For each extra that asks for CUDA
(cuda, cuda12, cuda12_pip, cuda13, ...) one row: the jaxlib range (the extra's own, else the base requirement's), the
plugin range, and what they resolve to: the newest release of jaxlib and of the plugin that PyPI lists with a Linux
x86_64 wheel, not yanked, inside the range (what uv picks). A pin that names a local build (jaxlib==0.4.7+cuda12.cudnn88)
comes from Google's find-links page, not PyPI: it resolves to itself. One row with extra '' per release holds the base
requirement, so the table is also the list of jax releases ("no such release").
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

PLUGIN = re.compile(r"jax-cuda[0-9]+-(plugin|pjrt)", re.ASCII)
LINUX_X86 = re.compile(r"(manylinux[0-9_]*|linux)_x86_64", re.ASCII)
COLUMNS = ["release", "extra", "jaxlib", "jaxlib_resolves", "plugin", "plugin_resolves", "source"]


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def releases(index: Index, project: str, linux_only: bool) -> dict[Version, str]:
    """Final, not-yanked releases with a wheel (a Linux x86_64 one where linux_only) -> one such wheel's file name;
    without linux_only, a release with only a source archive maps to '', and a yanked one (pip still installs it when
    pinned exactly, PEP 592) to 'yanked'."""
    found: dict[Version, str] = {}
    for item in index.files(project) or []:
        wheel = item.filename.endswith(".whl")
        if item.yanked and not linux_only:
            wheel = False
        if (item.yanked and linux_only) or (linux_only and not (wheel and LINUX_X86.search(item.filename))):
            continue
        stem = item.filename[:-len(".whl")] if wheel else re.sub(r"\.(tar\.gz|zip)$", "", item.filename)
        try:
            version = Version(stem.split("-")[1])
        except (InvalidVersion, IndexError):
            continue
        if not version.is_prerelease and not version.is_devrelease:
            found[version] = found.get(version) or (item.filename if wheel else "yanked" if item.yanked else "")
    return found


def requires_dist(index: Index, item) -> list[str]:
    with zipfile.ZipFile(index.open(item)) as wheel:
        member = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA") and n.count("/") == 1)
        text = wheel.read(member).decode("utf-8")
    return [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]


def _extra_of(requirement: Requirement) -> str | None:
    found = re.search(r"extra\s*==\s*['\"]([^'\"]+)['\"]", str(requirement.marker or ""))
    return _name(found.group(1)).replace("-", "_") if found else None


def resolves(spec: str, available: dict[Version, str]) -> str:
    """The newest available release inside `spec` (a pin of a local build resolves to itself); '' where none is."""
    if not spec:
        return ""
    exact = re.fullmatch(r"==\s*([0-9][0-9A-Za-z.+]*)", spec)
    if exact and "+" in exact.group(1):
        return exact.group(1)
    from packaging.specifiers import SpecifierSet

    inside = [v for v in available if SpecifierSet(spec).contains(v)]
    return str(max(inside)) if inside else ""


def rows_for(release: Version, wheel: str, dist: list[str], jaxlibs: dict, plugins: dict[str, dict], source: str) -> list[dict]:
    base, extras = "", {}
    for text in dist:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        name, extra = _name(requirement.name), _extra_of(requirement)
        if name != "jaxlib" and not PLUGIN.fullmatch(name):
            continue
        if extra is None:
            base = str(requirement.specifier) if name == "jaxlib" else base
            continue
        if not extra.startswith("cuda"):
            continue
        entry = extras.setdefault(extra, {"jaxlib": "", "plugin": "", "plugin_name": ""})
        if name == "jaxlib":
            entry["jaxlib"] = str(requirement.specifier)
        else:
            entry["plugin"], entry["plugin_name"] = str(requirement.specifier), name
    said = f"Requires-Dist of {wheel} METADATA ({source})"
    rows = [{"release": str(release), "extra": "", "jaxlib": base, "jaxlib_resolves": resolves(base, jaxlibs), "plugin": "",
             "plugin_resolves": "", "source": said}]
    for extra, entry in sorted(extras.items()):
        jaxlib = entry["jaxlib"] or base
        plugin = f"{entry['plugin_name']}{entry['plugin']}" if entry["plugin_name"] else ""
        rows.append({"release": str(release), "extra": extra, "jaxlib": jaxlib, "jaxlib_resolves": resolves(jaxlib, jaxlibs),
                     "plugin": plugin, "plugin_resolves": resolves(entry["plugin"], plugins.get(entry["plugin_name"], {})) if plugin else "",
                     "source": said})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--date", default=datetime.date.today().isoformat())
    parser.add_argument("--since", default="0.2.11", help="the first release read (jax's CUDA extras begin at 0.2.11)")
    args = parser.parse_args()
    index = Index("https://pypi.org/simple/")
    jaxlibs = releases(index, "jaxlib", linux_only=True)
    plugins = {name: releases(index, name, linux_only=True) for name in
               ("jax-cuda11-plugin", "jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda11-pjrt", "jax-cuda12-pjrt", "jax-cuda13-pjrt")}
    source = (f"read by HTTP range requests from the wheel listed at https://pypi.org/simple/jax/, {args.date}, tools/build_jax_pins.py; "
              "resolves: the newest not-yanked release with a Linux x86_64 wheel listed at https://pypi.org/simple/<package>/ that day")
    listed = {item.filename: item for item in index.files("jax") or []}
    rows = []
    for release, wheel in sorted(releases(index, "jax", linux_only=False).items()):
        if release < Version(args.since):
            continue
        if wheel in ("", "yanked"):  # a source archive only: its pins are computed by setup.py, which is not run here
            what = "yanked (pip installs it only when pinned exactly)" if wheel else "a source archive only"
            rows.append({"release": str(release), "extra": "", "jaxlib": "", "jaxlib_resolves": "", "plugin": "", "plugin_resolves": "",
                         "source": f"https://pypi.org/simple/jax/ lists jax {release} as {what} ({args.date}): "
                                   "its pins live in setup.py and were not read"})
            continue
        rows += rows_for(release, wheel, requires_dist(index, listed[wheel]), jaxlibs, plugins, source)
        print(release, file=sys.stderr)
    with (DATA / "jax_pins.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"{len(rows)} rows, {index.fetched >> 20} MiB of wheels read", file=sys.stderr)


if __name__ == "__main__":
    main()
