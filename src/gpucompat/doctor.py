"""`gpucompat doctor`: this machine and interpreter, what works on its GPUs, and what to change.

Reads the driver and GPUs (NVML, else nvidia-smi, else /proc/driver/nvidia/version),
interprets CUDA_VISIBLE_DEVICES as CUDA does, runs the probe's import stage for every
framework installed in this interpreter (so nothing touches a GPU), and predicts each
framework on each visible GPU with a one-line fix where one is known.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .discover import local
from .envs.current import installed
from .executors.base import PROBE_SOURCE
from .knowledge import tables
from .knowledge.rules import predict, suggest_fix
from .model import FRAMEWORKS


def _proc_driver() -> str | None:
    try:
        return local.driver_from_proc(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _import_facts(framework: str) -> dict:
    """The probe's import stage in a fresh interpreter: versions, CUDA runtime, cuDNN, arch list."""
    with tempfile.TemporaryDirectory() as work:
        result = Path(work) / "result.json"
        subprocess.run([sys.executable, str(PROBE_SOURCE), "--framework", framework, "--result", str(result), "--stages", "import"],
                       capture_output=True, timeout=300)
        try:
            stage = json.loads(result.read_text())["stages"]["import"]
        except (OSError, ValueError, KeyError):
            return {"import_error": "the probe did not report"}
    if not stage.get("ok"):
        error = stage.get("error") or {}
        return {"import_error": f"{error.get('type')}: {error.get('message', '').splitlines()[0] if error.get('message') else ''}"}
    return stage.get("facts", {})


def _arch(facts: dict) -> tuple | None:
    archs = facts.get("arch_list")
    if not archs:
        return None
    return ([a for a in archs if a.startswith("sm_")], [a for a in archs if a.startswith("compute_")],
            "the installed build's own arch list (torch.cuda.get_arch_list())")


def doctor() -> dict:
    gpus, source = local.all_gpus()
    driver = gpus[0].driver if gpus else _proc_driver()
    if driver and source == "none":
        source = "/proc/driver/nvidia/version"
    supported = (gpus[0].cuda_driver if gpus and gpus[0].cuda_driver else None) or (
        (tables.driver_cuda(driver) or {}).get("cuda") if driver else None)
    seen = local.read_visible_devices(gpus, os.environ.get("CUDA_VISIBLE_DEVICES"))
    frameworks = []
    present = [(fw, found) for fw in FRAMEWORKS if (found := installed(fw))]
    with ThreadPoolExecutor(max_workers=4) as pool:
        facts = list(pool.map(lambda item: _import_facts(item[0]), present))
    for (framework, (version, variant)), fw_facts in zip(present, facts):
        cpu_only = framework == "torch" and not fw_facts.get("import_error") and not fw_facts.get("cuda_runtime")
        frameworks.append({"framework": framework, "version": fw_facts.get("version", version), "variant": variant,
                           "cuda_runtime": fw_facts.get("cuda_runtime"), "cudnn": fw_facts.get("cudnn"),
                           "arch_list": fw_facts.get("arch_list"), "import_error": fw_facts.get("import_error"),
                           "note": "a CPU-only build: it cannot use any GPU" if cpu_only else None})
    verdicts = []
    for fw in frameworks:
        for gpu in local.gpu_classes(seen["gpus"]):
            if fw["import_error"]:
                verdicts.append({"framework": fw["framework"], "gpu": gpu.name, "cc": gpu.cc, "verdict": "fail", "code": "IMPORT_FAILED",
                                 "stage": "import", "reason": fw["import_error"], "warnings": [], "fix": None})
                continue
            release = fw["version"] if fw["framework"] != "cuda-runtime" else (fw["cuda_runtime"] or fw["version"])
            p = predict(fw["framework"], release, fw["variant"], gpu.cc, driver, cuda_runtime=fw["cuda_runtime"],
                        arch=_arch(fw) if fw["framework"] == "torch" else None)
            deciding = next((r for r in p.reasons if r.verdict == p.verdict), p.reasons[0] if p.reasons else None)
            verdicts.append({"framework": fw["framework"], "gpu": gpu.name, "cc": gpu.cc, "verdict": p.verdict, "code": p.code,
                             "stage": p.stage, "reason": deciding.text if deciding else "", "warnings": p.warnings,
                             "fix": suggest_fix(fw["framework"], release, gpu.cc, driver, p)})
    if not driver:
        summary = "no NVIDIA driver on this machine (no NVML, no nvidia-smi, no /proc/driver/nvidia/version): no GPU can be used here"
    elif not gpus:
        summary = f"driver {driver} is loaded but lists no GPU"
    elif not seen["gpus"] and not seen["mig"]:
        summary = f"{len(gpus)} GPU(s) present, none visible: CUDA_VISIBLE_DEVICES={seen['value']!r} ({seen['note']})"
    else:
        summary = f"driver {driver} (CUDA {supported}); {seen['note']}"
    return {
        "summary": summary,
        "driver": {"version": driver, "cuda": supported, "source": source},
        "gpus": [{"index": g.index, "uuid": g.uuid, "name": g.name, "cc": g.cc, "memory_mib": g.memory_mib,
                  "mig_mode": g.mig_mode, "mig_devices": list(g.mig_devices)} for g in gpus],
        "cuda_visible_devices": {k: seen[k] for k in ("value", "form", "note")} | {"visible": [g.index for g in seen["gpus"]], "mig": seen["mig"]},
        "python": {"version": sys.version.split()[0], "executable": sys.executable},
        "frameworks": frameworks,
        "verdicts": verdicts,
    }
