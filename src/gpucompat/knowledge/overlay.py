"""The knowledge a user learned after install (`gpucompat knowledge update`): CSV rows with the packaged
tables' columns, kept beside the store, never in the packaged data/ files.

tables.table() puts these rows before the packaged ones, so every rule sees them and a lookup that
takes the first match takes the learned row where both hold one (only newest_releases in practice:
an update learns releases newer than the packaged tables). Each row's source says
"learned from <index> on <date>".

Layout: $GPUCOMPAT_KNOWLEDGE, else <data dir>/knowledge (beside gpucompat.db), is a symbolic link to a
folder written whole by one update (<table>.csv and learned.json). An update writes a new folder and
swaps the link in one rename, so a failed or interrupted update leaves the old knowledge as it was.

What is read back is checked, since a file there may be damaged or edited by hand (`check_row`): strict UTF-8,
the packaged table's columns, every value a string of bounded length, versions that parse, CUDA versions that are
real versions within CUDA_MAJORS and agree with the row's variant (cu130 is CUDA 13.0, cupy-cuda13x is 13.x),
known frameworks, packages and variants, architectures as sm_XY/compute_XY; learned.json is JSON nested at most
MAX_DEPTH deep. One problem anywhere and the whole overlay is set aside: one sentence on stderr names the file
and `gpucompat knowledge reset`, and the packaged tables answer alone.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import sys
from functools import lru_cache
from itertools import accumulate, repeat
from operator import sub
from pathlib import Path

from ..errors import UserError
from ..paths import data_dir

META = "learned.json"
PACKAGED = Path(__file__).with_name("data")  # the packaged tables (tables.DATA), whose columns a learned file must have
# The tables an update writes, and their columns as packaged (a file with other columns is damaged).
TABLES = ("python_wheels", "torch_pypi_default", "torch_builds", "torch_cuda_pins", "jax_builds",
          "newest_releases", "tensorflow_builds", "cupy_packages")
MAX_FILE = 16 << 20  # bytes of one overlay file
MAX_ROWS = 20000  # rows of one table
MAX_VALUE = 4000  # characters of one value (sources are the long ones)
MAX_DEPTH = 32  # nesting of learned.json (it nests 4 deep)
# An update learns releases newer than the packaged tables, whose newest builds use CUDA 12 and 13: a learned CUDA
# older than 11 or past 19 is no real build of them.
CUDA_MAJORS = range(11, 20)
FRAMEWORKS = ("torch", "jax", "tensorflow", "cupy")
RESET = "run `gpucompat knowledge reset` to remove it (the packaged tables stay), then `gpucompat knowledge update` to learn again"
# Columns a table had before a release of gpucompat added more at its end: a learned file written then is still read,
# the added columns empty (newest_releases gained release, package, uploaded and checked).
EARLIER_COLUMNS = {"newest_releases": ["framework", "newest", "source"]}


class Damaged(Exception):
    """One sentence: what is wrong where in a learned file."""


_ESCAPE = re.compile(r"\\.", re.DOTALL)  # an escape pair, taken out first: then a string is quote, no quote, quote
_JSON_STRING = re.compile(r'"[^"]*"')  # linear: with no escapes left, no match can backtrack over another quote
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEPS = str.maketrans("[{]}", "\2\2\0\0")  # an opening bracket one level down (2 - 1), a closing one up (0 - 1)


def json_too_deep(text: str, depth: int) -> bool:
    """Whether JSON text nests arrays and objects deeper than `depth`, told without parsing it: the parser recurses once a
    level, closed or not, and ends in RecursionError far below what a line may hold. Escapes out, strings out, every character but the
    brackets out, then the deepest level any prefix reaches; each step in C (the regex engine, accumulate), never a loop
    over the characters in Python."""
    brackets = _NOT_BRACKET.sub("", _JSON_STRING.sub("", _ESCAPE.sub("", text)))
    if brackets.count("[") + brackets.count("{") <= depth:
        return False
    steps, level = brackets.translate(_STEPS).encode("latin-1"), 0
    for start in range(0, len(steps), 1 << 16):  # a piece at a time: a bomb of opening brackets is told in its first
        levels = list(accumulate(map(sub, steps[start:start + (1 << 16)], repeat(1)), initial=level))
        if max(levels) > depth:
            return True
        level = levels[-1]
    return False


def bounded_json(text: str, what: str, depth: int = MAX_DEPTH):
    """json.loads, refusing (UserError) text nested deeper than `depth` before the parser recurses into it."""
    if json_too_deep(text, depth):
        raise UserError(f"{what} nests JSON deeper than {depth} levels, which gpucompat does not read")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise UserError(f"{what} is not valid JSON ({str(exc)[:120]})") from None


def overlay_path() -> Path:
    """Where the learned knowledge lives (a link to the folder the last update wrote)."""
    override = os.environ.get("GPUCOMPAT_KNOWLEDGE")
    return Path(override) if override else data_dir() / "knowledge"


def rows(name: str) -> tuple[dict, ...]:
    """The learned rows of one table (none where nothing was learned, or where the overlay is damaged: then one
    sentence on stderr, once)."""
    return _loaded()[0].get(name, ())


def meta() -> dict:
    """What the last update said about itself (index, date, releases learned, newest per package); {} if none
    (or damaged: see rows)."""
    return _loaded()[1]


def problem() -> str | None:
    """The sentence naming what is damaged in the overlay, or None where it reads clean (or is not there)."""
    return _loaded()[2]


@lru_cache(maxsize=1)
def _loaded() -> tuple[dict, dict, str | None]:
    """({table: rows}, learned.json, None), read and checked once per process; ({}, {}, sentence) where a file is
    damaged (the sentence is also said on stderr, once)."""
    root = overlay_path()
    try:
        return _read(root) + (None,)
    except Damaged as exc:
        sentence = f"{exc}; gpucompat answers from the packaged tables alone until then"
        print(f"warning: {sentence}.", file=sys.stderr)
        return {}, {}, sentence


def _read(root: Path) -> tuple[dict, dict]:
    found: dict[str, tuple[dict, ...]] = {}
    for name in TABLES:
        path = root / f"{name}.csv"
        text = _text(path)
        if text is None:
            continue
        with (PACKAGED / f"{name}.csv").open(newline="", encoding="utf-8") as handle:
            columns = next(csv.reader(handle))
        try:
            reader = csv.DictReader(text.splitlines(keepends=True))
            earlier = reader.fieldnames == EARLIER_COLUMNS.get(name)
            if reader.fieldnames != columns and not earlier:
                raise Damaged(f"the learned knowledge file {path} has the columns {','.join(reader.fieldnames or [])[:200]!r}, "
                              f"not the table's {','.join(columns)}; {RESET}")
            table = []
            for number, row in enumerate(reader, start=2):
                if number > MAX_ROWS + 1:
                    raise Damaged(f"the learned knowledge file {path} holds more than {MAX_ROWS} rows; {RESET}")
                if earlier and None not in row:
                    row = {**dict.fromkeys(columns, ""), **row}
                why = check_row(name, row)
                if why:
                    raise Damaged(f"the learned knowledge file {path} is damaged or was edited by hand (line {number}: {why}); {RESET}")
                table.append(row)
        except csv.Error as exc:
            raise Damaged(f"the learned knowledge file {path} is no CSV file ({exc}); {RESET}") from None
        found[name] = tuple(table)
    text = _text(root / META)
    about: dict = {}
    if text is not None:
        try:
            about = bounded_json(text, f"the learned knowledge file {root / META}")
        except UserError as exc:
            raise Damaged(f"{exc}; {RESET}") from None
        why = check_meta(about)
        if why:
            raise Damaged(f"the learned knowledge file {root / META} is damaged or was edited by hand ({why}); {RESET}")
    return found, about


def _text(path: Path) -> str | None:
    """A learned file's text (strict UTF-8, bounded); None where it is not there."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE + 1)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if not path.parent.exists():
            return None
        raise Damaged(f"the learned knowledge file {path} cannot be read ({exc.strerror or exc}); {RESET}") from None
    if len(data) > MAX_FILE:
        raise Damaged(f"the learned knowledge file {path} is larger than {MAX_FILE >> 20} MiB, which no update writes; {RESET}")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Damaged(f"the learned knowledge file {path} is not UTF-8 text (byte {exc.start}); {RESET}") from None
    if "\x00" in text:
        raise Damaged(f"the learned knowledge file {path} holds NUL bytes, which no update writes; {RESET}")
    return text


