"""`gpucompat doctor`: this machine and interpreter, what works on its GPUs, and what to change.

Reads the driver and GPUs (NVML, else nvidia-smi, else /proc/driver/nvidia/version),
interprets CUDA_VISIBLE_DEVICES as CUDA does, runs the probe's import stage for every
framework installed in this interpreter (so nothing touches a GPU), and predicts each
framework on each visible GPU with a one-line fix where one is known. It also shows the
CUDA libraries mapped (in its own process after loading libcuda, and in each framework's
import) and the environment variables that change how CUDA loads or JIT-compiles
kernels, with a warning and its source for each one that matters (knowledge/variables.py), and
the environment cache (its size, what is hard-linked, whether uv's cache is on its filesystem).
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import cuda_start, env_cache, gpu_state
from .discover import local
from .envs import container
from .envs.current import installed
from .knowledge import gpus as gpus_table, tables
from .knowledge.variables import loading_findings
from .knowledge.rules import FAIL, architectures_not_driven, driver_drives_rule, predict_stack, suggest_fix
from .model import FRAMEWORKS
from .probe.records import cuda_env, loaded_libraries
from .probe_build import probe_pyz

def _own_libraries() -> list[dict]:
    """The CUDA libraries mapped into this process once libcuda is loaded (if it can be)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        pass
    return loaded_libraries()


