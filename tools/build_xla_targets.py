"""Read which GPU targets the XLA inside each JAX CUDA plugin can generate code for, from PyPI's wheels.

JAX compiles its kernels with XLA, whose LLVM NVPTX backend knows a fixed list of processors. The
plugin's `xla_cuda_plugin.so` carries that list as LLVM's processor table: NUL-terminated strings
`sm_20` ... `sm_90`, `sm_90a` (and later `sm_100a`, `sm_120a`, `sm_121a`, `sm_100f` ...). This tool reads
the `.so` out of each wheel through HTTP range requests (the zip's central directory, then the member's
compressed bytes inflated as they stream; nothing is written to disk) and keeps the names that stand
alone between NULs (LLVM's table puts them side by side, so two neighbours share one NUL). A name the
linker merged into the tail of a longer string is not seen (`sm_30` in 0.4.31, an old target no rule asks
about); the newest target, which the rule reads, was checked against XLA's source below.

How XLA picks its target for a GPU it does not know (openxla/xla GetSmName): it walks its list of supported
versions from the newest down and takes the first at or below the GPU's compute capability ("If the current
compute capability isn't known, fallback to the most recent version before it"):
xla/service/gpu/llvm_gpu_backend/gpu_backend_lib.cc @001918b7024cf5f020051a9d25d2dd57a5896aaa (2023: no suffix);
a 2024 version of the same function (its list {90, 89, 87, 86, 80, 75, ...}, as the 0.4.31 wheel's names; read
from the code search index, which gives no commit) appends `a` for a 9.x GPU at sm_90
(`compute_capability.major == 9 && sm_version == 90`, "only sm_90 is forward compatible, so don't use sm_90a
with newer hardware"); later code appends it where `ShouldUsePtxExtension(cc)` holds for the GPU (9.0,
10.0/10.1/10.3, 12.0/12.1, xla/stream_executor/cuda/ptx_compiler_helpers.cc); the current
xla/service/gpu/llvm_gpu_backend/nvptx_backend.cc @04cad8202fae6cb0821b0190669810d643fbeb05 keeps the list as
kSupportedVersions {12.1, 12.0, 11.0, 10.7, 10.3, 10.0, 9.0, ...} and, for a Blackwell-or-later GPU whose own
minor it lacks, falls back to the same major with the family-compatible (`f`) extension
(ResolveSupportedComputeCapability). What a JAX whose XLA falls back to sm_90 does on a later GPU is
observed, not traced line by line here: "ptxas fatal : Program with .target 'sm_90a' cannot be compiled to
future architecture" (jax 0.4.26 and 0.4.30 on compute capability 12.0, tools/facts/accuracy_cases_other.csv).

Which releases are read: PyPI's JSON API lists every release of each package; the first and last
release of each minor series are read (and ALSO_READ), and where two read releases differ, the release between them is
read, until every change lies between two adjacent releases. A release between two read releases that
agree is written as `inferred` (the targets only grow with LLVM; checked wherever a series was bisected).
jaxlib's own CUDA wheels (jaxlib==0.4.x+cuda11/12, before the plugin) live on storage.googleapis.com,
which this tool tries once: where it is unreachable, their rows are `inferred` from the jax-cuda12-pjrt
wheel of the same release (jaxlib and the plugin of one release are built from one XLA commit).

Writes src/gpucompat/knowledge/data/xla_targets.csv:
package,release,newest_sm,targets,read,source,checked

    python tools/build_xla_targets.py [--package jax-cuda12-pjrt] [--release 0.4.31 ...]

What each wheel read gave is kept in /tmp/xla-targets-read.json (by file name and sha256), so a rerun fetches
only wheels it has not read. Read here 2026-11-28: jax-cuda12-pjrt and jax-cuda13-pjrt, about 100-190 MB each.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path

from packaging.version import Version

from gpucompat.knowledge.xla_targets import sm_key

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "src" / "gpucompat" / "knowledge" / "data" / "xla_targets.csv"
FIELDS = ["package", "release", "newest_sm", "targets", "read", "source", "checked"]
PYPI = "https://pypi.org/pypi/{}/json"
MEMBER = re.compile(r"jax_plugins/xla_cuda1[0-9]/xla_cuda_plugin\.so")
PACKAGES = ("jax-cuda12-pjrt", "jax-cuda13-pjrt")
GOOGLE = "https://storage.googleapis.com/jax-releases/jax_cuda_releases.html"
JAXLIB_CUDA = ("0.4.23", "0.4.30")  # the jaxlib+cuda releases the plugin's wheels overlap (the jax_builds jaxlib variants end at 0.4.30)
NAME = re.compile(rb"(?<=\x00)sm_[0-9]{2,3}[af]?(?=\x00)")  # lookarounds: neighbouring names share their NULs
CHUNK = 8 << 20
ALSO_READ = {"jax-cuda12-pjrt": ("0.4.31", "0.6.2")}  # the releases issue 40 names, read to check what it says of them
CACHE = Path("/tmp/xla-targets-read.json")
XLA_SOURCE = ("how XLA falls back for a GPU it does not know: openxla/xla GetSmName, xla/service/gpu/llvm_gpu_backend/"
              "gpu_backend_lib.cc @001918b7024cf5f020051a9d25d2dd57a5896aaa and nvptx_backend.cc @04cad8202fae6cb0821b0190669810d643fbeb05")


class Ranges(io.RawIOBase):
    """A remote file zipfile can seek in, read through HTTP range requests in CHUNK blocks (the last one kept)."""

    def __init__(self, url: str):
        self.url, self.pos, self.fetched = url, 0, 0
        self.block_at, self.block = -1, b""
        with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"), timeout=60) as response:
            self.size = int(response.headers["Content-Length"])

    def readable(self):
        return True

    def seekable(self):
        return True

    def tell(self):
        return self.pos

    def seek(self, offset, whence=0):
        self.pos = offset if whence == 0 else self.pos + offset if whence == 1 else self.size + offset
        return self.pos

    def read(self, size=-1):
        size = self.size - self.pos if size is None or size < 0 else min(size, self.size - self.pos)
        out = []
        while size > 0:
            if not self.block_at <= self.pos < self.block_at + len(self.block):
                start, end = self.pos, min(self.size, self.pos + max(size, CHUNK)) - 1
                request = urllib.request.Request(self.url, headers={"Range": f"bytes={start}-{end}"})
                with urllib.request.urlopen(request, timeout=120) as response:
                    if response.status != 206:
                        raise SystemExit(f"{self.url} ignores range requests")
                    self.block_at, self.block = start, response.read()
                self.fetched += len(self.block)
            piece = self.block[self.pos - self.block_at:self.pos - self.block_at + size]
            out.append(piece)
            self.pos += len(piece)
            size -= len(piece)
        return b"".join(out)


def wheels(package: str) -> dict[str, dict]:
    """release -> its manylinux x86_64 wheel in PyPI's JSON API (name, absolute URL, sha256)."""
    url = PYPI.format(package)
    with urllib.request.urlopen(url, timeout=60) as response:
        data = json.load(response)
    found = {}
    for release, files in data["releases"].items():
        for item in files:
            if "manylinux" in item["filename"] and item["filename"].endswith("x86_64.whl") and not item.get("yanked"):
                found[release] = {"file": item["filename"], "url": urllib.parse.urljoin(url, item["url"]),
                                  "sha256": item["digests"]["sha256"]}
                break
    return found


