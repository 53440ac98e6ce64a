"""Verdicts on real, shared and faulty GPU nodes: the GPU's own state (probe/gpustate.py, read by
gpu_state.py) decides before any error text, and a failing library is judged by its own fat binary.

Three kinds of evidence, none invented:
- probe records from a real H100 (tests/data/gpu_state/, taken from docs/evidence/gpu-state-h100/):
  the GPU to itself, shared with a process computing, and with another process holding 78.9 GiB;
- faults that cannot be caused on a lent GPU, from public records (each cited where it is used),
  written into those real records;
- a stand-in libnvidia-ml.so.1 built here with gcc (tests/nvml_stub/nvml_stub.c) that answers with
  NVML's own struct layouts, so the probe's ctypes binding is run for real, and a stand-in cuBLAS
  whose .nv_fatbin section the probe reads back from /proc/self/maps.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, build_nvml, run_against_nvml, run_cli
from gpucompat import gpu_state
from gpucompat.analysis import classify
from gpucompat.model import Observation, ResolvedStack, Stack
from gpucompat.probe import libraries
from test_inspect import fatbin_entry
from test_probe_rungs import fake_cupy, rungs  # noqa: F401 (fake_cupy is a fixture)
from gpucompat.probe.fatbin import ARCH_SPECIFIC, KIND_ELF, KIND_PTX  # noqa: F401

DATA = REPO / "tests" / "data" / "gpu_state"
UUID = "GPU-19c77ad6-1006-0d65-b7ac-5e54182e8341"


def record(name: str) -> dict:
    return json.loads((DATA / f"h100-{name}.json").read_text())


def verdict(facts: dict, framework: str = "torch", **observation):
    stack = Stack(framework, "installed", "installed", "current", "current")
    return classify(ResolvedStack(stack, ok=True), Observation(**{"facts": facts, "returncode": 1, **observation}))


def failing(facts: dict, message: str, stage: str = "compute", rung: str = "blas", error_type: str = "RuntimeError") -> dict:
    """A real record whose `stage` now fails in `rung` with `message` (the probe's own shape for it)."""
    facts = copy.deepcopy(facts)
    record_ = facts["stages"][stage]
    error = {"type": error_type, "message": message}
    record_.update(ok=False, error=error)
    if stage == "compute":
        names = [r["name"] for r in record_["facts"]["rungs"]]
        at = names.index(rung)
        record_["facts"]["rungs"] = record_["facts"]["rungs"][:at] + [{"name": rung, "ok": False, "error": error}]
        record_["facts"]["failed_rung"] = rung
    for later in list(facts["stages"])[list(facts["stages"]).index(stage) + 1:]:
        del facts["stages"][later]
    return facts


# --- the H100 records: busy, shared, clean ------------------------------------------------------

@pytest.mark.parametrize("framework", ["torch", "jax", "cupy"])
def test_another_process_holding_the_memory_is_could_not_test_gpu_busy_never_the_stack(framework):
    facts = record(f"busy-{framework}")
    outcome = verdict(facts, framework)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "gpu-busy"), outcome.summary
    assert "pid 3800 (python3, 78.9 GiB)" in outcome.summary and "298 MiB of 79.6 GiB free" in outcome.summary
    assert UUID in outcome.summary and "PCI 00000000:00:06.0" in outcome.summary
    assert outcome.evidence["gpu"]["others"][0]["used_mib"] == 80772


def test_without_the_gpu_state_the_same_failure_was_blamed_on_the_stack():
    """What the issue measured before this change: an out-of-memory on a busy GPU read as COMPUTE_ERROR."""
    facts = record("busy-torch")
    assert "out of memory" in facts["stages"]["compute"]["error"]["message"]
    del facts["gpu_state"]
    assert verdict(facts).code == "COMPUTE_ERROR"


@pytest.mark.parametrize("framework", ["torch", "jax", "cupy"])
def test_a_process_computing_beside_the_job_leaves_a_pass_that_names_it(framework):
    outcome = verdict(record(f"shared-{framework}"), framework, returncode=0)
    assert outcome.code == "PASS"
    note = [w for w in outcome.warnings if w.startswith("GPU state:")]
    assert note and "1 other process on the GPU" in note[0] and "836 MiB" in note[0]


