"""Knowledge tables and prediction rules: each verdict with its sentence and source."""

import json

import pytest

from conftest import run_cli
from gpucompat.errors import UserError
from gpucompat.knowledge import tables
from gpucompat.knowledge.explain import explain
from gpucompat.knowledge.rules import arch_rule, driver_rule, predict, python_rule, toolkit_window_rule


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
    (("tensorflow", "2.15.0", "and-cuda", "3.7", "535.104.05"), "fail", "ARCH_UNSUPPORTED"),
    (("tensorflow", "2.15.0", "and-cuda", "8.0", "535.104.05"), "uncertain", None),  # its arch list is not known
    (("jax", "0.8.0", "cuda13", "7.0", "580.65.06"), "fail", "ARCH_UNSUPPORTED"),
    (("jax", "0.8.0", "cuda13", "9.0", "535.104.05"), "fail", "DRIVER_TOO_OLD"),
    (("cuda-runtime", "13.5", "default", "9.0", "580.159.04"), "pass", None),  # seen on the H200: docs/evidence
    (("torch", "0.4.1", "default", "8.0", "535.104.05"), "uncertain", None),
])
def test_predictions(args, verdict, code):
    prediction = predict(*args)
    assert (prediction.verdict, prediction.code) == (verdict, code), [r.text for r in prediction.reasons]
    assert prediction.reasons and all(r.text for r in prediction.reasons)


def test_explain_object_has_the_documented_fields():
    result = explain("torch==2.4.1", "NVIDIA GeForce RTX 5090", None, "570.86.10", "3.11")
    assert set(result) == {"spec", "target", "verdict", "code", "stage", "warnings", "reasons", "resolved"}
    assert (result["verdict"], result["code"], result["stage"]) == ("fail", "ARCH_UNSUPPORTED", "compute")
    assert result["target"]["cc"] == "12.0" and result["resolved"]["cuda_runtime"] == "12.1"
    assert all(set(r) == {"rule", "verdict", "text", "source"} for r in result["reasons"])


@pytest.mark.parametrize("args, message", [
    (("torch==2.4.1", "NVIDIA Fantasy 9000", None, "535.104.05"), "unknown GPU"),
    (("torch==2.4.1", None, "eight", "535.104.05"), "not a compute capability"),
    (("torch==2.4.1", None, "8.0", "latest"), "not a driver version"),
    (("torch==2.4.1", "NVIDIA H100", "9.0", "535.104.05"), "one of them"),
    (("torch>=2.4", None, "8.0", "535.104.05"), "one exact version"),
    (("pytorch==2.4.1", None, "8.0", "535.104.05"), "unknown framework"),
])
def test_explain_errors(args, message):
    with pytest.raises(UserError, match=message):
        explain(*args)


def test_explain_cli_json_and_text():
    data = json.loads(run_cli("explain", "jax[cuda12]==0.4.30", "--cc", "9.0", "--driver", "535.104.05", "--json", check=0).stdout)
    assert data["verdict"] == "pass" and any("PTX JIT" in w for w in data["warnings"])
    text = run_cli("explain", "cuda-runtime==13.0", "--gpu", "Tesla V100-PCIE-16GB", "--driver", "535.104.05", check=0).stdout
    assert "FAIL DRIVER_TOO_OLD" in text and "source:" in text
    bad = run_cli("explain", "torch==2.4.1", "--gpu", "Radeon", "--driver", "535.104.05")
    assert bad.returncode == 2 and bad.stderr.startswith("error:") and "Traceback" not in bad.stderr