def read_targets(wheel: dict) -> tuple[list[str], int]:
    """The sm_ names standing alone in the wheel's xla_cuda_plugin.so, and the bytes fetched."""
    remote = Ranges(wheel["url"])
    with zipfile.ZipFile(remote) as archive:
        member = next((m for m in archive.namelist() if MEMBER.fullmatch(m)), None)
        if member is None:
            raise SystemExit(f"{wheel['file']} has no xla_cuda_plugin.so")
        names, carry = set(), b""
        with archive.open(member) as stream:
            while chunk := stream.read(CHUNK):
                data = carry + chunk
                names.update(m.group(0).decode() for m in NAME.finditer(data))
                carry = data[-16:]
    return sorted(names, key=sm_key), remote.fetched


def series(release: str) -> tuple[int, ...]:
    return Version(release).release[:2]


def read_package(package: str, only: list[str] | None, today: str) -> list[dict]:
    found = wheels(package)
    cache = json.loads(CACHE.read_text()) if CACHE.exists() else {}  # wheel file and sha256 -> targets, so a rerun fetches nothing twice
    releases = sorted(found, key=Version)
    read: dict[str, list[str]] = {}
    total = 0

    def look(release: str) -> list[str]:
        nonlocal total
        key = f"{found[release]['file']} {found[release]['sha256']}"
        if release not in read and key in cache:
            read[release] = cache[key]
        elif release not in read:
            read[release], fetched = read_targets(found[release])
            total += fetched
            cache[key] = read[release]
            CACHE.write_text(json.dumps(cache, indent=0, sort_keys=True))
            print(f"{package} {release}: {read[release][-1]} ({fetched / 1e6:.0f} MB fetched)", file=sys.stderr)
        return read[release]

    def bisect(low: int, high: int) -> None:
        if look(releases[low]) == look(releases[high]) or high - low < 2:
            return
        middle = (low + high) // 2
        bisect(low, middle)
        bisect(middle, high)

    if only:
        for release in only:
            look(release)
    else:
        ends = []
        for key in sorted({series(r) for r in releases}):
            members = [i for i, r in enumerate(releases) if series(r) == key]
            ends += [members[0], members[-1]]
        ends = sorted(set(ends) | {releases.index(r) for r in ALSO_READ.get(package, ()) if r in releases})
        for low, high in zip(ends, ends[1:]):
            bisect(low, high)
    print(f"{package}: {len(read)} of {len(releases)} releases read, {total / 1e9:.2f} GB fetched", file=sys.stderr)
    rows, last = [], None
    for release in releases:
        wheel = found[release]
        if release in read:
            last = (release, read[release])
            rows.append(row(package, release, read[release], "read", f"{wheel['file']} (sha256 {wheel['sha256']}) read from PyPI by "
                            f"range requests: the sm_ names its xla_cuda_plugin.so carries ; {XLA_SOURCE}", today))
        elif last is not None and not only:
            after = next(r for r in releases[releases.index(release):] if r in read)
            assert read[after] == last[1], f"{package} {release} lies between two reads that differ"
            rows.append(row(package, release, last[1], "inferred", f"not read: {last[0]} and {after} read the same ({wheel['file']}, "
                            f"sha256 {wheel['sha256']}) ; {XLA_SOURCE}", today))
    return rows


