"""Knowledge tables and prediction rules: each verdict with its sentence and source."""

import json

import pytest
from packaging.version import Version

from conftest import run_cli
from gpucompat.errors import UserError
from gpucompat.answers.explain import explain
from gpucompat.knowledge import rules, tables
from gpucompat.knowledge.rules import arch_rule, driver_rule, predict_stack, python_rule, toolkit_window_rule


@pytest.mark.parametrize("reported, cc", [
    ("NVIDIA A100-SXM4-40GB", "8.0"), ("Tesla V100-PCIE-16GB", "7.0"), ("NVIDIA H100 80GB HBM3", "9.0"),
    ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA H200", "9.0"), ("Tesla T4", "7.5"), ("NVIDIA A10G", "8.6"),
    ("NVIDIA L40S", "8.9"), ("NVIDIA GeForce GTX 1080 Ti", "6.1"), ("Tesla K40m", "3.5"), ("NVIDIA RTX 6000 Ada Generation", "8.9"),
])
def test_gpu_names_as_drivers_report_them(reported, cc):
    row = tables.gpu(reported)
    assert row is not None and row["cc"] == cc and row["source"]


def test_unknown_gpu_names_are_not_guessed():
    assert tables.gpu("NVIDIA A1000") is None and tables.gpu("AMD Instinct MI300X") is None


def test_driver_to_newest_cuda():
    assert tables.driver_cuda("580.159.04")["cuda"] == "13.0"
    assert tables.driver_cuda("535.104.05")["cuda"] == "12.2"
    assert tables.driver_cuda("470.82.01")["cuda"] == "11.4"
    assert tables.driver_cuda("300.1") is None


@pytest.mark.parametrize("driver, cuda", [
    ("520.56.06", "11.8"),  # older than Table 3's 520.61.05 for 11.8, yet R520: nvidia-smi says CUDA 11.8 (issue 40.3)
    ("550.40.07", "12.4"),  # a beta of R550, older than Table 3's 550.54.14
    ("565.57.01", "12.7"),  # R565: no toolkit, so no Table 3 row at all
    ("450.57", "11.0"), ("510.06", "11.6"), ("575.57.08", "12.9"),
])
def test_a_drivers_cuda_is_its_branchs_as_nvidia_smi_reports_it(driver, cuda):
    row = tables.driver_cuda(driver)
    assert row["cuda"] == cuda and row["source"]
    assert f"driver {driver} supports CUDA {cuda}," in driver_rule(cuda, driver).text


def test_the_branch_table_agrees_with_table_3_and_the_gpu_evidence():
    from pathlib import Path
    import re
    branches = {r["branch"]: r for r in tables.table("driver_branch_cuda")}
    assert tables.driver_cuda("384.69")["cuda"] == "8.0"  # before R410 Table 3's minimum stands: 384.69 failed CUDA 9.0 (tf-027)
    for row in tables.table("cuda_drivers"):  # each toolkit's own driver reports at least that toolkit's CUDA
        if int(row["toolkit_driver_min"].split(".")[0]) < 410:
            continue
        assert Version(branches[row["toolkit_driver_min"].split(".")[0]]["cuda"]) >= Version(row["cuda"]), row["cuda"]
    measured = (Path(__file__).resolve().parent.parent / "docs/evidence/verdicts-h100/verdicts.txt").read_text()
    assert set(re.findall(r"driver_cuda_version: ([0-9.]+)", measured)) == {tables.driver_cuda("580.159.04")["cuda"]}


def test_driver_rule_each_way():
    assert driver_rule("12.1", "535.104.05").verdict == "pass"
    major = driver_rule("13.0", "535.104.05")
    assert (major.verdict, major.code, major.stage) == ("fail", "DRIVER_TOO_OLD", "device") and "580.65.06" in major.text
    compat = driver_rule("12.9", "535.104.05")
    assert compat.verdict == "pass" and "minor-version compatibility" in compat.warning and "525.60.13" in compat.text
    below_floor = driver_rule("11.8", "418.39")
    assert below_floor.code == "DRIVER_TOO_OLD"
    assert driver_rule(None, "535.104.05").verdict == "uncertain"
    assert all(r.source for r in (major, compat, below_floor))


