"""The user's own requirements, read as pip, uv and conda read them: a requirements file (or `pip freeze`
output), uv.lock, pylock.toml (PEP 751) and a conda environment.yml -> one `Pin` per package.

Pure functions of the text; every malformed input is one sentence (UserError), never a traceback.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import unquote, urlparse

from ..errors import UserError
from ..paths import read_user_text
from ..quoting import CONTROL_CHARACTERS

MAX_BYTES = 4 << 20  # a lock file of a large project is a few hundred KB
MAX_DEPTH = 10  # -r inside -r
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_FAST = re.compile(rf"({_NAME})(?:\[([A-Za-z0-9_,\s-]*)\])?\s*==\s*([0-9][0-9A-Za-z.+!_-]*)", re.ASCII)  # name[extra]==version
_WHEEL = re.compile(r"(?P<name>[A-Za-z0-9_.]+)-(?P<version>[0-9][^-]*)(-[0-9][^-]*)?-[^-]+-[^-]+-[^-]+\.whl", re.ASCII)
_OPTION = re.compile(r"(-[A-Za-z]|--[a-z][a-z-]*)(?:[=\s]\s*(\S+))?")
_CONDA_SPEC = re.compile(rf"(?:(?P<channel>[A-Za-z0-9_./:-]+)::)?(?P<name>{_NAME})\s*(?P<rest>[^\s#]*)", re.ASCII)


@dataclass
class Pin:
    """One package as the file asks for it."""

    name: str  # normalized: lower case, '-' for '_' and '.'
    typed: str  # the requirement as written (one line, without hashes and comments)
    line: int
    version: str | None = None  # exact: ==X, a lock file's version, a wheel file's name
    specifier: str = ""  # anything else pip would satisfy (>=2.4,<3)
    extras: tuple[str, ...] = ()
    index: str | None = None  # the index it comes from, where the file says
    conda: bool = False
    build: str | None = None  # a conda build string (py311_cuda12.1_cudnn9_0)
    source: str = ""  # the requirements file the line is in (a -r line's own file)


@dataclass
class Parsed:
    kind: str  # requirements file, uv.lock, pylock.toml, environment.yml
    pins: list[Pin]
    indexes: list[str] = field(default_factory=list)  # --index-url / --extra-index-url of a requirements file
    lines: int = 0
    notes: list[str] = field(default_factory=list)


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _toml(text: str, where: str) -> dict:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{where} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise UserError(f"{where} nests tables or arrays too deeply to be a lock file.") from None


# -- requirements files and pip freeze ------------------------------------------------------------

def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined and comments removed, as pip reads them."""
    out, pending, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        if not pending:
            start = number
        line = raw.rstrip()
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = re.sub(r"(^|\s)#.*$", "", pending + line).strip()
        pending = ""
        if line:
            out.append((start, line))
    if pending.strip():
        out.append((start, re.sub(r"(^|\s)#.*$", "", pending).strip()))
    return out


def _from_url(url: str, number: int, typed: str, name: str | None = None) -> Pin | None:
    """A direct reference: a wheel's file name says its name and version (torch-2.4.1%2Bcu118-cp311-...whl)."""
    wheel = _WHEEL.fullmatch(unquote(Path(urlparse(url).path).name))
    if wheel is None:
        return Pin(normalize(name), typed, number) if name else None
    return Pin(normalize(name or wheel["name"]), typed, number, version=wheel["version"])


def requirement_pin(text: str, number: int, where: str) -> Pin | None:
    """One requirement line -> a Pin (None for what installs nothing to judge: an editable project, a local path)."""
    text = re.sub(r"\s--hash[=\s]\S+", "", text).strip()
    if CONTROL_CHARACTERS.search(text) or len(text) > 2000:
        raise UserError(f"{where}, line {number}: the line holds control characters or is too long to be a requirement.")
    fast = _FAST.fullmatch(text)
    if fast:
        extras = tuple(sorted(e.strip().lower() for e in (fast.group(2) or "").split(",") if e.strip()))
        return Pin(normalize(fast.group(1)), text, number, version=fast.group(3), extras=extras)
    if re.match(r"[a-z+]+://", text):  # a bare URL
        return _from_url(text, number, text)
    if text.startswith((".", "/")) or text.endswith((".whl", ".tar.gz", ".zip")) and "@" not in text:
        return _from_url(text, number, text) if text.endswith(".whl") else None
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text)
    except InvalidRequirement as exc:
        raise UserError(f"{where}, line {number}: {text[:60]!r} is not a requirement pip can read ({str(exc).splitlines()[0][:120]}).") from None
    if requirement.marker is not None and not requirement.marker.evaluate({"sys_platform": "linux", "platform_system": "Linux",
                                                                            "platform_machine": "x86_64", "os_name": "posix"}):
        return None  # not installed on Linux x86_64, where the GPU is
    if requirement.url:
        return _from_url(requirement.url, number, text, requirement.name)
    specs = list(requirement.specifier)
    exact = [s for s in specs if s.operator in ("==", "===") and "*" not in s.version]
    return Pin(normalize(requirement.name), text, number, version=exact[0].version if len(specs) == 1 and exact else None,
               specifier="" if len(specs) == 1 and exact else str(requirement.specifier), extras=tuple(sorted(requirement.extras)))


