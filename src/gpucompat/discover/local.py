"""The GPUs of this machine, through NVML (nvidia-ml-py), falling back to nvidia-smi.

Devices are grouped into classes (same name, compute capability, driver and memory);
CUDA_VISIBLE_DEVICES, where set, limits what is visible, as it does for CUDA.
"""

from __future__ import annotations

import os
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
            gpus.append(Gpu(
                index=index, uuid=pynvml.nvmlDeviceGetUUID(handle), name=pynvml.nvmlDeviceGetName(handle),
                cc=f"{major}.{minor}", memory_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                driver=driver, cuda_driver=cuda_driver,
            ))
        return gpus
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


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


def visible(gpus: list[Gpu], cuda_visible_devices: str | None) -> list[Gpu]:
    """Apply CUDA_VISIBLE_DEVICES: indices or GPU-UUID prefixes; an invalid entry ends the list, as in CUDA."""
    if cuda_visible_devices is None:
        return gpus
    chosen = []
    for entry in (e.strip() for e in cuda_visible_devices.split(",")):
        if entry.isdigit():
            match = [g for g in gpus if g.index == int(entry)]
        elif entry.startswith("GPU-"):
            match = [g for g in gpus if g.uuid.startswith(entry)]
        else:
            match = []
        if not match:
            break
        chosen.append(match[0])
    return chosen


def local_gpus() -> list[Gpu]:
    gpus = _nvml_gpus()
    if gpus is None:
        gpus = _smi_gpus()
    return visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))


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
