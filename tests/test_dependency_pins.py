"""A release's real dependencies, read from its own metadata (issue 40 section 4): jax is judged by the jaxlib and
CUDA plugin its pins resolve to (jax_pins.csv, tools/build_jax_pins.py), and a jax version PyPI never listed is
"no such release", as for torch."""

from __future__ import annotations

import csv

import pytest

from conftest import REPO
from gpucompat.answers.explain import explain
from gpucompat.errors import UserError
from gpucompat.knowledge import pins

JAX_PINS = REPO / "src" / "gpucompat" / "knowledge" / "data" / "jax_pins.csv"


def test_the_jax_pins_table_is_each_wheels_metadata_with_its_source():
    rows = list(csv.DictReader(JAX_PINS.open(newline="", encoding="utf-8")))
    assert len({r["release"] for r in rows}) >= 100  # every jax release PyPI lists from 0.2.11
    assert all(r["source"] for r in rows)
    read = [r for r in rows if "Requires-Dist of jax-" in r["source"]]
    assert all(r["source"].startswith(f"Requires-Dist of jax-{r['release']}-py3-none-any.whl METADATA") for r in read)
    # jax 0.4.37 has no jaxlib of its number: its metadata pins 0.4.36, and the plugin range resolves there too
    cuda12 = pins.jax_pins("0.4.37", "cuda12")
    assert (cuda12.jaxlib, cuda12.jaxlib_resolves, cuda12.plugin_resolves) == ("==0.4.36", "0.4.36", "0.4.36")
    assert cuda12.moved and cuda12.judged_by == "0.4.36"
    assert not pins.jax_pins("0.4.36", "cuda12").moved
    assert pins.jax_pins("0.4.37", "cuda13") is None and "cuda13" not in pins.jax_extras("0.4.37")[0]


def test_a_jax_version_pypi_never_listed_is_no_such_release():
    with pytest.raises(UserError, match=r"jax 0\.4\.99: no such release — PyPI's jax releases as read on [0-9-]+ go up to 0\.12\.0\.1\.$"):
        explain("jax[cuda12]==0.4.99", "NVIDIA H100 80GB HBM3", None, "550.54.15")
    with pytest.raises(UserError, match=r"jax 0\.13\.0: no such release .*gpucompat knowledge update"):  # newer: maybe since
        explain("jax==0.13.0", "NVIDIA H100 80GB HBM3", None, "550.54.15")
    explain("jax[cuda12]==0.4.37", "NVIDIA H100 80GB HBM3", None, "550.54.15")  # exists, though no jaxlib 0.4.37 does


def test_jax_0_4_37_is_judged_by_the_jaxlib_and_plugin_its_pins_resolve_to():
    from gpucompat.knowledge.rules import predict_stack

    # on an H100 with driver 550 and Python 3.11: jaxlib 0.4.36's wheels and the 0.4.36 plugin's kernels say yes
    runs = predict_stack("jax", "0.4.37", "cuda12", "9.0", "550.54.15", "3.11")
    assert runs.verdict == "pass" and (runs.resolved["jaxlib"], runs.resolved["jax_plugin"]) == ("0.4.36", "0.4.36")
    assert runs.reasons[0].text.startswith("jax[cuda12] 0.4.37 requires jaxlib==0.4.36 (resolves to jaxlib 0.4.36)")
    assert "jax-0.4.37-py3-none-any.whl METADATA" in runs.reasons[0].source
    # Python 3.9: jaxlib 0.4.36 has no wheel for it (before, jaxlib 0.4.37's missing file list made this uncertain)
    old_python = predict_stack("jax", "0.4.37", "cuda12", "9.0", "550.54.15", "3.9")
    assert (old_python.verdict, old_python.code) == ("fail", "ENV_UNRESOLVABLE")
    assert "jaxlib 0.4.36 has Linux x86_64 wheels for Python 3.10 to 3.13, not 3.9" in [r.text for r in old_python.reasons]
    # an extra the release's metadata does not declare: pip ignores it and installs jax for the CPU
    no_extra = predict_stack("jax", "0.4.37", "cuda13", "9.0", "580.65.06", "3.11")
    assert (no_extra.verdict, no_extra.code) == ("fail", "NO_DEVICE") and "declares no [cuda13] extra" in no_extra.reasons[0].text
    # a release whose pins name its own number is judged as before, its pins shown in the resolved facts
    plain = predict_stack("jax", "0.4.38", "cuda12", "9.0", "550.54.15", "3.11")
    assert plain.verdict == "pass" and plain.resolved["jaxlib"] == "0.4.38" and not plain.reasons[0].rule.startswith("jaxlib and plugin")


