"""PTX ISA against the driver's JIT (issue 40.3): the table, the rule, and the project's own GPU evidence."""

import re
from pathlib import Path

import pytest
from packaging.version import Version

from gpucompat.knowledge import ptx, tables

EVIDENCE = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "verdicts-h100" / "verdicts.txt"


def test_every_row_is_sourced_and_the_isa_never_goes_back():
    rows = sorted(tables.table("ptx_isa"), key=lambda r: Version(r["cuda"]))
    assert all(r["source"] and r["confidence"] in ("high", "medium") for r in rows)
    isas = [Version(r["ptx_isa"]) for r in rows]
    assert isas == sorted(isas)
    assert ptx.isa("12.6")["ptx_isa"] == ptx.isa("12.5")["ptx_isa"] == "8.5"  # 12.6 added no ISA: its PTX loads under R555


def _runs() -> list[dict]:
    """Each cuda-runtime run on the lent H100: its NVRTC, the ISA it wrote, whether the driver loaded that PTX, the driver."""
    runs = []
    for block in re.split(r"\n(?=cuda-runtime-)", EVIDENCE.read_text()):
        isa = re.search(r"ptx_isa: ([0-9.]+)", block)
        rung = re.search(r"rung jit_ptx\s+(ok|FAIL)", block)
        if isa and rung:
            runs.append({"nvrtc": re.search(r"nvrtc_version: ([0-9.]+)", block).group(1), "isa": isa.group(1),
                         "loaded": rung.group(1) == "ok", "driver": re.search(r"mapped libcuda\s+([0-9.]+)", block).group(1)})
    return runs


def test_the_rule_agrees_with_every_measurement_on_the_lent_h100():
    runs = _runs()
    assert {(r["nvrtc"], r["loaded"]) for r in runs} >= {("13.0", True), ("13.5", False)}
    for run in runs:
        assert ptx.isa(run["nvrtc"])["ptx_isa"] == run["isa"]  # the ISA NVRTC wrote is the table's
        # the SASS rung ran in every run: PTX not loading is a warning on a pass, PTX loading says nothing
        beside_sass = ptx.ptx_jit_rule("NVRTC", run["nvrtc"], run["driver"], "sm_90", only_ptx=False)
        assert (beside_sass is None) == run["loaded"]
        assert beside_sass is None or (beside_sass.verdict == "pass" and "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in beside_sass.warning)
        only = ptx.ptx_jit_rule("NVRTC", run["nvrtc"], run["driver"], "sm_90", only_ptx=True)
        assert only.verdict == ("pass" if run["loaded"] else "fail")


@pytest.mark.parametrize("cuda, cc, driver, verdict, code", [
    ("12.8", "9.0", "550.54.14", "pass", None),        # minor-version compatible, SASS from NVRTC runs; its PTX would not
    ("13.5", "9.0", "580.159.04", "pass", None),       # the measured case
    ("12.6", "12.0", "555.42.02", "pass", None),       # a GPU newer than 12.6's targets: PTX of ISA 8.5, which R555 loads
    ("12.6", "12.0", "550.54.14", "fail", "PTX_TOOLCHAIN_TOO_NEW"),  # ... which R550 (ISA 8.4) refuses
])
def test_a_cuda_runtime_stacks_nvrtc_is_judged_by_isa(cuda, cc, driver, verdict, code):
    reason = ptx.runtime_ptx_rule(cuda, cc, driver)
    assert (reason.verdict, reason.code) == (verdict, code)
    assert f"driver {driver} (CUDA {tables.driver_cuda(driver)['cuda']})" in reason.text


def test_nothing_is_said_where_the_driver_takes_the_compilers_ptx_and_sass_runs():
    assert ptx.runtime_ptx_rule("13.0", "9.0", "580.65.06") is None
    assert ptx.runtime_ptx_rule("13.0", None, "580.65.06") is None
    assert ptx.ptx_jit_rule("NVRTC", "13.0", None, "sm_90", True) is None


def test_predict_stack_judges_a_cuda_runtime_by_its_nvrtcs_ptx():
    from gpucompat.knowledge.rules import predict_stack

    compatible = predict_stack("cuda-runtime", "12.8", "default", "9.0", "550.54.14")
    jit = next(r for r in compatible.reasons if r.rule == ptx.RULE)
    assert compatible.verdict == "pass" and any("CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in w for w in compatible.warnings) and jit.verdict == "pass"
    only_ptx = predict_stack("cuda-runtime", "12.6", "default", "12.0", "550.54.14")
    assert any(r.rule == ptx.RULE and r.code == "PTX_TOOLCHAIN_TOO_NEW" for r in only_ptx.reasons)
    assert not any(r.rule == ptx.RULE for r in predict_stack("cuda-runtime", "13.0", "default", "9.0", "580.159.04").reasons)