def test_arch_rule_sass_ptx_and_neither():
    assert arch_rule("8.6", ["sm_80"], [], "s").verdict == "pass"  # same major, newer minor
    assert arch_rule("9.0", ["sm_90a"], [], "s").verdict == "pass"
    assert arch_rule("9.1", ["sm_90a"], [], "s").verdict == "fail"  # arch-specific SASS runs on 9.0 only
    jit = arch_rule("9.0", ["sm_80"], ["compute_80"], "s")
    assert jit.verdict == "pass" and "PTX JIT" in jit.warning
    too_new = arch_rule("9.0", ["sm_80"], ["compute_80"], "s", build_cuda="12.8", driver="535.104.05")
    assert (too_new.verdict, too_new.code) == ("fail", "PTX_TOOLCHAIN_TOO_NEW")
    none = arch_rule("12.0", ["sm_80", "sm_90"], [], "s")
    assert (none.verdict, none.code, none.stage) == ("fail", "ARCH_UNSUPPORTED", "compute") and "sm_120" in none.text
    assert arch_rule("8.0", None, None, "").verdict == "uncertain"


def test_family_sass_runs_on_later_minors_of_its_family_but_arch_specific_does_not():
    # CUDA 12.9 family targets: sm_100f runs on 10.0 and 10.3 (B200, B300); sm_100a on 10.0 only
    assert arch_rule("10.3", ["sm_100f"], [], "s").verdict == "pass"
    assert arch_rule("10.3", ["sm_100a"], [], "s").code == "ARCH_UNSUPPORTED"
    assert arch_rule("12.1", ["sm_120f"], [], "s").verdict == "pass"
    assert arch_rule("12.0", ["sm_100f"], [], "s").code == "ARCH_UNSUPPORTED"  # another family


def test_ptx_suffixes_limit_what_the_driver_can_jit():
    arch_specific = arch_rule("10.0", ["sm_90a"], ["compute_90a"], "s")
    assert arch_specific.code == "ARCH_UNSUPPORTED" and "do not carry over" in arch_specific.text
    assert arch_rule("9.0", [], ["compute_90a"], "s").verdict == "pass"
    assert arch_rule("10.3", [], ["compute_100f"], "s").verdict == "pass"
    assert arch_rule("12.0", [], ["compute_100f"], "s").code == "ARCH_UNSUPPORTED"
    assert arch_rule("12.0", [], ["compute_90"], "s").verdict == "pass"  # plain PTX is forward compatible


def test_toolkit_window_looks_at_every_target():
    # CUDA 11.7's newest target is sm_87: it cannot build SASS for a Hopper GPU, only PTX of an older target
    hopper = toolkit_window_rule("11.7", "9.0")
    assert hopper.verdict == "uncertain" and "cannot build SASS for sm_90" in hopper.text
    # CUDA 13.0 dropped Xavier (7.2) and everything below 7.5
    assert toolkit_window_rule("13.0", "7.2").code == "ARCH_UNSUPPORTED"
    assert "can build for sm_90" in toolkit_window_rule("11.8", "9.0").text


def test_a_torch_variant_the_tables_do_not_cover_is_uncertain_not_never_built():
    rocm = predict_stack("torch", "2.4.1+rocm6.1", "rocm6.1", "9.0", "550.54.14")
    assert rocm.verdict == "uncertain" and "CUDA builds only" in rocm.reasons[0].text
    # a CUDA variant missing from a release whose sources list all its CUDA builds is known not to exist
    assert predict_stack("torch", "2.4.1+cu130", "cu130", "9.0", "580.65.06").code == "ENV_UNRESOLVABLE"