# -- what a learned row may say ------------------------------------------------------------------------------

_VERSION = re.compile(r"[0-9]{1,4}(\.[0-9]{1,6}){0,4}")  # a final release, as an update learns them (no pre-releases)
_SERIES = re.compile(r"[0-9]{1,4}\.[0-9]{1,4}")
_CUDA = re.compile(r"([0-9]{1,2})\.([0-9]{1,2})")
_ARCHS = {"sass": re.compile(r"sm_[0-9]{2,3}[af]?"), "ptx": re.compile(r"compute_[0-9]{2,3}[af]?")}
_PYTHON = re.compile(r"[0-9]\.[0-9]{1,2}t?|abi3 from [0-9]\.[0-9]{1,2}|py[0-9]")
_PACKAGE = re.compile(r"torch|jaxlib|tensorflow|jax-cuda(1[1-9])-plugin|cupy-cuda(1[1-9])x")
_PIN = re.compile(r"nvidia-[a-z0-9-]{1,60}|cuda-toolkit")
_DRIVER = re.compile(r"[0-9]{3}(\.[0-9]{1,3}){1,2}")
_CC = re.compile(r"[0-9]{1,2}\.[0-9]")
_DATE = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")


def _cuda(text: str, column: str = "cuda") -> str | None:
    """Why a CUDA version is none a learned row can hold (None: it is fine)."""
    found = _CUDA.fullmatch(text)
    if not found:
        return f"{column} {text[:40]!r} is not a CUDA version"
    if int(found.group(1)) not in CUDA_MAJORS:
        return f"{column} {text} is outside CUDA {CUDA_MAJORS.start} to {CUDA_MAJORS.stop - 1}, the CUDA of any release past the packaged tables"
    return None