def _proc_driver() -> str | None:
    try:
        return local.driver_from_proc(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _proc_kernel_module() -> str | None:
    """'open' or 'proprietary': the loaded kernel module's flavour, which decides which GPUs the driver drives."""
    try:
        return local.kernel_module_from_proc(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _import_facts(framework: str) -> dict:
    """The probe's import stage in a fresh interpreter: versions, CUDA runtime, cuDNN, arch list."""
    with tempfile.TemporaryDirectory() as work:
        result = Path(work) / "result.json"
        subprocess.run([sys.executable, str(probe_pyz()), "--framework", framework, "--result", str(result), "--stages", "import"],
                       capture_output=True, timeout=300)
        try:
            probed = json.loads(result.read_text())
            stage = probed["stages"]["import"]
        except (OSError, ValueError, KeyError):
            return {"import_error": "the probe did not report"}
    loaded = {"loaded_libraries": probed.get("loaded_libraries", [])}
    if not stage.get("ok"):
        error = stage.get("error") or {}
        return {"import_error": f"{error.get('type')}: {error.get('message', '').splitlines()[0] if error.get('message') else ''}"} | loaded
    return stage.get("facts", {}) | loaded


def _arch(facts: dict) -> tuple | None:
    archs = facts.get("arch_list")
    if not archs:
        return None
    return ([a for a in archs if a.startswith("sm_")], [a for a in archs if a.startswith("compute_")],
            "the installed build's own arch list (torch.cuda.get_arch_list())")


# What a person on a machine without a GPU can do next: ask the knowledge, or test where the GPUs are.
NO_GPU_NEXT_STEP = ("ask without a GPU: gpucompat explain torch==2.4.1 --gpu A100 --driver 535.104.05, or gpucompat advise torch "
                    "--gpu 'RTX 4090' --driver 550.54.15; to test for real, run gpucompat check torch --env current on a GPU "
                    "node, or a sweep through your scheduler (executor = \"slurm\", \"htcondor\" or \"kubernetes\" in a plan)")


def doctor() -> dict:
    gpus, source = local.all_gpus()
    driver = gpus[0].driver if gpus else _proc_driver()
    if driver and source == "none":
        source = "/proc/driver/nvidia/version"
    module = _proc_kernel_module() if driver else None
    supported = (gpus[0].cuda_driver if gpus and gpus[0].cuda_driver else None) or (
        (tables.driver_cuda(driver) or {}).get("cuda") if driver else None)
    seen = local.read_visible_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    env = cuda_env(os.environ)
    frameworks = []
    present = [(fw, found) for fw in FRAMEWORKS if (found := installed(fw))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        started = pool.submit(_cuda_start) if gpus else None  # in a process like a probe's, beside the imports
        facts = list(pool.map(lambda item: _import_facts(item[0]), present))
        start = started.result() if started else None
    blocked = _env_fault(start, env, gpus) if start is not None else None
    for (framework, (version, variant)), fw_facts in zip(present, facts):
        cpu_only = framework == "torch" and not fw_facts.get("import_error") and not fw_facts.get("cuda_runtime")
        frameworks.append({"framework": framework, "version": fw_facts.get("version", version), "variant": variant,
                           "cuda_runtime": fw_facts.get("cuda_runtime"), "cudnn": fw_facts.get("cudnn"),
                           "arch_list": fw_facts.get("arch_list"), "import_error": fw_facts.get("import_error"),
                           "note": "a CPU-only build: it cannot use any GPU" if cpu_only else None,
                           "loaded_libraries": fw_facts.get("loaded_libraries", [])})
    verdicts = []
    for fw in frameworks:
        for gpu in local.gpu_classes(local.visible(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))):  # MIG instances too
            if blocked:  # no stack can start CUDA here: nothing about this one can be known from this shell
                verdicts.append({"framework": fw["framework"], "gpu": gpu.name, "cc": gpu.cc, "verdict": "untested", "code": "UNTESTED",
                                 "stage": "device", "reason": f"could not test: {blocked}", "warnings": [], "fix": None})
                continue
            if fw["import_error"]:
                verdicts.append({"framework": fw["framework"], "gpu": gpu.name, "cc": gpu.cc, "verdict": "fail", "code": "IMPORT_FAILED",
                                 "stage": "import", "reason": fw["import_error"], "warnings": [], "fix": None})
                continue
            release = fw["version"] if fw["framework"] != "cuda-runtime" else (fw["cuda_runtime"] or fw["version"])
            p = predict_stack(fw["framework"], release, fw["variant"], gpu.cc, driver, cuda_runtime=fw["cuda_runtime"],
                        arch=_arch(fw) if fw["framework"] == "torch" else None, gpu=gpu.name, kernel_module=module)
            deciding = next((r for r in p.reasons if r.verdict == p.verdict), p.reasons[0] if p.reasons else None)
            verdicts.append({"framework": fw["framework"], "gpu": gpu.name, "cc": gpu.cc, "verdict": p.verdict, "code": p.code,
                             "stage": p.stage, "reason": deciding.text if deciding else "", "warnings": p.warnings,
                             "fix": suggest_fix(fw["framework"], release, gpu.cc, driver, p, gpu.name)})
    next_step = None
    if not driver:
        summary = "no NVIDIA GPU here: no driver (no NVML, no nvidia-smi, no /proc/driver/nvidia/version)"
        next_step = NO_GPU_NEXT_STEP
    elif not gpus:
        summary = f"driver {driver} is loaded but lists no GPU; " + _unlisted(driver)
    elif not seen["gpus"] and not seen["mig"]:
        summary = f"{len(gpus)} GPU(s) present, none visible: CUDA_VISIBLE_DEVICES={seen['value']!r} ({seen['note']})"
    elif blocked:
        summary = f"CUDA cannot start in a process of this shell, so no stack can be tested here: {blocked}"
    else:
        summary = f"driver {driver} (CUDA {supported}{f', {module} kernel module' if module else ''}); {seen['note']}"
        undriven = {r.text for g in gpus if (r := driver_drives_rule(g.cc, g.name, driver, module)) is not None and r.verdict == FAIL}
        summary += "".join(f"; {text}" for text in sorted(undriven))  # no stack can use such a GPU
    state = gpu_state_now() if gpus and (seen["gpus"] or seen["mig"]) else None
    if state and blocked:
        state.update(testable=False, why=blocked)
    elif state and not state["testable"]:
        summary += f"; this GPU cannot be tested right now: {state['why']}"
    return {
        "summary": summary,
        "next_step": next_step,
        "gpu_state": state,
        "cuda_start": start,
        "driver": {"version": driver, "cuda": supported, "source": source, "kernel_module": module},
        "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name, "cc": g.cc, "memory_mib": g.memory_mib,
                  "mig_mode": g.mig_mode, "mig_devices": list(g.mig_devices)} for g in gpus],
        "cuda_visible_devices": {k: seen[k] for k in ("value", "form", "note")} | {"visible": [g.index for g in seen["gpus"]], "mig": seen["mig"]},
        "python": {"version": sys.version.split()[0], "executable": sys.executable},
        "cuda_env": env,
        "loading_warnings": loading_findings(env),
        "loaded_libraries": _own_libraries(),
        "frameworks": frameworks,
        "verdicts": verdicts,
        "container_runtimes": container.runtimes_here(),  # what env = "container" stacks can run with here
        "env_cache": env_cache.summary(listing=False),  # the environments kept here: size, hard links, uv's cache beside them
    }


