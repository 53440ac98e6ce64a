"""The GPUs of this machine, through NVML (nvidia-ml-py), falling back to nvidia-smi.

Devices are grouped into classes (same name, compute capability, driver and memory);
CUDA_VISIBLE_DEVICES, where set, limits what is visible, as it does for CUDA. A GPU in MIG
mode is no target itself (CUDA cannot use the whole GPU then): each of its MIG instances is
one, pinned by its MIG-... UUID.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

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
    mig: tuple[MigDevice, ...] = ()  # those instances, as far as the source describes them


@dataclass(frozen=True)
class MigDevice:
    """One MIG instance (a compute instance in its GPU instance), what CUDA sees as one device."""

    uuid: str  # MIG-...: what CUDA_VISIBLE_DEVICES takes
    name: str  # as NVML and CUDA name it: "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    memory_mib: int | None = None
    gpu_instance: int | None = None  # GI and CI ids, as nvidia-smi shows them
    compute_instance: int | None = None
    gi_slices: int | None = None  # NVML's gpuInstanceSliceCount
    slices: int | None = None  # NVML's computeInstanceSliceCount: the compute slices this device runs on
    sms: int | None = None  # NVML's multiprocessorCount


# NVML and CUDA name a MIG device "<GPU name> MIG <profile>", the profile "[<c>c.]<g>g.<memory>gb"
# with <g> the GPU instance's compute slices and <c> the compute instance's, when it has fewer
# (MIG user guide, "MIG Device Names": 3g.20gb, 1c.3g.20gb; https://docs.nvidia.com/datacenter/tesla/mig-user-guide/mig-device-names.html).
MIG_NAME = re.compile(r"^(?P<parent>.+?) MIG (?P<profile>(?:(?P<c>\d+)c\.)?(?P<g>\d+)g\.\d+gb\S*)$")
# A whole GPU's compute slices in MIG mode (MIG user guide, "Supported MIG Profiles"): 7 on the data-centre
# A100/A800, H100/H800/H200, GH200, B100/B200/GB200; 4 on A30 (4g.24gb) and RTX PRO 6000 (4g.96gb). Any other
# GPU's count is not assumed (None): its instances are compared with the whole GPU without an expected share.
SEVEN_SLICES = re.compile(r"\b(A100|A800|H100|H800|H200|GH200|B100|B200|GB200)\b")
FOUR_SLICES = re.compile(r"\bA30\b|RTX PRO 6000")


@dataclass(frozen=True)
class MigName:
    parent: str  # the whole GPU's name
    profile: str  # "3g.20gb", "1c.3g.40gb"
    slices: int  # compute slices of the device
    gi_slices: int  # compute slices of its GPU instance
    gpu_slices: int | None  # compute slices of the whole GPU (None: not known for this GPU)


def mig_name(name: str | None) -> MigName | None:
    """What a MIG device's name says (None for a whole GPU's): 'NVIDIA H100 80GB HBM3 MIG 1c.3g.40gb' ->
    parent 'NVIDIA H100 80GB HBM3', profile '1c.3g.40gb', 1 compute slice of a 3-slice GPU instance, of 7."""
    found = MIG_NAME.match(name or "")
    if not found:
        return None
    gi = int(found["g"])
    parent = found["parent"]
    return MigName(parent, found["profile"], int(found["c"] or gi), gi,
                   4 if FOUR_SLICES.search(parent) else 7 if SEVEN_SLICES.search(parent) else None)


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
            mig_mode, mig = _nvml_mig(pynvml, handle)
            gpus.append(Gpu(
                index=index, uuid=pynvml.nvmlDeviceGetUUID(handle), name=pynvml.nvmlDeviceGetName(handle),
                cc=f"{major}.{minor}", memory_mib=pynvml.nvmlDeviceGetMemoryInfo(handle).total // (1024 * 1024),
                driver=driver, cuda_driver=cuda_driver, mig_mode=mig_mode, mig_devices=tuple(m.uuid for m in mig), mig=mig,
            ))
        return gpus
    except pynvml.NVMLError:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _nvml_mig(pynvml, handle) -> tuple[bool | None, tuple[MigDevice, ...]]:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # not supported: no MIG on this GPU
        return None, ()
    if not current:
        return False, ()

    def ask(call, *args):  # one detail NVML will not give costs only that detail
        try:
            return getattr(pynvml, call)(*args)
        except (pynvml.NVMLError, AttributeError):  # AttributeError: an older nvidia-ml-py without the call
            return None

    devices = []
    for slot in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)):
        try:  # the slots are sparse: a partitioning leaves some empty
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
            uuid, name = pynvml.nvmlDeviceGetUUID(mig), pynvml.nvmlDeviceGetName(mig)
        except pynvml.NVMLError:
            continue
        memory, attributes = ask("nvmlDeviceGetMemoryInfo", mig), ask("nvmlDeviceGetAttributes", mig)
        devices.append(MigDevice(
            uuid=uuid, name=name, memory_mib=memory.total // (1024 * 1024) if memory else None,
            gpu_instance=ask("nvmlDeviceGetGpuInstanceId", mig), compute_instance=ask("nvmlDeviceGetComputeInstanceId", mig),
            # nvmlDeviceAttributes_t (nvml.h; c_nvmlDeviceAttributes in nvidia-ml-py's pynvml.py)
            gi_slices=getattr(attributes, "gpuInstanceSliceCount", None), slices=getattr(attributes, "computeInstanceSliceCount", None),
            sms=getattr(attributes, "multiprocessorCount", None),
        ))
    return True, tuple(devices)


def driver_from_proc(text: str) -> str | None:
    """'NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  ...' -> '580.159.04'."""
    found = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+\.\d+(?:\.\d+)?)", text)
    return found.group(1) if found else None


def kernel_module_from_proc(text: str) -> str | None:
    """Which flavour of kernel module is loaded: 'NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04 ...'
    -> 'open'; 'NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.14 ...' -> 'proprietary'; None for neither."""
    if re.search(r"\bOpen Kernel Module\b", text):
        return "open"
    return "proprietary" if re.search(r"\bKernel Module\b", text) else None


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


# `nvidia-smi -L`: each GPU, then its MIG devices (MIG user guide, "Getting Started with MIG" and
# "MIG Device Names"; UUIDs "MIG-GPU-<uuid>/<gi>/<ci>" before driver R470):
#   GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-c08d91cb-e324-655c-71ba-7570956445bc)
#     MIG 1c.3g.40gb  Device  0: (UUID: MIG-c788539f-c1ea-5a36-8b4d-9b07d024b1bb)
SMI_GPU = re.compile(r"^GPU \d+: (?P<name>.+?) \(UUID: (?P<uuid>GPU-[^)]+)\)")
SMI_MIG = re.compile(r"^\s*MIG (?P<profile>\S+)\s+Device\s+\d+: \(UUID: (?P<uuid>MIG-[^)]+)\)")


def parse_nvidia_smi_list(text: str) -> dict[str, tuple[MigDevice, ...]]:
    """GPU UUID -> its MIG devices, from `nvidia-smi -L`; named as NVML names them, sliced as their profile says."""
    found: dict[str, list[MigDevice]] = {}
    parent = None
    for line in text.splitlines():
        if gpu := SMI_GPU.match(line.strip()):
            parent = gpu
            found[gpu["uuid"]] = []
        elif (mig := SMI_MIG.match(line)) and parent:
            name = f"{parent['name']} MIG {mig['profile']}"
            sliced = mig_name(name)
            found[parent["uuid"]].append(MigDevice(mig["uuid"], name, gi_slices=getattr(sliced, "gi_slices", None),
                                                   slices=getattr(sliced, "slices", None)))
    return {uuid: tuple(devices) for uuid, devices in found.items()}


def with_mig(gpus: list[Gpu], listed: dict[str, tuple[MigDevice, ...]]) -> list[Gpu]:
    """The GPUs with the MIG devices `nvidia-smi -L` lists under them: MIG on where it lists any (a GPU in
    MIG mode with no instance yet looks like one without MIG here)."""
    return [replace(g, mig_mode=True, mig_devices=tuple(m.uuid for m in listed[g.uuid]), mig=listed[g.uuid])
            if listed.get(g.uuid) else g for g in gpus]


def _smi(*args: str) -> str:
    try:
        proc = subprocess.run(["nvidia-smi", *args], capture_output=True, encoding="utf-8", errors="replace", timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return proc.stdout if proc.returncode == 0 else ""


def _smi_gpus() -> list[Gpu]:
    if not shutil.which("nvidia-smi"):
        return []
    gpus = parse_nvidia_smi(_smi("--query-gpu=index,uuid,name,compute_cap,memory.total,driver_version", "--format=csv,noheader,nounits"))
    return with_mig(gpus, parse_nvidia_smi_list(_smi("-L"))) if gpus else []


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
    """The visible GPUs; a MIG instance made visible by its UUID brings its GPU with only the instances named."""
    seen = read_visible_devices(gpus, cuda_visible_devices)
    chosen = list(seen["gpus"])
    for gpu in gpus:
        named = tuple(m for m in instances(gpu) if any(m.uuid.startswith(entry) for entry in seen["mig"]))
        if named and gpu not in chosen:
            chosen.append(replace(gpu, mig_devices=tuple(m.uuid for m in named), mig=named))
    return chosen


PCI_DEVICES = "/sys/bus/pci/devices"


def pci_nvidia_gpus(root: str = PCI_DEVICES) -> list[tuple[str, str]]:
    """(PCI address, device ID) of each NVIDIA display or 3D controller the kernel sees, bound to a driver or not:
    what is there when a loaded driver lists no GPU ('0000:3b:00.0', '2b85'). Read from sysfs, so no driver is needed."""
    found = []
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return []
    for address in entries:
        try:
            with open(os.path.join(root, address, "vendor")) as vendor, open(os.path.join(root, address, "class")) as kind, \
                    open(os.path.join(root, address, "device")) as device:
                if vendor.read().strip().lower() == "0x10de" and kind.read().strip().lower()[:6] in ("0x0300", "0x0302"):
                    found.append((address, device.read().strip().lower().removeprefix("0x")))
        except OSError:
            continue
    return found


def all_gpus() -> tuple[list[Gpu], str]:
    """Every GPU the driver knows, and where that was read from."""
    gpus = _nvml_gpus()
    if gpus is not None:
        return gpus, "NVML"
    gpus = _smi_gpus()
    return gpus, ("nvidia-smi" if gpus else "none")


def local_gpus() -> list[Gpu]:
    return visible(all_gpus()[0], os.environ.get("CUDA_VISIBLE_DEVICES"))


def instances(gpu: Gpu) -> tuple[MigDevice, ...]:
    """A GPU's MIG devices; those known by UUID alone with their GPU's name."""
    return gpu.mig or tuple(MigDevice(uuid, f"{gpu.name} MIG") for uuid in gpu.mig_devices)


def mig_targets(gpu: Gpu) -> list[Target]:
    """A GPU in MIG mode: one target per MIG instance, pinned by its MIG UUID, with its GPU's compute
    capability and driver, its own memory and slices (NVML's, else its profile's), and its GPU's UUID."""
    targets = []
    for mig in instances(gpu):
        sliced = mig_name(mig.name)
        targets.append(Target(
            name=mig.name, cc=gpu.cc, driver=gpu.driver, cuda_driver=gpu.cuda_driver, memory_mib=mig.memory_mib, count=1,
            devices=(mig.uuid,), mig=True, mig_profile=getattr(sliced, "profile", None),
            mig_slices=mig.slices or getattr(sliced, "slices", None), mig_gi_slices=mig.gi_slices or getattr(sliced, "gi_slices", None),
            mig_gpu_slices=getattr(sliced, "gpu_slices", None), parent=gpu.uuid))
    return targets


