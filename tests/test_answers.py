"""Answers a researcher can act on (issue 25): the nearest yes after every no, questions as people type
them, the user's own requirements and lock files, the user's own machine and cluster, and output that
fits the terminal. The commands are the issue's own, run as a user runs them."""

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli, write
from gpucompat.answers import lockfiles, pool
from gpucompat.answers.explain import ask, explain
from gpucompat.answers.requirements import judge
from gpucompat.answers.target import target
from gpucompat.errors import UserError
from gpucompat.model import Target

H200_DB = REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db"
WIDTH = {"COLUMNS": "100"}
CUDA_WHEEL_RELEASE = "https://download.pytorch.org/whl/cu118"


def lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines()]


def joined(text: str) -> str:
    """The text with its wrapping undone: one space between words."""
    return " ".join(text.split())


def fits(text: str, width: int = 100) -> None:
    too_long = [line for line in text.splitlines() if len(line) > width]
    assert not too_long, too_long


# -- 1. the nearest yes ----------------------------------------------------------------------------

def test_torch_on_a_v100_with_driver_470_ends_with_the_nearest_yes():
    proc = run_cli("explain", "torch==2.4", "--gpu", "V100", "--driver", "470", "--python", "3.11", env=WIDTH, check=0)
    out = lines(proc.stdout)
    assert out[0] == "note: torch==2.4 read as 2.4.1, the newest 2.4.x the knowledge holds (pip itself would install 2.4.0"
    # a bare branch is read as the first R470 release the knowledge names, and said so
    assert "torch==2.4.1 on V100 (CC 7.0), driver 470 (as 470.42.01, CUDA 11.4), Python 3.11: FAIL DRIVER_TOO_OLD at device" in joined(proc.stdout)
    start = out.index("Nearest yes on V100 (CC 7.0), driver 470.42.01:")
    assert out[start:start + 7] == [
        "Nearest yes on V100 (CC 7.0), driver 470.42.01:",
        "  another variant   torch==2.4.1+cu118 passes (under CUDA minor-version compatibility)",
        "    pip install 'torch==2.4.1' --index-url https://download.pytorch.org/whl/cu118",
        "  newest that works torch==2.7.1+cu118 passes (under CUDA minor-version compatibility)",
        "    pip install 'torch==2.7.1' --index-url https://download.pytorch.org/whl/cu118",
        "  a newer driver    driver 525.60.13 or newer makes torch==2.4.1 pass (under CUDA minor-version",
        "                    compatibility; 530.30.02 or newer runs it without); an administrator's change",
    ]
    fits(proc.stdout)
    # the variant it names does pass there, and the answer is one variant away
    passing = run_cli("explain", "torch==2.4.1+cu118", "--gpu", "V100", "--driver", "470", "--python", "3.11", "--exit-code", env=WIDTH, check=0)
    assert "torch==2.4.1+cu118 on V100 (CC 7.0), driver 470 (as 470.42.01, CUDA 11.4), Python 3.11: PASS" in joined(passing.stdout) and "Nearest yes" not in passing.stdout


def test_the_nearest_yes_is_a_json_field_with_every_install_command():
    data = json.loads(run_cli("explain", "torch==2.4", "--gpu", "V100", "--driver", "470", "--json", check=0).stdout)
    assert [n["kind"] for n in data["nearest"]] == ["variant", "newest", "driver"]
    variant, newest, driver = data["nearest"]
    assert variant["spec"] == "torch==2.4.1+cu118" and variant["verdict"] == "pass"
    assert variant["install"] == {"pip": f"pip install 'torch==2.4.1' --index-url {CUDA_WHEEL_RELEASE}",
                                  "uv": f"uv pip install 'torch==2.4.1' --index-url {CUDA_WHEEL_RELEASE}",
                                  "conda": "conda install -c conda-forge 'pytorch==2.4.1' 'cudatoolkit=11.8'"}
    assert newest["spec"] == "torch==2.7.1+cu118"
    assert (driver["driver"], driver["clean_driver"], driver["install"]) == ("525.60.13", "530.30.02", None)


def test_the_nearest_yes_comes_from_advise_own_search():
    """The newest release that passes is advise's first predicted stack, with advise's own install command."""
    from gpucompat.answers.advise import advise

    advised = advise("torch", "V100", None, "470", None, [], limit=1)["predicted"][0]
    newest = next(n for n in explain("torch==2.4", "V100", None, "470")["nearest"] if n["kind"] == "newest")
    assert (advised["version"], advised["variant"]) == ("2.7.1", newest["variant"]) == (newest["version"], newest["variant"])  # exact, never 2.7.*
    assert newest["install"]["pip"] == advised["commands"]["pip"]