def test_torch_names_the_triton_its_metadata_pins_and_warns_where_triton_cannot_compile():
    from gpucompat.knowledge.rules import predict_stack

    rows = {r["release"]: r for r in csv.DictReader((JAX_PINS.parent / "torch_triton_pins.csv").open(newline="", encoding="utf-8"))}
    assert (rows["2.5.1"]["requirement"], rows["2.4.0"]["triton"]) == ("triton==3.1.0", "3.0.0")
    assert all(r["source"].startswith(f"Requires-Dist of torch-{r['release']}-") for r in rows.values())
    # a GTX 1080 (6.1): eager torch runs, torch.compile's triton refuses the GPU (karpathy/nanoGPT#157): a warning, not the verdict
    pascal = predict_stack("torch", "2.5.1+cu121", "cu121", "6.1", "550.54.15", "3.11", gpu="NVIDIA GeForce GTX 1080")
    assert pascal.verdict == "pass" and pascal.resolved["triton"] == "3.1.0"
    assert any("torch 2.5.1 pins triton==3.1.0" in w and "torch.compile fails" in w for w in pascal.warnings)
    ampere = predict_stack("torch", "2.5.1+cu121", "cu121", "8.0", "550.54.15", "3.11")
    assert ampere.resolved["triton"] == "3.1.0" and not any("triton" in w for w in ampere.warnings)


def test_tensorflow_and_cuda_runs_the_cuda_its_nvidia_pins_resolve_to():
    from gpucompat.knowledge.rules import predict_stack

    # 2.20's extra pins ranges (nvidia-cuda-runtime-cu12>=12.5.82,<13.0): pip brings CUDA 12.9, not the tested build's 12.5
    ranged = predict_stack("tensorflow", "2.20.0", "and-cuda", "8.0", "550.54.15", "3.11")
    said = next(r for r in ranged.reasons if r.rule == "CUDA libraries")
    assert said.text.startswith("tensorflow[and-cuda] 2.20.0 requires nvidia-cuda-runtime-cu12<13.0,>=12.5.82 (resolves to 12.9.")
    assert "tensorflow-2.20.0-cp311" in said.source and ranged.resolved["cuda_runtime"] == "12.9"
    assert ranged.resolved["cuda_wheels"]["nvidia-cudnn-cu12"].startswith("9.")
    # 2.14 pinned CUDA 11.8's wheels exactly: a driver of CUDA 11's major runs it, judged by that CUDA
    exact = predict_stack("tensorflow", "2.14.1", "and-cuda", "8.0", "470.82.01", "3.11")
    assert exact.resolved["cuda_runtime"] == "11.8" and exact.resolved["cuda_wheels"]["nvidia-cuda-runtime-cu11"] == "11.8.89"
    assert "cuda_wheels" not in predict_stack("tensorflow", "2.20.0", "plain", "8.0", "550.54.15", "3.11").resolved


def test_a_requirements_file_with_jax_0_4_37_and_the_plugin_its_pins_name_is_one_set(tmp_path):
    from gpucompat.answers import lockfiles
    from gpucompat.answers.requirements import judge
    from gpucompat.answers.target import target

    path = tmp_path / "requirements.txt"
    path.write_text("jax[cuda12]==0.4.37\njax-cuda12-plugin==0.4.36\n")
    result = judge(lockfiles.load(str(path)), target("NVIDIA H100 80GB HBM3", None, "550.54.15"), "3.11")
    assert result["verdict"] == "pass" and result["set"] == []  # jaxlib 0.4.36 is what jax 0.4.37 installs
    path.write_text("jax[cuda12]==0.4.37\njax-cuda12-plugin==0.4.35\n")
    result = judge(lockfiles.load(str(path)), target("NVIDIA H100 80GB HBM3", None, "550.54.15"), "3.11")
    assert "jax-cuda12-plugin 0.4.35 differs from jaxlib 0.4.36" in result["set"][0]["text"]
