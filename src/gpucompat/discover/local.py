"""The GPUs of this machine, through NVML (nvidia-ml-py), falling back to nvidia-smi.

Devices are grouped into classes (same name, compute capability, driver and memory);
CUDA_VISIBLE_DEVICES, where set, limits what is visible, as it does for CUDA.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from ..model import Target


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    cc: str | None
    memory_mib: int | None
    driver: str | None
    cuda_driver: str | None
    mig_mode: bool | None = None  # None: the GPU has no MIG
    mig_devices: tuple[str, ...] = ()  # MIG-... UUIDs of its instances


def _nvml_gpus() -> list[Gpu] | None:
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        return None
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        cuda_driver = f"{cuda // 1000}.{(cuda % 1000) // 10}"
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            mig_mode, mig_devices = _nvml_mig(pynvml, handle)
            gpus.append(Gpu(
                index=index, uuid=pynvml.nvmlDeviceGetUUID(handle), name=pynvml.nvmlDeviceGetName(handle),
                cc=f"{major}.{minor}", memory_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                driver=driver, cuda_driver=cuda_driver, mig_mode=mig_mode, mig_devices=mig_devices,
            ))
        return gpus
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _nvml_mig(pynvml, handle) -> tuple[bool | None, tuple[str, ...]]:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # not supported: no MIG on this GPU
        return None, ()
    if not current:
        return False, ()
    uuids = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:
            uuids.append(pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)))
        except pynvml.NVMLError:
            continue
    return True, tuple(uuids)


def driver_from_proc(text: str) -> str | None:
    """'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ...' -> '580.159.04'."""
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Output of --query-gpu=index,uuid,name,compute_cap,memory.total,driver_version --format=csv,noheader,nounits."""
    gpus = []
    for line in text.splitlines():
        fields = [f.strip() for f in line.split(",")]
        if len(fields) != 6 or not fields[0].isdigit():
            continue
        index, uuid, name, cc, memory, driver = fields
        gpus.append(Gpu(
            int(index), uuid, name, cc if cc[:1].isdigit() else None,
            int(float(memory)) if memory.replace(".", "").isdigit() else None, driver, None,
        ))
    return gpus


def _smi_gpus() -> list[Gpu]:
    if not shutil.which("nvidia-smi"):
        return []
    try:
        proc = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,uuid,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_nvidia_smi(proc.stdout) if proc.returncode == 0 else []


def read_visible_devices(gpus: list[Gpu], value: str | None) -> dict:
    """What CUDA_VISIBLE_DEVICES makes visible, as CUDA reads it: indices, GPU-UUID prefixes or
    MIG-UUIDs, comma-separated; the first entry that matches nothing ends the list."""
    if value is None:
        return {"value": None, "form": "unset", "gpus": list(gpus), "mig": [], "note": "unset: every GPU is visible"}
    if not value.strip():
        return {"value": value, "form": "empty", "gpus": [], "mig": [], "note": "set but empty: CUDA sees no GPU"}
    chosen, mig, forms, note = [], [], set(), ""
    for entry in (e.strip() for e in value.split(",")):
        if entry.isdigit():
            forms.add("indices")
            match = [g for g in gpus if g.index == int(entry)]
        elif entry.startswith("GPU-"):
            forms.add("uuids")
            match = [g for g in gpus if g.uuid.startswith(entry)]
        elif entry.startswith("MIG-"):
            forms.add("mig")
            owners = [g for g in gpus if any(m.startswith(entry) for m in g.mig_devices)]
            if owners:
                mig.append(entry)
                continue
            match = []
        else:
            match = []
        if not match:
            note = f"entry {entry!r} matches no device, so CUDA ignores it and every entry after it"
            break
        chosen.append(match[0])
    form = "+".join(sorted(forms)) or "invalid"
    return {"value": value, "form": form, "gpus": chosen, "mig": mig,
            "note": note or f"{len(chosen)} GPU(s){f' and {len(mig)} MIG instance(s)' if mig else ''} visible"}


def visible(gpus: list[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    return read_visible_devices(gpus, cuda_visible_devices)["gpus"]


def all_gpus() -> tuple[list[Gpu], str]:
    """Every GPU the driver knows, and where that was read from."""
    gpus = _nvml_gpus()
    if gpus is not None:
        return gpus, "NVML"
    gpus = _smi_gpus()
    return gpus, ("nvidia-smi" if gpus else "none")


def local_gpus() -> list[Gpu]:
    return visible(all_gpus()[0], os.environ.get("CUDA_VISIBLE_DEVICES"))


def gpu_classes(gpus: list[Gpu]) -> list[Target]:
    classes: dict[tuple, list[Gpu]] = {}
    for gpu in gpus:
        classes.setdefault((gpu.name, gpu.cc, gpu.driver, gpu.memory_mib, gpu.cuda_driver), []).append(gpu)
    return [
        Target(name=name, cc=cc, driver=driver, cuda_driver=cuda_driver, memory_mib=memory,
               count=len(members), devices=tuple(g.uuid or str(g.index) for g in members))
        for (name, cc, driver, memory, cuda_driver), members in classes.items()
    ]


NO_GPU = Target(name="no GPU visible", count=0)


def discover() -> list[Target]:
    """This machine's GPU classes; one placeholder class when none is visible."""
    return gpu_classes(local_gpus()) or [NO_GPU]
