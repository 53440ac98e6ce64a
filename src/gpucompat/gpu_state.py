"""The GPU's own state around a probe, as its NVML binding recorded it (probe/gpustate.py):
whether a failure was the GPU's doing (busy, faulty, prohibited), never the stack's.

The probe records facts["gpu_state"] = {"before": snapshot, "after": snapshot, "events": [...]}:
a snapshot names the GPU (UUID, PCI bus id), its memory, compute/MIG/persistence/ECC modes, ECC
error counters, retired pages and remapped rows, throttle reasons, and the processes on it; the
events are the critical Xid and ECC events NVML delivered while the job ran. The rules here read
those facts; classify() in analysis.py applies them before any error text decides.
"""

from __future__ import annotations

import re

# Xids that name the GPU, its memory, its bus or its firmware rather than the program that ran, after
# NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: immediate action
# RESET_GPU, RESTART_BM or a hardware workflow) and its older causes table (HW flagged). 63 (a row
# remap recorded), 92 (a high single-bit rate, "IGNORE") and 154 (informational) are notes, not faults.
HARDWARE_XIDS = {46: "GPU stopped processing", 48: "double-bit ECC error", 62: "internal micro-controller halt",
                 64: "ECC page retirement or row-remapping failure", 74: "NVLink error", 79: "GPU has fallen off the bus",
                 94: "contained ECC error", 95: "uncontained ECC error", 109: "context switch timeout",
                 119: "GSP RPC timeout", 120: "GSP error", 140: "unrecovered ECC error", 143: "GPU initialization error",
                 158: "GPU fatal timeout", 171: "uncorrectable DRAM error", 172: "uncorrectable SRAM error"}
# Xids the catalogue sends to the application first (RESTART_APP, "debug the user application"): a bad
# access of the job's own raises them, so they count only beside an error of a GPU that gave way.
PROGRAM_XIDS = {13: "graphics engine exception", 31: "GPU memory page fault", 43: "GPU stopped processing",
                45: "preemptive cleanup after an earlier error"}

# A job with no room or no context on the GPU (each wording from a public report: PyTorch's caching
# allocator, XLA's "RESOURCE_EXHAUSTED", CuPy's OutOfMemoryError, cudaErrorDevicesUnavailable (46) in
# its old and new words, cuBLAS/cuDNN allocation failures, a context that could not be retained).
_NO_ROOM = re.compile(
    r"out of memory|OUT_OF_MEMORY|cudaErrorMemoryAllocation|RESOURCE_EXHAUSTED|OutOfMemoryError|Failed to allocate"
    r"|_ALLOC_FAILED|busy or unavailable|DEVICES_UNAVAILABLE|cudaErrorDevicesUnavailable|DeviceAlreadyInUse"
    r"|already in use by a different thread|cuDevicePrimaryCtxRetain|when calling `cublasCreate", re.I)
LOW_FREE_MIB = 1024  # less free than this, with others on the GPU, leaves no room for a framework's context and workspaces


def state(facts: dict | None) -> dict:
    """The probe's gpu_state record, or {} where the probe wrote none (no device stage, an older probe)."""
    found = (facts or {}).get("gpu_state")
    return found if isinstance(found, dict) else {}


def snapshot(facts: dict | None, which: str = "before") -> dict:
    found = state(facts).get(which)
    return found if isinstance(found, dict) else {}


def others(shot: dict) -> list[dict]:
    """The processes on this GPU other than the probe and its children."""
    return [p for p in shot.get("processes") or [] if isinstance(p, dict) and not p.get("self")]


def _mib(value) -> str:
    return f"{value / 1024:.1f} GiB" if isinstance(value, (int, float)) and value >= 1024 else f"{value} MiB" if value is not None else "an unknown amount"


def _process(p: dict) -> str:
    name = (p.get("name") or "").rsplit("/", 1)[-1] or "?"
    return f"pid {p.get('pid')} ({name}, {_mib(p.get('used_mib'))})"


