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

from conftest import run_cli

from gpucompat.executors import local
from gpucompat.model import Timeouts


def _check(isolated: Path, early: str) -> tuple[dict, float, list[Path]]:
    run_cli("check", "cupy", "--env", "current", env={"GPUCOMPAT_EARLY_PROBE": early}, check=1)
    results = sorted(isolated.rglob("result.json"))
    assert len(results) == 1, results
    with sqlite3.connect(isolated / "gpucompat.db") as db:
        created = db.execute("select created_at from sweeps order by id desc limit 1").fetchone()[0]
        stage, = db.execute("select stage from results order by id desc limit 1").fetchone()
    assert stage == "import"  # the probe's own verdict, stored as from any probe
    return json.loads(results[0].read_text()), created, results


def test_the_probe_starts_before_the_sweep_is_stored_and_is_adopted(isolated):
    facts, created, results = _check(isolated, "1")
    assert facts["started_at"] < created, "the probe started after the store, not before it"
    assert facts["framework"] == "cupy" and facts["finished"]
    cell = results[0].parent
    assert (cell / "stderr.log").exists() and (cell / "job.pid").exists()
    leftovers = list(Path(tempfile.gettempdir()).glob("gpucompat-early-*"))
    assert not [p for p in leftovers if p.stat().st_mtime >= created - 5], leftovers


def test_without_the_early_start_the_probe_starts_after_the_store(isolated):
    facts, created, _ = _check(isolated, "0")
    assert facts["started_at"] > created


def test_an_early_probe_no_job_adopts_is_killed_and_removed():
    local.start_early("cupy", Timeouts(), None)
    early = local._early[-1]
    assert early.proc.poll() is None or early.path.exists()
    local._end_early()
    assert early.proc.poll() is not None and not early.path.exists() and not local._early


def test_a_job_with_another_command_does_not_adopt_it():
    local.start_early("cupy", Timeouts(), None)
    try:
        assert local._take_early(local._early_key("jax", sys.executable, Timeouts(), None, None)) is None
        assert local._take_early(local._early_key("cupy", "/other/python", Timeouts(), None, None)) is None
        assert len(local._early) == 1
    finally:
        local._end_early()
    assert not local._early
