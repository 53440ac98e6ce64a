"""Classification from probe facts first, signatures second (facts shaped as the probe writes them)."""

import json

import pytest

from gpucompat.analysis import as_read, classify
from gpucompat.model import FAILURE_CODES, PASS, STAGES, UNTESTED, UNTESTED_CAUSES, Observation, ResolvedStack, Stack

STACK = Stack("torch", "2.4.1", "default", "3.11", "uv", ("torch==2.4.1",))
RESOLVED = ResolvedStack(STACK, ok=True, pins=("torch==2.4.1",), cuda_runtime="12.1")
WITH_DRIVER = {"libcuda": True, "driver_cuda_version": "12.4", "proc_driver_version": "NVRM version: 550.54.15"}


def facts(*stages, system=WITH_DRIVER, finished=True, current="done"):
    return {"system": system, "stages": dict(stages), "finished": finished, "current_stage": current}


def ok(name, **stage_facts):
    return name, {"ok": True, "facts": stage_facts}


def failed(name, message=None, reason=None, error_type="RuntimeError", warnings=(), **stage_facts):
    record = {"ok": False, "facts": stage_facts}
    if message:
        record["error"] = {"type": error_type, "message": message}
    if reason:
        record["reason"] = reason
    if warnings:
        record["warnings"] = list(warnings)
    return name, record


def verdict(probe_facts, **observation):
    outcome = classify(RESOLVED, Observation(facts=probe_facts, returncode=0, **observation))
    assert outcome.code in (PASS, UNTESTED, *FAILURE_CODES) and outcome.stage in STAGES
    assert (outcome.code == UNTESTED) == (outcome.cause is not None)
    return outcome


H100 = {"devices": [{"name": "NVIDIA H100 80GB HBM3", "cc": "9.0"}], "device_count": 1}


def test_pass_records_what_ran():
    outcome = verdict(facts(ok("import", cuda_runtime="12.1"), ok("device", arch_list=["sm_80", "sm_90"], **H100),
                            ok("compute", op="matmul", rel_error=1e-7)))
    assert (outcome.code, outcome.stage) == ("PASS", "compute")
    assert "NVIDIA H100 80GB HBM3" in outcome.summary and not outcome.warnings


def test_pass_under_minor_version_compatibility_and_ptx_jit_warns():
    outcome = verdict(facts(ok("import", cuda_runtime="12.8"), ok("device", arch_list=["sm_80", "compute_80"], **H100),
                            ok("compute", op="matmul", rel_error=1e-7)))
    assert outcome.code == "PASS"
    assert any("minor-version compatibility" in w for w in outcome.warnings)
    assert any("PTX JIT" in w for w in outcome.warnings)


def test_unresolvable_needs_no_observation():
    outcome = classify(ResolvedStack(STACK, ok=False, error="  × No solution found\n  ╰─▶ Because torch==2.4.1 has no wheels with a matching Python ABI tag"), None)
    assert (outcome.code, outcome.stage) == ("ENV_UNRESOLVABLE", "resolve")
    assert outcome.summary.startswith("uv cannot resolve it: Because torch==2.4.1")


@pytest.mark.parametrize("observation, code, stage", [
    (dict(no_match="no node has GPU type a100"), "UNTESTED", "schedule"),
    (dict(install_failed=True, install_log="error: Failed to download torch"), "ENV_INSTALL_FAILED", "install"),
    (dict(install_failed=True, timed_out_stage="install"), "TIMEOUT", "install"),
    (dict(internal="KeyError('x')"), "INTERNAL", "schedule"),
])
def test_before_the_probe(observation, code, stage):
    outcome = classify(RESOLVED, Observation(facts={}, **observation))
    assert (outcome.code, outcome.stage) == (code, stage)


