"""`gpucompat knowledge update`: learn the releases an index has that the packaged tables do not describe yet.

For torch, JAX (jaxlib and its CUDA plugins), TensorFlow and CuPy's cupy-cuda*x packages, every final release newer
than the packaged build tables is read from the index as pip would see it:
- its Python windows from the wheel files' tags (knowledge/wheeltags.py, as tools/build_python_wheels.py did);
- its CUDA variants from the files the index lists (torch's local labels, JAX's jax-cudaNN-plugin packages, CuPy's
  cupy-cudaNNx packages), and the default torch build's CUDA from the pins `uv pip compile` resolves against the
  same index (as tools/build_torch_pins.py and build_knowledge.py did);
- its architectures from the wheel's fat binaries (knowledge/pyindex.py: the zip's central directory and only its
  CUDA libraries, through range requests), or, where the server ignores range requests, inferred from the previous
  release of the same variant and marked so.
Everything learned goes into the overlay (knowledge/overlay.py) in one swap at the end: a failure on the way
changes nothing. Releases the overlay already holds with read kernels are kept, not fetched again.

A release is learned only from a file the index really serves: every release (version and local label) past the
packaged lists has one of its wheels checked (pyindex.Index.check: its PEP 658 metadata against the index's hash,
a range read of its head, or the file whole against the index's hash) before anything is learned from it; one
that fails is left out, and the report says why in one sentence (as it says which links were refused).
Before fetching, the update says what it will fetch and how many bytes (`plan`); `dry_run` stops there.
"""

from __future__ import annotations

import csv
import datetime
import re
import subprocess
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Callable

from packaging.version import InvalidVersion, Version

from .envs.uv import uv_bin
from .errors import UserError
from .knowledge import overlay, pyindex, wheeltags
from .knowledge.fatbin import _arch_key
from .knowledge.tables import DATA
from .resolve import cuda_versions, default_index, parse_pins, uv_env

TORCH_PIN = re.compile(r"^(nvidia-[a-z0-9-]+|cuda-toolkit)==([0-9][0-9.]*)$")  # CUDA 13 wheels: cuda-toolkit, unsuffixed nvidia-*
JAX_PLUGINS = ("jax-cuda12-plugin", "jax-cuda13-plugin", "jax-cuda14-plugin")
CUPY_PACKAGES = ("cupy-cuda12x", "cupy-cuda13x", "cupy-cuda14x")
PACKAGES = ("torch", "jaxlib", *JAX_PLUGINS, "tensorflow", *CUPY_PACKAGES)
PLATFORM = "x86_64-manylinux_2_28"
# The libraries whose kernels are the framework's own (the bundled cuBLAS/cuDNN of old torch wheels carry more archs).
KERNELS = {
    "torch": lambda name: name.rsplit("/", 1)[-1].startswith("libtorch_cuda"),
    "jax": lambda name: True,
    "tensorflow": lambda name: True,
}
TABLES = ("python_wheels", "torch_pypi_default", "torch_builds", "torch_cuda_pins", "jax_builds",  # every table an update may add rows to
          "newest_releases", "tensorflow_builds", "cupy_packages")


def torch_pins(compile_output: str) -> list[tuple[str, str]]:
    """The CUDA wheels torch itself requires, from `uv pip compile` output with its `# via torch` annotations
    (tools/build_torch_pins.py builds torch_cuda_pins.csv with this too)."""
    found, current = [], None
    for line in compile_output.splitlines():
        if not line.startswith(" "):
            current = TORCH_PIN.match(line.strip())
        elif current and re.search(r"#\s+(via\s+)?torch$", line.strip()):  # torch's own requirement, not a library's
            found.append((current.group(1), current.group(2)))
    return found


