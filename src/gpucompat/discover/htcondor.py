"""HTCondor: GPU classes from the startd ads (`condor_status -long`), read with classad2.

Both forms are read: the nested ads of current releases (AvailableGPUs = {GPUs_GPU_<id>, ...},
each GPUs_GPU_<id> = [ Capability = 8.0; DeviceName = "..."; DriverVersion = 12.2;
GlobalMemoryMb = ...; MaxSupportedVersion = 12020 ], with GPUs_* common values), and
the legacy flat attributes (CUDACapability, CUDADeviceName, CUDADriverVersion,
CUDAGlobalMemoryMb). HTCondor's DriverVersion is the CUDA version the driver supports,
not the driver's own version number. Dynamic slots are skipped: their partitionable
parent already counts the GPUs.
"""

from __future__ import annotations

from ..errors import UserError
from ..model import Target
from .command import run_command

CONSTRAINT = '(TotalGPUs > 0 || GPUs > 0) && SlotType =!= "Dynamic"'


def _classad2():
    try:
        import classad2
    except ImportError:
        raise UserError("reading HTCondor ads needs the official bindings: pip install 'gpucompat[htcondor]'.") from None
    return classad2


def _devices(ad) -> list[dict]:
    """One dict per GPU of a machine ad: name, cc, cuda (driver's CUDA), memory."""
    names = [str(ref) for ref in (ad.get("AvailableGPUs") or [])] or sorted(k for k in ad.keys() if k.startswith("GPUs_GPU_"))
    nested = [ad.get(name) for name in names if ad.get(name) is not None]
    if nested:
        return [{
            "name": str(gpu.get("DeviceName") or ad.get("GPUs_DeviceName") or "unknown GPU"),
            "cc": _cc(gpu.get("Capability", ad.get("GPUs_Capability"))),
            "cuda": _cuda(gpu.get("DriverVersion", ad.get("GPUs_DriverVersion"))),
            "memory": gpu.get("GlobalMemoryMb", ad.get("GPUs_GlobalMemoryMb")),
        } for gpu in nested]
    count = int(ad.get("TotalGPUs") or ad.get("GPUs") or 0)
    prefix = "GPUs_" if "GPUs_DeviceName" in ad or "GPUs_Capability" in ad else "CUDA"
    return [{
        "name": str(ad.get(f"{prefix}DeviceName") or "unknown GPU"),
        "cc": _cc(ad.get(f"{prefix}Capability")),
        "cuda": _cuda(ad.get(f"{prefix}DriverVersion")),
        "memory": ad.get(f"{prefix}GlobalMemoryMb"),
    }] * count


def _cc(value) -> str | None:
    return f"{float(value):.1f}" if value is not None else None


def _cuda(value) -> str | None:
    return f"{float(value):.1f}" if value is not None else None


def classes_from_ads(ads) -> list[Target]:
    groups: dict[tuple, dict] = {}
    for ad in ads:
        if str(ad.get("SlotType", "")) == "Dynamic":
            continue
        machine = str(ad.get("Machine") or ad.get("Name") or "?")
        for device in _devices(ad):
            key = (device["name"], device["cc"], device["cuda"], int(device["memory"]) if device["memory"] else None)
            group = groups.setdefault(key, {"count": 0, "nodes": []})
            group["count"] += 1
            if machine not in group["nodes"]:
                group["nodes"].append(machine)
    return [Target(name=name, cc=cc, cuda_driver=cuda, memory_mib=memory, count=g["count"], nodes=tuple(g["nodes"]))
            for (name, cc, cuda, memory), g in sorted(groups.items(), key=lambda item: (item[0][1] or "", item[0][0]))]


def parse_long(text: str) -> list[Target]:
    """`condor_status -long` output (ads separated by blank lines) -> GPU classes."""
    return classes_from_ads(_classad2().parseAds(text))


def discover() -> list[Target]:
    proc = run_command(["condor_status", "-long", "-constraint", CONSTRAINT], 120, "an HTCondor access point")
    if proc.returncode != 0:
        raise UserError(f"condor_status failed: {proc.stderr.strip()[:300]}")
    return parse_long(proc.stdout)
