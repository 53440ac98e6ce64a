"""An environment.yml judged as conda judges it (issue 40 section 5): conda packages carry their CUDA through
cuda-version and their builds' own requirements, the one-CUDA-major rule is about pip's nvidia-* wheels only, and a
conda-forge cupy is the conda build that would resolve (conda_cupy_builds.csv), never PyPI's cupy-cuda12x."""

from __future__ import annotations

import csv
import json

from conftest import REPO, run_cli, write
from gpucompat.answers import lockfiles
from gpucompat.answers.requirements import judge
from gpucompat.answers.target import target
from gpucompat.knowledge import conda_builds

H100, DRIVER_550 = "NVIDIA H100 80GB HBM3", "550.54.15"


def _judged(path):
    result = judge(lockfiles.load(str(path)), target(H100, None, DRIVER_550), None)
    return result, {r["package"]: r for r in result["rows"]}, {r["rule"]: r for r in result["set"]}


def test_conda_packages_never_enter_the_one_major_rule_and_pip_wheels_still_do(tmp_path):
    # conda's pytorch of CUDA 11.8 and conda's CUDA 11.8 pin, beside one pip wheel of CUDA 12: nothing overwrites anything
    conda_and_pip = write(tmp_path / "environment.yml", """name: sim
channels:
  - conda-forge
dependencies:
  - python=3.11
  - cuda-version=11.8
  - pytorch=2.4.1=cuda118_py311h1234
  - pip
  - pip:
      - nvidia-cudnn-cu12==9.1.0.70
""")
    result, rows, rules = _judged(conda_and_pip)
    assert "one CUDA major" not in rules and result["verdict"] == "pass"
    assert rows["pytorch"]["read_as"] == "torch==2.4.1+cu118" and rows["cuda-version"]["verdict"] == "pass"
    # two pip wheels of two majors in the pip: section do overwrite each other: the rule names those wheels only
    pip_mixed = write(tmp_path / "mixed.yml", conda_and_pip.read_text() + "      - nvidia-cublas-cu11==11.11.3.6\n")
    result, _rows, rules = _judged(pip_mixed)
    assert rules["one CUDA major"]["verdict"] == "fail"
    assert "nvidia-cublas-cu11" in rules["one CUDA major"]["text"] and "pytorch" not in rules["one CUDA major"]["text"]


def test_a_conda_build_for_another_cuda_major_than_the_pin_cannot_be_solved(tmp_path):
    env = write(tmp_path / "environment.yml", """name: sim
dependencies:
  - cuda-version=12.6
  - pytorch=2.4.1=cuda118_py311h1234
""")
    result, _rows, rules = _judged(env)
    assert result["code"] == "ENV_UNRESOLVABLE" and rules["conda's CUDA"]["verdict"] == "fail"
    assert "line 4 'pytorch=2.4.1=cuda118_py311h1234' (CUDA 11.8)" in rules["conda's CUDA"]["text"]


def test_conda_forge_cupy_is_the_build_conda_resolves(tmp_path):
    pinned = write(tmp_path / "environment.yml", """name: sim
channels:
  - conda-forge
dependencies:
  - cuda-version=11.8
  - cupy=13.6
""")
    _result, rows, _rules = _judged(pinned)
    assert rows["cupy"]["read_as"] == "conda-forge cupy 13.6.0 (CUDA 11.8 build)" and rows["cupy"]["verdict"] == "pass"
    assert "CUDA 11.8, CUDA 12.9, CUDA 13.0" in rows["cupy"]["reasons"][0]["text"]
    assert "cupy-feedstock" in rows["cupy"]["reasons"][0]["source"]
    # CuPy 14 on conda-forge has no CUDA 11 build: conda cannot solve it (PyPI's cupy-cuda11x would have said nothing of it)
    too_new = write(tmp_path / "too-new.yml", pinned.read_text().replace("cupy=13.6", "cupy=14.1"))
    result, rows, _rules = _judged(too_new)
    assert (rows["cupy"]["verdict"], rows["cupy"]["code"]) == ("fail", "ENV_UNRESOLVABLE")
    assert "cupy 14.1.1 has builds for CUDA 12.9, CUDA 13.2, none for the environment's CUDA 11.8" in rows["cupy"]["reason"]
    # no CUDA pin: conda picks by the driver's __cuda (550 runs CUDA 12.4: the CUDA 12 build, not the CUDA 13 one)
    unpinned = write(tmp_path / "unpinned.yml", "name: sim\ndependencies:\n  - conda-forge::cupy\n")
    proc = run_cli("explain", "-r", str(unpinned), "--gpu", H100, "--driver", DRIVER_550, "--json", check=0)
    row = json.loads(proc.stdout)["rows"][0]
    newest = max((r["version"] for r in csv.DictReader((REPO / "src/gpucompat/knowledge/data/conda_cupy_builds.csv").open())),
                 key=lambda v: tuple(int(p) for p in v.split(".")))
    assert row["read_as"] == f"conda-forge cupy {newest} (CUDA 12.9 build)" and row["verdict"] == "pass"
    old_driver = conda_builds.cupy(None, "", None, "470.82.01")  # CUDA 11.4's driver: no CuPy 14 build accepts it
    assert old_driver.cuda is None and "which none of them accepts" in old_driver.why


def test_conda_specs_are_read_with_conda_grammar():
    assert conda_builds._matches("==14.1.*", "14.1.1") and not conda_builds._matches("==14.1.*", "14.10.0")
    assert conda_builds._matches(">=13,<14", "13.6.0") and not conda_builds._matches(">=13,<14", "14.0.0")
    assert conda_builds.build_cuda("cuda118_py311h1234") == "11.8" and conda_builds.build_cuda("py311_cuda12.1_cudnn9_0") == "12.1"