def test_a_job_that_never_started_is_not_scheduled_in_the_schedulers_words():
    """Issue 39 section 2: no verdict on the stack (never invalid, never a surprise); the scheduler's message is kept."""
    said = "sbatch --test-only --gres=gpu:l40s:1: sbatch: error: Invalid generic resource (gres) specification"
    outcome = classify(RESOLVED, Observation(facts={}, no_match=said))
    assert (outcome.code, outcome.cause, outcome.evidence["scheduler"]) == ("UNTESTED", "not-scheduled", said)
    assert outcome.summary == f"could not test: {UNTESTED_CAUSES['not-scheduled']} ({said})"


def test_verdicts_stored_before_their_cause_existed_are_read_as_it():
    """NO_MATCH, and a `current` env whose framework's own module was missing, are read as could not test; a missing module
    the framework needs (not its own) stays the stack's IMPORT_FAILED."""
    old = as_read({"code": "NO_MATCH", "stage": "schedule", "summary": "no node has GPU type v100", "env": "uv", "framework": "torch",
                   "evidence": {"scheduler": "no node has GPU type v100"}})
    assert (old["code"], old["evidence"]["cause"], old["evidence"]["stored_as"]) == ("UNTESTED", "not-scheduled", "NO_MATCH")
    assert old["summary"].endswith("(no node has GPU type v100)")

    def imported(message, env="current"):
        evidence = {"stage_facts": {"ok": False, "error": {"type": "ModuleNotFoundError", "message": message}}}
        return as_read({"code": "IMPORT_FAILED", "stage": "import", "summary": "the framework does not import", "env": env,
                        "framework": "tensorflow", "evidence": json.dumps(evidence)})  # as sqlite3 reads it: JSON text

    assert (imported("No module named 'tensorflow'")["code"], imported("No module named 'tensorflow'")["evidence"]["cause"]) == (
        "UNTESTED", "not-installed")
    assert imported("No module named 'keras'")["code"] == "IMPORT_FAILED"
    assert imported("No module named 'tensorflow'", env="uv")["code"] == "IMPORT_FAILED"  # a uv env was built: the stack's


def test_import_failure():
    outcome = verdict(facts(failed("import", "libcudnn.so.9: cannot open shared object file", error_type="ImportError")))
    assert (outcome.code, outcome.stage) == ("IMPORT_FAILED", "import")
    assert "ImportError: libcudnn.so.9" in outcome.summary


def test_no_driver_is_could_not_test_no_gpu_even_though_cudart_says_insufficient_driver():
    outcome = verdict(facts(ok("import", cuda_runtime="12.4"),
                            failed("device", "cudaErrorInsufficientDriver (35): CUDA driver version is insufficient for CUDA runtime version"),
                            system={"libcuda": False, "proc_driver_version": None}))
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "no-gpu", "device")
    assert "no kernel module, no libcuda.so.1" in outcome.summary


def test_a_cpu_only_build_on_a_machine_without_a_gpu_is_still_the_stacks():
    outcome = verdict(facts(ok("import", cuda_runtime=None), failed("device", reason="CPU-only build", cuda_build=False),
                            system={"libcuda": False, "proc_driver_version": None}))
    assert outcome.code == "NO_DEVICE" and "CPU-only build" in outcome.summary


def test_cpu_only_build_is_no_device_with_that_reason():
    outcome = verdict(facts(ok("import", cuda_runtime=None), failed("device", reason="CPU-only build", cuda_build=False)))
    assert outcome.code == "NO_DEVICE" and "CPU-only build" in outcome.summary


def test_runtime_major_newer_than_driver_is_driver_too_old():
    outcome = verdict(facts(ok("import", cuda_runtime="13.0"),
                            failed("device", "CUDA driver version is insufficient for CUDA runtime version", driver_cuda_version="12.4")))
    assert (outcome.code, outcome.stage) == ("DRIVER_TOO_OLD", "device")
    assert "13.0" in outcome.summary and "12.4" in outcome.summary


def test_driver_too_old_from_the_signature_alone():
    outcome = verdict(facts(ok("import"), failed("device", "The NVIDIA driver on your system is too old (found version 11040)")))
    assert outcome.code == "DRIVER_TOO_OLD"
    assert "upgrade the driver" in outcome.evidence["signature"]["fix"].lower()