def test_jax_without_an_extra_means_the_gpu_build_and_jax_cpu_gets_the_nearest_yes():
    asked = run_cli("explain", "jax==0.4.30", "--gpu", "H100 PCIe", "--driver", "535", "--python", "3.12", env=WIDTH, check=0).stdout
    assert "jax[cuda12]==0.4.30 on H100 PCIe (CC 9.0), driver 535 (as 535.54.03, CUDA 12.2), Python 3.12: PASS" in joined(asked)
    assert ("note: jax==0.4.30 read as jax[cuda12]==0.4.30: a question that names a GPU means the GPU build (write jax[cpu] for the "
            "CPU one)") in " ".join(asked.split())
    cpu = run_cli("explain", "jax[cpu]==0.4.30", "--gpu", "H100 PCIe", "--driver", "535", "--python", "3.12", env=WIDTH, check=0).stdout
    out = lines(cpu)
    assert "jax[cpu]==0.4.30 on H100 PCIe (CC 9.0), driver 535 (as 535.54.03, CUDA 12.2), Python 3.12: FAIL NO_DEVICE at device" in joined(cpu)
    start = out.index("Nearest yes on H100 PCIe (CC 9.0), driver 535.54.03:")
    assert out[start + 1:start + 5] == [
        "  another variant   jax[cuda12]==0.4.30 passes",
        "    pip install 'jax[cuda12]==0.4.30'",
        "  newest that works jax[cuda12]==0.12.0.1 passes",
        "    pip install 'jax[cuda12]==0.12.0.1'",
    ]


def test_a_stack_no_driver_can_save_has_no_driver_line_and_a_release_the_tables_lack_is_uncertain(monkeypatch):
    arch = explain("torch==2.4.1", "NVIDIA GeForce RTX 5090", None, "570.86.10")
    assert arch["code"] == "ARCH_UNSUPPORTED" and "driver" not in [n["kind"] for n in arch["nearest"]]
    assert next(n for n in arch["nearest"] if n["kind"] == "newest")["variant"].startswith("cu12")  # a build with sm_120
    # a release on PyPI's list that the build tables do not describe: the packaged tables include PyPI's newest torch
    # (newest_releases.csv), so they are made to stop one series earlier, as they did before torch 2.15's wheel was read
    from gpucompat.knowledge import tables
    real = tables.table
    monkeypatch.setattr(tables, "table", lambda name: tuple(r for r in real(name) if not (
        name in ("torch_builds", "torch_pypi_default") and r["release"] == "2.15")))
    unknown = explain("torch==2.15.0", None, "9.0", "580.65.06")  # on PyPI, newer than the build tables
    assert unknown["verdict"] == "uncertain" and [(n["kind"], n["spec"]) for n in unknown["nearest"]][0] == ("older", "torch==2.14.1")
    assert [n["kind"] for n in unknown["nearest"]] == ["older", "newest"]  # the same build one release down, then the newest
    assert any("gpucompat knowledge update" in note for note in unknown["notes"])
    with pytest.raises(UserError, match="torch 99: no such release .* go up to 2.15.0"):  # not on the index at all
        explain("torch==99", None, "9.0", "580.65.06")


# -- 2. questions as people type them --------------------------------------------------------------

@pytest.mark.parametrize("question, spec, note", [
    ("torch 2.4", "torch==2.4.1", "the newest 2.4.x the knowledge holds"),
    (["torch", "2.4"], "torch==2.4.1", "pip itself would install 2.4.0 for ==2.4"),
    ("torch==2.4", "torch==2.4.1", "read as 2.4.1"),
    ("pytorch==2.1", "torch==2.1.2", "pytorch (conda's name) read as torch"),
    ("pytorch", "torch==2.15.0", "no version given: read as 2.15.0"),
    ("tf==2.15", "tensorflow==2.15.1", "tf read as tensorflow"),
    ("tensorflow==2.15.0", "tensorflow==2.15.0", "tensorflow[and-cuda]==2.15.0, the spelling that brings CUDA and cuDNN, does not install"),
    ("tensorflow-gpu==2.10", "tensorflow-gpu==2.10.1", "the GPU package of TensorFlow 1.x to 2.11"),
    ("cupy-cuda12x", "cupy-cuda12x==14.2.0", "no version given"),
    ("nvidia-cuda-runtime-cu12==12.4.127", "cuda-runtime==12.4", "version 12.4.127 of the runtime wheel is CUDA 12.4"),
    ("jax[cuda12]", "jax[cuda12]==0.12.0.1", "no version given"),
    ("jax-cuda12-plugin==0.4.30", "jax[cuda12]==0.4.30", "JAX's CUDA plugin"),
    ("jaxlib==0.4.30", "jax[cuda12]==0.4.30", "jaxlib (JAX's compiled half) read as jax"),
    ("torch>=2.4,<2.6", "torch==2.5.1", "the newest release the knowledge describes that satisfies it"),
])
def test_questions_as_people_type_them(question, spec, note):
    result = explain(question, "H100 PCIe", None, "550.54.15")
    assert result["spec"] == spec
    assert any(note in n for n in result["notes"]), result["notes"]


def test_what_was_typed_exactly_carries_no_note_and_cpu_builds_are_kept():
    assert explain("torch==2.4.1", None, "8.0", "535.104.05", "3.11")["notes"] == []  # a Python given carries no note either
    assert explain("jax[cpu]==0.4.30", None, "9.0", "535.104.05")["code"] == "NO_DEVICE"
    cpu = explain("tensorflow-cpu==2.15.1", None, "8.0", "535.104.05")
    assert (cpu["spec"], cpu["code"]) == ("tensorflow-cpu==2.15.1", "NO_DEVICE")
    assert cpu["nearest"][0]["spec"] == "tensorflow[and-cuda]==2.15.1"