def requirements_text(text: str, where: str, base: Path | None, depth: int = 0, seen: set | None = None) -> Parsed:
    """A requirements file or pip freeze output; `-r other.txt` is read relative to `base`."""
    seen = seen if seen is not None else set()
    parsed = Parsed("requirements file", [], lines=len(text.splitlines()))
    for number, line in _logical_lines(text):
        if line.startswith("-"):
            option = _OPTION.match(line)
            flag, value = (option.group(1), option.group(2)) if option else (line.split()[0], None)
            if flag in ("-r", "--requirement", "-c", "--constraint"):
                if not value:
                    raise UserError(f"{where}, line {number}: {flag} needs a file name.")
                if flag in ("-c", "--constraint"):
                    parsed.notes.append(f"{where}, line {number}: constraints file {value} not read (it installs nothing by itself)")
                    continue
                inner = _nested(value, where, number, base, depth, seen)
                parsed.pins += inner.pins
                parsed.indexes += inner.indexes
                parsed.lines += inner.lines
                parsed.notes += inner.notes
            elif flag in ("-i", "--index-url", "--extra-index-url"):
                if not value:
                    raise UserError(f"{where}, line {number}: {flag} needs a URL.")
                parsed.indexes.append(value.rstrip("/"))
            elif flag in ("-e", "--editable"):
                parsed.notes.append(f"{where}, line {number}: the editable project {(value or '')[:60]} is not judged")
            continue  # -f, --pre, --no-binary and the like change how, not what
        pin = requirement_pin(line, number, where)
        if pin is not None:
            pin.source = where
            parsed.pins.append(pin)
    if depth == 0:  # once, over the lines of every -r file together, as pip reads them
        parsed.pins = one_per_package(parsed.pins, where)
    return parsed


def one_per_package(pins: list[Pin], where: str) -> list[Pin]:
    """Each package once, as pip reads a file that names one twice: lines that cannot both hold (torch==2.0.0 and
    torch==2.7.0, or torch==2.0.0 and torch>=2.1) are refused, as pip refuses them (ResolutionImpossible, "Cannot install
    torch==2.0.0 and torch==2.7.0"); lines that can are one requirement, its exact version and every extra
    (jax[cuda12]==0.4.30 and jax==0.4.30 install JAX with CUDA), shown at the line that pins it."""
    kept: dict[str, Pin] = {}
    for pin in pins:
        first = kept.get(pin.name)
        if first is None:
            kept[pin.name] = pin
            continue
        if not _both_hold(first, pin):
            files = first.source != pin.source
            raise UserError(f"{where} asks for {pin.name} twice in ways that cannot both hold, {_at(first, files)} {first.typed[:80]!r} "
                            f"and {_at(pin, files)} {pin.typed[:80]!r}; pip refuses such a file (ResolutionImpossible), so keep the one you mean.")
        exact = first if first.version and (not pin.version or len(first.version) >= len(pin.version)) else pin
        specifier = exact.specifier if exact.version else ",".join(filter(None, (first.specifier, pin.specifier)))
        kept[pin.name] = replace(exact, specifier=specifier, index=first.index or pin.index,
                                 extras=tuple(sorted(set(first.extras) | set(pin.extras))))
    return list(kept.values())


def _at(pin: Pin, files: bool) -> str:
    return f"{pin.source}, line {pin.line}" if files else f"line {pin.line}"