def test_the_gpu_to_itself_passes_with_every_library_rung_and_no_note():
    outcome = verdict(record("clean-torch"), returncode=0)
    assert outcome.code == "PASS" and not [w for w in outcome.warnings if w.startswith("GPU state:")]
    libs = {lib["rung"]: lib for lib in outcome.evidence["libraries"]}
    assert list(libs) == ["blas", "cudnn", "cufft", "cusolver", "cusparse", "nccl"]
    assert all(lib["ok"] and lib["files"] for lib in libs.values())
    assert libs["cufft"]["files"][0]["path"].endswith("libcufft.so.12")
    assert outcome.evidence["gpu"]["uuid"] == UUID and outcome.evidence["gpu"]["others"] == []


def test_an_out_of_memory_with_nobody_else_on_the_gpu_is_not_gpu_busy():
    facts = failing(record("clean-torch"), "CUDA error: out of memory", rung="elementwise")
    assert verdict(facts).code == "COMPUTE_ERROR"


def test_the_bench_running_out_of_memory_on_a_shared_gpu_is_a_warning_with_the_figures_kept():
    facts = record("busy-torch")
    facts["stages"]["compute"] = record("clean-torch")["stages"]["compute"]
    facts["stages"]["bench"] = {"ok": False, "error": {"type": "OutOfMemoryError", "message": "CUDA out of memory. Tried to allocate 512.00 MiB"},
                                "facts": {"figures": []}}
    outcome = verdict(facts, returncode=1)
    assert outcome.code == "PASS"
    assert any("the bench rung could not finish: other processes held the GPU's memory: pid 3800" in w for w in outcome.warnings)


# --- faults from public records, written into the real H100 records -----------------------------

def with_state(facts: dict, events=(), after: dict | None = None, before: dict | None = None) -> dict:
    facts = copy.deepcopy(facts)
    state = facts["gpu_state"]
    state["events"] = list(events)
    state["after"].update(after or {})
    state["before"].update(before or {})
    return facts


def test_xid_79_and_a_lost_gpu_are_gpu_fault_naming_what_to_drain():
    # akash-network/support#209: "NVRM: Xid (PCI:0000:a1:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."
    # then NVML answers ERROR_GPU_IS_LOST (leptonai/gpud#604)
    facts = with_state(failing(record("clean-torch"), "CUDA error: unspecified launch failure"),
                       events=[{"type": "xid", "xid": 79, "t_s": 0.4}], after={"lost": True})
    outcome = verdict(facts)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "gpu-fault")
    assert "Xid 79 (GPU has fallen off the bus)" in outcome.summary and "NVML reports the GPU lost" in outcome.summary
    assert f"drain node vm, {UUID}, PCI 00000000:00:06.0" in outcome.summary


def test_a_process_killed_mid_compute_after_a_double_bit_error_is_gpu_fault_not_crashed():
    # Xid 48, NVIDIA/gpu-operator#1146: "An uncorrectable double bit error (DBE) has been detected on GPU"
    facts = with_state(record("clean-torch"), events=[{"type": "xid", "xid": 48, "t_s": 1.0}])
    facts["finished"], facts["current_stage"] = False, "compute"
    facts["stages"]["compute"]["running"] = True
    outcome = verdict(facts, returncode=None, signal=6)
    assert (outcome.code, outcome.cause) == ("UNTESTED", "gpu-fault") and "Xid 48 (double-bit ECC error)" in outcome.summary
    assert verdict(record("clean-torch") | {"finished": False, "current_stage": "compute"}, returncode=None, signal=6).code == "CRASHED"


