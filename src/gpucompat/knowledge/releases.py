"""Which releases of a framework exist, as far as the knowledge knows, and since when it knows.

The list is the index's own: python_wheels.csv (PyPI's file lists, read when the tables were built) and, after
`gpucompat knowledge update`, the release lists the update read (overlay.py). So `explain` can tell, offline,
a release that does not exist ("no such release", naming the newest known) from one newer than the knowledge
(and how to learn it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from ..errors import UserError
from . import overlay, tables

UPDATE = "run `gpucompat knowledge update` to learn it"
_READ_ON = re.compile(r"read ([0-9]{4}-[0-9]{2}-[0-9]{2})")


@dataclass(frozen=True)
class Known:
    package: str
    versions: frozenset  # Version
    newest: Version | None
    read_on: str | None  # the date the list was read
    where: str  # "PyPI" or the index an update read


def package_of(framework: str, variant: str | None) -> str | None:
    """The index project whose releases are the framework's (jaxlib for JAX: its compiled half carries the CUDA builds)."""
    if framework == "torch":
        return "torch"
    if framework == "jax":
        return "jaxlib"
    if framework == "tensorflow":
        return {"gpu": "tensorflow-gpu", "cpu": None}.get(variant or "", "tensorflow")
    if framework == "cupy":
        return f"cupy-{variant or 'cuda12x'}"
    return None


def _parsed(texts) -> set:
    found = set()
    for text in texts:
        try:
            found.add(Version(text))
        except InvalidVersion:
            continue
    return found


@lru_cache(maxsize=64)
def known(package: str) -> Known:
    """Every release of `package` the knowledge knows, its newest final release, and when the list was read."""
    rows = [r for r in tables.table("python_wheels") if r["package"] == package]
    versions = _parsed(r["version"] for r in rows)
    learned = overlay.meta()
    listed = learned.get("releases", {}).get(package)
    if listed:
        versions |= _parsed(listed)
        read_on, where = learned.get("date"), learned.get("index", "the index")
    else:
        dates = sorted({m.group(1) for r in rows if (m := _READ_ON.search(r["source"]))})
        read_on, where = (dates[-1] if dates else None), "PyPI"
    finals = [v for v in versions if not v.is_prerelease and not v.is_devrelease]
    return Known(package, frozenset(versions), max(finals, default=None), read_on, where)


@lru_cache(maxsize=1)
def _jax() -> Known:
    """jax's own releases: jax_pins.csv (every release PyPI listed, with each one's pins), and what an update read."""
    from . import pins

    versions = set(pins.jax_releases())
    learned = overlay.meta()
    listed = learned.get("releases", {}).get("jax")
    if listed:
        versions |= _parsed(listed)
        read_on, where = learned.get("date"), learned.get("index", "the index")
    else:
        dates = sorted({m.group(1) for r in tables.table("jax_pins") if (m := _DATED.search(r["source"]))})
        read_on, where = (dates[-1] if dates else None), "PyPI"
    finals = [v for v in versions if not v.is_prerelease and not v.is_devrelease]
    return Known("jax", frozenset(versions), max(finals, default=None), read_on, where)


_DATED = re.compile(r"([0-9]{4}-[0-9]{2}-[0-9]{2})")


def _cupy_packages() -> tuple[str, ...]:
    return tuple(sorted({r["package"] for r in tables.table("python_wheels") if r["package"].startswith("cupy-cuda")}))


def learned_on() -> tuple[str | None, str | None]:
    """(the date of the last update, the index it read), or (None, None) where nothing was learned."""
    about = overlay.meta()
    return about.get("date"), about.get("index")


def check(framework: str, variant: str | None, version: str, described: bool) -> str | None:
    """A note where the asked release is newer than what the build tables describe (None where they do);
    UserError "no such release" where the index's list, as last read, lacks it."""
    package = package_of(framework, variant)
    plain = tables.version(version.split("+")[0])
    if package is None or plain is None or plain.is_prerelease or plain.is_devrelease:
        return None  # pre-releases and nightlies live on other indexes (download.pytorch.org): not PyPI's list to judge
    facts = _jax() if framework == "jax" else known(package)  # jax has releases without a jaxlib of their number (0.4.37)
    if facts.newest is None:
        return None
    package = facts.package
    as_of = f" as read on {facts.read_on}" if facts.read_on else ""
    exists = plain in facts.versions
    if not exists and framework == "jax":  # a jaxlib an update learned after the jax list was read
        exists = plain > facts.newest and plain in known("jaxlib").versions
    if not exists and framework == "cupy":  # a CuPy release published for other CUDA majors only: the rules say which exist
        exists = any(plain in known(other).versions for other in _cupy_packages() if other != package)
    if not exists:
        raise UserError(f"{framework} {plain}: no such release — {facts.where}'s {package} releases{as_of} go up to {facts.newest}"
                        f"{'' if plain < facts.newest else f'; if {plain} came out since, {UPDATE}'}.")
    if described:
        return None
    date, index = learned_on()
    since = f" (last update: {index} on {date})" if date else ""
    return (f"{framework} {plain} is on {facts.where}{as_of}, but it is newer than the build tables describe{since}: {UPDATE}, "
            "or read this answer as what the tables can say")
