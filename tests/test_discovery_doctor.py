"""Local discovery parsers (on output recorded from the H200 run) and `gpucompat doctor`."""

import json
import os
import re
import shlex
import subprocess
import sys

from conftest import REPO, have_torch, run_cli
from gpucompat.discover.local import Gpu, driver_from_proc, gpu_classes, parse_nvidia_smi, read_visible_devices
from gpucompat.knowledge.rules import predict_stack, suggest_fix

H200_SMI = (REPO / "docs" / "evidence" / "gpu-node-h200" / "nvidia-smi.txt").read_text()


def test_nvidia_smi_query_output_from_a_real_h200():
    gpus = parse_nvidia_smi(H200_SMI)
    assert gpus == [Gpu(0, "GPU-60943228-de65-6991-ad8b-d9c80f5f3816", "NVIDIA H200", "9.0", 143771, "580.159.04", None)]
    (target,) = gpu_classes(gpus)
    assert (target.name, target.cc, target.count, target.devices) == ("NVIDIA H200", "9.0", 1, ("GPU-60943228-de65-6991-ad8b-d9c80f5f3816",))


def test_driver_from_proc():
    text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (dvs-builder@U22)\nGCC version:"
    assert driver_from_proc(text) == "580.159.04"
    assert driver_from_proc("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023") == "535.104.05"
    assert driver_from_proc("garbage") is None


GPUS = [Gpu(0, "GPU-aaaa", "NVIDIA A100-SXM4-40GB", "8.0", 40960, "535.104.05", "12.2", False),
        Gpu(1, "GPU-bbbb", "NVIDIA A100-SXM4-40GB", "8.0", 40960, "535.104.05", "12.2", True, ("MIG-1111", "MIG-2222"))]


def test_cuda_visible_devices_in_all_its_forms():
    def read(value):
        seen = read_visible_devices(GPUS, value)
        return seen["form"], [g.index for g in seen["gpus"]], seen["mig"]

    assert read(None) == ("unset", [0, 1], [])
    assert read("") == ("empty", [], [])
    assert read("1,0") == ("indices", [1, 0], [])
    assert read("GPU-bb") == ("uuids", [1], [])  # a unique prefix is enough, as in CUDA
    assert read("MIG-2222") == ("mig", [], ["MIG-2222"])
    assert read("0,5,1") == ("indices", [0], [])  # an entry that matches nothing ends the list
    assert read("-1")[1] == [] and "matches no device" in read_visible_devices(GPUS, "-1")["note"]


def test_fixes_name_what_to_install_instead():
    broken = predict_stack("torch", "2.4.1", "default", "12.0", "570.86.10")
    fix = suggest_fix("torch", "2.4.1", "12.0", "570.86.10", broken)
    assert fix.startswith("pip install 'torch==2.") and "download.pytorch.org/whl/cu12" in fix
    old_driver = predict_stack("cuda-runtime", "13.0", "default", "9.0", "535.104.05")
    assert suggest_fix("cuda-runtime", "13.0", "9.0", "535.104.05", old_driver).startswith("upgrade the NVIDIA driver")
    assert suggest_fix("torch", "2.4.1", "8.0", "535.104.05", predict_stack("torch", "2.4.1", "default", "8.0", "535.104.05")) is None


def test_doctor_on_a_machine_without_a_driver():
    data = json.loads(run_cli("doctor", "--json", env={"CUDA_VISIBLE_DEVICES": "0,GPU-x"}, check=0).stdout)
    assert data["summary"].startswith("no NVIDIA GPU here: no driver")
    assert data["next_step"].startswith("ask without a GPU: gpucompat explain ")
    assert data["cuda_visible_devices"]["form"] == "indices" and data["gpus"] == [] and data["verdicts"] == []
    if have_torch():
        torch = next(f for f in data["frameworks"] if f["framework"] == "torch")
        assert torch["note"] == "a CPU-only build: it cannot use any GPU"
    unset = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    text = subprocess.run([sys.executable, "-m", "gpucompat", "doctor"], capture_output=True, text=True, env={**unset, "COLUMNS": "200"}).stdout
    lines = text.splitlines()
    assert lines[0] == "no NVIDIA GPU here: no driver (no NVML, no nvidia-smi, no /proc/driver/nvidia/version)"
    assert lines[1].startswith("next: ask without a GPU: gpucompat explain torch==2.4.1 --gpu A100")
    assert "CUDA_VISIBLE_DEVICES" not in text and "None" not in text  # unset says nothing where no GPU is to be hidden