def test_confidence_is_read_a_low_confidence_row_decides_nothing():
    # CUDA 13.3's driver minimum comes from one third-party page (cuda_drivers.csv, confidence low)
    assert tables.cuda_row("13.3")["confidence"] == "low"
    on_610 = driver_rule("13.3", "610.43.02")
    assert on_610.verdict == "pass" and on_610.confidence == "high"  # settled by the 13.x compatibility floor instead
    low = rules.weighed(rules.Reason("r", "fail", "t", "s", "DRIVER_TOO_OLD", "device"), "low")
    assert (low.verdict, low.code, low.confidence) == ("uncertain", None, "low")
    medium = predict_stack("torch", "1.8.1+cu111", "cu111", "8.6", "535.104.05")
    assert (medium.verdict, medium.confidence) == ("pass", "medium")  # its arch list is from a medium-confidence builder read


def test_python_windows_come_from_pypi_file_lists():
    assert predict_stack("torch", "2.9.0+cu128", "cu128", "8.0", "570.86.10", "3.9").code == "ENV_UNRESOLVABLE"
    assert predict_stack("torch", "2.1.2+cu118", "cu118", "8.0", "570.86.10", "3.12").code == "ENV_UNRESOLVABLE"
    assert predict_stack("torch", "2.1.2+cu118", "cu118", "8.0", "570.86.10", "3.11").verdict == "pass"
    assert predict_stack("tensorflow", "2.15.0", "and-cuda", "8.0", "570.86.10", "3.12").code == "ENV_UNRESOLVABLE"
    assert predict_stack("cupy", "13.3.0", "cuda12x", "8.0", "570.86.10", "3.8").code == "ENV_UNRESOLVABLE"
    beyond = rules.wheel_rule("torch", "9.0.0", "3.12")
    assert beyond.verdict == "uncertain" and "newer than the file list" in beyond.text


def test_toolkit_window_and_python():
    assert toolkit_window_rule("12.2", "3.5").code == "ARCH_UNSUPPORTED"
    assert toolkit_window_rule("13.0", "6.1").code == "ARCH_UNSUPPORTED"
    assert toolkit_window_rule("12.2", "8.0").verdict == "uncertain"
    assert python_rule("TF", "3.12", "3.9-3.11", "s").code == "ENV_UNRESOLVABLE"
    assert python_rule("TF", "3.10", "2.7, 3.5-3.7", "s").verdict == "fail"
    assert python_rule("TF", "3.6", "2.7, 3.5-3.7", "s").verdict == "pass"


@pytest.mark.parametrize("args, verdict, code", [
    (("torch", "2.4.1", "default", "8.0", "535.104.05"), "pass", None),
    (("torch", "2.4.1", "default", "12.0", "570.86.10"), "fail", "ARCH_UNSUPPORTED"),   # RTX 5090 with a cu121 build
    (("torch", "2.7.0+cu128", "default", "12.0", "570.86.10"), "pass", None),
    (("torch", "2.11.0", "default", "9.0", "535.104.05"), "fail", "DRIVER_TOO_OLD"),  # cu130 on an R535 driver
    (("torch", "2.11.0", "default", "7.0", "580.159.04"), "fail", "ARCH_UNSUPPORTED"),  # V100 dropped from cu130
    (("torch", "2.4.1", "cpu", "8.0", "535.104.05"), "fail", "NO_DEVICE"),
    # R535 does not drive Kepler (R470 is its last branch): the GPU is not there before its missing sm_37 matters
    (("tensorflow", "2.15.0", "and-cuda", "3.7", "535.104.05"), "fail", "NO_DEVICE"),
    (("tensorflow", "2.15.1", "and-cuda", "8.0", "535.104.05"), "pass", None),  # 2.15.0 itself does not install (tests/test_installs.py)  # sm_80 in its wheel (docs/evidence/wheels)
    (("tensorflow", "2.15.1", "and-cuda", "12.0", "570.86.10"), "pass", None),  # compute_80 PTX JIT-compiled (2.15 predates the known defect)
    (("tensorflow", "2.17.0", "and-cuda", "12.0", "570.86.10"), "fail", "ARCH_UNSUPPORTED"),  # known defect: PTX JIT fails on sm_120
    (("tensorflow", "2.15.0", "plain", "8.0", "535.104.05"), "uncertain", None),  # plain tensorflow brings no CUDA libraries
    (("jax", "0.8.0", "cuda13", "7.0", "580.65.06"), "fail", "ARCH_UNSUPPORTED"),
    (("jax", "0.8.0", "cuda13", "9.0", "535.104.05"), "fail", "DRIVER_TOO_OLD"),
    (("cuda-runtime", "13.5", "default", "9.0", "580.159.04"), "pass", None),  # seen on the H200: docs/evidence
    (("torch", "0.4.1", "default", "8.0", "535.104.05"), "uncertain", None),
])
def test_predictions(args, verdict, code):
    prediction = predict_stack(*args)
    assert (prediction.verdict, prediction.code) == (verdict, code), [r.text for r in prediction.reasons]
    assert prediction.reasons and all(r.text for r in prediction.reasons)


