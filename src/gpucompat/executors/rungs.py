"""What a check already proved in this interpreter on this GPU and driver: the library and JIT rungs that
passed there, cached per environment so that the next `check --env current` does not run them again.

Those rungs (cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL, the JIT) depend only on the environment's packages, the
GPU and the driver; the core rungs (the framework's own kernel and cuBLAS's product, checked against float64)
run every time, and the GPU's state is read every time. The key changes when any of those does: the
interpreter, the modification time of each of its site-packages directories (a package installed, upgraded or
removed), the driver's version line, the GPU the job is pinned to, and the probe's version. A rung read from
here is recorded as passed with when and where it ran (`cached`). GPUCOMPAT_RUNG_CACHE=0 turns it off.
"""

from __future__ import annotations

import hashlib
import json
import os
import site
import sys
import time
from pathlib import Path

from ..paths import cache_dir

CORE_RUNGS = ("elementwise", "blas")  # run at every check: what a bare start proves, and the GPU computing now
ENV_VARIABLE = "GPUCOMPAT_CACHED_RUNGS"  # the probe reads the rungs to take as passed from it (probe/ladder.py)
DRIVER_VERSION = Path("/proc/driver/nvidia/version")


def _key(interpreter: str, device: str | None) -> str | None:
    if os.environ.get("GPUCOMPAT_RUNG_CACHE") == "0" or not device:
        return None
    try:
        with open(DRIVER_VERSION) as handle:
            driver = handle.readline().strip()
    except OSError:
        return None
    folders = site.getsitepackages() + [site.getusersitepackages()] if os.path.realpath(interpreter) == os.path.realpath(sys.executable) else []
    stamps = []
    for folder in folders:
        try:
            stamps.append(f"{folder}:{os.stat(folder).st_mtime_ns}")
        except OSError:
            pass
    if not stamps:
        return None  # another interpreter: its packages cannot be dated from here
    from ..probe.records import PROBE_VERSION

    text = "\n".join([os.path.realpath(interpreter), driver, device, str(PROBE_VERSION), *stamps])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _path(key: str) -> Path:
    return cache_dir() / "rungs" / f"{key}.json"


def cached(interpreter: str, device: str | None, framework: str) -> dict:
    """{rung: sentence} of the rungs this interpreter already passed on DEVICE with this driver ({} if none)."""
    key = _key(interpreter, device)
    if key is None:
        return {}
    try:
        known = json.loads(_path(key).read_text())
    except (OSError, ValueError):
        return {}
    passed = known.get(framework) if isinstance(known, dict) else None
    return {str(k): str(v) for k, v in passed.items()} if isinstance(passed, dict) else {}


def probe_env(interpreter: str, device: str | None, framework: str) -> dict:
    """The variable that hands the cached rungs to the probe, or {}."""
    passed = cached(interpreter, device, framework)
    return {ENV_VARIABLE: json.dumps(passed)} if passed else {}


def remember(interpreter: str, device: str | None, framework: str, facts: dict) -> None:
    """After a job on DEVICE: keep the rungs beyond the core ones that passed (ran, not read from here)."""
    key = _key(interpreter, device)
    compute = (facts.get("stages") or {}).get("compute") or {}
    if key is None or not compute.get("ok"):
        return
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(facts.get("started_at") or time.time()))
    passed = {r["name"]: f"passed at {when} in this environment on this GPU and driver; not run again until a package, the driver or the GPU changes"
              for r in (compute.get("facts") or {}).get("rungs") or []
              if r.get("ok") is True and not r.get("cached") and r.get("name") not in CORE_RUNGS}
    if not passed:
        return
    path = _path(key)
    try:
        known = json.loads(path.read_text())
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    known[framework] = {**(known.get(framework) or {}), **passed}
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.tmp")
    partial.write_text(json.dumps(known))
    os.replace(partial, path)