def test_driver_present_but_no_device_visible():
    system = {**WITH_DRIVER, "env": {"CUDA_VISIBLE_DEVICES": ""}}
    outcome = verdict(facts(ok("import"), failed("device", reason="torch sees no CUDA device", device_count=0), system=system))
    assert outcome.code == "NO_DEVICE" and "CUDA_VISIBLE_DEVICES=''" in outcome.summary


def test_no_kernel_image_is_arch_unsupported():
    outcome = verdict(facts(ok("import"), ok("device", **H100),
                            failed("compute", "CUDA error: no kernel image is available for execution on the device")))
    assert (outcome.code, outcome.stage) == ("ARCH_UNSUPPORTED", "compute")
    assert outcome.evidence["signature"]["source"]


def test_ptx_from_a_newer_toolchain():
    outcome = verdict(facts(ok("import"), ok("device", **H100),
                            failed("compute", "CUDA error: the provided PTX was compiled with an unsupported toolchain.")))
    assert outcome.code == "PTX_TOOLCHAIN_TOO_NEW"


def test_wrong_numbers_and_other_compute_errors():
    wrong = verdict(facts(ok("import"), ok("device", **H100), failed("compute", reason="differs", rel_error=0.5, tolerance=1e-3)))
    assert wrong.code == "COMPUTE_WRONG" and "0.5" in wrong.summary
    other = verdict(facts(ok("import"), ok("device", **H100), failed("compute", "CUBLAS_STATUS_EXECUTION_FAILED")))
    assert other.code == "COMPUTE_ERROR"


def test_timeout_names_the_stage_and_a_signal_is_a_crash():
    timed = verdict(facts(ok("import"), finished=False, current="device"), timed_out_stage="device")
    assert (timed.code, timed.stage) == ("TIMEOUT", "device")
    crashed = classify(RESOLVED, Observation(facts=facts(ok("import"), finished=False, current="compute"), returncode=-11, signal=11))
    assert (crashed.code, crashed.stage) == ("CRASHED", "compute") and "SIGSEGV" in crashed.summary
    silent = classify(RESOLVED, Observation(facts={}, returncode=-9, signal=9))
    assert silent.code == "CRASHED" and "SIGKILL" in silent.summary


def test_a_probe_that_never_started_is_our_problem_not_the_stacks():
    outcome = classify(RESOLVED, Observation(facts={}, returncode=127, stderr="exec: /envs/x/bin/python: not found"))
    assert outcome.code == "INTERNAL" and "not found" in outcome.summary


# -- crashes with a signature, and what is not the stack's fault (issue 9) -----------------------

JAX_ABORT_STDERR = (
    "E1121 12:00:01.000000 1234 pjrt_stream_executor_client.cc:3045] Execution of replica 0 failed: INTERNAL: "
    "CUDA error: Failed to launch kernel: cudaErrorNoKernelImageForDevice : no kernel image is available\n"
    "Fatal Python error: Aborted\n"
)


def test_an_abort_with_a_signature_gets_the_signature_code_and_keeps_the_signal():
    running = facts(ok("import", version="0.4.30"), ok("device", **H100), finished=False, current="compute")
    outcome = classify(RESOLVED, Observation(facts=running, returncode=-6, signal=6, stderr=JAX_ABORT_STDERR))
    assert (outcome.code, outcome.stage) == ("ARCH_UNSUPPORTED", "compute")
    assert outcome.summary.startswith("the process aborted (was killed by SIGABRT) during the compute stage")
    assert outcome.evidence["signal"] == "SIGABRT"
    assert outcome.evidence["signature"]["pattern"] == "cudaErrorNoKernelImageForDevice"