def test_the_next_step_doctor_gives_without_a_gpu_answers():
    """The commands doctor suggests on a machine without a GPU run there and answer."""
    from gpucompat.doctor import NO_GPU_NEXT_STEP

    commands = re.findall(r"gpucompat ((?:explain|advise) [^,;]+?)(?:, or |;)", NO_GPU_NEXT_STEP)
    assert len(commands) == 2, commands
    for command in commands:
        words = shlex.split(command)
        run_cli(*words, "--json", check=0)


def test_loading_warnings_name_what_each_variable_does_and_where_that_is_written():
    from gpucompat.knowledge.variables import loading_findings, loading_warnings

    (forced,) = loading_warnings({"CUDA_FORCE_PTX_JIT": "1"})
    assert forced.startswith("CUDA_FORCE_PTX_JIT='1': ") and "JIT-compiles its PTX" in forced
    assert "(source: https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html#cuda-force-ptx-jit)" in forced
    (preload,) = loading_findings({"LD_PRELOAD": "/opt/shim/libfakegpu.so"})
    assert preload["variable"] == "LD_PRELOAD" and "replace any CUDA function" in preload["text"] and "ld.so.8" in preload["source"]
    # set to what changes nothing: no warning
    assert loading_warnings({"CUDA_FORCE_PTX_JIT": "0", "LD_PRELOAD": "", "CUDA_DISABLE_PTX_JIT": "0", "HOME": "/root",
                             "XLA_FLAGS": "--xla_gpu_autotune_level=0", "JAX_PLATFORMS": "cuda,cpu"}) == []
    assert [f["variable"] for f in loading_findings({"CUDA_VISIBLE_DEVICES": "", "JAX_PLATFORMS": "cpu",
                                                     "XLA_FLAGS": "--xla_gpu_cuda_data_dir=/opt/cuda"})] == [
        "CUDA_VISIBLE_DEVICES", "XLA_FLAGS", "JAX_PLATFORMS"]


def test_ld_library_path_warns_only_for_directories_that_hold_a_libcuda_or_libcudart(tmp_path):
    from gpucompat.knowledge.variables import loading_findings, loading_warnings

    stubs, plain, toolkit = tmp_path / "cuda" / "lib64" / "stubs", tmp_path / "plain", tmp_path / "cuda-12.4" / "lib64"
    for directory in (stubs, plain, toolkit):
        directory.mkdir(parents=True)
    (stubs / "libcuda.so").write_bytes(b"")
    (plain / "libfoo.so.1").write_bytes(b"")
    (toolkit / "libcudart.so.12").write_bytes(b"")
    assert loading_warnings({"LD_LIBRARY_PATH": f"{plain}:/does/not/exist"}) == []
    (finding,) = loading_findings({"LD_LIBRARY_PATH": f"{plain}:{stubs}:{toolkit}"})
    assert finding["text"].endswith(f"breaks CUDA: {stubs} (libcuda.so (a stub)); {toolkit} (libcudart.so.12)")


def test_doctor_shows_the_cuda_environment_and_warns_about_what_changes_kernel_loading():
    env = {"CUDA_FORCE_PTX_JIT": "1", "LD_PRELOAD": "libm.so.6", "NCCL_DEBUG": "WARN"}
    data = json.loads(run_cli("doctor", "--json", env=env, check=0).stdout)
    assert data["cuda_env"]["CUDA_FORCE_PTX_JIT"] == "1" and data["cuda_env"]["LD_PRELOAD"] == "libm.so.6"
    assert "NCCL_DEBUG" not in data["cuda_env"]
    assert [w["variable"] for w in data["loading_warnings"]] == ["CUDA_FORCE_PTX_JIT", "LD_PRELOAD"]
    assert all(w["source"].startswith("https://") for w in data["loading_warnings"])
    assert isinstance(data["loaded_libraries"], list)
    assert all(isinstance(f["loaded_libraries"], list) for f in data["frameworks"])
    text = run_cli("doctor", env=env, check=0).stdout
    assert "warning CUDA_FORCE_PTX_JIT='1'" in text and "warning LD_PRELOAD='libm.so.6'" in text
    assert "CUDA environment (what changes kernel loading)" in text
