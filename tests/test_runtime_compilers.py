"""Run-time compilers (issue 35 items 2 and 4): JAX's ptxas and CuPy's NVRTC decide a GPU newer than the build.
The facts are measured: the plugin wheels read with `gpucompat inspect`, ptxas/NVRTC targets from NVIDIA's wheels,
the pins from the wheels' METADATA (docs/evidence/runtime-compilers/)."""

from gpucompat.knowledge import rules, tables
from gpucompat.knowledge.frameworks import cupy, jax, tensorflow
from gpucompat.knowledge.rules import FAIL, PASS, UNCERTAIN


def _jax(release, variant, cc, driver="580.65.06"):
    reasons, _ = jax.rules(release, variant, cc, driver)
    return rules.combine(reasons, {}), {r.rule: r for r in reasons}


def _cupy(release, variant, cc="12.0", driver="570.86.10"):
    reasons, _ = cupy.rules(release, variant, cc, driver)
    return rules.combine(reasons, {}), {r.rule: r for r in reasons}


def test_jax_cuda13_plugin_kernels_are_the_measured_ones():
    assert tables.jax_build("0.8.0", "cuda13")["sass"] == "sm_75;sm_80;sm_90;sm_100;sm_120"
    assert tables.jax_build("0.10.2", "cuda13")["sass"] == "sm_75;sm_80;sm_90;sm_100;sm_110;sm_120"
    assert "gpucompat inspect" in tables.jax_build("0.10.2", "cuda13")["source"]


def test_jax_sass_covers_a_newer_gpu_pass():
    prediction, reasons = _jax("0.10.2", "cuda13", "11.0")  # Thor: the plugin carries sm_110, ptxas 13.0.48 knows it
    assert prediction.verdict == PASS
    assert "sm_110" in reasons["architecture"].text


def test_jax_before_sm_110_sass_fails_on_thor():
    prediction, _ = _jax("0.10.1", "cuda13", "11.0")
    assert prediction.verdict == FAIL and prediction.code == "ARCH_UNSUPPORTED"


def test_jax_gpu_newer_than_its_ptxas_fails_naming_the_compiler():
    # jax[cuda12] 0.5.0: PTX compute_90 the driver could JIT, but XLA's ptxas (nvidia-cuda-nvcc-cu12, newest 12.9.86) has no sm_110
    prediction, reasons = _jax("0.5.0", "cuda12", "11.0")
    assert reasons["architecture"].verdict == PASS
    compiler = reasons["run-time compiler (XLA)"]
    assert compiler.verdict == FAIL and prediction.verdict == FAIL and prediction.code == "ARCH_UNSUPPORTED"
    assert "CUDA 12.9.86's compiler does not know sm_110" in compiler.text and "nvidia-cuda-nvcc-cu12>=12.6.85" in compiler.text
    assert "nvJitLink" in compiler.text  # XLA's first choice where it loads (docs/evidence/jax-ptxas-h100)


def test_jax_ptxas_floor_too_old_but_pip_gives_a_new_one():
    prediction, reasons = _jax("0.6.0", "cuda12", "12.0", "570.86.10")
    compiler = reasons["run-time compiler (XLA)"]
    assert prediction.verdict == PASS and compiler.verdict == PASS and compiler.warning
    assert "12.9.86" in compiler.text and "12.6.85" in compiler.text


def test_jax_says_nothing_more_where_sass_and_the_oldest_ptxas_cover():
    _prediction, reasons = _jax("0.8.0", "cuda13", "9.0")
    assert "run-time compiler (XLA)" not in reasons


def test_cupy_13_6_on_sm_120_without_ctk_the_system_toolkit_decides():
    """Issue 40.3: without [ctk] the answer is conditional on the toolkit the GPU needs (a pass naming it, which
    answers/conditions.py makes conditional), not uncertain."""
    prediction, reasons = _cupy("13.6.0", "cuda12x")
    system = reasons["CUDA libraries"]
    assert prediction.verdict == UNCERTAIN and system.verdict == UNCERTAIN  # uncertain on which minor the system has, and on that alone
    assert "system's CUDA toolkit" in system.text and "12.8 or later" in system.text
    assert [r.rule for r in reasons.values() if r.verdict == UNCERTAIN] == ["CUDA libraries"]


