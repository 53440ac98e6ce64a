"""Environment faults are never the stack's: a cell is a stack's verdict only where CUDA can start in the job's
process (DESIGN.md, "Stages and failure codes"). The faults that can be built here without a GPU are built for
real (a stub libcuda on LD_LIBRARY_PATH, a virtual-memory limit, a stand-in NVML that lists a GPU) and run through
the real probe; the rest are judged from recorded facts shaped as the probe writes them."""

import json
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, build_nvml
from gpucompat.analysis import classify
from gpucompat.model import Observation, ResolvedStack, Stack
from gpucompat.probe_build import probe_pyz

H100 = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341"}]
MODULE = "580.159.04"


def build_cuda(tmp_path: Path, folder: str, *defines: str) -> Path:
    """A stand-in libcuda.so.1 (tests/cuda_stub/cuda_stub.c) in tmp_path/folder, for LD_LIBRARY_PATH."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler here (.ci/run installs gcc): the stand-in libcuda cannot be built")
    where = tmp_path / folder
    where.mkdir(parents=True)
    subprocess.run([cc, "-shared", "-fPIC", *[f"-D{d}" for d in defines], "-o", str(where / "libcuda.so.1"),
                    str(REPO / "tests" / "cuda_stub" / "cuda_stub.c")], check=True, capture_output=True)
    return where


def verdict(facts: dict, framework: str = "cupy", returncode: int = 1, signal: int | None = None, stderr: str = ""):
    stack = Stack(framework, "14.0.0", "cuda13x", "3.12", "uv")
    return classify(ResolvedStack(stack, ok=True), Observation(facts=facts, returncode=returncode, signal=signal, stderr=stderr))


STAND_IN_CUPY = '''__version__ = "14.0.0"
class _Runtime:
    def runtimeGetVersion(self): return 13000
    def driverGetVersion(self): return 13000
    def getDeviceCount(self):
        raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
class cuda:
    runtime = _Runtime()
'''


def run_probe(tmp_path: Path, library_path: str, limit_as: int | None = None, env: dict | None = None) -> dict:
    """The real probe.pyz, testing a stand-in cupy that fails at the device stage as CuPy does with no usable GPU."""
    package = tmp_path / "stand-ins" / "cupy"
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(STAND_IN_CUPY)
    result = tmp_path / "result.json"

    def limited():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))

    subprocess.run([sys.executable, str(probe_pyz()), "--framework", "cupy", "--result", str(result)], preexec_fn=limited,
                   env={"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": library_path, "PYTHONPATH": str(package.parent), **(env or {})},
                   capture_output=True, text=True, timeout=120)
    return json.loads(result.read_text())


def test_a_toolkit_stub_on_ld_library_path_is_the_environments_fault_named_with_its_entry(tmp_path):
    nvml = build_nvml(tmp_path)  # NVML lists the H100 of the recorded case
    stubs = build_cuda(tmp_path, "cuda-12.4/lib64/stubs", "INIT=34")
    facts = run_probe(tmp_path, f"{stubs}:{nvml}")
    start = facts["cuda_start"]
    assert (start["init"], start["init_name"]) == (34, "CUDA_ERROR_STUB_LIBRARY")
    assert start["libcuda"][0]["path"] == str(stubs / "libcuda.so.1")
    outcome = verdict(facts)
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "env-fault", "device")
    assert f"the CUDA toolkit's stub ({stubs}/libcuda.so.1)" in outcome.summary
    assert f"found through LD_LIBRARY_PATH entry {stubs}: take it out of LD_LIBRARY_PATH" in outcome.summary
    assert "NO_DEVICE" not in outcome.summary and outcome.evidence["cuda_start"]["init"] == 34


def test_a_failure_no_fact_explains_is_still_the_environments_where_cuinit_failed(tmp_path):
    nvml = build_nvml(tmp_path)
    lib = build_cuda(tmp_path, "opt/odd", "INIT=999")
    facts = run_probe(tmp_path, f"{lib}:{nvml}", limit_as=16 << 30)
    assert facts["cuda_start"]["limits"]["as"] == [16 << 30, 16 << 30]  # the real limit of the job's process
    outcome = verdict(facts)
    assert outcome.cause == "env-fault"
    # here /dev/nvidiactl does not exist: the first fact that explains it is named, before the limit
    assert "the job cannot open the GPU's device nodes: /dev/nvidiactl (missing)" in outcome.summary
    facts["cuda_start"]["nodes"] = {"/dev/nvidiactl": {"exists": True, "open": True}}
    assert "virtual memory is limited to 16.0 GiB (RLIMIT_AS, ulimit -v)" in verdict(facts).summary
    facts["cuda_start"]["limits"] = {}
    assert "cuInit failed in this job's process with CUDA_ERROR_UNKNOWN before any framework ran" in verdict(facts).summary


def test_the_jobs_own_cuda_visible_devices_is_named_and_the_local_pin_never_is(tmp_path):
    nvml = build_nvml(tmp_path)
    lib = build_cuda(tmp_path, "usr/lib", "COUNT=0")
    facts = run_probe(tmp_path, f"{lib}:{nvml}", env={"CUDA_VISIBLE_DEVICES": "3"})
    assert facts["cuda_start"]["count"] == 0
    outcome = verdict(facts)
    assert outcome.cause == "env-fault" and "CUDA_VISIBLE_DEVICES='3' names no GPU on this machine (NVML lists 1 GPU" in outcome.summary
    pinned = run_probe(tmp_path, f"{lib}:{nvml}", env={"CUDA_VISIBLE_DEVICES": "GPU-01061f8c-0000",
                                                       "GPUCOMPAT_PINNED": json.dumps({"CUDA_VISIBLE_DEVICES": None})})
    assert pinned["system"]["pinned"] == {"CUDA_VISIBLE_DEVICES": None}
    outcome = verdict(pinned)
    assert outcome.cause == "env-fault" and "GPU-01061f8c" not in outcome.summary
    pinned["cuda_start"]["nodes"] = {"/dev/nvidiactl": {"exists": True, "open": True}}  # here there are none to open
    outcome = verdict(pinned)
    assert "CUDA started but counts no GPU in this job's process, although NVML lists 1 here" in outcome.summary


def test_no_driver_at_all_is_no_gpu_through_the_real_probe(tmp_path):
    facts = run_probe(tmp_path, str(tmp_path / "nothing"))
    outcome = verdict(facts)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "no-gpu")
    assert "no NVIDIA driver" in outcome.summary and "no kernel module, no libcuda.so.1" in outcome.summary


# Recorded facts: the faults that need a driver to build.

def recorded(start: dict, framework: str = "cupy", stage_failed: str = "device", **system) -> dict:
    record = {"ok": False, "error": {"type": "CUDARuntimeError", "message": "cudaErrorUnknown: unknown error"}, "facts": {}}
    stages = {"import": {"ok": True, "facts": {}}, stage_failed: record}
    if stage_failed == "compute":
        stages["device"] = {"ok": True, "facts": {"devices": [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}], "device_count": 1}}
    return {"framework": framework, "finished": True, "current_stage": "done", "stages": stages,
            "system": {"libcuda": True, "proc_driver_version": f"NVRM version: NVIDIA UNIX x86_64 Kernel Module  {MODULE}",
                       "prefix": "/scratch/envs/abc", "cuda_env": {}, **system},
            "gpu_state": {"gpus": H100}, "cuda_start": {"kernel_module": MODULE, "nodes": {"/dev/nvidiactl": {"exists": True, "open": True}},
                                                         "limits": {}, **start}}


def test_a_libcuda_of_another_release_than_the_kernel_module_names_both_and_where_it_came_from():
    facts = recorded({"init": 803, "init_name": "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
                      "libcuda": [{"path": "/opt/nvidia-575/lib/libcuda.so.575.57.08", "version": "575.57.08"}]},
                     cuda_env={"LD_LIBRARY_PATH": "/opt/nvidia-575/lib:/usr/lib"})
    outcome = verdict(facts)
    assert outcome.cause == "env-fault"
    assert ("the job loaded a libcuda of driver 575.57.08 (/opt/nvidia-575/lib/libcuda.so.575.57.08), but the kernel module is "
            "580.159.04: cuInit answered CUDA_ERROR_SYSTEM_DRIVER_MISMATCH, found through LD_LIBRARY_PATH entry /opt/nvidia-575/lib") in outcome.summary


def test_a_compat_libcuda_the_stack_brought_itself_stays_the_stacks():
    facts = recorded({"init": 804, "init_name": "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
                      "libcuda": [{"path": "/scratch/envs/abc/lib/libcuda.so.590.44.01", "version": "590.44.01"}]})
    outcome = verdict(facts)
    assert outcome.code == "NO_DEVICE" and outcome.cause is None


def test_device_nodes_the_job_cannot_open_are_named():
    facts = recorded({"init": 100, "init_name": "CUDA_ERROR_NO_DEVICE", "libcuda": [{"path": "/usr/lib/libcuda.so.580.159.04", "version": MODULE}],
                      "nodes": {"/dev/nvidiactl": {"exists": True, "open": True},
                                "/dev/nvidia0": {"exists": True, "open": False, "error": "PermissionError: Operation not permitted"}}})
    outcome = verdict(facts)
    assert "the job cannot open the GPU's device nodes: /dev/nvidia0 (PermissionError: Operation not permitted)" in outcome.summary


def test_a_cuda_library_loaded_through_ld_library_path_in_place_of_the_stacks_own_fails_even_at_import():
    facts = recorded({"init": 0, "count": 1}, stage_failed="import", cuda_env={"LD_LIBRARY_PATH": "/sw/cuda/11.2/lib64"})
    facts["stages"]["import"]["error"] = {"type": "ImportError", "message": "undefined symbol: cudaGetDriverEntryPointByVersion"}
    facts["loaded_libraries"] = [{"name": "libcudart", "path": "/sw/cuda/11.2/lib64/libcudart.so.12", "version": "12"}]
    facts["diagnosis"] = {"env_libraries": {"libcudart.so.12": "/scratch/envs/abc/lib/python3.12/site-packages/nvidia/cuda_runtime/lib/libcudart.so.12"}}
    outcome = verdict(facts)
    assert (outcome.cause, outcome.stage) == ("env-fault", "import")
    assert "loaded /sw/cuda/11.2/lib64/libcudart.so.12 through LD_LIBRARY_PATH entry /sw/cuda/11.2/lib64 in place of the stack's own" in outcome.summary
    facts["diagnosis"] = {"env_libraries": {}}  # a stack that carries no libcudart of its own uses the system's as designed
    assert verdict(facts).code == "IMPORT_FAILED"


def test_cuda_started_so_a_framework_failure_stays_the_stacks():
    outcome = verdict(recorded({"init": 0, "init_name": "CUDA_SUCCESS", "count": 1}))
    assert outcome.code == "NO_DEVICE" and outcome.cause is None


def test_jax_aborting_under_forced_ptx_jit_names_the_variable_as_torch_and_cupy_do():
    facts = recorded({"init": 0, "count": 1}, framework="jax", stage_failed="compute", cuda_env={"CUDA_FORCE_PTX_JIT": "1"})
    facts.update(finished=False, current_stage="compute")
    stderr = ("F external/xla/xla/stream_executor/cuda/cuda_executor.cc:212] The binary has no SASS for this GPU's "
              "architecture and no PTX the driver can JIT-compile")
    outcome = verdict(facts, framework="jax", returncode=-6, signal=6, stderr=stderr)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "env-fault")
    assert "CUDA_FORCE_PTX_JIT='1' in the job's environment: the driver ignores the SASS in every binary" in outcome.summary
    assert "the process aborted (was killed by SIGABRT)" in outcome.summary or "SIGABRT" in outcome.summary


def test_jax_platforms_without_cuda_stops_jax_only():
    facts = recorded({"init": 0, "count": 1}, framework="jax", cuda_env={"JAX_PLATFORMS": "cpu"})
    facts["stages"]["device"] = {"ok": False, "reason": "jax has no GPU backend: Unknown backend: 'gpu'", "facts": {"device_count": 0}}
    assert verdict(facts, framework="jax").cause == "env-fault"
    facts["framework"] = "torch"
    assert verdict(facts, framework="torch").code == "NO_DEVICE"


def test_a_driver_that_lists_no_gpu_is_no_gpu():
    facts = recorded({"init": 100, "init_name": "CUDA_ERROR_NO_DEVICE", "libcuda": []})
    facts["gpu_state"] = {"gpus": []}
    outcome = verdict(facts)
    assert outcome.cause == "no-gpu" and "lists no GPU" in outcome.summary


def test_doctor_says_a_probe_can_test_only_after_cuda_started_in_a_process_like_the_probes(tmp_path):
    from conftest import run_cli

    nvml = build_nvml(tmp_path)
    stubs = build_cuda(tmp_path, "cuda/lib64/stubs", "INIT=34")
    env = {"LD_LIBRARY_PATH": f"{stubs}:{nvml}", "GPUCOMPAT_CACHE": str(tmp_path / "cache"), "XDG_DATA_HOME": str(tmp_path / "data")}
    proc = run_cli("doctor", "--json", env=env, check=0)
    report = json.loads(proc.stdout)
    assert report["cuda_start"]["init_name"] == "CUDA_ERROR_STUB_LIBRARY"
    assert report["summary"].startswith("CUDA cannot start in a process of this shell, so no stack can be tested here: the libcuda.so.1")
    assert f"LD_LIBRARY_PATH entry {stubs}" in report["summary"]
    assert report["gpu_state"]["testable"] is False and "stub" in report["gpu_state"]["why"]
    text = run_cli("doctor", env={**env, "COLUMNS": "200"}, check=0).stdout
    assert "a probe can test stacks on it now" not in text and "cannot test stacks on it now" in text
    good = build_cuda(tmp_path, "usr/lib64")  # the same shell with a libcuda that starts
    started = json.loads(run_cli("doctor", "--json", env={**env, "LD_LIBRARY_PATH": f"{good}:{nvml}"}, check=0).stdout)
    assert started["cuda_start"]["count"] == 1 and started["summary"].startswith("driver 580.159.04 (CUDA 13.0)")
    assert "other processes hold its memory" in started["gpu_state"]["why"]  # the stand-in's recorded case: pid 3800 holds 78.9 GiB


def test_an_import_that_ran_out_of_a_virtual_memory_limit_is_the_limits():
    facts = recorded({"init": 0, "count": 1}, stage_failed="import")
    facts["stages"]["import"]["error"] = {"type": "OSError", "message": "libcublasLt.so.13: failed to map segment from shared object"}
    facts["diagnosis"] = {"limits": {"as": [8 << 30, 8 << 30]}, "env_libraries": {}}
    outcome = verdict(facts)
    assert (outcome.cause, outcome.stage) == ("env-fault", "import") and "limited to 8.0 GiB (RLIMIT_AS, ulimit -v)" in outcome.summary
    facts["stages"]["import"]["error"] = {"type": "ModuleNotFoundError", "message": "No module named 'cupy_backends'"}
    assert verdict(facts).code == "IMPORT_FAILED"  # a broken package is the stack's, limit or not


def test_a_stub_reached_through_a_link_in_a_module_directory_names_that_directory(tmp_path):
    nvml = build_nvml(tmp_path)
    real = build_cuda(tmp_path, "cuda-13.0/targets/x86_64-linux/lib/stubs", "INIT=34")
    module = tmp_path / "modules" / "cuda" / "lib64" / "stubs"  # what a module file puts on LD_LIBRARY_PATH, as a link
    module.mkdir(parents=True)
    (module / "libcuda.so.1").symlink_to(real / "libcuda.so.1")
    facts = run_probe(tmp_path, f"{module}:{nvml}")
    assert facts["cuda_start"]["libcuda"][0]["via"] == {"variable": "LD_LIBRARY_PATH", "entry": str(module)}
    assert f"found through LD_LIBRARY_PATH entry {module}: take it out of LD_LIBRARY_PATH" in verdict(facts).summary


def test_jax_crashing_while_another_process_holds_the_gpus_memory_is_gpu_busy():
    # as on the lent H100 (docs/evidence/env-faults-h100): JAX preallocates most of the GPU and died by SIGSEGV
    facts = recorded({"init": 0, "count": 1}, framework="jax", stage_failed="compute")
    facts.update(finished=False, current_stage="compute")
    facts["gpu_state"]["before"] = {"uuid": "GPU-3c15737e", "memory": {"free_mib": 1022, "total_mib": 81559},
                                    "processes": [{"pid": 2757, "name": "python3", "used_mib": 80077}]}
    outcome = verdict(facts, framework="jax", returncode=-11, signal=11)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "gpu-busy") and "pid 2757 (python3, 78.2 GiB)" in outcome.summary
    facts["gpu_state"]["before"]["processes"] = []  # alone on the GPU, the same crash is the stack's
    assert verdict(facts, framework="jax", returncode=-11, signal=11).code == "CRASHED"


def test_the_generic_cuinit_sentence_never_looks_at_this_machines_directories(tmp_path):
    """A job's recorded LD_LIBRARY_PATH is judged by the libraries the job recorded, not by what the same path holds on
    the machine that classifies the result (gpucompat's own, after the job)."""
    here = tmp_path / "lib"
    here.mkdir()
    (here / "libcuda.so.1").write_text("")  # on this machine only
    facts = recorded({"init": 999, "init_name": "CUDA_ERROR_UNKNOWN",
                      "libcuda": [{"path": f"/usr/lib64/libcuda.so.{MODULE}", "version": MODULE}]},
                     cuda_env={"LD_LIBRARY_PATH": str(here), "CUDA_FORCE_PTX_JIT": "0"})
    outcome = verdict(facts)
    assert outcome.cause == "env-fault" and "cuInit failed in this job's process with CUDA_ERROR_UNKNOWN" in outcome.summary
    assert str(here) not in outcome.summary and "LD_LIBRARY_PATH" not in outcome.summary
