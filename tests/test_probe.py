"""The probe as shipped: one stdlib-only file, run by real interpreters."""

import ast
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import have_torch

PROBE = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "probe" / "probe.py"
STDLIB = set(sys.stdlib_module_names)


def test_probe_is_python38_syntax_and_imports_only_the_stdlib_at_top_level():
    tree = ast.parse(PROBE.read_text(), feature_version=(3, 8))
    top_level = {
        alias.name.split(".")[0]
        for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {node.module.split(".")[0] for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert top_level <= STDLIB, top_level - STDLIB


def run_probe(tmp_path, framework, python=sys.executable):
    result = tmp_path / f"{framework}.json"
    proc = subprocess.run([python, str(PROBE), "--framework", framework, "--result", str(result)], capture_output=True, text=True, timeout=300)
    return proc, json.loads(result.read_text())


@pytest.mark.skipif(not have_torch(), reason="torch is not installed in this interpreter (.ci/run installs the CPU wheel when the machine has it)")
def test_cpu_torch_reports_a_cpu_only_build(tmp_path):
    proc, facts = run_probe(tmp_path, "torch")
    assert proc.returncode == 1 and facts["finished"]
    assert facts["stages"]["import"]["ok"] and facts["stages"]["import"]["facts"]["cuda_runtime"] is None
    device = facts["stages"]["device"]
    assert not device["ok"] and device["facts"]["cuda_build"] is False
    assert "compute" not in facts["stages"]
    assert facts["system"]["python"] == ".".join(map(str, sys.version_info[:3]))


def test_a_missing_framework_is_an_import_failure_with_its_error(tmp_path):
    proc, facts = run_probe(tmp_path, "tensorflow") if not _has("tensorflow") else pytest.skip("tensorflow is installed here")
    record = facts["stages"]["import"]
    assert not record["ok"] and record["error"]["type"] == "ModuleNotFoundError"
    assert facts["current_stage"] == "done"


PY38 = shutil.which("python3.8") and subprocess.run(["python3.8", "-c", "1"], capture_output=True).returncode == 0


@pytest.mark.skipif(not PY38, reason="no working python3.8 on PATH to run the probe under its oldest supported Python")
def test_probe_runs_under_python38(tmp_path):
    proc, facts = run_probe(tmp_path, "cuda-runtime", python="python3.8")
    assert facts["system"]["python"].startswith("3.8.") and facts["finished"]
    imported = facts["stages"]["import"]
    if imported["ok"]:  # a system libcudart (e.g. from a CUDA toolkit) was found
        assert imported["facts"]["library"]
        assert not facts["stages"]["device"]["ok"], "no GPU here, yet a device was found"
    else:
        assert "libcudart" in imported["error"]["message"]


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None