def _both_hold(a: Pin, b: Pin) -> bool:
    """Whether some version satisfies both lines; where neither names one version it is left to the judging (as if yes)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    def allows(pin: Pin, version: str) -> bool:
        spec = pin.specifier if not pin.version else f"=={pin.version}"
        try:
            return not spec or SpecifierSet(spec).contains(Version(version), prereleases=True)
        except (InvalidSpecifier, InvalidVersion):
            return True  # what packaging cannot read is not judged here
    if a.version and b.version:  # 2.7.0 and 2.7.0+cu128: the labelled build satisfies ==2.7.0
        return allows(a, b.version) or allows(b, a.version)
    if a.version or b.version:
        exact, other = (a, b) if a.version else (b, a)
        return allows(other, exact.version)
    return True


def _nested(value: str, where: str, number: int, base: Path | None, depth: int, seen: set) -> Parsed:
    if depth >= MAX_DEPTH:
        raise UserError(f"{where}, line {number}: -r nests more than {MAX_DEPTH} files deep.")
    path = Path(value) if Path(value).is_absolute() or base is None else base / value
    key = path.resolve()
    if key in seen:
        raise UserError(f"{where}, line {number}: -r {value} includes a file that includes it back.")
    seen.add(key)
    try:
        text = read_text(path)
    except UserError as exc:  # named with the line that included it
        raise UserError(f"{where}, line {number}: -r {value[:200]}: {exc}") from None
    return requirements_text(text, str(value), path.parent, depth + 1, seen)


# -- lock files ------------------------------------------------------------------------------------

def _lock_tables(text: str, where: str, key: str, marker: str, kind: str) -> tuple[Parsed, list[tuple[dict, str | None]]]:
    """A TOML lock file's package tables (each with its version), checked: `marker` is the top-level key that says what it is."""
    data = _toml(text, where)
    packages = data.get(key)
    if not isinstance(packages, list) or marker not in data:
        raise UserError(f"{where} is not a {kind}: it has no top-level {marker} and [[{key}]] tables.")
    tables = []
    for item in packages:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise UserError(f"{where}: a [[{key}]] table without a name.")
        tables.append((item, item.get("version") if isinstance(item.get("version"), str) else None))
    return Parsed(kind.split(" ")[0], [], lines=len(text.splitlines())), tables


def uv_lock(text: str, where: str) -> Parsed:
    parsed, tables = _lock_tables(text, where, "package", "version", "uv.lock")
    for item, version in tables:
        source = item.get("source") if isinstance(item.get("source"), dict) else {}
        if "editable" in source or "virtual" in source:
            continue  # the project itself
        parsed.pins.append(Pin(normalize(item["name"]), f"{item['name']} {version or ''}".strip(), 0, version=version,
                               index=source.get("registry") if isinstance(source.get("registry"), str) else None))
    return _one_each(parsed)


def pylock(text: str, where: str) -> Parsed:
    parsed, tables = _lock_tables(text, where, "packages", "lock-version", "pylock.toml (PEP 751)")
    for item, version in tables:
        wheels = item.get("wheels") if isinstance(item.get("wheels"), list) else []
        names = [w.get("name") or Path(urlparse(w.get("url", "")).path).name for w in wheels if isinstance(w, dict)]
        found = next((m for m in (_WHEEL.fullmatch(unquote(n or "")) for n in names) if m), None)
        if found and "+" in found["version"]:
            version = found["version"]  # the wheel names the local label (2.4.1+cu118) that the version may leave out
        parsed.pins.append(Pin(normalize(item["name"]), f"{item['name']} {version or ''}".strip(), 0, version=version,
                               index=item.get("index") if isinstance(item.get("index"), str) else None))
    return _one_each(parsed)


def _one_each(parsed: Parsed) -> Parsed:
    """A lock file may hold one package at several versions (one per platform): judge the newest, and say so."""
    from packaging.version import InvalidVersion, Version

    def key(pin: Pin):
        try:
            return Version(pin.version or "0")
        except InvalidVersion:
            return Version("0")

    chosen: dict[str, Pin] = {}
    for pin in parsed.pins:
        if pin.name in chosen and key(pin) != key(chosen[pin.name]):
            parsed.notes.append(f"{parsed.kind} holds {pin.name} at several versions (one per platform); judged the newest")
        if pin.name not in chosen or key(pin) > key(chosen[pin.name]):
            chosen[pin.name] = pin
    parsed.pins = list(chosen.values())
    parsed.notes = list(dict.fromkeys(parsed.notes))
    return parsed


# -- conda environment.yml -------------------------------------------------------------------------

def _yaml_scalar(text: str) -> str:
    text = re.sub(r"\s+#.*$", "", text).strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        text = text[1:-1]
    return text