@pytest.mark.parametrize("question, message", [
    ("torch 2.4 cu118", "ask about one stack"),
    ("tensorflowz==2.4", "unknown framework"),
    ("torch==banana", "not a stack spec"),
    ("torch<0.1", "no torch release the knowledge holds satisfies"),
    ("torch==" + "9" * 300, "characters long"),
    ("torch==2.4\n", "not a stack spec"),
])
def test_questions_that_cannot_be_read_are_one_sentence(question, message):
    with pytest.raises(UserError, match=message) as caught:
        explain(question, None, "8.0", "535.104.05")
    assert "\n" not in str(caught.value)


def test_advise_takes_the_framework_positionally_and_keeps_the_option(tmp_path):
    db = f"sqlite:///{tmp_path / 'empty.db'}"
    positional = json.loads(run_cli("advise", "tf", "--cc", "8.0", "--driver", "550.54.14", "--python", "3.11", "--db", db, "--json", check=0).stdout)
    option = json.loads(run_cli("advise", "--framework", "tensorflow", "--cc", "8.0", "--driver", "550.54.14", "--python", "3.11", "--db", db, "--json",
                                check=0).stdout)
    assert positional["predicted"] == option["predicted"] and positional["notes"] == ["tf read as tensorflow"]
    assert all({"pip", "uv", "conda"} == set(p["commands"]) for p in option["predicted"])
    both = run_cli("advise", "torch", "--framework", "jax", "--cc", "8.0", "--driver", "550.54.14", "--db", db, check=2)
    assert both.stderr.startswith("error:") and "Traceback" not in both.stderr


# -- 3. the user's own requirements ----------------------------------------------------------------

CONFLICTING = """\
# a cu12 torch with cu11 cuDNN pins, and an NCCL pin torch does not allow
torch==2.4.1
nvidia-cudnn-cu11==8.9.4.25
nvidia-nccl-cu12==2.18.1
numpy==1.26.4
"""


def test_a_requirements_file_with_conflicting_pins(tmp_path):
    path = write(tmp_path / "requirements.txt", CONFLICTING)
    proc = run_cli("explain", "-r", str(path), "--gpu", "NVIDIA A100-SXM4-80GB", "--driver", "535.104.05", "--exit-code", env=WIDTH)
    assert proc.returncode == 1, proc.stderr
    fits(proc.stdout)
    data = json.loads(run_cli("explain", "-r", str(path), "--gpu", "NVIDIA A100-SXM4-80GB", "--driver", "535.104.05", "--json", check=0).stdout)
    assert (data["verdict"], data["packages"], data["gpu_packages"]) == ("fail", 4, 3)
    rows = {r["package"]: r for r in data["rows"]}
    assert rows["torch"]["verdict"] == "pass" and rows["torch"]["line"] == 2  # each package alone runs there...
    assert rows["nvidia-cudnn-cu11"]["read_as"] == "cuDNN, CUDA 11"
    together = {r["rule"]: r for r in data["set"]}  # ...but not together
    mixed = together["one CUDA major"]
    assert mixed["verdict"] == "fail" and "CUDA 11: nvidia-cudnn-cu11" in mixed["text"] and "torch 2.4.1 (cu121)" in mixed["text"]
    assert "github.com/pytorch/pytorch/issues/147001" in mixed["source"]
    pin = together["torch's own pin of nvidia-nccl-cu12"]
    assert pin["text"] == "torch 2.4.1 requires nvidia-nccl-cu12==2.20.5; the set pins 2.18.1, so pip cannot install both"
    assert "uv pip compile 'torch==2.4.1'" in pin["source"]
    clean = write(tmp_path / "clean.txt", "torch==2.4.1\nnvidia-cudnn-cu12==9.1.0.70\nnumpy==1.26.4\n")
    assert run_cli("explain", "-r", str(clean), "--gpu", "NVIDIA A100-SXM4-80GB", "--driver", "535.104.05", "--exit-code").returncode == 0


def test_jax_without_a_plugin_in_a_file_runs_on_the_cpu_and_gets_the_nearest_yes(tmp_path):
    path = write(tmp_path / "requirements.txt", "jax==0.4.30\njaxlib==0.4.30\n")
    data = json.loads(run_cli("explain", "-r", str(path), "--gpu", "H100 PCIe", "--driver", "535", "--python", "3.12", "--json", check=0).stdout)
    assert (data["verdict"], data["code"]) == ("fail", "NO_DEVICE")
    nearest = data["nearest"]["jax[cpu]==0.4.30"]
    assert [(n["kind"], n["spec"], n["install"]["pip"]) for n in nearest] == [
        ("variant", "jax[cuda12]==0.4.30", "pip install 'jax[cuda12]==0.4.30'"),
        ("newest", "jax[cuda12]==0.12.0.1", "pip install 'jax[cuda12]==0.12.0.1'")]
    plugin = write(tmp_path / "plugin.txt", "jax==0.4.30\njaxlib==0.4.30\njax-cuda12-plugin==0.4.29\n")
    mismatch = json.loads(run_cli("explain", "-r", str(plugin), "--gpu", "H100 PCIe", "--driver", "535", "--json", check=0).stdout)
    assert [(r["rule"], r["verdict"]) for r in mismatch["set"]] == [("jax-cuda12-plugin beside jaxlib", "fail")]


H100 = target("H100 PCIe", None, "535.104.05")


