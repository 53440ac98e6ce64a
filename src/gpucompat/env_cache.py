"""The environments a site keeps: what lies under the environment root, how much of it is shared
through hard links, which sweep used each one last, and pruning what the latest sweeps no longer use.

The local and Slurm executors build one environment per resolved stack under the root
(`paths.cache_dir()/envs`, `<env_key>/`), beside its `<env_key>.lock` (held exclusively while it
is built and shared while a job uses it) and, written by the sweep on the submit side when it
prepares jobs, `<env_key>.uses.json`: the stack, and every (database, plan, sweep) that used it.
uv links the files of an environment from its cache; where the cache and the root are on one
filesystem those are hard links (one copy on disk for every environment that has the file),
elsewhere copies. Sizes are apparent sizes (st_size) of regular files, each inode counted once.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .envs.uv import uv_bin
from .paths import cache_dir

READY_MARKER = ".gpucompat-ready"  # the same name as executors.base.READY_MARKER (a test checks it)
KEY = re.compile(r"[0-9a-f]{16}")  # model.ResolvedStack.env_key
USES_SUFFIX = ".uses.json"
SIDE_FILES = (".requirements.txt", ".install.sh", ".install.log", USES_SUFFIX)  # removed with the environment; the .lock stays
BUILT_BY_PROVIDER = ("uv", "conda")  # providers that build an environment under the root
USES_PER_PLAN = 100  # the newest uses of one plan kept in a marker


def env_root() -> Path:
    return cache_dir() / "envs"


# -- locks --------------------------------------------------------------------------------------

def lock_path(env_dir: Path) -> Path:
    return env_dir.parent / f"{env_dir.name}.lock"


@contextmanager
def using(env_dir: Path) -> Iterator[None]:
    """Hold the environment's lock shared while a job uses it, so `envs prune` leaves it alone.
    Nothing to hold where no install ever took the lock (an interpreter used as it is)."""
    path = lock_path(env_dir)
    if not path.exists():
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _held(path: Path) -> bool:
    """Whether some process holds this lock file now (shared or exclusive). Asked without waiting."""
    if not path.exists():
        return False
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


# -- which sweeps used an environment -----------------------------------------------------------

def record_use(root: Path, used: Iterable[tuple[Path, object]], sweep: int, plan: str, database: str) -> int:
    """Write into each environment's uses file that this sweep of this plan uses it (env_dir,
    resolved stack pairs; stacks whose provider builds nothing under `root` are passed over).
    Returns how many environments were marked. Written on the submit side, which shares the root
    with the nodes under Slurm."""
    marked = 0
    now = time.strftime("%Y-%m-%dT%H:%M:%S")
    for env_dir, resolved in {str(d): (d, r) for d, r in used}.values():
        stack = resolved.stack
        if stack.env not in BUILT_BY_PROVIDER or Path(env_dir).parent != root:
            continue
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{Path(env_dir).name}{USES_SUFFIX}"
        with open(path, "a+") as handle:  # read, change and write under one lock: two sweeps may start at once
            fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            record = _parse(handle.read())
            record["stack"] = {"key": stack.key, "framework": stack.framework, "version": stack.version, "variant": stack.variant,
                               "python": stack.python, "env": stack.env, "cuda_runtime": getattr(resolved, "cuda_runtime", None)}
            uses = [u for u in record["uses"] if (u.get("database"), u.get("plan"), u.get("sweep")) != (database, plan, sweep)]
            uses.append({"database": database, "plan": plan, "sweep": sweep, "at": now})
            mine = [u for u in uses if (u.get("database"), u.get("plan")) == (database, plan)]
            drop = {id(u) for u in sorted(mine, key=lambda u: u["sweep"])[:-USES_PER_PLAN]}
            record["uses"] = [u for u in uses if id(u) not in drop]
            handle.seek(0)
            handle.truncate()
            handle.write(json.dumps(record, indent=1))
        marked += 1
    return marked


def read_uses(path: Path) -> dict:
    """A uses file, read under its lock (shared), so a sweep writing it is never read half-way."""
    try:
        with open(path) as handle:
            fcntl.flock(handle, fcntl.LOCK_SH)
            return _parse(handle.read())
    except OSError:
        return _parse("")


def _parse(text: str) -> dict:
    try:
        record = json.loads(text) if text.strip() else {}
    except ValueError:  # a write cut short: the uses are lost, the environment is not
        record = {}
    if not isinstance(record, dict):
        record = {}
    record.setdefault("stack", None)
    record["uses"] = [u for u in record.get("uses") or [] if isinstance(u, dict) and isinstance(u.get("sweep"), int)]
    return record


def _stack_from_files(root: Path, key: str) -> dict | None:
    """An environment built before uses were recorded: its pins and Python, from the files beside it."""
    try:
        pins = [line.strip() for line in (root / f"{key}.requirements.txt").read_text().splitlines() if line.strip()]
    except OSError:
        pins = []
    python = None
    try:
        for line in (root / key / "pyvenv.cfg").read_text().splitlines():
            name, _, value = line.partition("=")
            if name.strip() in ("version_info", "version"):
                python = ".".join(value.strip().split(".")[:2])
    except OSError:
        pass
    if not pins and not python:
        return None
    return {"key": " ".join(pins[:3]) + (" ..." if len(pins) > 3 else ""), "python": python, "pins": pins}


# -- sizes and sharing --------------------------------------------------------------------------

@dataclass
class Files:
    """Regular files under a directory, each inode once: bytes, files, bytes in files with more than
    one link (shared with uv's cache or another environment), and bytes only this directory holds."""

    bytes: int = 0
    files: int = 0
    shared_bytes: int = 0
    own_bytes: int = 0
    inodes: dict = field(default_factory=dict, repr=False)  # (dev, ino) -> (size, nlink)


def measure(path: Path) -> Files:
    found = Files()
    stack = [str(path)]
    while stack:
        try:
            entries = os.scandir(stack.pop())
        except OSError:  # vanished or unreadable while we walked: what is left is still counted
            continue
        with entries:
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                inode = (info.st_dev, info.st_ino)
                if inode in found.inodes:
                    continue
                found.inodes[inode] = (info.st_size, info.st_nlink)
                found.files += 1
                found.bytes += info.st_size
                if info.st_nlink > 1:
                    found.shared_bytes += info.st_size
                else:
                    found.own_bytes += info.st_size
    return found


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def uv_cache_dir() -> Path | None:
    """uv's cache as uv itself reports it (UV_CACHE_DIR, XDG_CACHE_HOME, ~/.cache/uv)."""
    try:
        proc = subprocess.run([uv_bin(), "cache", "dir"], capture_output=True, encoding="utf-8", errors="replace", timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(proc.stdout.strip()) if proc.returncode == 0 and proc.stdout.strip() else None


def linking(root: Path, uv_cache: Path | None) -> dict:
    """Whether uv can hard-link from its cache into the environments: one filesystem (st_dev), and
    no UV_LINK_MODE that asks for copies. `note` says what happens when it cannot, or None."""
    mode = os.environ.get("UV_LINK_MODE") or None
    same = None if uv_cache is None else os.stat(_existing(uv_cache)).st_dev == os.stat(_existing(root)).st_dev
    note = None
    if same is False:
        note = (f"uv's cache ({uv_cache}) and the environment root ({root}) are on different filesystems: hard links "
                "cannot cross them, so uv copies every file into every environment; put both on one filesystem "
                "(UV_CACHE_DIR and GPUCOMPAT_CACHE)")
    elif mode in ("copy", "symlink", "clone"):
        note = f"UV_LINK_MODE={mode}: uv does not hard-link files into the environments" + (
            " (clone shares blocks on a filesystem with reflinks, invisible to link counts)" if mode == "clone" else "")
    return {"uv_cache": str(uv_cache) if uv_cache else None, "same_filesystem": same, "link_mode": mode or "hardlink", "note": note}


@dataclass
class Environment:
    key: str
    path: str
    ready: bool
    in_use: bool
    bytes: int
    files: int
    shared_bytes: int
    own_bytes: int
    stack: dict | None
    uses: list
    last_use: dict | None


def environments(root: Path | None = None, inodes: dict | None = None) -> list[Environment]:
    """Every environment under the root, oldest last use first. `inodes`, when given, collects
    (dev, ino) -> (size, nlink) over all of them."""
    root = root or env_root()
    found = []
    try:
        names = sorted(entry.name for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False) and KEY.fullmatch(entry.name))
    except OSError:
        return []
    for key in names:
        files = measure(root / key)
        if inodes is not None:
            inodes.update(files.inodes)
        record = read_uses(root / f"{key}{USES_SUFFIX}")
        uses = sorted(record["uses"], key=lambda u: (u.get("at") or "", u["sweep"]))
        found.append(Environment(key, str(root / key), (root / key / READY_MARKER).exists(), _held(root / f"{key}.lock"),
                                 files.bytes, files.files, files.shared_bytes, files.own_bytes,
                                 record["stack"] or _stack_from_files(root, key), uses, uses[-1] if uses else None))
    found.sort(key=lambda e: ((e.last_use or {}).get("at") or "", e.key))
    return found


def summary(root: Path | None = None, listing: bool = True) -> dict:
    """The cache as `envs`, `doctor` and the sweep's closing line show it: each environment (when
    `listing`), and totals where every inode counts once across the whole root."""
    root = root or env_root()
    inodes: dict = {}
    envs = environments(root, inodes)
    total = {
        "environments": len(envs),
        "listed_bytes": sum(e.bytes for e in envs),  # what they would take with nothing shared
        "bytes": sum(size for size, _ in inodes.values()),  # the root's files, each inode once
        "shared_bytes": sum(size for size, links in inodes.values() if links > 1),
        "in_use": sum(e.in_use for e in envs),
    }
    result = {"root": str(root), **linking(root, uv_cache_dir()), "totals": total}
    if listing:
        result["environments"] = [asdict(e) for e in envs]
    return result


def size_text(count: int) -> str:
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"


def summary_line(result: dict) -> str:
    """One sentence: where, how many, how big, how much of it is hard links, and whether uv can link."""
    t = result["totals"]
    if not t["environments"]:
        return f"environment cache {result['root']}: empty" + (f"; {result['note']}" if result["note"] else "")
    line = (f"environment cache {result['root']}: {t['environments']} environment{'s' if t['environments'] != 1 else ''}, {size_text(t['bytes'])} in their files, "
            f"{size_text(t['shared_bytes'])} of it hard links (stored once, shared with uv's cache or other environments), "
            f"{size_text(t['bytes'] - t['shared_bytes'])} their own")
    if result["note"]:
        return f"{line}; {result['note']}"
    return line + (f"; uv's cache {result['uv_cache']} is on the same filesystem" if result["same_filesystem"] else "")


# -- pruning ------------------------------------------------------------------------------------

def kept_sweeps(root: Path, keep: int) -> dict[tuple, list[int]]:
    """(database, plan) -> its latest `keep` sweeps that use any environment here, built or not yet
    (a Slurm job still queued has recorded its use, and its environment does not exist yet)."""
    sweeps: dict[tuple, set[int]] = {}
    for path in root.glob(f"*{USES_SUFFIX}"):
        for use in read_uses(path)["uses"]:
            sweeps.setdefault((use.get("database"), use.get("plan")), set()).add(use["sweep"])
    return {plan: sorted(ids)[-keep:] if keep else [] for plan, ids in sweeps.items()}


def prune(keep: int, dry_run: bool = False, root: Path | None = None) -> dict:
    """Remove every environment that none of the latest `keep` sweeps of any plan used; never one
    whose lock a job holds (built or used right now): those are skipped and named. With `dry_run`
    nothing is removed. Returns what was (or would be) removed, kept and skipped, and the bytes freed
    (files no other link holds)."""
    root = root or env_root()
    envs = environments(root)
    latest = kept_sweeps(root, keep)
    removed, kept, skipped = [], [], []
    for env in envs:
        keeping = [u for u in env.uses if u["sweep"] in latest.get((u.get("database"), u.get("plan")), [])]
        entry = {"key": env.key, "stack": env.stack, "bytes": env.bytes, "own_bytes": env.own_bytes, "last_use": env.last_use}
        if keeping:
            newest = keeping[-1]
            kept.append({**entry, "why": f"used by sweep {newest['sweep']} of plan {newest['plan']!r}, one of its latest {keep}"})
            continue
        entry["why"] = (f"last used by sweep {env.last_use['sweep']} of plan {env.last_use['plan']!r}, older than its latest {keep}"
                        if env.last_use else "no sweep recorded using it" + ("" if env.ready else " (an install that never finished)"))
        outcome = _remove(root, env.key, dry_run)
        if outcome:
            skipped.append({**entry, "why": outcome})
        else:
            removed.append(entry)
    return {"root": str(root), "keep": keep, "dry_run": dry_run, "removed": removed, "kept": kept, "skipped": skipped,
            "freed_bytes": sum(e["own_bytes"] for e in removed)}


def _remove(root: Path, key: str, dry_run: bool) -> str | None:
    """Remove one environment under its lock, taken without waiting; why not, or None when done."""
    lock = root / f"{key}.lock"
    if dry_run:  # asked without creating anything
        return f"in use: a job holds its lock ({lock})" if _held(lock) else None
    with open(lock, "a") as handle:  # the lock file stays: a job that opened it must never lock a stale copy
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return f"in use: a job holds its lock ({lock})"
        try:
            (root / key / READY_MARKER).unlink(missing_ok=True)  # first: a job that looks now builds it again
            shutil.rmtree(root / key, ignore_errors=True)
            for suffix in SIDE_FILES:
                (root / f"{key}{suffix}").unlink(missing_ok=True)
            if (root / key).exists():
                return f"could not remove all of {root / key}"
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return None