def row(package: str, release: str, targets: list[str], how: str, source: str, today: str) -> dict:
    return {"package": package, "release": release, "newest_sm": max(targets, key=sm_key), "targets": ";".join(targets),
            "read": how, "source": source, "checked": today}


def jaxlib_rows(cuda12: list[dict], today: str) -> list[dict]:
    """jaxlib's own CUDA wheels of the releases the plugin overlaps, read where Google's storage answers, else inferred."""
    try:
        with urllib.request.urlopen(GOOGLE, timeout=20):
            reachable = True
    except (urllib.error.URLError, OSError):
        reachable = False
    low, high = (Version(v) for v in JAXLIB_CUDA)
    rows = []
    for plugin in cuda12:
        if low <= Version(plugin["release"]) <= high:
            why = ("storage.googleapis.com/jax-releases answered, but its wheels were not read" if reachable else
                   "jaxlib's CUDA wheels live on storage.googleapis.com/jax-releases, unreachable from here")
            rows.append({**plugin, "package": "jaxlib", "read": "inferred", "source": f"{why}: inferred from jax-cuda12-pjrt "
                         f"{plugin['release']} (one XLA commit per jax release) ; {XLA_SOURCE}", "checked": today})
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--package", action="append", choices=PACKAGES, help="only this package (default: all)")
    parser.add_argument("--release", action="append", help="read only these releases and print them (nothing written)")
    args = parser.parse_args(argv)
    today = datetime.date.today().isoformat()
    rows = []
    for package in args.package or PACKAGES:
        rows += read_package(package, args.release, today)
    if args.release:
        for item in rows:
            print(item["package"], item["release"], item["targets"])
        return 0
    rows += jaxlib_rows([r for r in rows if r["package"] == "jax-cuda12-pjrt"], today)
    with OUT.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {len(rows)} rows to {OUT.relative_to(ROOT)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