def test_an_abort_nothing_explains_stays_crashed():
    running = facts(ok("import"), ok("device", **H100), finished=False, current="compute")
    outcome = classify(RESOLVED, Observation(facts=running, returncode=-6, signal=6, stderr="Fatal Python error: Aborted\n"))
    assert (outcome.code, outcome.stage) == ("CRASHED", "compute") and outcome.evidence["signal"] == "SIGABRT"


def test_a_probe_stopped_from_outside_is_untested_interrupted():
    running = facts(ok("import"), finished=False, current="device")
    outcome = classify(RESOLVED, Observation(facts=running, returncode=-15, signal=15))
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "interrupted", "device")


@pytest.mark.parametrize("log, cause", [
    ("error: Failed to install: torch-2.4.1-cp311-cp311-manylinux1_x86_64.whl\n  Caused by: No space left on device (os error 28)", "disk"),
    ("error: No interpreter found for Python 3.8 in managed installations or search path", "python-download"),
    ("error: Failed to download `torch==2.4.1`\n  Caused by: error sending request for url\n  Caused by: dns error", "network"),
    ("error: Failed to fetch: http://127.0.0.1:3141/simple/torch/\n  Caused by: tcp connect error: Connection refused (os error 111)", "index"),
    ("error: Failed to download `torch==2.4.1`\n  Caused by: Network connectivity is disabled, but the requested data wasn't found in the cache", "offline-cache"),
])
def test_an_install_that_could_not_fetch_is_untested_with_its_cause(log, cause):
    outcome = classify(RESOLVED, Observation(facts={}, install_failed=True, install_log=log))
    assert (outcome.code, outcome.stage, outcome.cause) == ("UNTESTED", "install", cause)
    assert outcome.summary.startswith("could not test:") and outcome.evidence["install_log"] == log


def test_an_install_the_stack_broke_is_env_install_failed():
    log = "error: Failed to install: broken-1.0-py3-none-any.whl\n  Caused by: The wheel is invalid: Missing .dist-info directory"
    outcome = classify(RESOLVED, Observation(facts={}, install_failed=True, install_log=log))
    assert (outcome.code, outcome.stage, outcome.cause) == ("ENV_INSTALL_FAILED", "install", None)


def test_a_scheduler_that_lost_the_job_is_untested():
    outcome = classify(RESOLVED, Observation(facts={}, untested=("scheduler", "job 42 ended NODE_FAIL")))
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "scheduler", "schedule")
    assert "NODE_FAIL" in outcome.summary


def test_the_first_failing_rung_is_named():
    outcome = verdict(facts(ok("import"), ok("device", **H100),
                            failed("compute", "CUDA error: no kernel image is available for execution on the device", failed_rung="elementwise")))
    assert outcome.code == "ARCH_UNSUPPORTED" and outcome.summary.endswith("(rung elementwise)")


def test_ptx_the_driver_cannot_load_is_a_warning_when_sass_runs():
    warning = ("PTX from NVRTC 13.5 (PTX ISA 9.5) cannot be JIT-compiled by this driver: cuModuleLoadData: "
               "CUDA_ERROR_UNSUPPORTED_PTX_VERSION (222); its SASS runs")
    outcome = verdict(facts(ok("import"), ok("device", **H100), ("compute", {"ok": True, "facts": {"op": "axpy"}, "warnings": [warning]})))
    assert outcome.code == "PASS"
    assert any(w.startswith("PTX_TOOLCHAIN_TOO_NEW: ") and "NVRTC 13.5" in w for w in outcome.warnings)


def test_signature_table_holds_only_model_codes_and_stages():
    from gpucompat.knowledge import signatures
    from gpucompat.model import Code, Stage

    for row in signatures.signatures():
        assert Code(row.code) not in (Code.PASS, Code.UNTESTED) and Stage(row.stage)


