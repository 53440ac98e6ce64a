"""A check does not run again what it already proved in this environment on this GPU and driver (issue 34,
item 8): the library and JIT rungs are cached per (interpreter, its site-packages as dated, driver, GPU)."""

import json

from gpucompat.executors import rungs
from gpucompat.probe import ladder

PASSED = {"stages": {"compute": {"ok": True, "facts": {"rungs": [
    {"name": "elementwise", "ok": True}, {"name": "blas", "ok": True}, {"name": "cudnn", "ok": True},
    {"name": "cufft", "ok": True}, {"name": "cusolver", "ok": None, "skipped": True}]}}}, "started_at": 1795730000.0}


def setup(tmp_path, monkeypatch):
    driver = tmp_path / "version"
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04\n")
    packages = tmp_path / "site-packages"
    packages.mkdir()
    monkeypatch.setattr(rungs, "DRIVER_VERSION", driver)
    monkeypatch.setattr(rungs.site, "getsitepackages", lambda: [str(packages)])
    monkeypatch.setattr(rungs.site, "getusersitepackages", lambda: str(tmp_path / "no-user-site"))
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    return driver, packages


def test_a_passed_checks_library_rungs_are_kept_and_the_core_rungs_never_are(tmp_path, monkeypatch):
    import sys

    driver, packages = setup(tmp_path, monkeypatch)
    gpu = "GPU-3c15737e-0676-dd38-2b5d-7dc502112aab"
    assert rungs.cached(sys.executable, gpu, "torch") == {}
    rungs.remember(sys.executable, gpu, "torch", PASSED)
    kept = rungs.cached(sys.executable, gpu, "torch")
    assert sorted(kept) == ["cudnn", "cufft"] and "in this environment on this GPU and driver" in kept["cudnn"]
    assert rungs.cached(sys.executable, gpu, "cupy") == {}  # per framework
    assert rungs.cached(sys.executable, "GPU-other", "torch") == {}  # another GPU
    assert json.loads(rungs.probe_env(sys.executable, gpu, "torch")[rungs.ENV_VARIABLE]) == kept
    (packages / "newpkg-1.0.dist-info").mkdir()  # a package installed: the environment is another one
    assert rungs.cached(sys.executable, gpu, "torch") == {}
    rungs.remember(sys.executable, gpu, "torch", PASSED)
    driver.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  590.44.01\n")  # a new driver
    assert rungs.cached(sys.executable, gpu, "torch") == {}
    monkeypatch.setenv("GPUCOMPAT_RUNG_CACHE", "0")
    assert rungs.probe_env(sys.executable, gpu, "torch") == {}


def test_failed_or_no_gpu_jobs_teach_nothing(tmp_path, monkeypatch):
    import sys

    setup(tmp_path, monkeypatch)
    failed = {"stages": {"compute": {"ok": False, "facts": PASSED["stages"]["compute"]["facts"]}}}
    rungs.remember(sys.executable, "GPU-a", "torch", failed)
    rungs.remember(sys.executable, None, "torch", PASSED)
    assert rungs.cached(sys.executable, "GPU-a", "torch") == {} and rungs.cached(sys.executable, None, "torch") == {}


def test_the_probe_takes_a_cached_rung_as_passed_without_running_it(monkeypatch):
    monkeypatch.setenv("GPUCOMPAT_CACHED_RUNGS", json.dumps({"cudnn": "passed at 2026-11-26 21:50 in this environment"}))
    ran, facts = [], {}

    def body(name):
        return lambda rung: ran.append(name)

    ladder.ladder(facts, [("elementwise", body("elementwise")), ("cudnn", body("cudnn")), ("cufft", body("cufft"))])
    assert ran == ["elementwise", "cufft"]
    cudnn = next(r for r in facts["rungs"] if r["name"] == "cudnn")
    assert cudnn["ok"] is True and cudnn["cached"].startswith("passed at 2026-11-26 21:50")