def check_row(name: str, row: dict) -> str | None:
    """Why a row of a learned table cannot be used (None: it can). csv.DictReader gives None for a missing value
    and a list under None for extra ones."""
    if None in row:
        return "more values than the table has columns"
    for column, value in row.items():
        if not isinstance(value, str):
            return f"no value for {column}"
        if len(value) > MAX_VALUE:
            return f"{column} is longer than {MAX_VALUE} characters"
        if any(ord(c) < 32 and c not in "\t" for c in value):
            return f"{column} holds a control character"
    if not row.get("source", "").strip():
        return "no source"

    def version(column: str, pattern=_VERSION, empty: bool = False) -> str | None:
        value = row[column]
        if empty and not value:
            return None
        return None if pattern.fullmatch(value) else f"{column} {value[:40]!r} is not a release version"

    def archs() -> str | None:
        for column, pattern in _ARCHS.items():
            for arch in filter(None, row[column].split(";")):
                if not pattern.fullmatch(arch):
                    return f"{column} {arch[:40]!r} is not an architecture ({'sm_XY' if column == 'sass' else 'compute_XY'})"
        return None

    def torch_variant() -> str | None:
        found = re.fullmatch(r"cu([0-9]{1,2})([0-9])", row["variant"])
        if not found:
            return f"variant {row['variant'][:40]!r} is not a torch CUDA build (cuXYZ)"
        return _cuda(row["cuda"]) or (None if row["cuda"] == f"{int(found.group(1))}.{found.group(2)}" else
                                       f"CUDA {row['cuda']} is not the CUDA of the variant {row['variant']} "
                                       f"({int(found.group(1))}.{found.group(2)})")

    if name == "python_wheels":
        if not _PACKAGE.fullmatch(row["package"]):
            return f"package {row['package'][:40]!r} is none an update learns"
        return version("version") or next((f"pythons {p[:20]!r} is not a Python version" for p in filter(None, row["pythons"].split(";"))
                                           if not _PYTHON.fullmatch(p)), None)
    if name == "torch_pypi_default":
        return version("release", _SERIES) or torch_variant()
    if name == "torch_builds":
        return (version("release", _SERIES) or torch_variant() or archs()
                or (None if row["confidence"] in ("high", "medium", "low") else f"confidence {row['confidence'][:40]!r} is not high, medium or low"))
    if name == "torch_cuda_pins":
        return version("release") or (None if _PIN.fullmatch(row["package"]) else f"package {row['package'][:40]!r} is no CUDA wheel") \
            or version("version")
    if name == "jax_builds":
        found = re.fullmatch(r"cuda(1[0-9])", row["variant"])
        if not found:
            return f"variant {row['variant'][:40]!r} is not a JAX CUDA plugin (cuda12, cuda13, ...)"
        if row["cuda_major"] != found.group(1):
            return f"cuda_major {row['cuda_major'][:40]!r} is not the CUDA major of the variant {row['variant']}"
        return (_cuda(f"{row['cuda_major']}.0", "cuda_major") or version("from_version") or version("to_version", empty=True)
                or (None if _DRIVER.fullmatch(row["min_driver"]) else f"min_driver {row['min_driver'][:40]!r} is not a driver version")
                or (None if _CC.fullmatch(row["min_cc"]) else f"min_cc {row['min_cc'][:40]!r} is not a compute capability")
                or version("cudnn", empty=True) or archs())
    if name == "newest_releases":
        if row["framework"] not in FRAMEWORKS:
            return f"framework {row['framework'][:40]!r} is none gpucompat knows ({', '.join(FRAMEWORKS)})"
        if row["package"] and not _PACKAGE.fullmatch(row["package"]):
            return f"package {row['package'][:40]!r} is none an update learns"
        dates = next((f"{c} {row[c][:40]!r} is not a date (YYYY-MM-DD)" for c in ("uploaded", "checked") if row[c] and not _DATE.fullmatch(row[c])), None)
        return version("newest", _SERIES) or version("release", empty=True) or dates
    if name == "tensorflow_builds":
        return (version("release", _SERIES) or _cuda(row["cuda"]) or version("cudnn", empty=True)
                or (None if re.fullmatch(r"[0-9]\.[0-9]{1,2}-[0-9]\.[0-9]{1,2}", row["pythons"]) else f"pythons {row['pythons'][:40]!r} is not a range such as 3.10-3.13")
                or (None if not row["min_cc"] or _CC.fullmatch(row["min_cc"]) else f"min_cc {row['min_cc'][:40]!r} is not a compute capability")
                or archs())
    if name == "cupy_packages":
        found = _PACKAGE.fullmatch(row["package"])
        if not (found and found.group(2)):
            return f"package {row['package'][:40]!r} is not a CuPy package an update learns (cupy-cudaNNx)"
        if row["variant"] != row["package"][len("cupy-"):]:
            return f"variant {row['variant'][:40]!r} is not the package's ({row['package'][len('cupy-'):]})"
        if row["cuda"] != f"{found.group(2)}.x":
            return f"CUDA {row['cuda'][:40]!r} is not the CUDA of {row['package']} ({found.group(2)}.x)"
        error = version("first_version") or version("last_version")
        if error:
            return error
        if row["series"] != row["first_version"].split(".")[0] or row["series"] != row["last_version"].split(".")[0]:
            return f"series {row['series'][:40]!r} is not the major of {row['first_version']} and {row['last_version']}"
        return None
    return None