def test_explain_object_has_the_documented_fields():
    result = explain("torch==2.4.1", "NVIDIA GeForce RTX 5090", None, "570.86.10", "3.11")
    assert set(result) == {"spec", "asked", "notes", "target", "verdict", "code", "stage", "confidence", "warnings", "reasons", "resolved",
                           "nearest", "source", "decided_by", "predicted", "observed", "disagreement"}  # issue 24: observation first
    assert result["source"] == "rule" and result["observed"] is None  # no store was given
    assert (result["verdict"], result["code"], result["stage"]) == ("fail", "ARCH_UNSUPPORTED", "compute")
    assert result["target"]["cc"] == "12.0" and result["resolved"]["cuda_runtime"] == "12.1"
    assert all(set(r) == {"rule", "verdict", "text", "source", "confidence"} for r in result["reasons"])


@pytest.mark.parametrize("args, message", [
    (("torch==2.4.1", None, "eight", "535.104.05"), "not a compute capability"),
    (("torch==2.4.1", None, "8.0", "latest"), "not a driver version"),
    (("torch==2.4.1", "NVIDIA H100", "9.0", "535.104.05"), "one of them"),
    (("torch<0.1", None, "8.0", "535.104.05"), "no torch release the knowledge holds satisfies"),
    (("pyторch==2.4.1", None, "8.0", "535.104.05"), "not a stack spec"),
    (("tensorflowz==2.4.1", None, "8.0", "535.104.05"), "unknown framework"),
])
def test_explain_errors(args, message):
    with pytest.raises(UserError, match=message):
        explain(*args)


def test_explain_cli_json_and_text():
    # the 0.4.35 plugin has SASS up to sm_90 and PTX compute_90 (as 0.4.30's wheel, docs/evidence/wheels) and its XLA
    # targets sm_100 (xla_targets.csv): a B200 runs its kernels by PTX JIT
    data = json.loads(run_cli("explain", "jax[cuda12]==0.4.35", "--cc", "10.0", "--driver", "570.86.10", "--json", check=0).stdout)
    assert data["verdict"] == "pass" and any("PTX JIT" in w for w in data["warnings"])
    text = run_cli("explain", "cuda-runtime==13.0", "--gpu", "Tesla V100-PCIE-16GB", "--driver", "535.104.05", check=0).stdout
    assert "FAIL DRIVER_TOO_OLD" in text and "Sources" in text and "[1] https://" in text
    bad = run_cli("explain", "torch==2.4.1", "--gpu", "x" * 500, "--driver", "535.104.05")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr


