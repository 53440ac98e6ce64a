"""How much the local executor runs at once, derived from the node: cores, available memory, GPUs.

The rule (docs/performance.md measures it on a 2-core machine):

- installs at once = min(cores, MemAvailable / 1 GiB, 8), at least 1. An install is uv linking
  files from its cache (or downloading them): a core and a few hundred MB each; past 8, installs
  only wait on the same disk and index, and uv already runs each one's downloads in parallel.
- probes at once, with GPUs: one per GPU (each pinned with CUDA_VISIBLE_DEVICES, as before), and
  in all at most min(GPUs, cores, MemAvailable / 2 GiB), at least 1. A probe imports a framework:
  a CUDA build of PyTorch or JAX takes 1 to 2 GiB of host memory before it touches the GPU.
- probes at once, no GPU visible: min(cores, MemAvailable / 2 GiB), at least 1 (none of them can
  reach a GPU, so they are only processes on the CPU).

A plan overrides either with `max_parallel_installs` and `max_parallel_probes` (1 to 64); a probe
count above the GPU count still runs one probe per GPU. The Slurm, HTCondor and Kubernetes
executors leave concurrency to the scheduler: one job per cell, each with its own GPU.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

GIB = 1 << 30
INSTALL_MEMORY = 1 * GIB
PROBE_MEMORY = 2 * GIB
MAX_INSTALLS = 8


def mem_available(meminfo: str = "/proc/meminfo") -> int | None:
    """MemAvailable in bytes (the kernel's estimate of what can be used without swapping), or None."""
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def cores() -> int:
    """The cores this process may run on (its affinity under a batch scheduler's cgroup), else os.cpu_count()."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class Limits:
    installs: int
    probes: int
    cores: int
    memory: int | None  # MemAvailable when derived, bytes
    gpus: int
    why: str  # the rule with this node's numbers, for the log and the docs

    def as_dict(self) -> dict:
        return {"installs": self.installs, "probes": self.probes, "cores": self.cores, "mem_available": self.memory,
                "gpus": self.gpus, "why": self.why}


def limits(gpus: int, installs: int | None = None, probes: int | None = None, ncores: int | None = None,
           memory: int | None = None) -> Limits:
    """The node's limits: `installs`/`probes` are the plan's overrides (None: derived); `ncores` and
    `memory` (bytes) default to this node's."""
    ncores = ncores or cores()
    memory = mem_available() if memory is None else memory
    by_memory_install = max(1, memory // INSTALL_MEMORY) if memory else MAX_INSTALLS
    by_memory_probe = max(1, memory // PROBE_MEMORY) if memory else ncores
    derived_installs = max(1, min(ncores, by_memory_install, MAX_INSTALLS))
    derived_probes = max(1, min(gpus or ncores, ncores, by_memory_probe))
    mem_text = f"{memory / GIB:.1f} GiB available" if memory else "memory unknown"
    why = (f"{ncores} cores, {mem_text}, {gpus} GPUs: installs min(cores, memory/1 GiB, {MAX_INSTALLS}) = {derived_installs}, "
           f"probes min({'GPUs, ' if gpus else ''}cores, memory/2 GiB) = {derived_probes}")
    if installs is not None or probes is not None:
        why += "; the plan sets " + ", ".join(f"{name} = {value}" for name, value in
                                              (("max_parallel_installs", installs), ("max_parallel_probes", probes)) if value is not None)
    return Limits(installs or derived_installs, probes or derived_probes, ncores, memory, gpus, why)