def test_cupy_13_6_has_no_ctk_extra():
    prediction, reasons = _cupy("13.6.0", "cuda12x[ctk]")
    assert prediction.verdict == UNCERTAIN and "has no [ctk] extra (CuPy 14.0.0 on have it)" in reasons["run-time compiler (NVRTC)"].text


def test_cupy_with_ctk_gets_pip_nvrtc():
    prediction, reasons = _cupy("14.2.0", "cuda12x[ctk]")
    nvrtc = reasons["run-time compiler (NVRTC)"]
    assert prediction.verdict == PASS and not nvrtc.warning and "nvidia-cuda-nvrtc-cu12 12.9.86" in nvrtc.text


def test_cupy_without_sm_120_kernels_stays_uncertain():
    prediction, _ = _cupy("13.3.0", "cuda12x")  # precompiled kernels end at sm_90 (cupy/cupy#9106)
    assert prediction.verdict == UNCERTAIN


def test_cupy_ctk_is_read_from_the_spec_and_advised_where_it_brings_the_nvrtc_that_decides():
    """`cupy-cuda12x[ctk]` keeps its package through the parser (plan and explain), and advise offers it on a GPU
    newer than CuPy's CUDA 12 builds: its pip NVRTC (12.9.86) compiles for sm_120, the system toolkit is not assumed."""
    import json

    from conftest import run_cli
    from gpucompat.plan import _spec_parts

    assert _spec_parts("cupy-cuda12x", ("ctk",), "14.2.0", "cupy-cuda12x[ctk]==14.2.0") == ("cupy", "14.2.0", "cuda12x[ctk]")
    answer = json.loads(run_cli("explain", "cupy-cuda12x[ctk]==14.2.0", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05",
                                "--json", check=0).stdout)
    assert answer["verdict"] == "pass" and answer["install"]["pip"] == "pip install 'cupy-cuda12x[ctk]==14.2.0'"
    advised = json.loads(run_cli("advise", "cupy", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--json", check=0).stdout)
    assert [(p["version"], p["variant"]) for p in advised["predicted"]][:1] == [("14.2.0", "cuda12x[ctk]")]


def _tensorflow(release, variant, cc, driver="580.65.06"):
    reasons, _ = tensorflow.rules(release, variant, cc, driver)
    return {r.rule: r for r in reasons}


def test_tensorflow_xla_names_the_ptxas_its_and_cuda_extra_pins():
    # tensorflow[and-cuda] 2.18/2.19 pin nvidia-cuda-nvcc-cu12==12.5.82, whose ptxas stops at sm_90 (measured):
    # TF's own kernels run by PTX JIT, XLA falls back to the driver, so a warning on a pass, naming the version
    xla = _tensorflow("2.19.0", "and-cuda", "12.0")["run-time compiler (XLA ptxas)"]
    assert xla.verdict == PASS and "12.5.82" in xla.text and "does not know sm_120" in xla.text
    assert xla.warning and "jit_compile" in xla.warning
    # 2.20 on allows any 12.x from 12.5.82: pip installs 12.9.86, whose ptxas knows sm_120
    newer = _tensorflow("2.20.0", "and-cuda", "12.0")["run-time compiler (XLA ptxas)"]
    assert newer.verdict == PASS and "12.9.86 knows sm_120" in newer.text and not newer.warning
    # 2.14 pins the CUDA 11.8 ptxas (nvidia-cuda-nvcc-cu11==11.8.89)
    assert "11.8.89" in _tensorflow("2.14.0", "and-cuda", "12.0")["run-time compiler (XLA ptxas)"].text


def test_tensorflow_xla_rule_is_silent_where_it_adds_nothing():
    assert "run-time compiler (XLA ptxas)" not in _tensorflow("2.19.0", "and-cuda", "9.0")  # SASS sm_90, ptxas knows it
    assert "run-time compiler (XLA ptxas)" not in _tensorflow("2.19.0", "", "12.0")  # plain tensorflow: the system's CUDA