def environment_yml(text: str, where: str) -> Parsed:
    """The parts of an environment.yml that say what is installed: `dependencies` (conda specs) and its `pip:` list."""
    parsed = Parsed("environment.yml", [], lines=len(text.splitlines()))
    section, pip_indent, found = None, None, False
    for number, raw in enumerate(text.splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        if indent == 0:
            key, _, value = line.partition(":")
            if not _ or not re.fullmatch(r"[A-Za-z_-]+", key):
                raise UserError(f"{where}, line {number}: {line[:60]!r} is not a 'key:' line of an environment.yml.")
            section, pip_indent = key, None
            found |= key == "dependencies"
            if key == "dependencies" and value.strip().startswith("["):
                for item in value.strip().strip("[]").split(","):
                    _conda_item(_yaml_scalar(item), number, where, parsed)
            continue
        if section != "dependencies":
            continue
        if not line.startswith("- "):
            raise UserError(f"{where}, line {number}: {line[:60]!r} is not a '- package' item of the dependencies list.")
        item = _yaml_scalar(line[2:])
        if pip_indent is not None and indent > pip_indent:
            pin = requirement_pin(item, number, where)
            if pin is not None:
                parsed.pins.append(pin)
            continue
        pip_indent = None
        if item.rstrip(":") == "pip" and item.endswith(":"):
            pip_indent = indent
            continue
        _conda_item(item, number, where, parsed)
    if not found:
        raise UserError(f"{where} has no 'dependencies:' list, so it is not a conda environment file.")
    return parsed


def _conda_item(item: str, number: int, where: str, parsed: Parsed) -> None:
    if not item or item == "pip":
        return
    spec = _CONDA_SPEC.fullmatch(item.replace(" ", ""))
    if spec is None:
        raise UserError(f"{where}, line {number}: {item[:60]!r} is not a conda package spec like pytorch=2.4.1 or cuda-version=12.4.")
    rest = spec["rest"]
    value = re.sub(r"^[<>=!~]+", "", rest)
    if rest and not (value[:1].isdigit() or value[:1] == "*"):
        raise UserError(f"{where}, line {number}: {item[:60]!r} is not a conda package spec like pytorch=2.4.1 or cuda-version=12.4.")
    version = build = None
    specifier = ""
    if rest.startswith("=="):
        version, _, build = rest[2:].partition("=")
    elif rest.startswith("=") or re.match(r"[0-9]", rest):
        value, _, build = rest.lstrip("=").partition("=")
        version = value if value and "*" not in value and not value.endswith(".") else None
        specifier = "" if version else (f"=={value}" if value.endswith("*") else "")
        if version and version.count(".") < 2:  # conda's =2.4 is 2.4.*
            specifier, version = f"=={version}.*", None
    elif rest:
        specifier = rest
    if (version and not version[0].isdigit()) or (specifier and not re.fullmatch(r"[<>=!~,|.*0-9A-Za-z+_-]+", specifier)):
        raise UserError(f"{where}, line {number}: {item[:60]!r} is not a conda package spec like pytorch=2.4.1 or cuda-version=12.4.")
    parsed.pins.append(Pin(normalize(spec["name"]), item, number, version=version or None, specifier=specifier, conda=True,
                           build=build or None, index=spec["channel"]))


# -- one entry point -------------------------------------------------------------------------------

def read_text(path: Path) -> str:
    """A requirements or lock file named by `-r` or by a `-r` line in one: a regular file of UTF-8 text, bounded."""
    return read_user_text(path, "requirements or lock file", MAX_BYTES, "a requirements or lock file is far smaller.")


def parse(text: str, name: str, base: Path | None = None) -> Parsed:
    """Read `text` by its file name: uv.lock, pylock[.NAME].toml, *.yml/*.yaml (conda), anything else as a requirements
    file (`pip freeze` output is one)."""
    if "\x00" in text:
        raise UserError(f"{name[:200]} holds NUL bytes, so it is no requirements or lock file.")
    leaf = Path(name).name
    if leaf == "uv.lock":
        return uv_lock(text, name)
    if re.fullmatch(r"pylock(\.[^.]+)?\.toml", leaf):
        return pylock(text, name)
    if leaf.endswith((".yml", ".yaml")):
        return environment_yml(text, name)
    return requirements_text(text, name, base)


def load(path: str, stdin_text: str | None = None) -> Parsed:
    """`-r FILE`, or `-r -` with `stdin_text` (pip freeze output)."""
    if path == "-":
        return requirements_text(stdin_text or "", "standard input", Path.cwd())
    file = Path(path)
    return parse(read_text(file), path, file.parent)
