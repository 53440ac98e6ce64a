"""The probe as shipped: a package of small stdlib-only modules, built into one probe.pyz that real
interpreters run (this one, and the oldest supported Python where pyenv or the PATH has it)."""

import ast
import glob
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import have_torch
from gpucompat import __version__, probe_build
from gpucompat.probe_build import probe_pyz

PROBE_DIR = Path(__file__).resolve().parent.parent / "src" / "gpucompat" / "probe"
STDLIB = set(sys.stdlib_module_names)
FRAMEWORKS = {"torch", "tensorflow", "jax", "jaxlib", "cupy", "numpy", "cupyx"}  # imported only inside the functions that need them
MODULE_LINES = 400


def test_every_probe_module_is_small_python38_and_imports_only_the_stdlib_and_its_own_package():
    modules = sorted(PROBE_DIR.glob("*.py"))
    assert len(modules) > 10 and PROBE_DIR / "__main__.py" in modules
    for path in modules:
        text = path.read_text()
        assert len(text.splitlines()) <= MODULE_LINES, f"{path.name} has {len(text.splitlines())} lines"
        tree = ast.parse(text, str(path), feature_version=(3, 8))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                assert node.level == 1, f"{path.name}: a relative import leaves the package"
                continue
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) else []
            for name in names:
                top = name.split(".")[0]
                assert top != "gpucompat", f"{path.name} imports {name}: the probe imports nothing of gpucompat"
                if node in tree.body:  # module level: the standard library only
                    assert top in STDLIB, f"{path.name} imports {name} at its top level"
                else:
                    assert top in STDLIB | FRAMEWORKS, f"{path.name} imports {name}"


def test_the_pyz_is_built_once_per_version_and_sources_and_then_reused(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    first = probe_pyz()
    assert first.parent == tmp_path / "cache" / "probe" and first.name == f"probe-{__version__}-{probe_build.source_digest()}.pyz"
    assert [p.name for p in first.parent.iterdir()] == [first.name]  # nothing half-written left beside it
    with zipfile.ZipFile(first) as archive:
        names = set(archive.namelist())
        main = archive.read("__main__.py").decode()
    assert names - {"gpucompat_probe/"} == {"__main__.py"} | {f"gpucompat_probe/{p.name}" for p in PROBE_DIR.glob("*.py")}
    assert "from gpucompat_probe.__main__ import entry" in main
    stat = first.stat()
    monkeypatch.setattr(probe_build.zipapp, "create_archive", lambda *a, **k: pytest.fail("built again"))
    again = probe_pyz()
    assert again == first and (again.stat().st_ino, again.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)
    with pytest.raises(pytest.fail.Exception, match="built again"):  # the check can fail: another cache has none yet
        probe_pyz(tmp_path / "other")
    assert list((tmp_path / "other").iterdir()) == []  # and what a failed build began is gone


def test_the_pyz_runs_the_sharing_children_and_the_ddp_worker_from_itself():
    pyz = probe_pyz()
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from gpucompat_probe import records, scaling; "
            "print(records.probe_file()); print(scaling.WORKER_COMMAND)")
    proc = subprocess.run([sys.executable, "-c", code, str(pyz)], capture_output=True, text=True, timeout=60)
    assert proc.stdout.split() == [str(pyz), "ddp-worker"], proc.stderr


def run_probe(tmp_path, framework, python=sys.executable):
    result = tmp_path / f"{framework}.json"
    proc = subprocess.run([python, str(probe_pyz()), "--framework", framework, "--result", str(result)], capture_output=True,
                          text=True, timeout=300)
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


def _python38():
    """A working python3.8: on the PATH, else one pyenv installed (its shim runs only where pyenv selects it)."""
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    for candidate in [shutil.which("python3.8")] + sorted(glob.glob(os.path.join(root, "versions", "3.8*", "bin", "python3.8"))):
        if candidate and subprocess.run([candidate, "-c", "1"], capture_output=True).returncode == 0:
            return candidate
    return None


PY38 = _python38()


@pytest.mark.skipif(not PY38, reason="no working python3.8 (PATH or pyenv) to run the probe under its oldest supported Python")
def test_probe_runs_under_python38(tmp_path):
    proc, facts = run_probe(tmp_path, "cuda-runtime", python=PY38)
    assert facts["system"]["python"].startswith("3.8.") and facts["finished"]
    imported = facts["stages"]["import"]
    if imported["ok"]:  # a system libcudart (e.g. from a CUDA toolkit) was found
        assert imported["facts"]["library"]
        assert not facts["stages"]["device"]["ok"], "no GPU here, yet a device was found"
    else:
        assert "libcudart" in imported["error"]["message"]


@pytest.mark.skipif(not PY38, reason="no working python3.8 (PATH or pyenv) to run the probe under its oldest supported Python")
def test_the_ddp_worker_in_the_pyz_starts_under_python38_and_says_what_is_wrong():
    """Its arguments are read before torch is imported: a bad one is its one line, whatever the environment has."""
    proc = subprocess.run([PY38, str(probe_pyz()), "ddp-worker", "--model", "huge", "--epochs", "1", "--images-per-epoch", "64",
                           "--batch", "32", "--result", "x.json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == ["ddp_worker: error: unknown --model 'huge' (choose cnn or large)"], proc.stderr


def _has(module):
    import importlib.util

    return importlib.util.find_spec(module) is not None