def test_an_illegal_address_with_only_the_programs_own_xid_31_stays_the_stacks():
    # captured on the lent H100 (research for this issue): a kernel's write to 0xdead0000 raised
    # "NVRM: Xid (PCI:0000:00:06): 31, pid=801, name=python3, ... MMU Fault ... FAULT_PDE ACCESS_TYPE_VIRT_WRITE";
    # NVIDIA's Xid catalogue sends 31 to the application first (RESTART_APP, "debug the user application")
    facts = with_state(failing(record("clean-cupy"), "cudaErrorIllegalAddress: an illegal memory access was encountered"),
                       events=[{"type": "xid", "xid": 31, "t_s": 0.2}])
    outcome = verdict(facts, "cupy")
    assert outcome.code == "COMPUTE_ERROR"
    assert "Xid 31 (GPU memory page fault)" in gpu_state.note(facts)


def test_uncorrectable_ecc_errors_that_appear_during_the_job_are_gpu_fault():
    # NVIDIA's dynamic page retirement guide: a DBE is reported to the application and counted as uncorrectable
    facts = with_state(failing(record("clean-torch"), "CUDA error: uncorrectable ECC error encountered"),
                       before={"ecc": {"enabled": True, "volatile_uncorrected": 0, "aggregate_uncorrected": 0}},
                       after={"ecc": {"enabled": True, "volatile_uncorrected": 2, "aggregate_uncorrected": 2}})
    outcome = verdict(facts)
    assert outcome.cause == "gpu-fault" and "volatile count 0 -> 2" in outcome.summary


def test_a_pending_row_remap_is_a_note_never_a_fault():
    # nvidia-smi -q of an A100 after Xid 63 (stas00/ml-engineering debug.md): "Remapped Rows ... Pending : Yes";
    # NVIDIA: "unaffected applications can continue running ... and new workloads can be launched"
    rows = {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False}
    outcome = verdict(with_state(record("clean-torch"), after={"remapped_rows": rows}), returncode=0)
    assert outcome.code == "PASS" and any("remapped rows pending" in w for w in outcome.warnings)
    failed = verdict(with_state(failing(record("clean-torch"), "CUDA error: unknown error"),
                                after={"remapped_rows": {**rows, "failure": True}}))
    assert failed.cause == "gpu-fault" and "row remapping failed" in failed.summary


def test_compute_mode_prohibited_is_no_device_a_site_setting():
    # pytorch/pytorch#100691: is_available() True, then "CUDA error: CUDA-capable device(s) is/are busy or unavailable"
    facts = with_state(failing(record("clean-torch"), "CUDA error: CUDA-capable device(s) is/are busy or unavailable",
                               rung="elementwise"), before={"compute_mode": "prohibited"})
    outcome = verdict(facts)
    assert outcome.code == "NO_DEVICE" and "compute mode is Prohibited" in outcome.summary and "not the stack" in outcome.summary


def test_exclusive_process_held_by_another_is_gpu_busy():
    # NVIDIA/DIGITS#2005: "all CUDA-capable devices are busy or unavailable" on a GPU in "E. Process" mode
    facts = with_state(failing(record("shared-torch"), "CUDA error: all CUDA-capable devices are busy or unavailable",
                               rung="elementwise"), before={"compute_mode": "exclusive_process"})
    outcome = verdict(facts)
    assert outcome.cause == "gpu-busy" and "Exclusive_Process" in outcome.summary and "pid 3451" in outcome.summary


# --- a failing library judged by its own fat binary -------------------------------------------

def fatbin(*entries: bytes) -> bytes:
    import struct

    body = b"".join(entries)
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body)) + body


def library_failure(sass: list[int], ptx: list[tuple[int, int]], message: str, cc: str = "9.0") -> dict:
    """The clean torch record with its cuBLAS rung failed, the library's kernels as the probe reads them."""
    facts = failing(record("clean-torch"), message)
    facts["stages"]["device"]["facts"]["devices"][0]["cc"] = cc
    rung = facts["stages"]["compute"]["facts"]["rungs"][-1]
    rung["library"] = {"name": "libcublas", "files": [{"path": "/site/nvidia/cu12/lib/libcublasLt.so.12", "version": "12"}],
                       "archs": {"sass": [f"sm_{s}" for s in sass], "ptx": [f"compute_{p}" for p, _ in ptx],
                                 "ptx_isa": [isa for _, isa in ptx] and [f"{isa // 10}.{isa % 10}" for _, isa in ptx],
                                 "entries": len(sass) + len(ptx)}}
    return facts