def test_uv_lock_pylock_and_conda_environment_files(tmp_path):
    uv_lock = write(tmp_path / "uv.lock", """version = 1
requires-python = ">=3.11"

[[package]]
name = "demo"
version = "0.1.0"
source = { editable = "." }

[[package]]
name = "torch"
version = "2.4.1+cu118"
source = { registry = "https://download.pytorch.org/whl/cu118" }

[[package]]
name = "nvidia-cudnn-cu11"
version = "9.1.0.70"
source = { registry = "https://download.pytorch.org/whl/cu118" }
""")
    locked = judge(lockfiles.load(str(uv_lock)), target("V100", None, "470.82.01"), None)
    assert [(r["package"], r["read_as"], r["verdict"]) for r in locked["rows"]] == [
        ("torch", "torch==2.4.1+cu118", "pass"), ("nvidia-cudnn-cu11", "cuDNN, CUDA 11", "pass")]
    assert locked["set"] == [] and locked["packages"] == 2  # the project itself is not a package to judge
    pylock = write(tmp_path / "pylock.toml", """lock-version = "1.0"
created-by = "uv"

[[packages]]
name = "torch"
version = "2.4.1"
index = "https://download.pytorch.org/whl/cu118"
wheels = [{ url = "https://download.pytorch.org/whl/cu118/torch-2.4.1%2Bcu118-cp311-cp311-linux_x86_64.whl" }]

[[packages]]
name = "nvidia-cudnn-cu12"
version = "9.1.0.70"
""")
    mixed = judge(lockfiles.load(str(pylock)), target("V100", None, "470.82.01"), None)
    assert mixed["rows"][0]["read_as"] == "torch==2.4.1+cu118"
    assert mixed["rows"][1]["code"] == "DRIVER_TOO_OLD" and [r["rule"] for r in mixed["set"]] == ["one CUDA major"]
    conda = write(tmp_path / "environment.yml", """name: train
channels:
  - pytorch
  - nvidia
dependencies:
  - python=3.11
  - pytorch=2.4.1
  - pytorch-cuda=12.1  # the CUDA of the pytorch channel's build
  - pip
  - pip:
      - "cupy-cuda12x==13.3.0"
""")
    env = judge(lockfiles.load(str(conda)), target("V100", None, "470.82.01"), None)
    rows = {r["package"]: r for r in env["rows"]}
    assert rows["pytorch"]["read_as"] == "torch==2.4.1+cu121" and rows["pytorch"]["code"] == "DRIVER_TOO_OLD"
    assert rows["cupy-cuda12x"]["line"] == 11 and rows["pytorch-cuda"]["read_as"] == "conda's CUDA pin, CUDA 12.1"


def test_pip_freeze_on_stdin(tmp_path):
    freeze = "numpy==1.26.4\ntorch==2.4.1+cu118\nnvidia-cudnn-cu11==8.7.0.84\ntriton==3.0.0\n"
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "explain", "-r", "-", "--gpu", "V100", "--driver", "470",
                           "--json"], input=freeze, capture_output=True, text=True, timeout=60)
    data = json.loads(proc.stdout)
    assert data["file"] == "standard input" and data["verdict"] == "pass"
    assert [r["read_as"] for r in data["rows"]] == ["torch==2.4.1+cu118", "cuDNN, CUDA 11"]


def test_a_real_gpu_nodes_pip_freeze_cuda_13_wheels_without_their_suffix():
    """pip freeze of an H100 node (docs/evidence/answers-h100): torch 2.11 with cuda-toolkit 13.0.2, whose wheels carry no
    -cu13 suffix and partly their own versions (nvidia-cufft 12.0.0.61); on its own driver all pass, on R535 none can."""
    freeze = lockfiles.load(str(REPO / "docs" / "evidence" / "answers-h100" / "pip-freeze.txt"))
    here = judge(freeze, target("NVIDIA H100 80GB HBM3", None, "580.159.04"), None)
    assert (here["verdict"], here["set"], here["packages"]) == ("pass", [], 197)
    rows = {r["package"]: r for r in here["rows"]}
    assert rows["nvidia-cufft"]["read_as"] == "cuFFT, CUDA 13" and rows["cuda-toolkit"]["read_as"] == "the CUDA toolkit's wheels, CUDA 13.0"
    assert rows["torch"]["read_as"] == "torch==2.11.0" and rows["jax"]["read_as"] == "jax[cuda13]==0.11.2"
    older = judge(freeze, target("NVIDIA H100 80GB HBM3", None, "535.104.05"), None)
    assert (older["verdict"], older["code"]) == ("fail", "DRIVER_TOO_OLD")
    assert older["nearest"]["torch==2.11.0"][0]["spec"] == "torch==2.11.0+cu128"  # the same release for CUDA 12


def test_requirements_files_as_pip_writes_them(tmp_path):
    write(tmp_path / "base.txt", "numpy==1.26.4 \\\n    --hash=sha256:0123\n")
    path = write(tmp_path / "requirements.txt", f"""-r base.txt
--extra-index-url {CUDA_WHEEL_RELEASE}
torch==2.4.1  # the comment is no part of it
pywin32==306 ; sys_platform == "win32"
cupy-cuda12x @ https://files.example/cupy_cuda12x-13.3.0-cp311-cp311-manylinux2014_x86_64.whl
-e .
""")
    parsed = lockfiles.load(str(path))
    assert [(p.name, p.version, p.line) for p in parsed.pins] == [("numpy", "1.26.4", 1), ("torch", "2.4.1", 3), ("cupy-cuda12x", "13.3.0", 5)]
    result = judge(parsed, target("V100", None, "470"), None)
    assert result["rows"][0]["read_as"] == "torch==2.4.1+cu118"  # the extra index is PyTorch's cu118 one