def test_a_signature_with_an_unknown_code_is_refused_at_load(tmp_path, monkeypatch):
    from gpucompat.knowledge import signatures

    bad = tmp_path / "error_signatures.csv"
    bad.write_text("pattern,code,stage,meaning,fix,source\nboom,KERNEL_SAD,compute,m,f,s\n")
    monkeypatch.setattr(signatures, "DATA", bad)
    signatures.signatures.cache_clear()
    try:
        with pytest.raises(ValueError, match="'KERNEL_SAD' is not a failure code of model.Code"):
            signatures.signatures()
    finally:
        signatures.signatures.cache_clear()


# CUDA_VISIBLE_DEVICES naming no GPU that NVML lists (the probe's gpu_state["gpus"] reads NVML whatever the
# variable says): the verdict says which value hid which GPUs, ahead of the error's generic words.
LISTED = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341"}]
NO_DEVICE_ERROR = "cudaErrorNoDevice: no CUDA-capable device is detected"


def hidden(value, gpus=LISTED, message=NO_DEVICE_ERROR):
    probe = facts(ok("import"), failed("device", message, error_type="CUDARuntimeError"),
                  system={**WITH_DRIVER, "cuda_env": {"CUDA_VISIBLE_DEVICES": value}})
    probe["gpu_state"] = {"before": {"error": "nvmlDeviceGetHandleByIndex_v2 returned NVML error 2"}, "gpus": gpus}
    return verdict(probe)


def test_an_index_past_the_last_gpu_is_the_environments_named_with_the_gpus_nvml_lists():
    outcome = hidden("1")
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "env-fault", "device")
    assert ("CUDA_VISIBLE_DEVICES='1' names no GPU on this machine (NVML lists 1 GPU: index 0, "
            "NVIDIA H100 80GB HBM3, GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341): CUDA sees none") in outcome.summary


def test_a_uuid_of_another_machine_is_named_not_the_driver_seeing_no_gpu():
    outcome = hidden("GPU-00000000-1111-2222-3333-444444444444")
    assert outcome.cause == "env-fault"
    assert "CUDA_VISIBLE_DEVICES='GPU-00000000-1111-2222-3333-444444444444' names no GPU on this machine" in outcome.summary
    assert "GPU-19c77ad6" in outcome.summary and "driver sees no GPU" not in outcome.summary


def test_a_first_entry_that_matches_nothing_hides_the_rest_and_an_empty_value_hides_all():
    two = LISTED + [{"index": 1, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-aaaa"}]
    assert "its first entry '7' names no GPU on this machine, so CUDA ignores it and every entry after it (NVML lists 2 GPUs" in hidden("7,0", two).summary
    assert "CUDA_VISIBLE_DEVICES='' (set but empty) hides every GPU on this machine (NVML lists 2 GPUs" in hidden("", two).summary


def test_the_local_executors_own_pin_is_never_quoted_as_the_cause():
    probe = facts(ok("import"), failed("device", reason="jax lists no GPU device", device_count=0),
                  system={**WITH_DRIVER, "cuda_env": {"CUDA_VISIBLE_DEVICES": "GPU-01061f8c-aaaa"},
                          "pinned": {"CUDA_VISIBLE_DEVICES": None}})
    probe["gpu_state"] = {"gpus": LISTED}
    outcome = verdict(probe)
    assert "GPU-01061f8c" not in outcome.summary
    probe["system"]["pinned"] = {"CUDA_VISIBLE_DEVICES": "0,1"}  # the user's value, which the pin replaced, is the one named
    assert "GPU-01061f8c" not in verdict(probe).summary and "'0,1'" in verdict(probe).summary


def test_a_value_that_leaves_a_gpu_visible_or_no_nvml_list_keeps_the_error_s_reason():
    assert "CUDA_VISIBLE_DEVICES" not in hidden("0").summary  # the GPU was visible: something else kept CUDA from it
    assert "GPU-19c" not in hidden("GPU-19c7").summary  # a UUID prefix CUDA accepts
    assert hidden("1", gpus=None).summary.startswith("The driver sees no GPU")  # an older probe recorded no list
    assert "CUDA_VISIBLE_DEVICES" not in hidden("MIG-abc").summary  # MIG instances are not in NVML's GPU list