def test_a_library_without_kernels_for_the_gpu_is_arch_unsupported_whatever_its_status_string_says():
    facts = library_failure([70, 75, 80, 86, 90], [(90, 88)], "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`",
                            cc="12.0")
    facts["stages"]["compute"]["facts"]["rungs"][-1]["library"]["archs"]["ptx"] = []  # only SASS, none of it for sm_120
    outcome = verdict(facts)
    assert outcome.code == "ARCH_UNSUPPORTED" and outcome.summary.startswith("libcublas 12 cannot run on this GPU")
    assert "sm_120" in outcome.summary


def test_a_library_with_kernels_for_the_gpu_leaves_the_error_to_other_evidence():
    facts = library_failure([80, 90], [], "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`")
    outcome = verdict(facts)
    assert outcome.code == "COMPUTE_ERROR"  # the first library that failed, named with its version and file
    assert outcome.summary.startswith("a small op in libcublas 12 (/site/nvidia/cu12/lib/libcublasLt.so.12) failed: RuntimeError")


def forced_jit(facts: dict) -> dict:
    facts["system"].setdefault("cuda_env", {})["CUDA_FORCE_PTX_JIT"] = "1"
    return facts


def test_under_forced_ptx_jit_a_library_with_sass_only_is_named_as_the_variables_doing():
    # cuBLAS 13 has SASS for the H100 and no PTX: fine normally, unable to run when the driver must ignore SASS
    facts = forced_jit(library_failure([75, 80, 90, 100, 120], [], "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"))
    outcome = verdict(facts, framework="cupy")
    # the variable, not the stack: could not test, with what the binary would have needed said after it
    assert (outcome.code, outcome.cause, outcome.evidence["stack_would_be"]) == ("UNTESTED", "env-fault", "ARCH_UNSUPPORTED")
    assert "(CUDA_FORCE_PTX_JIT=1 makes the driver ignore the SASS in every binary" in outcome.summary
    assert "libcublas 12 carries SASS only for this GPU and its PTX (no PTX at all) cannot be compiled for compute capability 9.0" in outcome.summary
    # with PTX that could reach the GPU (cuBLAS 13 carries compute_75 and compute_120, as read on the H100), the variable is still named first
    some_ptx = forced_jit(library_failure([75, 80, 90, 100, 120], [(75, 90), (120, 90)], "CUBLASError: CUBLAS_STATUS_INTERNAL_ERROR"))
    outcome = verdict(some_ptx, framework="cupy")
    assert outcome.cause == "env-fault" and "(CUDA_FORCE_PTX_JIT=1 makes the driver ignore the SASS" in outcome.summary
    assert "carry PTX only for compute_75, compute_120, so every kernel had to be compiled from that PTX" in outcome.summary
    # the same failure without the variable is not blamed on it
    plain = verdict(library_failure([75, 80, 90, 100, 120], [], "CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasCreate(handle)`"),
                    framework="cupy")
    assert plain.code == "COMPUTE_ERROR" and "CUDA_FORCE_PTX_JIT" not in plain.summary


def test_under_forced_ptx_jit_torch_with_sm_90_sass_is_not_said_to_lack_it():
    facts = forced_jit(failing(record("clean-torch"), "CUDA error: no kernel image is available for execution on the device", rung="elementwise"))
    facts["stages"]["import"]["facts"]["arch_list"] = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120", "compute_120"]
    outcome = verdict(facts)
    assert outcome.cause == "env-fault" and "(CUDA_FORCE_PTX_JIT=1 makes the driver ignore the SASS" in outcome.summary
    assert "the build has SASS sm_75, sm_80, sm_86, sm_90, sm_100, sm_120, but its PTX (compute_120) cannot be compiled for compute capability 9.0" in outcome.summary