@pytest.mark.parametrize("name, text, message", [
    ("uv.lock", "version = 1\n[[package]\n", "is not valid TOML"),
    ("uv.lock", "[tool]\nx = 1\n", "is not a uv.lock"),
    ("pylock.toml", 'lock-version = "1.0"\n[[packages]]\nversion = "1"\n', "without a name"),
    ("environment.yml", "name: x\nchannels:\n  - conda-forge\n", "has no 'dependencies:' list"),
    ("environment.yml", "dependencies:\n  pytorch\n", "is not a '- package' item"),
    ("environment.yml", "dependencies:\n  - 'pytorch===!!'\n", "is not a conda package spec"),
    ("requirements.txt", "torch==2.4.1\ntorch >= = 2\n", "line 2"),
    ("requirements.txt", "-r\n", "-r needs a file name"),
    ("requirements.txt", "-r requirements.txt\n", "includes a file that includes it back"),
    ("requirements.txt", "torch==2.4.1\x00\n", "NUL bytes"),
])
def test_every_malformed_input_is_one_sentence_and_exit_2(tmp_path, name, text, message):
    path = write(tmp_path / name, text)
    proc = run_cli("explain", "-r", str(path), "--cc", "8.0", "--driver", "535.104.05")
    assert proc.returncode == 2 and proc.stderr.startswith("error:") and message in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize("args, message", [
    (["-r", "/nonexistent/requirements.txt"], "does not exist"),
    (["-r", "."], "is a directory"),
    (["torch==2.4.1", "-r", "requirements.txt"], "without a stack spec"),
    (["torch==2.4.1", "--pool", "slurm", "--gpu", "V100"], "leave out --gpu"),
    (["torch==2.4.1", "--pool", "nowhere.toml"], "neither a pool"),
    ([], "give a stack to ask about"),
])
def test_malformed_command_lines_are_one_sentence(args, message):
    proc = run_cli("explain", *args, "--cc", "8.0", "--driver", "535.104.05") if "--pool" not in args else run_cli("explain", *args)
    assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_a_binary_file_is_refused(tmp_path):
    path = tmp_path / "requirements.txt"
    path.write_bytes(b"\xff\xfe\x00torch")
    proc = run_cli("explain", "-r", str(path), "--cc", "8.0", "--driver", "535.104.05")
    assert proc.returncode == 2 and "not UTF-8 text" in proc.stderr


def _benchmark():
    """benchmarks/answers_speed.py, whose files the speed tests reuse."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("answers_speed", REPO / "benchmarks" / "answers_speed.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


def test_a_300_line_requirements_file_answers_in_under_a_second(tmp_path):
    bench = _benchmark()
    path = write(tmp_path / "requirements.txt", bench.requirements_file(300))
    began = time.perf_counter()
    result = ask(None, str(path), None, "H100 PCIe", None, "535.104.05", None)
    assert time.perf_counter() - began < 1.0
    assert result["lines"] == 300 and result["packages"] == 299 and result["verdict"] == "pass", result["set"]
    began = time.perf_counter()
    proc = run_cli("explain", "-r", str(path), "--gpu", "H100 PCIe", "--driver", "535.104.05", "--exit-code", env=WIDTH)
    assert proc.returncode == 0 and time.perf_counter() - began < 3.0  # a cold process, with room for a busy machine
    fits(proc.stdout)


# -- 4. the user's own machine and cluster ---------------------------------------------------------

FAKE_SMI = """#!/bin/sh
case "$*" in
  *query-gpu*) echo "0, GPU-11111111-2222-3333-4444-555555555555, Tesla V100-SXM2-32GB, 7.0, 32768, 470.82.01";;
  *-L*) echo "GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-11111111-2222-3333-4444-555555555555)";;