def test_an_unknown_gpu_name_is_uncertain_and_the_cc_free_rules_still_judge():
    unknown = explain("torch==2.4.1", "NVIDIA Fantasy 9000", None, "535.104.05")
    assert unknown["verdict"] == "uncertain" and unknown["target"]["cc"] is None
    assert any(r["text"] == "the GPU's compute capability is not known" for r in unknown["reasons"])
    # what does not depend on the GPU is still known: no torch 2.9 wheel for Python 3.9
    assert explain("torch==2.9.0", "NVIDIA Fantasy 9000", None, "570.86.10", "3.9")["code"] == "ENV_UNRESOLVABLE"
    assert explain("torch==2.11.0", "NVIDIA Fantasy 9000", None, "535.104.05")["code"] == "DRIVER_TOO_OLD"


def test_known_defects_fail_a_release_the_minimums_would_pass():
    # CuPy 13.0.0's reductions need sm_70 (cupy#8184); 13.1.0 and a V100 are not affected
    defect = predict_stack("cupy", "13.0.0", "cuda12x", "6.1", "550.54.14")
    assert defect.code == "COMPUTE_ERROR" and any("github.com/cupy/cupy/issues/8184" in r.source for r in defect.reasons)
    assert predict_stack("cupy", "13.1.0", "cuda12x", "6.1", "550.54.14").verdict == "pass"
    assert predict_stack("cupy", "13.0.0", "cuda12x", "7.0", "550.54.14").verdict == "pass"
    # a defect tied to a compute capability cannot be ruled out without one
    unknown = predict_stack("cupy", "13.0.0", "cuda12x", None, "550.54.14")
    assert any(r.rule == "known defect" and r.verdict == "uncertain" for r in unknown.reasons)
    assert rules.within(Version("2.20.0.dev20250314"), ">=2.16,<2.21") and not rules.within(Version("2.21.0"), ">=2.16,<2.21")
    assert all(row["source"].startswith("https://") for row in tables.table("known_defects"))


def test_jax_extras_that_did_not_exist_yet_or_any_more_install_the_cpu_build():
    early = predict_stack("jax", "0.4.20", "cuda12", "8.0", "550.54.14")  # jax[cuda12] began with 0.4.22
    assert (early.code, early.stage) == ("NO_DEVICE", "device") and "pip ignores an unknown extra" in early.reasons[0].text
    retired = predict_stack("jax", "0.6.0", "cuda11_pip", "8.0", "550.54.14")  # the cuda11 extras ended with 0.4.25
    assert retired.code == "NO_DEVICE"
    assert predict_stack("jax", "0.4.20", "cuda12_pip", "8.0", "550.54.14").verdict == "pass"
    assert rules.never_built("jax", "0.4.20", "cuda12") and rules.never_built("jax", "0.4.30", "cuda12") is None


def test_tensorflow_arch_lists_come_from_its_wheels():
    # TF 2.15's wheel: SASS sm_50..sm_80, PTX compute_80 (docs/evidence/wheels); 2.17 dropped Maxwell
    assert predict_stack("tensorflow", "2.15.1", "and-cuda", "5.2", "550.54.14").verdict == "pass"
    assert predict_stack("tensorflow", "2.17.0", "and-cuda", "5.2", "550.54.14").code == "ARCH_UNSUPPORTED"
    kepler = predict_stack("tensorflow", "2.15.0", "and-cuda", "3.7", "535.104.05")  # R535 does not drive Kepler, and no sm_37
    architecture = next(r for r in kepler.reasons if r.rule == "architecture")
    assert kepler.code == "NO_DEVICE" and architecture.code == "ARCH_UNSUPPORTED" and "sm_37" in architecture.text
    # before 2.14, TensorFlow loads CUDA from the system: a pass says so
    old = predict_stack("tensorflow", "2.10.0", "plain", "8.0", "535.104.05")
    assert old.verdict == "pass" and any("installed on the system" in w for w in old.warnings)
