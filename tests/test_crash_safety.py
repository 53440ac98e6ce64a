"""gpucompat killed at every point it writes, and the probes it leaves behind.

The kill points are SQLAlchemy's own events (each statement and each commit), armed from a
sitecustomize in the killed process only: gpucompat carries no test hook. After each kill,
`--resume` must leave every cell with exactly one result and one prediction, and no sweep
may exist without its cells.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from conftest import run_cli, write

KILLER = """
import os, signal
import sqlalchemy as sa

_count = [0]
_at = int(os.environ["GPUCOMPAT_KILL_AT"])


def _tick(*_args, **_kwargs):
    _count[0] += 1
    if _count[0] == _at:
        os.kill(os.getpid(), signal.SIGKILL)
    with open(os.environ["GPUCOMPAT_KILL_COUNT"], "w") as handle:
        handle.write(str(_count[0]))


sa.event.listen(sa.engine.Engine, "before_cursor_execute", _tick)
sa.event.listen(sa.engine.Engine, "commit", _tick)
"""

# Four cells that finish in a second each: frameworks the test interpreter does not have.
PLAN = """
name = "killed at every write"
[[stacks]]
framework = "jax"
env = "current"
[[stacks]]
framework = "cupy"
env = "current"
[[stacks]]
framework = "tensorflow"
env = "current"
[[stacks]]
framework = "cuda-runtime"
env = "current"
"""


def _sweep(plan: Path, hooks: Path, kill_at: int, count_file: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(hooks), "GPUCOMPAT_KILL_AT": str(kill_at), "GPUCOMPAT_KILL_COUNT": str(count_file)}
    return subprocess.run([sys.executable, "-m", "gpucompat", "sweep", str(plan)], env=env, capture_output=True, text=True, timeout=300)


def _state(db: Path) -> list[tuple[int, int, int, int]]:
    """(sweep, cells, predictions, results) per stored sweep."""
    with sqlite3.connect(db) as conn:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sweeps'").fetchone():
            return []  # killed while the schema was being created: one transaction, so nothing at all
        return conn.execute("""
            SELECT s.id, count(DISTINCT c.id), count(DISTINCT p.id), count(DISTINCT r.id)
            FROM sweeps s LEFT JOIN cells c ON c.sweep_id = s.id
            LEFT JOIN predictions p ON p.cell_id = c.id LEFT JOIN results r ON r.cell_id = c.id
            GROUP BY s.id""").fetchall()


def test_a_kill_at_any_write_loses_nothing_after_resume(isolated):
    hooks = isolated / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text(KILLER)
    plan = write(isolated / "plan.toml", PLAN)
    count_file = isolated / "count"
    # a run that is never killed counts the points
    assert _sweep(plan, hooks, 0, count_file).returncode == 0
    points = int(count_file.read_text())
    assert points >= 10, points
    os.remove(isolated / "gpucompat.db")

    # every point is tried by tools/reliability.py (GPUCOMPAT_KILL_EVERY_POINT=1); CI tries a spread of them
    stride = 1 if os.environ.get("GPUCOMPAT_KILL_EVERY_POINT") else max(1, points // 16)
    kill_points = range(1, points + 1, stride)
    tried = lost = duplicated = 0
    for kill_at in kill_points:
        db = isolated / f"kill-{kill_at}.db"
        os.environ["GPUCOMPAT_DB"] = f"sqlite:///{db}"
        proc = _sweep(plan, hooks, kill_at, count_file)
        assert proc.returncode == -signal.SIGKILL, f"kill point {kill_at} of {points} was not reached: {proc.stderr}"
        tried += 1
        if not db.exists() or not _state(db):
            continue  # killed before the sweep was stored: nothing to lose
        for sweep_id, cells, predictions, _ in _state(db):
            assert cells == 4 and predictions == 4, f"kill point {kill_at}: a sweep stored without all its cells"
            run_cli("sweep", "--resume", str(sweep_id), check=0)
        for sweep_id, cells, predictions, results in _state(db):
            lost += cells - results
            with sqlite3.connect(db) as conn:
                duplicated += conn.execute("SELECT count(*) - count(DISTINCT cell_id) FROM results").fetchone()[0]
    print(f"kill points tried {tried} of {points}; cells lost {lost}; duplicated {duplicated}")
    assert (tried, lost, duplicated) == (len(kill_points), 0, 0)


HANGING_JAX = "import time\ntime.sleep(300)\n"


def _job_processes(job_dir: Path) -> list[int]:
    """PIDs of processes started for this job (they carry its directory in their environment)."""
    mark = f"GPUCOMPAT_JOB_DIR={job_dir}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if mark in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_probes_die_with_a_killed_gpucompat(isolated):
    fakes = isolated / "fakes" / "jax"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text(HANGING_JAX)
    plan = write(isolated / "plan.toml", '[timeouts]\nimport = "10m"\n[[stacks]]\nframework = "jax"\nenv = "current"\n')
    env = {**os.environ, "PYTHONPATH": str(fakes.parent)}
    gpucompat = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan)], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    runs = isolated / "gpucompat-runs"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(_job_processes(p) for p in runs.glob("sweep-*/cell-*")):
        time.sleep(0.1)
    job_dir = next(runs.glob("sweep-*/cell-*"))
    assert _job_processes(job_dir), "the probe never started"
    gpucompat.kill()  # SIGKILL to gpucompat alone: its probe is in a session of its own
    gpucompat.wait()
    deadline = time.monotonic() + 10
    while _job_processes(job_dir) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _job_processes(job_dir), "the probe outlived the gpucompat that started it"


def test_resume_kills_a_leftover_probe_of_the_same_cell(tmp_path):
    """Where no watchdog acted (a probe started by an older gpucompat), prepare kills it."""
    from gpucompat.executors.local import PID_FILE, kill_leftover

    job_dir = tmp_path / "sweep-1" / "cell-7"
    job_dir.mkdir(parents=True)
    leftover = subprocess.Popen(["sleep", "300"], env={**os.environ, "GPUCOMPAT_JOB_DIR": str(job_dir)}, start_new_session=True)
    stranger = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        (job_dir / PID_FILE).write_text(str(stranger.pid))
        assert not kill_leftover(job_dir), "a process that is not this cell's was killed"
        (job_dir / PID_FILE).write_text(str(leftover.pid))
        assert kill_leftover(job_dir)
        assert leftover.wait(timeout=10) == -signal.SIGKILL
        assert stranger.poll() is None
    finally:
        for proc in (leftover, stranger):
            proc.kill()
            proc.wait()