esac
"""


def _here_has_a_gpu() -> bool:
    from gpucompat.answers.target import this_machine

    return this_machine() is not None


def test_without_gpu_and_driver_this_machine_answers(tmp_path):
    if _here_has_a_gpu():
        pytest.skip("this machine has a GPU of its own, which NVML reads before any stand-in nvidia-smi")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    write(bin_dir / "nvidia-smi", FAKE_SMI).chmod(0o755)
    env = {**WIDTH, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = run_cli("explain", "torch", "2.4", env=env, check=0)
    assert "note: GPU and driver: this machine's Tesla V100-SXM2-32GB, driver 470.82.01, read through nvidia-smi" in proc.stdout
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"  # not given: this interpreter's, and said so
    assert f"torch==2.4.1 on Tesla V100-SXM2-32GB (CC 7.0), driver 470.82.01 (CUDA 11.4), Python {here}: FAIL DRIVER_TOO_OLD" in joined(proc.stdout)
    other = json.loads(run_cli("explain", "torch==2.4.1", "--driver", "535.104.05", "--python", "3.11", "--json", env=env, check=0).stdout)
    assert other["verdict"] == "pass" and other["notes"] == ["GPU: this machine's Tesla V100-SXM2-32GB, read through nvidia-smi"]
    advised = json.loads(run_cli("advise", "torch", "--db", f"sqlite:///{tmp_path / 'e.db'}", "--json", env=env, check=0).stdout)
    assert advised["target"]["driver"] == "470.82.01" and advised["predicted"][0]["variant"] == "cu118"


def test_a_machine_without_a_gpu_asks_for_one_in_one_sentence(tmp_path):
    if _here_has_a_gpu():
        pytest.skip("this machine has a GPU")
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {"PATH": f"{empty}:/usr/bin:/bin"}
    for args in (["explain", "torch==2.4.1"], ["explain", "torch==2.4.1", "--gpu", "V100"], ["advise", "torch"]):
        proc = run_cli(*args, env=env)
        assert proc.returncode == 2 and "no NVIDIA GPU is visible on this machine" in proc.stderr and "--driver" in proc.stderr
        assert proc.stderr.count("\n") == 1


def test_a_pool_that_cannot_be_discovered_is_one_sentence(tmp_path):
    if not _here_has_a_gpu():
        local = run_cli("explain", "torch==2.4.1", "--pool", "local", "--db", f"sqlite:///{tmp_path / 'e.db'}")
        assert local.returncode == 2 and "local discovery found no GPU class" in local.stderr
    else:
        pytest.skip("this machine has a GPU, so local discovery finds a class")


FIVE_CLASSES = """name = "site"
executor = "slurm"
[[targets]]
name = "Tesla V100-SXM2-32GB"
cc = "7.0"
driver = "470.82.01"
gres = "v100"
[[targets]]
name = "NVIDIA A100-SXM4-80GB"
cc = "8.0"
driver = "535.104.05"
gres = "a100"
features = ["hbm"]
[[targets]]
name = "NVIDIA H200"
cc = "9.0"
driver = "580.159.04"
gres = "h200"
[[targets]]
name = "NVIDIA GeForce RTX 2080 Ti"
cc = "7.5"
driver = "450.80.02"
gres = "rtx2080ti"
[[targets]]
name = "NVIDIA B200"
cc = "10.0"
driver = "580.65.06"
gres = "b200"
[[stacks]]
framework = "torch"
versions = ["2.4.1"]
"""


def test_a_pool_from_a_plan_of_five_classes(tmp_path):
    plan = write(tmp_path / "site.toml", FIVE_CLASSES)
    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    data = json.loads(run_cli("explain", "torch==2.4.1", "--pool", str(plan), "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    verdicts = {c["name"]: (c["verdict"], c["code"]) for c in data["classes"]}
    assert verdicts == {"Tesla V100-SXM2-32GB": ("fail", "DRIVER_TOO_OLD"), "NVIDIA A100-SXM4-80GB": ("pass", None),
                        "NVIDIA H200": ("pass", None), "NVIDIA GeForce RTX 2080 Ti": ("fail", "DRIVER_TOO_OLD"),
                        "NVIDIA B200": ("fail", "ARCH_UNSUPPORTED")}
    assert [c["request"] for c in data["classes"] if c["request"]] == ["sbatch --gres=gpu:a100:1 --constraint=hbm", "sbatch --gres=gpu:h200:1"]
    assert data["passing"] == 2 and data["origin"] == "the [[targets]] of site.toml"
    text = run_cli("explain", "torch==2.4.1", "--pool", str(plan), "--db", f"sqlite:///{db}", "--exit-code", env=WIDTH)
    assert text.returncode == 0 and "torch==2.4.1 on the 5 GPU classes of the [[targets]] of site.toml: 2 of 5 pass" in text.stdout
    out = lines(text.stdout)
    assert out[-3:] == ["Ask Slurm for the classes that pass:", "    sbatch --gres=gpu:a100:1 --constraint=hbm", "    sbatch --gres=gpu:h200:1"]
    fits(text.stdout)
    # the store's observed cells beside the prediction: the H200 sweep ran CUDA 12.4 there
    runtime = json.loads(run_cli("explain", "cuda-runtime==12.4", "--pool", str(plan), "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    h200 = next(c for c in runtime["classes"] if c["name"] == "NVIDIA H200")
    assert h200["observed"] and {o["code"] for o in h200["observed"]} == {"PASS"} and h200["observed_summary"].startswith("PASS")
    shown = run_cli("explain", "cuda-runtime==12.4", "--pool", str(plan), "--db", f"sqlite:///{db}", env={"COLUMNS": "160"}, check=0).stdout
    assert "Observed" in shown


def test_htcondor_and_kubernetes_classes_get_their_own_requests():
    from gpucompat.answers.asked import resolve_pool
    from gpucompat.answers.observed import Observations
    from gpucompat.answers.questions import read

    question = read("torch==2.4.1")
    condor = [Target("NVIDIA A100-SXM4-40GB", "8.0", cuda_driver="12.2", count=4), Target("Tesla V100-SXM2-16GB", "7.0", cuda_driver="11.4")]
    answer = pool.answer(question, "default", resolve_pool("htcondor", condor, "htcondor discovery", None), None, Observations([]))
    assert [c["verdict"] for c in answer["classes"]] == ["pass", "fail"]
    assert answer["classes"][0]["driver"] == "535.54.03" and "at least" in answer["classes"][0]["driver_from"]
    assert answer["htcondor"] == 'request_GPUs = 1\nrequire_gpus = Capability == 8.0 && DeviceName == "NVIDIA A100-SXM4-40GB"'
    nodes = [Target("NVIDIA H100 80GB HBM3", "9.0", "550.54.15", selector=("nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",))]
    k8s = pool.answer(question, "default", resolve_pool("kubernetes", nodes, "kubernetes discovery", None), None, Observations([]))
    assert k8s["classes"][0]["request"] == "nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}"


def test_fifty_classes_answer_in_under_a_second(tmp_path):
    bench = _benchmark()
    plan = write(tmp_path / "plan50.toml", bench.plan_file(50))
    began = time.perf_counter()
    result = ask("torch==2.4.1", None, str(plan), None, None, None, None, None, [])
    assert time.perf_counter() - began < 1.0 and len(result["classes"]) == 50


def _slurm_cluster(tmp_path_factory):
    """The live Slurm test cluster of test_slurm.py; a cluster that cannot start skips the test, saying why."""
    from test_slurm import start_cluster

    started = start_cluster(tmp_path_factory)
    try:
        env = next(started)
    except AssertionError as exc:
        pytest.skip(f"the Slurm test cluster did not start: {str(exc)[:300]}")
    return started, env


@pytest.mark.integration
def test_a_pool_from_the_live_slurm_clusters_discovery(tmp_path_factory, isolated):
    started, env = _slurm_cluster(tmp_path_factory)
    try:
        data = json.loads(run_cli("explain", "torch==2.4.1", "--pool", "slurm", "--driver", "535.104.05", "--json", env=env, check=0).stdout)
        classes = {c["gres"]: c for c in data["classes"]}
        assert set(classes) == {"a100", "h100"} and data["origin"] == "slurm discovery"
        assert all(c["verdict"] == "pass" and c["driver_from"] == "assumed: --driver" for c in classes.values())
        assert classes["a100"]["request"] == "sbatch --gres=gpu:a100:1 '--constraint=fakegpu&hbm'"  # quoted: a line to paste
        unknown = json.loads(run_cli("explain", "torch==2.4.1", "--pool", "slurm", "--json", env=env, check=0).stdout)
        assert {c["verdict"] for c in unknown["classes"]} == {"uncertain"}  # Slurm reports no driver
        text = run_cli("explain", "torch==2.4.1", "--pool", "slurm", "--driver", "535.104.05", env={**env, **WIDTH}, check=0).stdout
        assert "Ask Slurm for the classes that pass:" in text
        fits(text)
    finally:
        next(started, None)


# -- 5. output a person reads ----------------------------------------------------------------------

def test_explain_fits_100_columns_with_short_references_and_full_sources_on_request():
    short = run_cli("explain", "cuda-runtime==13.0", "--gpu", "Tesla V100-PCIE-16GB", "--driver", "535.104.05", env=WIDTH, check=0).stdout
    fits(short)
    assert "Sources (the first of each; --sources shows them in full):" in short and "  [1] https://docs.nvidia.com/" in short
    full = run_cli("explain", "cuda-runtime==13.0", "--gpu", "Tesla V100-PCIE-16GB", "--driver", "535.104.05", "--sources", env=WIDTH, check=0).stdout
    fits(full)
    assert "minor-version-compatibility.html" in full and "minor-version-compatibility.html" not in short
    data = json.loads(run_cli("explain", "cuda-runtime==13.0", "--gpu", "Tesla V100-PCIE-16GB", "--driver", "535.104.05", "--json", check=0).stdout)
    assert all(r["source"] for r in data["reasons"]) and "minor-version-compatibility.html" in json.dumps(data)


@pytest.mark.parametrize("spec, code", [("torch==2.4.1", 0), ("torch==2.11.0", 1), ("torch==2.4.1+rocm6.1", 3)])
def test_exit_code_says_pass_fail_or_uncertain(spec, code):
    proc = run_cli("explain", spec, "--cc", "9.0", "--driver", "535.104.05", "--exit-code")
    assert proc.returncode == code and not proc.stderr
    assert run_cli("explain", spec, "--cc", "9.0", "--driver", "535.104.05").returncode == 0  # without it, an answer is success


def test_values_from_users_are_never_read_as_markup(tmp_path):
    proc = run_cli("explain", "torch==2.4.1", "--gpu", "[bold red]NVIDIA A100[/]", "--driver", "535.104.05", env=WIDTH, check=0)
    assert "[bold red]NVIDIA A100[/]" in proc.stdout
    plan = write(tmp_path / "[red]site.toml", FIVE_CLASSES.replace('"NVIDIA B200"', '"[blink]B200[/]"'))
    shown = run_cli("explain", "torch==2.4.1", "--pool", str(plan), "--db", f"sqlite:///{tmp_path / 'e.db'}", env={"COLUMNS": "200"}, check=0)
    assert "[red]site.toml" in shown.stdout and "[blink]B200[/]" in shown.stdout


# -- hostile input: one sentence or an answer, never an internal error --------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LINE = st.one_of(st.sampled_from(["torch==2.4.1", "jax[cuda12]==0.4.30", "nvidia-cudnn-cu11==8.9.4.25", "-r", "--index-url",
                                  "cupy>=13", "- pip:", "dependencies:", "[[package]]", 'name = "torch"', "version = 1", "pytorch=2.4.1=cuda12",
                                  "  - cuda-version=12.4", "\\", "# x", "torch @ https://x/torch-2.4.1%2Bcu118-cp311-cp311-linux_x86_64.whl"]),
                 st.text(max_size=40))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(name=st.sampled_from(["requirements.txt", "uv.lock", "pylock.toml", "environment.yml"]), lines=st.lists(LINE, max_size=12))
def test_any_file_text_is_an_answer_or_one_sentence(name, lines):
    try:
        parsed = lockfiles.parse("\n".join(lines), name, Path("/nonexistent"))
        judge(parsed, H100, "3.11")
    except UserError as exc:
        assert "\n" not in str(exc).strip() and len(str(exc)) < 600


@settings(max_examples=300, deadline=None)
@given(words=st.lists(st.one_of(st.sampled_from(["torch", "2.4", "==", "jax[cuda12]", "tf", ">=2.4", "cupy-cuda12x", "pytorch==2.1"]),
                                st.text(max_size=30)), max_size=3))
def test_any_question_is_an_answer_or_one_sentence(words):
    try:
        explain(words, None, "9.0", "535.104.05")
    except UserError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600


def test_a_conditional_tensorflow_gets_the_nearest_self_contained_release_as_well_as_the_newest():
    """TensorFlow 2.12 needs the system's CUDA (conditional): beside it, the nearest release that brings its own, judged on
    the Python it is shown with (2.14.x [and-cuda] does not install on its newest, 3.11: tensorrt 8.5.3.1 has no cp311
    wheel; 2.15.0 does not install at all), and the newest."""
    from gpucompat.answers.asked import read
    from gpucompat.answers.explain import answer

    result = answer(read(["tensorflow==2.12.0"], gpu="A100", driver="535.104.05"), [])
    assert result["verdict"] == "conditional"
    kinds = {item["kind"]: item for item in result["nearest"]}
    assert kinds["newer"]["spec"] == "tensorflow[and-cuda]==2.15.0.post1" and kinds["newer"]["verdict"] == "pass"
    assert kinds["newest"]["version"] == "2.21.0" and all(item["verdict"] == "pass" for item in result["nearest"])


def test_plain_tensorflow_is_judged_as_typed_and_the_extra_has_a_line_of_its_own():
    """Issue 40.3: tensorflow==2.15.0 is plain TensorFlow, conditional on the system's CUDA 12.2 and cuDNN 8.9, never
    tensorflow[and-cuda]==2.15.0 failed because the extra cannot install; the extra's fate is a note naming 2.15.0.post1."""
    plain = explain("tensorflow==2.15.0", "H100", None, "580.65.06", "3.11")
    assert (plain["spec"], plain["verdict"], plain["code"], plain["needs"]["cuda"]) == ("tensorflow==2.15.0", "conditional", "NEEDS_SYSTEM_CUDA", "12.2")
    assert not any(r["rule"] == "installs" for r in plain["reasons"])
    extra = [n for n in plain["notes"] if n.startswith("tensorflow[and-cuda]==2.15.0,")]
    assert len(extra) == 1 and "tensorrt-libs==8.6.1" in extra[0] and extra[0].endswith("tensorflow[and-cuda]==2.15.0.post1 installs")
    asked_extra = explain("tensorflow[and-cuda]==2.15.0", "H100", None, "580.65.06", "3.11")
    assert (asked_extra["verdict"], asked_extra["code"]) == ("fail", "ENV_UNRESOLVABLE")  # asked for, the extra is judged
    resolving = explain("tensorflow==2.16.1", "H100", None, "580.65.06", "3.11")
    assert resolving["verdict"] == "conditional" and any(n.startswith("tensorflow[and-cuda]==2.16.1 brings CUDA and cuDNN") for n in resolving["notes"])