@lru_cache(maxsize=None)
def packaged(name: str) -> tuple[tuple[str, ...], tuple[dict, ...]]:
    """A packaged table as shipped (columns, rows), without the overlay; read once, as tables.table is."""
    with (DATA / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        return tuple(reader.fieldnames or ()), tuple(reader)


def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def _series(version: Version) -> str:
    return f"{version.major}.{version.minor}"


def _resolving_python(package: str, version: str, pythons: list[str]) -> str:
    """The Python a release's pins are resolved for: 3.12 where it has wheels for it, else its newest; a release with
    no plain-CPython wheel (only free-threaded or none) is one sentence, and nothing is changed."""
    if not pythons:
        raise UserError(f"{package} {version} on the index has no wheel for a plain CPython, so its pins cannot be resolved; nothing was changed.")
    return "3.12" if "3.12" in pythons else pythons[-1]


def _series_past(found: dict[str, dict[str, Release]], newest: Version) -> list[tuple[str, list[str]]]:
    """The final releases of series (major.minor) newer than `newest`: (series, its versions in order), oldest series first."""
    by_series: dict[str, list[str]] = {}
    for text in found:
        version = Version(text)
        if not version.is_prerelease and not version.is_devrelease and Version(_series(version)) > newest:
            by_series.setdefault(_series(version), []).append(text)
    return [(series, sorted(versions, key=Version)) for series, versions in sorted(by_series.items(), key=lambda item: Version(item[0]))]


def _kept_entry(package: str, series: str, versions: list[str], rows: list[dict], variant: str | None = None) -> dict:
    """The summary of a series an earlier update read, from its rows (`variant`: for rows without a variant column)."""
    return {"package": package, "release": series, "versions": versions, "bytes": 0,
            "variants": [{"variant": variant or r["variant"], "cuda": r["cuda"], "sass": r["sass"], "ptx": r["ptx"],
                          "how": "kept from the last update"} for r in rows]}


@dataclass
class Release:
    """One release (version) of one package as the index lists it: its Linux x86_64 wheels."""

    package: str
    version: Version
    wheels: list = field(default_factory=list)  # IndexFile
    pythons: set = field(default_factory=set)
    checked: object = None  # the IndexFile found served (Index.check), once checked
    how: str = ""  # how it was found served: metadata, range, whole, wheelhouse

    def smallest(self):
        return min(self.wheels, key=lambda w: (w.size or 0, w.filename))

    @property
    def plain_pythons(self) -> list[str]:
        return [p for p in wheeltags.sort_tokens(self.pythons) if re.fullmatch(r"\d+\.\d+", p)]


def releases(files: list, package: str) -> dict[str, dict[str, Release]]:
    """version -> local label ('' for none) -> the release's Linux x86_64 wheels, from an index's file list."""
    found: dict[str, dict[str, Release]] = {}
    for item in files:
        tags = wheeltags.wheel_tags(item.filename)
        if tags is None or item.yanked or not wheeltags.is_linux_x86_64(tags[2]):
            continue
        text = item.filename.split("-")[1]
        plain, _, local = text.partition("+")
        version = _version(plain)
        if version is None:
            continue
        release = found.setdefault(str(version), {}).setdefault(local, Release(package, version))
        release.wheels.append(item)
        release.pythons |= wheeltags.python_tokens(tags[0], tags[1])
    return found


class Learner:
    """One update: what the index has, what is learned from it, and the bytes and seconds it cost."""

    def __init__(self, index: pyindex.Index, offline: bool = False, say: Callable[[str], None] = lambda text: None,
                 today: str | None = None):
        self.index, self.offline, self.say = index, offline, say
        self.today = today or datetime.date.today().isoformat()
        self.source = f"learned from {index.label} on {self.today}"
        self.rows: dict[str, list[dict]] = {name: [] for name in TABLES}
        self.learned: list[dict] = []  # one per release series learned, for the summary
        self.ranges = True  # the server honoured range requests (False: archs inferred)
        self.seen: dict[str, list[str]] = {}  # package -> every version the index lists (the release list explain reads)
        self.earlier = {name: overlay.rows(name) for name in TABLES}  # the rows earlier updates learned, read once
        self.damaged = overlay.problem()  # a damaged overlay: nothing of it is kept, this update replaces it
        self.not_learned: list[str] = []  # one sentence per release left out (its files not served as listed)

    # -- index reading ------------------------------------------------------------------------------

    def listing(self, package: str) -> dict[str, dict[str, Release]]:
        self.say(f"reading {self.index.label} for {package}")
        files = self.index.files(package)
        if files is None:
            return {}
        versions = set()
        for item in files:
            parts = item.filename.split("-")
            if len(parts) > 1 and (item.filename.endswith((".whl", ".tar.gz", ".zip"))):
                found = _version(parts[1].partition("+")[0]) if item.filename.endswith(".whl") else _version(item.filename.rsplit("-", 1)[-1].split(".tar")[0].removesuffix(".zip"))
                if found is not None:
                    versions.add(str(found))
        self.seen[package] = sorted(versions, key=Version)
        return releases(files, package)

    def _known(self, package: str) -> set[str]:
        """The versions of a package the packaged python_wheels list holds (PyPI's, read when the tables were built)."""
        return {r["version"] for r in packaged("python_wheels")[1] if r["package"] == package}

    def _unchecked(self, package: str, found: dict[str, dict[str, Release]], also=()) -> list[Release]:
        """The releases to check before learning: every version the packaged list lacks, and those in `also`."""
        known, also = self._known(package), set(also)
        return [release for text in sorted(found, key=Version) if text not in known or text in also
                for _local, release in sorted(found[text].items()) if release.checked is None]

    def check(self, release: Release) -> bool:
        """Whether the index serves a file of this release (its wheels tried smallest first); the files that fail
        are dropped from it, each with one sentence."""
        for wheel in sorted(release.wheels, key=lambda w: (w.size or 0, w.filename)):
            self.say(f"checking that {self.index.label} serves {wheel.filename}")
            try:
                release.how = self.index.check(wheel)
            except pyindex.NotServed as exc:
                self.index.refuse(str(exc))
                continue
            release.checked = wheel
            break
        if release.checked is None:
            label = f"+{release.wheels[0].filename.split('-')[1].partition('+')[2]}" if "+" in release.wheels[0].filename.split("-")[1] else ""
            self.not_learned.append(f"{release.package} {release.version}{label} is not learned: the index lists it, "
                                    "but serves none of its files as listed.")
            return False
        return True

    def served(self, package: str, found: dict[str, dict[str, Release]], also=()) -> dict[str, dict[str, Release]]:
        """`found` without the releases whose files the index does not serve (those past the packaged list, and
        `also`, are checked); the release list explain reads keeps only what is known or was checked."""
        for release in self._unchecked(package, found, also):
            self.check(release)
        known, also = self._known(package), set(also)
        kept = {text: {local: r for local, r in labels.items() if r.checked is not None or (text in known and text not in also)}
                for text, labels in found.items()}
        kept = {text: labels for text, labels in kept.items() if labels}
        if package in self.seen:
            self.seen[package] = [v for v in self.seen[package] if v in known or v in kept]
        return kept

    def kernels(self, framework: str, release: Release) -> tuple[list[str], list[str], str, int] | None:
        """(sass, ptx, how, bytes) read from the wheel of a release found served; None where the server ignores ranges
        (the file was checked another way: its metadata, or whole)."""
        if release.checked is None and not self.check(release):
            raise pyindex.NotServed(f"{release.package} {release.version} is not served")
        wheel = release.checked
        before = self.index.fetched
        self.say(f"reading the CUDA libraries of {wheel.filename}")
        try:
            archs, members = pyindex.wheel_archs(self.index, wheel, KERNELS[framework])
        except pyindex.NoRanges:
            self.ranges = False
            return None
        spent = self.index.fetched - before
        size = f" of {wheel.size:,}" if wheel.size else ""
        listed = ", ".join(members) if len(members) <= 4 else f"{len(members)} libraries, {', '.join(members[-2:])} the largest"
        how = f"read from {wheel.filename} with gpucompat's fat-binary reader ({listed or 'no CUDA library'}; {spent:,}{size} bytes fetched)"
        return sorted(archs.sass, key=_arch_key), sorted(archs.ptx, key=_arch_key), how, spent

    # -- pins -----------------------------------------------------------------------------------------

    def compile(self, requirement: str, python: str) -> str:
        """`uv pip compile` of one requirement against the same index, with annotations (torch_pins reads them)."""
        if self.index.wheelhouse:
            where = ["--no-index", "--find-links", self.index.wheelhouse]
        else:
            where = ["--default-index", self.index.url]
        command = [uv_bin(), "pip", "compile", "-", "--python-version", python, "--python-platform", PLATFORM, "--no-header",
                   "--no-build", *where, *(["--offline"] if self.offline else [])]
        self.say(f"uv pip compile {requirement} (Python {python})")
        try:
            proc = subprocess.run(command, input=requirement + "\n", capture_output=True, encoding="utf-8", errors="replace", env=uv_env(), timeout=300)
        except subprocess.TimeoutExpired:
            raise UserError(f"uv pip compile {requirement} did not finish within 300 s; nothing was changed.") from None
        if proc.returncode != 0:
            error = proc.stderr.strip().splitlines()
            raise UserError(f"uv pip compile {requirement} against {self.index.label} failed ({error[-1][:300] if error else proc.returncode}); "
                            "nothing was changed.")
        return proc.stdout

    # -- per framework ----------------------------------------------------------------------------------

    def python_rows(self, package: str, found: dict[str, dict[str, Release]]) -> None:
        """python_wheels rows for the releases of `package` that the packaged table lacks."""
        known = {r["version"] for r in packaged("python_wheels")[1] if r["package"] == package}
        for text in sorted(found, key=Version):
            if text in known:
                continue
            pythons = set().union(*(r.pythons for r in found[text].values()))
            self.rows["python_wheels"].append({"package": package, "version": text, "pythons": ";".join(wheeltags.sort_tokens(pythons)),
                                               "source": f"{self.source} (the index's files for {package} {text}: Linux x86_64 wheels)"})

    def previous(self, table: str, match: Callable[[dict], bool], order: str) -> dict | None:
        """The newest row of a table (learned, then packaged) that matches: what an unread release is inferred from."""
        rows = [r for r in (*self.rows[table], *self.earlier[table], *packaged(table)[1]) if match(r)]
        return max(rows, key=lambda r: Version(r[order]), default=None)

    def torch(self) -> None:
        found = self.listing("torch")
        newest = max(Version(r["release"]) for r in packaged("torch_pypi_default")[1] + packaged("torch_builds")[1])
        found = self.served("torch", found, also=[v for _series, versions in _series_past(found, newest) for v in versions])
        kept = {r["release"] for r in self.earlier["torch_builds"] if "inferred" not in r["source"]}  # inferred rows are read again
        for series, versions in _series_past(found, newest):
            if series in kept:
                self._keep("torch_builds", "torch_pypi_default", "torch_cuda_pins", key=lambda r, s=series: _series(Version(r["release"])) == s)
                self.learned.append(_kept_entry("torch", series, versions, [r for r in self.earlier["torch_builds"] if r["release"] == series]))
                continue
            latest = versions[-1]
            default = found[latest].get("")
            entry = {"package": "torch", "release": series, "versions": versions, "variants": [], "bytes": 0}
            if default is not None and default.checked is not None:
                python = _resolving_python("torch", latest, default.plain_pythons)
                output = self.compile(f"torch=={latest}", python)
                pins = torch_pins(output)
                cuda, _cudnn = cuda_versions(parse_pins(output))
                if cuda is None:
                    raise UserError(f"uv pip compile torch=={latest} against {self.index.label} pins no CUDA runtime; nothing was changed.")
                variant = f"cu{cuda.replace('.', '')}"
                how = f"{self.source}: uv pip compile torch=={latest} --python-version {python} --python-platform {PLATFORM} pins nvidia-cuda-runtime {cuda}"
                self.rows["torch_pypi_default"].append({"release": series, "variant": variant, "cuda": cuda, "source": how})
                self.rows["torch_cuda_pins"] += [{"release": latest, "package": p, "version": v, "source": f"{how} (torch's own Requires-Dist pins)"}
                                                 for p, v in pins]
                self._torch_build(series, variant, cuda, default, entry)
            for local, release in sorted(found[latest].items()):
                if re.fullmatch(r"cu[0-9]{3}", local):
                    self._torch_build(series, local, f"{local[2:-1]}.{local[-1]}", release, entry)
            self.learned.append(entry)
        self.python_rows("torch", found)

    def _torch_build(self, series: str, variant: str, cuda: str, release: Release, entry: dict) -> None:
        try:
            read = self.kernels("torch", release)
        except pyindex.NotServed:
            return  # said once, by check
        if read is not None:
            sass, ptx, how, spent = read
            row = {"sass": ";".join(sass), "ptx": ";".join(ptx), "confidence": "high", "source": f"{self.source}: {how}"}
            entry["bytes"] += spent
        else:
            before = self.previous("torch_builds", lambda r: r["variant"] == variant and Version(r["release"]) < Version(series), "release")
            row = {"sass": before["sass"] if before else "", "ptx": before["ptx"] if before else "", "confidence": "low" if before is None or before["confidence"] == "low" else "medium",  # an inference from a guess is a guess
                   "source": f"{self.source}: inferred from torch {before['release']} {variant} ({before['source'][:200]}): the index ignores "
                             "range requests, so the wheel's kernels were not read" if before else
                             f"{self.source}: the index ignores range requests and no earlier {variant} build is known"}
        self.rows["torch_builds"].append({"release": series, "variant": variant, "cuda": cuda, **row})
        entry["variants"].append({"variant": variant, "cuda": cuda, "sass": row["sass"], "ptx": row["ptx"],
                                  "how": "read" if read is not None else "inferred"})

    def _keep(self, *tables: str, key: Callable[[dict], bool]) -> None:
        """Rows an earlier update learned (their release is not read again)."""
        for table in tables:
            self.rows[table] += [r for r in self.earlier[table] if key(r)]

    def jax(self) -> None:
        found = self.listing("jaxlib")
        packaged_newest = next((Version(r["newest"]) for r in packaged("newest_releases")[1] if r["framework"] == "jax"), None)
        new = [v for _series, versions in (_series_past(found, packaged_newest) if packaged_newest is not None else ()) for v in versions]
        found = self.served("jaxlib", found, also=new)
        self.python_rows("jaxlib", found)
        kept = {r["from_version"] for r in self.earlier["jax_builds"] if r.get("source", "").find("inferred") < 0}
        plugins = {}
        for package in JAX_PLUGINS:
            listed = self.served(package, self.listing(package), also=new)
            if listed:
                plugins[package] = listed
                self.python_rows(package, listed)
        for series, versions in _series_past(found, packaged_newest) if packaged_newest is not None else ():
            entry = {"package": "jax", "release": series, "versions": versions, "variants": [], "bytes": 0}
            for package, listed in plugins.items():
                first = next((v for v in versions if v in listed), None)
                if first is None:
                    continue
                variant = package.split("-")[1]  # jax-cuda13-plugin: cuda13
                if first in kept:
                    self._keep("jax_builds", key=lambda r, f=first, v=variant: r["from_version"] == f and r["variant"] == v)
                    entry["variants"] += [{"variant": variant, "cuda": f"{r['cuda_major']}.x", "sass": r["sass"], "ptx": r["ptx"],
                                           "how": "kept from the last update"}
                                          for r in self.earlier["jax_builds"] if r["from_version"] == first and r["variant"] == variant]
                    continue
                self._jax_build(first, variant, listed[first][""] if "" in listed[first] else next(iter(listed[first].values())), entry)
            self.rows["newest_releases"] = [{"framework": "jax", "newest": series,  # the newest series only: the rules take the first row
                                             "source": f"{self.source} (jaxlib {', '.join(entry['versions'])} on the index)",
                                             "release": versions[-1], "package": "jaxlib", "uploaded": "", "checked": self.today}]
            self.learned.append(entry)

    def _jax_build(self, first: str, variant: str, release: Release, entry: dict) -> None:
        before = self.previous("jax_builds", lambda r: r["variant"] == variant and Version(r["from_version"]) < Version(first), "from_version")
        if before is None:
            return  # a CUDA major no JAX row describes yet: its driver floor is not in the tables to carry over
        try:
            read = self.kernels("jax", release)
        except pyindex.NotServed:
            return  # said once, by check
        inherited = f"documented minimum CC, driver and cuDNN as jax[{variant}] {before['from_version']} ({before['source'][:160]})"
        if read is not None:
            sass, ptx, how, spent = read
            entry["bytes"] += spent
            row = {"sass": ";".join(sass), "ptx": ";".join(ptx), "min_cc": before["min_cc"], "source": f"{self.source}: {how} ; {inherited}"}
        else:
            row = {"sass": before["sass"], "ptx": before["ptx"], "min_cc": before["min_cc"],
                   "source": f"{self.source}: inferred from jax[{variant}] {before['from_version']}: the index ignores range requests ; {inherited}"}
        self.rows["jax_builds"].append({"from_version": first, "variant": variant, "cuda_major": before["cuda_major"],
                                        "min_driver": before["min_driver"], "cudnn": before.get("cudnn", ""), "to_version": "", **row})
        entry["variants"].append({"variant": variant, "cuda": f"{before['cuda_major']}.x", "sass": row["sass"], "ptx": row["ptx"],
                                  "how": "read" if read is not None else "inferred"})

    def tensorflow(self) -> None:
        found = self.listing("tensorflow")
        newest = max(Version(r["release"]) for r in packaged("tensorflow_builds")[1])
        found = self.served("tensorflow", found, also=[v for _series, versions in _series_past(found, newest) for v in versions])
        self.python_rows("tensorflow", found)
        kept = {r["release"] for r in self.earlier["tensorflow_builds"] if "inferred" not in r.get("source", "")}
        for series, versions in _series_past(found, newest):
            if series in kept:
                self._keep("tensorflow_builds", key=lambda r, s=series: r["release"] == s)
                self.learned.append(_kept_entry("tensorflow", series, versions,
                                                [r for r in self.earlier["tensorflow_builds"] if r["release"] == series], "and-cuda"))
                continue
            first = versions[0]
            release = found[first][""] if "" in found[first] else next(iter(found[first].values()))
            python = _resolving_python("tensorflow", first, release.plain_pythons)
            cuda, cudnn = cuda_versions(parse_pins(self.compile(f"tensorflow[and-cuda]=={first}", python)))
            before = self.previous("tensorflow_builds", lambda r: Version(r["release"]) < Version(series), "release")
            try:
                read = self.kernels("tensorflow", release)
            except pyindex.NotServed:
                continue  # said once, by check
            entry = {"package": "tensorflow", "release": series, "versions": versions, "variants": [], "bytes": 0}
            if read is not None:
                sass, ptx, how, spent = read
                entry["bytes"] += spent
            else:
                # an empty column is no architecture: "".split(";") is [""], which min() below would take as the lowest
                sass = [a for a in before["sass"].split(";") if a] if before else []
                ptx = [a for a in before["ptx"].split(";") if a] if before else []
                how = f"inferred from TensorFlow {before['release'] if before else '?'}: the index ignores range requests"
            lowest = min((_arch_key(a)[0] for a in sass + ptx), default=None)  # sm_75 -> 75, sm_100 -> 100
            min_cc = f"{lowest // 10}.{lowest % 10}" if lowest is not None else ""
            self.rows["tensorflow_builds"].append({
                "release": series, "cuda": cuda or "", "cudnn": ".".join((cudnn or "").split(".")[:2]),
                "pythons": f"{release.plain_pythons[0]}-{release.plain_pythons[-1]}", "sass": ";".join(sass), "ptx": ";".join(ptx),
                "min_cc": min_cc,
                "source": f"{self.source}: uv pip compile tensorflow[and-cuda]=={first} --python-version {python} pins CUDA {cuda} and cuDNN {cudnn} ; archs: {how}"})
            entry["variants"].append({"variant": "and-cuda", "cuda": cuda, "sass": ";".join(sass), "ptx": ";".join(ptx),
                                      "how": "read" if read is not None else "inferred"})
            self.learned.append(entry)

    def cupy(self) -> None:
        rows = packaged("cupy_packages")[1]
        for package in CUPY_PACKAGES:
            found = self.listing(package)
            if not found:
                continue
            last = max((Version(r["last_version"]) for r in rows if r["package"] == package), default=Version("0"))
            found = self.served(package, found, also=[t for t in found if Version(t) > last])
            self.python_rows(package, found)
            new = sorted(Version(t) for t in found if not Version(t).is_prerelease and Version(t) > last)
            variant = package[len("cupy-"):]
            for major in sorted({v.major for v in new}):
                series = [v for v in new if v.major == major]
                self.rows["cupy_packages"].append({
                    "package": package, "variant": variant, "cuda": re.sub(r"cuda(\d+)x", r"\1.x", variant),
                    "first_version": str(series[0]), "last_version": str(series[-1]), "series": str(major),
                    "source": f"{self.source} (the index's releases of {package} with a Linux x86_64 wheel)"})
                self.learned.append({"package": package, "release": str(major), "versions": [str(v) for v in series],
                                     "variants": [{"variant": variant, "how": "listed (CuPy compiles its kernels at run time with NVRTC)"}], "bytes": 0})

    def run(self) -> None:
        for step in (self.torch, self.jax, self.tensorflow, self.cupy):
            step()

    # -- what a run would fetch ---------------------------------------------------------------------------

    def plan(self) -> dict:
        """What a run would fetch, found before anything but the index pages is fetched: the wheels whose CUDA
        libraries it would read (range requests read only those, so a wheel's size is the most it costs; the size
        is the index's, else a HEAD request's Content-Length) and the files it would check (a metadata file or a
        4-byte range read each). The same choices as the run, releases kept from the last update left out."""
        reads: list[dict] = []
        checks: list[str] = []

        def read(package: str, series: str, release: Release) -> None:
            wheel = release.smallest()
            try:
                size = self.index.size_of(wheel)
            except pyindex.NotServed as exc:
                self.index.refuse(str(exc))
                return
            reads.append({"package": package, "release": series, "file": wheel.filename, "url": wheel.url, "bytes": size})

        def check(package: str, found: dict, also) -> None:
            checks.extend(r.smallest().filename for r in self._unchecked(package, found, also))

        found = self.listing("torch")
        newest = max(Version(r["release"]) for r in packaged("torch_pypi_default")[1] + packaged("torch_builds")[1])
        kept = {r["release"] for r in self.earlier["torch_builds"] if "inferred" not in r["source"]}
        past = _series_past(found, newest)
        check("torch", found, [v for _s, versions in past for v in versions])
        for series, versions in past:
            if series not in kept:
                for local, release in sorted(found[versions[-1]].items()):
                    if local == "" or re.fullmatch(r"cu[0-9]{3}", local):
                        read("torch", series, release)
        found = self.listing("jaxlib")
        jax_newest = next((Version(r["newest"]) for r in packaged("newest_releases")[1] if r["framework"] == "jax"), None)
        past = _series_past(found, jax_newest) if jax_newest is not None else []
        new = [v for _s, versions in past for v in versions]
        check("jaxlib", found, new)
        kept = {r["from_version"] for r in self.earlier["jax_builds"] if "inferred" not in r.get("source", "")}
        for package in JAX_PLUGINS:
            listed = self.listing(package)
            check(package, listed, new)
            for series, versions in past:
                first = next((v for v in versions if v in listed), None)
                if first is not None and first not in kept:
                    read(package, series, listed[first][""] if "" in listed[first] else next(iter(listed[first].values())))
        found = self.listing("tensorflow")
        newest = max(Version(r["release"]) for r in packaged("tensorflow_builds")[1])
        kept = {r["release"] for r in self.earlier["tensorflow_builds"] if "inferred" not in r.get("source", "")}
        past = _series_past(found, newest)
        check("tensorflow", found, [v for _s, versions in past for v in versions])
        for series, versions in past:
            if series not in kept:
                first = versions[0]
                read("tensorflow", series, found[first][""] if "" in found[first] else next(iter(found[first].values())))
        for package in CUPY_PACKAGES:
            found = self.listing(package)
            last = max((Version(r["last_version"]) for r in packaged("cupy_packages")[1] if r["package"] == package), default=Version("0"))
            check(package, found, [t for t in found if Version(t) > last])
        sized = [r["bytes"] for r in reads if r["bytes"] is not None]
        return {"reads": reads, "bytes": sum(sized), "unsized": len(reads) - len(sized), "checks": checks}


def plan_sentence(planned: dict, label: str) -> str:
    """The one line an update says before it fetches: what, and how many bytes at most."""
    wheels = len(planned["reads"])
    unsized = f" ({planned['unsized']} of them of a size {label} does not give)" if planned["unsized"] else ""
    return (f"fetching up to {planned['bytes']:,} bytes from {label}: the CUDA libraries of {wheels} wheel{'s' if wheels != 1 else ''}"
            f"{unsized}, by range requests where the server allows them, and checking {len(planned['checks'])} listed "
            f"file{'s' if len(planned['checks']) != 1 else ''} (its metadata or its first 4 bytes each)")


def update(index_url: str | None = None, wheelhouse: str | None = None, offline: bool = False,
           say: Callable[[str], None] = lambda text: None, today: str | None = None, dry_run: bool = False,
           announce: Callable[[str], None] = lambda text: None, hosts: tuple = ()) -> dict:
    """Learn what the index has past the packaged tables and swap the overlay in; the summary as one object.
    `announce` hears, before any wheel is fetched, what will be and how many bytes; `dry_run` stops there."""
    if wheelhouse is not None and not Path(wheelhouse).is_dir():
        raise UserError(f"--wheelhouse {wheelhouse!r} is not a directory.")
    if offline and not wheelhouse:
        return {"changed": False, "offline": True, **status()}
    started = time.monotonic()
    index = pyindex.Index(None if wheelhouse else (index_url or default_index()), wheelhouse, hosts=tuple(hosts))
    learner = Learner(index, offline, say, today)
    planned = learner.plan()
    if dry_run:
        return {"changed": False, "dry_run": True, "index": index.label, "index_url": index.url or wheelhouse, "fetch": planned,
                "index_bytes": index.pages, "bytes_fetched": index.fetched, "checked_bytes": index.checked, "refused": index.refusals,
                "seconds": round(time.monotonic() - started, 2), "overlay": str(overlay.overlay_path())}
    announce(plan_sentence(planned, index.label))
    learner.run()
    tables = {}
    for name in TABLES:
        columns = list(packaged(name)[0])
        if learner.rows[name]:
            tables[name] = (columns, learner.rows[name])
    about = {"index": index.label, "index_url": index.url or wheelhouse, "date": learner.today, "releases": learner.seen,
             "learned": learner.learned, "bytes_fetched": index.fetched, "index_bytes": index.pages, "range_requests": learner.ranges,
             "checked_bytes": index.checked, "refused": index.refusals, "not_learned": learner.not_learned, "planned_bytes": planned["bytes"]}
    say("writing the overlay")
    overlay.replace(tables, about)
    return {"changed": True, "offline": False, **about, "seconds": round(time.monotonic() - started, 2), "overlay": str(overlay.overlay_path()),
            "rows": {name: len(rows) for name, (_c, rows) in tables.items()},
            **({} if learner.learned else {"current": current_sentence(index.label)}),
            **({"replaced_damaged": learner.damaged} if learner.damaged else {})}


def current_sentence(index_label: str) -> str:
    """An update that learned nothing: how current the packaged tables are, each framework's newest release they hold
    and the day it was checked (newest_releases.csv)."""
    rows = packaged("newest_releases")[1]
    days = {r["checked"] for r in rows}
    held = ", ".join(f"{r['framework']} {r['release'] or r['newest']}" + ("" if len(days) == 1 else f" (checked {r['checked']})") for r in rows)
    return f"nothing new on {index_label} past the tables: they hold {held}" + (f" (checked {days.pop()})" if len(days) == 1 else "")


def status() -> dict:
    """What the overlay holds now (for --offline with an index: nothing is asked); a damaged overlay is one sentence."""
    about = overlay.meta()
    if overlay.problem():
        raise UserError(overlay.problem() + ".")
    return {"overlay": str(overlay.overlay_path()), "index": about.get("index"), "date": about.get("date"), "learned": about.get("learned", []),
            "bytes_fetched": 0, "index_bytes": 0, "seconds": 0.0}


# -- the plan of what is new ---------------------------------------------------------------------------

def _python_for(pythons: list[str]) -> str | None:
    usable = [p for p in pythons if re.fullmatch(r"3\.(8|9|1[0-5])", p)]
    return "3.12" if "3.12" in usable else (usable[-1] if usable else None)


def plan_text(summary: dict, executor: str = "local", wheelhouse: str | None = None) -> str | None:
    """A sweep plan of the releases an update learned, for the GPU classes `sweep` discovers (None: nothing new)."""
    wheel_pythons = {(r["package"], r["version"]): r["pythons"].split(";") for r in packaged("python_wheels")[1] + overlay.rows("python_wheels")}
    stacks = []
    for entry in summary.get("learned", []):
        newest = entry["versions"][-1]
        if entry["package"] == "torch":
            framework, package = "torch", "torch"
            variants = ["default"] + [v["variant"] for v in entry["variants"][1:]]
        elif entry["package"] == "jax":
            framework, package = "jax", "jaxlib"
            variants = [v["variant"] for v in entry["variants"]]
        elif entry["package"] == "tensorflow":
            framework, package, variants = "tensorflow", "tensorflow", ["and-cuda"]
        else:
            framework, package = "cupy", entry["package"]
            variants = [entry["package"][len("cupy-"):]]
        python = _python_for(wheel_pythons.get((package, newest), []))
        if not variants or python is None:
            continue
        stacks.append((framework, newest, sorted(set(variants), key=variants.index), python))
    if not stacks:
        return None
    targets = "local" if executor == "local" else "discover"
    lines = [f"# Written by `gpucompat knowledge update` on {summary['date']} from {summary['index']}: the releases it learned,",
             f"# on the GPU classes `gpucompat sweep` finds ({'this machine' if targets == 'local' else executor + ' discovery'}).",
             f'name = "new-releases-{summary["date"]}"', f'executor = "{executor}"', f'targets = "{targets}"']
    if wheelhouse:
        lines.append(f"wheelhouse = {_toml(str(Path(wheelhouse).resolve()))}")
    for framework, version, variants, python in stacks:
        lines += ["", "[[stacks]]", f'framework = "{framework}"', f'versions = ["{version}"]',
                  "variants = [" + ", ".join(f'"{v}"' for v in variants) + "]", f'python = ["{python}"]']
    return "\n".join(lines) + "\n"


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