def where(facts: dict | None) -> str:
    """The node and the GPU, the way an admin drains it: host, UUID, PCI bus id."""
    shot = snapshot(facts) or snapshot(facts, "after")
    host = (facts or {}).get("system", {}).get("hostname")
    parts = [f"node {host}" if host else None, shot.get("uuid"), f"PCI {shot['pci_bus_id']}" if shot.get("pci_bus_id") else None]
    return ", ".join(p for p in parts if p) or "the GPU the job ran on"


def holders(facts: dict | None) -> str:
    """Who else held the GPU, in words: 'pid 4242 (python3, 78.9 GiB), ...; 0.3 GiB of 79.6 GiB free'."""
    shot = snapshot(facts)
    named = [_process(p) for p in others(shot)[:4]]
    more = len(others(shot)) - len(named)
    memory = shot.get("memory") or {}
    free = f"{_mib(memory.get('free_mib'))} of {_mib(memory.get('total_mib'))} free" if memory.get("total_mib") else ""
    return "; ".join(p for p in (", ".join(named) + (f" and {more} more" if more > 0 else ""), free) if p)


def compute_mode(facts: dict | None) -> str | None:
    return snapshot(facts).get("compute_mode") or snapshot(facts, "after").get("compute_mode")


def busy(facts: dict | None, text: str) -> str | None:
    """Why the GPU was too busy to test the stack (None: it was not): another process held its memory
    and the job failed for room or a context, or the GPU is Exclusive_Process and another owns it."""
    shot = snapshot(facts)
    rivals = others(shot)
    if not rivals:
        return None
    if compute_mode(facts) == "exclusive_process":
        return f"the GPU is in Exclusive_Process compute mode and another process owns its context: {holders(facts)}"
    free = (shot.get("memory") or {}).get("free_mib")
    if _NO_ROOM.search(text or "") or (isinstance(free, (int, float)) and free < LOW_FREE_MIB):
        return f"other processes held the GPU's memory: {holders(facts)}"
    return None


def _counter(shot: dict, *path) -> int | None:
    value = shot
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) else None


def faults(facts: dict | None) -> list[str]:
    """What NVML saw go wrong with the GPU while the job ran: hardware Xids, uncorrectable ECC errors
    that appeared, pages or rows waiting for a reset, a GPU that NVML reports lost."""
    found = []
    for event in state(facts).get("events") or []:
        xid = event.get("xid") if isinstance(event, dict) else None
        if isinstance(xid, int) and xid in HARDWARE_XIDS:
            found.append(f"Xid {xid} ({HARDWARE_XIDS[xid]})")
        elif isinstance(event, dict) and event.get("type") == "double_bit_ecc":
            found.append("a double-bit ECC error")
    before, after = snapshot(facts), snapshot(facts, "after")
    was, now = _counter(before, "ecc", "volatile_uncorrected"), _counter(after, "ecc", "volatile_uncorrected")
    if was is not None and now is not None and now > was:
        found.append(f"uncorrectable ECC errors during the job (volatile count {was} -> {now})")
    for shot in (after, before):
        if shot.get("lost"):
            found.append("NVML reports the GPU lost (it has fallen off the bus or stopped answering)")
            break
    shot = after or before
    if (shot.get("remapped_rows") or {}).get("failure"):  # NVIDIA's RMA criterion for row remapping
        found.append("a row remapping failed (NVIDIA's RMA criterion: run the field diagnostics)")
    if shot.get("retired_pages_pending"):  # after a double-bit error no new context is created until the page is retired
        found.append("retired pages pending until the GPU is reset")
    return list(dict.fromkeys(found))


def program_xids(facts: dict | None) -> list[str]:
    return [f"Xid {e['xid']} ({PROGRAM_XIDS[e['xid']]})" for e in state(facts).get("events") or []
            if isinstance(e, dict) and e.get("xid") in PROGRAM_XIDS]


def fault(facts: dict | None, text: str) -> str | None:
    """Why the GPU, not the stack, failed the job (None: nothing says so): a hardware Xid, ECC or NVML's
    word, or the driver's own "fallen off the bus". An illegal address or a launch failure that comes with
    only a program's Xid (31, a page fault the job's own kernel caused) stays the stack's: NVIDIA's
    catalogue sends those to the application first, and the probe's calls are the stack's kernels."""
    seen = faults(facts)
    if not seen and re.search(r"fallen off the bus|GPU is lost|GPU_IS_LOST", text or "", re.I):
        seen = ["the GPU has fallen off the bus"]
    return "; ".join(seen) if seen else None