def test_requirements_get_a_fix_line_per_failing_package_and_for_the_set(tmp_path):
    """-r: torch 2.3.1 (PyPI's cu121) with nvidia-cudnn-cu11 mixes CUDA majors: drop the cu11 cuDNN, or take torch's
    cu118 build (it runs on an A100 with R550); torch 2.0.0 on an RTX 5090 gets its nearest yes as the line to write."""
    mixed = write(tmp_path / "mixed.txt", "torch==2.3.1\nnvidia-cudnn-cu11==8.9.2.26\n")
    data = json.loads(run_cli("explain", "-r", str(mixed), "--gpu", "A100", "--driver", "550.54.14", "--python", "3.11", "--json", check=0).stdout)
    texts = [f["text"] for f in data["fixes"]]
    assert texts[0].startswith("remove line 2 (nvidia-cudnn-cu11): torch 2.3.1 (cu121) is a CUDA 12 build")
    assert texts[1].endswith("line 1 torch==2.3.1+cu118") and data["fixes"][1]["install"].endswith("/whl/cu118")
    old = write(tmp_path / "old.txt", "torch==2.0.0\n")
    data = json.loads(run_cli("explain", "-r", str(old), "--gpu", "RTX 5090", "--driver", "575.51.03", "--python", "3.11", "--json", check=0).stdout)
    (fix,) = data["fixes"]
    assert fix["text"].startswith("line 1: torch==2.7.0+cu128 instead of torch==2.0.0") and "cu128" in fix["install"]
    text = run_cli("explain", "-r", str(mixed), "--gpu", "A100", "--driver", "550.54.14", "--python", "3.11", check=0).stdout
    assert "Fix:" in text and "remove line 2 (nvidia-cudnn-cu11)" in text