def check_meta(about) -> str | None:
    """Why learned.json cannot be used (None: it can): the parts explain reads are checked."""
    if not isinstance(about, dict):
        return "it is not a JSON object"
    for key in ("index", "date", "index_url"):
        if key in about and not isinstance(about[key], (str, type(None))):
            return f"{key} is not text"
    if isinstance(about.get("date"), str) and not re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", about["date"]):
        return f"date {about['date'][:40]!r} is not a date"
    listed = about.get("releases", {})
    if not isinstance(listed, dict):
        return "releases is not an object"
    for package, versions in listed.items():
        if not _PACKAGE.fullmatch(package):
            return f"releases names {package[:40]!r}, a package no update learns"
        if not isinstance(versions, list) or not all(isinstance(v, str) and len(v) <= 64 for v in versions):
            return f"the releases of {package} are not a list of versions"
    learned = about.get("learned", [])
    if not isinstance(learned, list) or not all(isinstance(e, dict) and isinstance(e.get("versions", []), list) for e in learned):
        return "learned is not a list of release series"
    return None


def reset() -> tuple[Path, bool]:
    """Remove the overlay (the link and the folder it names); the packaged tables are untouched. (where, whether
    anything was there). A folder that is no overlay gpucompat wrote is left alone, and said."""
    link = overlay_path()
    if not link.is_symlink():
        if link.exists():
            raise UserError(f"{link} is not the link gpucompat keeps its learned knowledge under, so reset leaves it alone; "
                            "move it away yourself if it is yours to remove.")
        return link, False
    target = Path(os.path.join(link.parent, os.readlink(link)))
    link.unlink()
    if target.parent.resolve() == link.parent.resolve() and target.name.startswith(f".{link.name}-") and target.is_dir():
        shutil.rmtree(target, ignore_errors=True)
    _loaded.cache_clear()
    return link, True


def replace(tables: dict[str, tuple[list[str], list[dict]]], about: dict) -> Path:
    """Write a whole new overlay ({table: (columns, rows)} and its learned.json), then swap it in with one rename.
    Nothing the readers see changes until that rename; an exception before it leaves the old overlay."""
    import tempfile  # here, not at the top: every explain imports this module, only an update writes

    link = overlay_path()
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.exists() and not link.is_symlink():
        raise UserError(f"{link} is a folder, not the link gpucompat keeps its learned knowledge under; move it away and run the update again.")
    folder = Path(tempfile.mkdtemp(prefix=f".{link.name}-", dir=link.parent))
    _loaded.cache_clear()  # what this process reads next is the new overlay
    try:
        for name, (columns, table_rows) in tables.items():
            with (folder / f"{name}.csv").open("w", newline="", encoding="utf-8") as handle:
                writer = csv.DictWriter(handle, fieldnames=columns, lineterminator="\n", extrasaction="ignore")
                writer.writeheader()
                writer.writerows(table_rows)
        (folder / META).write_text(json.dumps(about, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        folder.chmod(0o755)
        previous = link.resolve() if link.is_symlink() else None
        swap = link.parent / f".{link.name}-link-{os.getpid()}"
        if swap.is_symlink():
            swap.unlink()
        os.symlink(folder.name, swap)
        os.replace(swap, link)  # the one step readers see
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    if previous is not None and previous != folder and previous.parent == link.parent:
        shutil.rmtree(previous, ignore_errors=True)
    return folder
