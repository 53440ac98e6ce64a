import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Tests assert on the packaged knowledge tables: what `gpucompat knowledge update` learned on this machine
# (the overlay beside the store) must not change them. A test that wants an overlay names its own.
os.environ["GPUCOMPAT_KNOWLEDGE"] = str(Path(tempfile.gettempdir()) / f"gpucompat-tests-no-overlay-{os.getpid()}")
# The stand-in frameworks of the tests choose their fault by a variable (FAKE_CUPY_MODE and the like), which the
# probe's clean re-run would rightly find and call the job's environment's fault. So jobs started by the tests
# skip it; tests/test_clean_rerun.py turns it on and builds faults that live in the stack or in the environment.
os.environ["GPUCOMPAT_CLEAN_RERUN"] = "0"

@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Database, caches and job directories of one test, under its tmp_path.

    uv's own package cache stays shared (UV_CACHE_DIR untouched), as on a real machine.
    """
    monkeypatch.setenv("GPUCOMPAT_DB", f"sqlite:///{tmp_path / 'gpucompat.db'}")
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path

def run_cli(*args, env=None, timeout=600, check=None):
    """The real console entry point in a subprocess, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpucompat", *args], capture_output=True, text=True,
        env={**os.environ, **(env or {})}, timeout=timeout,
    )
    if check is not None:
        assert proc.returncode == check, f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc

def have_torch() -> bool:
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True

def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path



def stand_in_framework(where: Path, monkeypatch, name: str, body: str = "raise ImportError('a stand-in')\n") -> Path:
    """A package `name` that this process and the processes it starts can find (PYTHONPATH and sys.path), for tests of
    an `env = "current"` stack on a machine without the framework: a framework nobody can find is 'not installed here'
    and never reaches a probe, a stand-in is found and then fails (or hangs) as its body says when the probe imports it."""
    package = where / "stand-ins" / name
    package.mkdir(parents=True, exist_ok=True)
    (package / "__init__.py").write_text(body)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")])))
    monkeypatch.syspath_prepend(str(package.parent))
    return package.parent


def build_nvml(tmp_path: Path, *defines: str) -> Path:
    """A stand-in libnvidia-ml.so.1 (tests/nvml_stub/nvml_stub.c, NVML's own struct layouts) built with gcc, its answers chosen
    by `defines` (-D); the folder that holds it, for LD_LIBRARY_PATH."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        pytest.skip("no C compiler here (.ci/run installs gcc): the stand-in NVML cannot be built")
    folder = tmp_path / ("nvml" + "".join(d.replace("=", "") for d in defines))
    folder.mkdir()
    subprocess.run([cc, "-shared", "-fPIC", *[f"-D{d}" for d in defines], "-o", str(folder / "libnvidia-ml.so.1"),
                    str(REPO / "tests" / "nvml_stub" / "nvml_stub.c")], check=True, capture_output=True)
    return folder


def run_against_nvml(code: str, folder: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """`code` (the probe's own modules) in a fresh interpreter that loads the stand-in NVML in `folder` (build_nvml)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={"LD_LIBRARY_PATH": str(folder), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO / "src"), **(env or {})})