def _unlisted(driver: str) -> str:
    """Why a loaded driver lists no GPU: per NVIDIA PCI device present, whether this release's list of compatible GPUs
    names it (driver_devices.csv); without such a device, the architectures this branch does not drive."""
    said = []
    for address, device in local.pci_nvidia_gpus():
        answer, _confidence, read = gpus_table.driver_lists(device, driver)
        name = (gpus_table.device_names(device) or ["an NVIDIA GPU"])[0]
        began = gpus_table.first_listing(device)
        if answer == "no":
            said.append(f"PCI {address} is 10de:{device} ({name}), which driver {driver} does not drive: it is not in {read}"
                        + (f" (first listed in {began['first']})" if began else ""))
        elif answer == "yes":
            said.append(f"PCI {address} is 10de:{device} ({name}), which driver {driver} lists ({read}), so dmesg's NVRM lines say why it did not bind")
        else:
            said.append(f"PCI {address} is 10de:{device} ({name}); whether driver {driver} drives it is not known ({read})")
    if said:
        return "; ".join(said)
    undriven = architectures_not_driven(driver)
    return (f"a driver ignores a GPU its branch does not drive, and this one does not drive {', '.join(undriven)}: "
            "dmesg says 'NVRM: ... will ignore this GPU'" if undriven else "no NVIDIA GPU is on the PCI bus (/sys/bus/pci/devices)")


def _cuda_start() -> dict:
    """cuInit and cuDeviceGetCount in a fresh interpreter with this shell's environment, as a job's probe
    calls them (probe/cuda_start.py): whether CUDA can start here at all, and the facts if not."""
    try:
        done = subprocess.run([sys.executable, str(probe_pyz()), "cuda-start"], capture_output=True, encoding="utf-8", errors="replace", timeout=120)
        return json.loads(done.stdout)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return {"error": f"the start check did not report ({type(exc).__name__})"}


def _env_fault(start: dict, env: dict, gpus: list) -> str | None:
    """What stops CUDA in this shell's processes, in the words a cell would get (cuda_start.env_fault)."""
    facts = {"cuda_start": start, "system": {"cuda_env": env, "prefix": sys.prefix},
             "gpu_state": {"gpus": [{"index": g.index, "name": g.name, "uuid": g.uuid} for g in gpus]}}
    return cuda_start.env_fault(facts)


def gpu_state_now() -> dict:
    """The first visible GPU as the probe's NVML binding reads it now (processes, modes, ECC, remapped
    rows), and whether a probe could test a stack on it at this moment, and why not."""
    from .probe.gpustate import snapshot
    from .probe.nvml import Nvml

    shot = snapshot(Nvml())
    facts = {"gpu_state": {"before": shot}, "system": {"hostname": socket.gethostname()}}
    why = None
    if shot.get("error"):
        why = f"NVML cannot read it ({shot['error']})"
    elif gpu_state.compute_mode(facts) == "prohibited":
        why = "its compute mode is Prohibited: no process may create a context on it"
    elif gpu_state.faults(facts):
        why = "; ".join(gpu_state.faults(facts))
    elif gpu_state.others(shot) and gpu_state.compute_mode(facts) == "exclusive_process":
        why = f"it is in Exclusive_Process mode and another process holds it: {gpu_state.holders(facts)}"
    elif gpu_state.others(shot) and ((shot.get("memory") or {}).get("free_mib") or 0) < gpu_state.LOW_FREE_MIB:
        why = f"other processes hold its memory: {gpu_state.holders(facts)}"
    return {"snapshot": shot, "note": gpu_state.note(facts), "testable": why is None, "why": why}