def test_under_forced_ptx_jit_any_other_compute_failure_still_names_the_variable():
    facts = forced_jit(failing(record("clean-torch"), "CUDA error: an illegal memory access was encountered", rung="elementwise"))
    facts["stages"]["import"]["facts"]["arch_list"] = ["sm_90", "compute_90"]  # its PTX reaches the GPU: the arch list does not explain it
    outcome = verdict(facts)
    assert outcome.cause == "env-fault" and outcome.evidence["stack_would_be"] == "COMPUTE_ERROR"
    assert "CUDA_FORCE_PTX_JIT='1' in the job's environment: the driver ignores the SASS in every binary" in outcome.summary
    assert "unset it, then test again — a small op on the GPU failed: RuntimeError: CUDA error: an illegal memory access" in outcome.summary


def test_library_ptx_newer_than_the_driver_can_jit_is_ptx_toolchain_too_new():
    # PTX ISA 9.1 (CUDA 13.1) for compute_90 only, on the H100's driver 580 (CUDA 13.0)
    facts = library_failure([80], [(90, 91)], "CUDA error: the provided PTX was compiled with an unsupported toolchain.")
    outcome = verdict(facts)
    assert outcome.code == "PTX_TOOLCHAIN_TOO_NEW", outcome.summary


@pytest.fixture(scope="module")
def fake_cublas(tmp_path_factory) -> Path:
    """A real shared object named like cuBLAS with a .nv_fatbin section holding SASS for sm_80 only."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler here (.ci/run installs gcc): the stand-in cuBLAS cannot be built")
    data = fatbin(fatbin_entry(KIND_ELF, 80), fatbin_entry(KIND_ELF, 86))
    work = tmp_path_factory.mktemp("cublas")
    source = work / "cublas.c"
    source.write_text('__attribute__((section(".nv_fatbin"), used)) const unsigned char fatbin[] = {'
                      + ",".join(str(b) for b in data) + "};\nint cublasLtGetVersion(void) { return 120103; }\n")
    library = work / "libcublasLt.so.12"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(library), str(source)], check=True, capture_output=True)
    return library


def test_the_probe_reads_the_fat_binary_of_the_cublas_it_mapped(fake_cupy, fake_cublas, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE_CUBLAS", str(fake_cublas))
    proc, result, calls = fake_cupy("cublas-fails")
    blas = rungs(result["stages"]["compute"])["blas"]
    assert blas["ok"] is False and blas["library"]["files"][0]["path"] == str(fake_cublas)
    assert blas["library"]["archs"]["sass"] == ["sm_80", "sm_86"] and blas["library"]["archs"]["ptx"] == []
    outcome = verdict(result, "cupy")  # the stand-in cupy's GPU is CC 9.0: no kernel of sm_8x runs there
    assert outcome.code == "ARCH_UNSUPPORTED" and "libcublas 12 cannot run on this GPU" in outcome.summary, outcome.summary


def test_a_library_file_that_cannot_be_read_is_named_not_fatal(tmp_path):
    found = libraries.archs([{"path": str(tmp_path / "gone.so")}])
    assert found["entries"] == 0 and "gone.so: FileNotFoundError" in found["unread"][0]


# --- the probe's own NVML binding, against a stand-in libnvidia-ml.so.1 -------------------------

WATCH = """
import json, sys, time
from gpucompat.probe.gpustate import Watch
record = {}
watch = Watch(record).begin()
time.sleep(0.6)
watch.end()
print(json.dumps(record))
"""


def watch_with(folder: Path) -> dict:
    proc = run_against_nvml(WATCH, folder)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_the_nvml_binding_reads_processes_memory_modes_and_ids_with_nvmls_layouts(tmp_path):
    state = watch_with(build_nvml(tmp_path))
    before = state["before"]
    assert before["uuid"] == UUID and before["pci_bus_id"] == "00000000:00:06.0" and before["name"] == "NVIDIA H100 80GB HBM3"
    assert before["processes"] == [{"pid": 3800, "name": "/opt/torch/.venv/bin/python3", "used_mib": 80772, "self": False}]
    assert before["memory"] == {"total_mib": 81559, "free_mib": 298, "used_mib": 81261}
    assert (before["compute_mode"], before["mig_mode"], before["persistence_mode"]) == ("default", "disabled", "enabled")
    assert before["ecc"] == {"enabled": True, "volatile_uncorrected": 0, "aggregate_uncorrected": 0}
    assert before["retired_pages_pending"] is None and before["remapped_rows"]["pending"] is False
    assert before["throttle"] == ["gpu_idle"] and before["lost"] is False and state["events"] == []
    assert state["events_error"] is None


def test_early_r535_drivers_32_byte_process_entries_are_read_whole(tmp_path):
    state = watch_with(build_nvml(tmp_path, "EARLY_R535"))
    assert state["before"]["processes"] == [{"pid": 3800, "name": "/opt/torch/.venv/bin/python3", "used_mib": 80772, "self": False}]


def test_an_xid_while_the_job_runs_is_recorded_and_a_lost_gpu_said(tmp_path):
    state = watch_with(build_nvml(tmp_path, "XID=79", "LOST"))
    assert state["events"][0]["type"] == "xid" and state["events"][0]["xid"] == 79
    assert state["after"]["lost"] is True and state["after"]["uuid"] is None
    facts = {"gpu_state": state, "system": {"hostname": "gpu07"}}
    assert "Xid 79 (GPU has fallen off the bus)" in gpu_state.fault(facts, "")


def test_a_prohibited_gpu_and_a_pending_remap_come_through(tmp_path):
    state = watch_with(build_nvml(tmp_path, "COMPUTE_MODE=2", "REMAP_PENDING"))
    assert state["before"]["compute_mode"] == "prohibited"
    assert state["after"]["remapped_rows"] == {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False}


DOCTOR = """
import json
from gpucompat.doctor import gpu_state_now
print(json.dumps(gpu_state_now()))
"""


def test_doctor_says_the_gpu_cannot_be_tested_now_and_why(tmp_path):
    proc = run_against_nvml(DOCTOR, build_nvml(tmp_path))
    now = json.loads(proc.stdout)
    assert now["testable"] is False and "other processes hold its memory: pid 3800 (python3, 78.9 GiB)" in now["why"]


# --- what a user reads: results, the report, the closing line --------------------------------

@pytest.fixture(scope="module")
def evidence_store(tmp_path_factory):
    import sqlite3

    copy_ = tmp_path_factory.mktemp("store") / "gpu-state.db"
    with sqlite3.connect(REPO / "docs" / "evidence" / "gpu-state-h100" / "gpu-state.db") as src, sqlite3.connect(copy_) as dst:
        src.backup(dst)
    return f"sqlite:///{copy_}"


def test_results_name_the_busy_gpu_and_carry_the_state_and_libraries(evidence_store, tmp_path):
    env = {"COLUMNS": "120", "XDG_DATA_HOME": str(tmp_path)}
    shown = run_cli("results", "--sweep", "3", "--db", evidence_store, env=env)
    assert shown.returncode == 0
    assert f"GPUs busy (other processes held them): node vm, {UUID}, PCI 00000000:00:06.0 (3 cells)" in " ".join(shown.stdout.split())
    data = json.loads(run_cli("results", "--sweep", "1", "--format", "json", "--db", evidence_store, env=env, check=0).stdout)
    torch = next(r for r in data["valid"] if r["framework"] == "torch")
    assert torch["gpu_state"]["uuid"] == UUID and [lib["rung"] for lib in torch["libraries"]][:2] == ["blas", "cudnn"]
    shared = json.loads(run_cli("results", "--sweep", "2", "--format", "json", "--db", evidence_store, env=env, check=0).stdout)
    assert all("1 other process on the GPU" in r["gpu_note"] for r in shared["valid"])


def test_the_html_report_shows_the_state_per_cell_and_lists_busy_gpus(evidence_store, tmp_path):
    out = tmp_path / "report.html"
    run_cli("report", "--sweep", "3", "-o", str(out), "--db", evidence_store, env={"XDG_DATA_HOME": str(tmp_path)}, check=0)
    html = out.read_text()
    assert 'id="gpu-busy"' in html and UUID in html and "GPU state</dt>" in html