def _listed(gpu: dict) -> str:
    return ", ".join(str(part) for part in (f"index {gpu.get('index')}", gpu.get("name"), gpu.get("uuid")) if part is not None)


def hidden_by_visible_devices(facts: dict | None) -> str | None:
    """Why CUDA saw no GPU where NVML lists some: CUDA_VISIBLE_DEVICES named none of them (an index past the
    last, a UUID of another machine, an empty value), read as CUDA reads it (indices, GPU-UUID prefixes; the
    first entry that matches nothing ends the list). None where it leaves a GPU visible, names a MIG instance
    (NVML's list here has no instances to match), is unset, or the probe recorded no list of GPUs."""
    system = (facts or {}).get("system") or {}
    value = (system.get("cuda_env") or system.get("env") or {}).get("CUDA_VISIBLE_DEVICES")
    gpus = [g for g in state(facts).get("gpus") or [] if isinstance(g, dict)]
    if value is None or not gpus:
        return None
    listing = f"NVML lists {len(gpus)} GPU{'s' if len(gpus) > 1 else ''}: " + "; ".join(_listed(g) for g in gpus)
    if not value.strip():
        return f"CUDA_VISIBLE_DEVICES={value!r} (set but empty) hides every GPU on this machine ({listing}): CUDA sees none"
    entries = [e.strip() for e in value.split(",")]
    if any(e.startswith("MIG-") for e in entries):
        return None
    first = entries[0]  # CUDA stops at the first entry that names nothing: all are hidden only where that is the first
    if first.isdigit():
        found = any(g.get("index") == int(first) for g in gpus)
    else:
        found = first.startswith("GPU-") and any(str(g.get("uuid") or "").startswith(first) for g in gpus)
    if found:
        return None  # a GPU is visible: something else kept CUDA from it
    if len(entries) == 1:
        return f"CUDA_VISIBLE_DEVICES={value!r} names no GPU on this machine ({listing}): CUDA sees none"
    return (f"CUDA_VISIBLE_DEVICES={value!r}: its first entry {first!r} names no GPU on this machine, "
            f"so CUDA ignores it and every entry after it ({listing}): CUDA sees none")


def note(facts: dict | None) -> str:
    """One short line for `results --cells` and the report: who else was on the GPU, and anything odd."""
    shot = snapshot(facts)
    if not shot:
        return ""
    parts = []
    rivals = others(shot)
    if rivals:
        parts.append(f"{len(rivals)} other process{'es' if len(rivals) > 1 else ''} on the GPU ({holders(facts)})")
    mode = compute_mode(facts)
    if mode and mode != "default":
        parts.append(f"compute mode {mode}")
    parts += faults(facts) + program_xids(facts)
    if ((snapshot(facts, "after") or shot).get("remapped_rows") or {}).get("pending"):
        parts.append("remapped rows pending until the next GPU reset (work still runs; reset when convenient)")
    throttle = [r for r in snapshot(facts, "after").get("throttle") or [] if r in ("hw_slowdown", "hw_thermal", "sw_thermal", "hw_power_brake")]
    if throttle:
        parts.append("throttled: " + ", ".join(throttle))
    return "; ".join(parts)


def summary(facts: dict | None) -> dict | None:
    """What a stored verdict keeps of the GPU's state (the raw record stays in the probe's JSON)."""
    before, after = snapshot(facts), snapshot(facts, "after")
    if not any(shot.get("uuid") or shot.get("memory") for shot in (before, after)):
        return None  # no NVML here (no driver, or no GPU): nothing to say of a GPU
    shot = before or after
    return {"where": where(facts), "uuid": shot.get("uuid"), "pci_bus_id": shot.get("pci_bus_id"),
            "node": (facts or {}).get("system", {}).get("hostname"), "compute_mode": compute_mode(facts),
            "memory": shot.get("memory"), "others": others(before)[:8], "others_after": others(after)[:8],
            "faults": faults(facts), "events": (state(facts).get("events") or [])[:20],
            "events_error": state(facts).get("events_error"), "note": note(facts)}