def proc_kernel_module() -> str | None:
    """This node's loaded kernel module flavour ('open' | 'proprietary'), from /proc/driver/nvidia/version; None without one."""
    try:
        return kernel_module_from_proc(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def gpu_classes(gpus: list[Gpu]) -> list[Target]:
    """This node's GPU classes, each with the node's kernel module flavour (it decides which GPUs the driver drives)."""
    module = proc_kernel_module() if gpus else None
    classes: dict[tuple, list[Gpu]] = {}
    instances = []
    for gpu in gpus:
        if gpu.mig_mode:  # CUDA cannot use the whole GPU while MIG is on: only its instances are targets
            instances += mig_targets(gpu)
        else:
            classes.setdefault((gpu.name, gpu.cc, gpu.driver, gpu.memory_mib, gpu.cuda_driver), []).append(gpu)
    return [
        Target(name=name, cc=cc, driver=driver, cuda_driver=cuda_driver, memory_mib=memory,
               count=len(members), devices=tuple(g.uuid or str(g.index) for g in members), kernel_module=module)
        for (name, cc, driver, memory, cuda_driver), members in classes.items()
    ] + [replace(t, kernel_module=module) for t in instances]


def mig_notes(gpus: list[Gpu]) -> list[str]:
    """Why a GPU in MIG mode is no target of its own, one line per such GPU."""
    notes = []
    for gpu in gpus:
        if gpu.mig_mode:
            count = len(instances(gpu))
            notes.append(f"GPU {gpu.index} ({gpu.name}, {gpu.uuid}) has MIG on: CUDA cannot use the whole GPU, so it is no target; "
                         + (f"its {count} MIG instance(s) are, each its own" if count else
                            "it has no MIG instance yet (nvidia-smi mig -cgi <profiles> -C creates them), so nothing on it can run"))
    return notes


NO_GPU = Target(name="no GPU visible", count=0)


def discover() -> list[Target]:
    """This machine's GPU classes; one placeholder class when none is visible."""
    return gpu_classes(local_gpus()) or [NO_GPU]
