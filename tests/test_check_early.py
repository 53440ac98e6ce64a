"""`check FRAMEWORK --env current` starts its probe before the store is opened (issue 23: a check costs at
most 0.5 s over the framework's own start), and the sweep adopts that probe instead of starting a second.

The frameworks are ones this interpreter does not have (cupy), so each probe ends in a second at its import;
what is checked is when it started, that exactly one ran, and that nothing is left behind.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import run_cli, stand_in_framework

from gpucompat.executors import early
from gpucompat.model import BenchSpec, Timeouts


def _check(isolated: Path, early_probe: str, monkeypatch) -> tuple[dict, float, list[Path]]:
    stand_in_framework(isolated, monkeypatch, "cupy")  # found (so tested), then failing at import: the probe's own verdict
    run_cli("check", "cupy", "--env", "current", env={"GPUCOMPAT_EARLY_PROBE": early_probe}, check=1)
    results = sorted(isolated.rglob("result.json"))
    assert len(results) == 1, results
    with sqlite3.connect(isolated / "gpucompat.db") as db:
        created = db.execute("select created_at from sweeps order by id desc limit 1").fetchone()[0]
        stage, = db.execute("select stage from results order by id desc limit 1").fetchone()
    assert stage == "import"  # the probe's own verdict, stored as from any probe
    return json.loads(results[0].read_text()), created, results


def test_the_probe_starts_before_the_sweep_is_stored_and_is_adopted(isolated, monkeypatch):
    facts, created, results = _check(isolated, "1", monkeypatch)
    assert facts["started_at"] < created, "the probe started after the store, not before it"
    assert facts["framework"] == "cupy" and facts["finished"]
    cell = results[0].parent
    assert (cell / "stderr.log").exists() and (cell / "job.pid").exists()
    leftovers = list(Path(tempfile.gettempdir()).glob("gpucompat-early-*"))
    assert not [p for p in leftovers if p.stat().st_mtime >= created - 5], leftovers


def test_without_the_early_start_the_probe_starts_after_the_store(isolated, monkeypatch):
    facts, created, _ = _check(isolated, "0", monkeypatch)
    assert facts["started_at"] > created


@pytest.fixture
def clean():
    yield
    early.end_all()


def test_an_early_probe_no_job_adopts_is_killed_and_removed(clean):
    early.start("cupy", Timeouts(), None, None)
    probe = early._early[-1]
    early.end_all()
    assert probe.proc.poll() is not None and not probe.path.exists() and not early._early


def test_only_a_job_with_the_same_command_and_gpu_adopts_it(clean):
    early.start("cupy", Timeouts(), None, "GPU-1")
    for other in (early.key("jax", sys.executable, Timeouts(), None, "GPU-1"),
                  early.key("cupy", "/other/python", Timeouts(), None, "GPU-1"),
                  early.key("cupy", sys.executable, Timeouts(), BenchSpec(), "GPU-1"),
                  early.key("cupy", sys.executable, Timeouts(), None, "GPU-2"),
                  early.key("cupy", sys.executable, Timeouts(), None, None)):
        assert early.take(other) is None
    assert early.take(early.key("cupy", sys.executable, Timeouts(), None, "GPU-1")) is not None


def _gpus(root: Path, *uuids: str) -> Path:
    root.mkdir()
    for n, uuid in enumerate(uuids):
        (root / f"0000:0{n}:00.0").mkdir()
        (root / f"0000:0{n}:00.0" / "information").write_text(f"Model: \t\t NVIDIA H100\nIRQ: 1\nGPU UUID: \t {uuid}\nBus Type: PCIe\n")
    return root


@pytest.mark.parametrize("argv, started", [
    (["check", "cupy", "--env", "current"], True),
    (["check", "--json", "cupy", "--env=current", "--db", "sqlite:///x.db"], True),
    (["check", "cupy", "--env", "current", "--bench"], True),
    (["check", "cupy"], False),  # an environment to build first: no probe yet
    (["check", "cupy", "jax", "--env", "current"], False),  # two stacks: which runs first is the executor's to say
    (["check", "pytorch", "--env", "current"], False),  # an alias: the CLI reads it
    (["check", "cupy", "--env", "current", "--python", "3.12"], False),  # an option it does not know
    (["sweep", "plan.toml"], False),
])
def test_the_entry_point_starts_one_only_for_a_plain_check(argv, started, tmp_path, monkeypatch, clean):
    monkeypatch.setattr(early, "PROC_GPUS", _gpus(tmp_path / "gpus", "GPU-aaaa"))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("GPUCOMPAT_EARLY_PROBE", raising=False)
    early.start_for_argv(argv)
    assert bool(early._early) == started
    if started:
        bench = BenchSpec() if "--bench" in argv else None
        assert early._early[0].key == early.key("cupy", sys.executable, Timeouts(), bench, "GPU-aaaa")


def test_the_entry_point_leaves_several_gpus_and_a_set_visibility_to_the_cli(tmp_path, monkeypatch, clean):
    monkeypatch.delenv("GPUCOMPAT_EARLY_PROBE", raising=False)
    monkeypatch.setattr(early, "PROC_GPUS", _gpus(tmp_path / "two", "GPU-a", "GPU-b"))
    early.start_for_argv(["check", "cupy", "--env", "current"])
    assert not early._early
    monkeypatch.setattr(early, "PROC_GPUS", _gpus(tmp_path / "one", "GPU-a"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    early.start_for_argv(["check", "cupy", "--env", "current"])
    assert not early._early


def test_the_driver_files_name_the_gpus_or_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(early, "PROC_GPUS", _gpus(tmp_path / "gpus", "GPU-1", "GPU-2"))
    assert early.proc_gpu_uuids() == ["GPU-1", "GPU-2"]
    monkeypatch.setattr(early, "PROC_GPUS", tmp_path / "absent")
    assert early.proc_gpu_uuids() is None
    (tmp_path / "odd" / "0000:01:00.0").mkdir(parents=True)
    (tmp_path / "odd" / "0000:01:00.0" / "information").write_text("Model: something else\n")
    monkeypatch.setattr(early, "PROC_GPUS", tmp_path / "odd")
    assert early.proc_gpu_uuids() is None


def test_without_the_driver_files_nvml_discovery_names_the_gpu(tmp_path, monkeypatch, clean):
    from gpucompat.discover import local as discovery
    from gpucompat.model import Target

    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("GPUCOMPAT_EARLY_PROBE", raising=False)
    monkeypatch.setattr(early, "PROC_GPUS", tmp_path / "absent")
    monkeypatch.setattr(discovery, "discover", lambda: [Target(name="NVIDIA H100", count=2, devices=("GPU-a", "GPU-b"))])
    early.start_on_this_gpu("cupy", Timeouts(), None)
    assert not early._early  # two GPUs: the executor chooses
    monkeypatch.setattr(discovery, "discover", lambda: [Target(name="NVIDIA H100", count=1, devices=("GPU-a",))])
    early.start_on_this_gpu("cupy", Timeouts(), None)
    assert early._early[0].key == early.key("cupy", sys.executable, Timeouts(), None, "GPU-a")
