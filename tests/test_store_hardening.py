"""The store under what happens to real files: kills, concurrent processes, read-only places, damage."""

import hashlib
import multiprocessing
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import pytest

from conftest import REPO
from gpucompat.errors import UserError
from gpucompat.model import Outcome, ResolvedStack, Stack, Target
from gpucompat.store import SCHEMA_VERSION, Store
from test_store import PREDICTED, sample

FORK = multiprocessing.get_context("fork")
SRC = str(REPO / "src")
TABLES = ("sweeps", "targets", "stacks", "cells", "predictions", "results")


def counts(path) -> dict:
    with sqlite3.connect(path) as conn:
        return {t: conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in TABLES}


def state(path: Path):
    """What a read must not change: the file's bytes and mode, and which files lie beside it."""
    return hashlib.sha256(path.read_bytes()).hexdigest(), os.stat(path).st_mtime_ns, sorted(os.listdir(path.parent))


def journal_mode(path) -> str:
    """PRAGMA journal_mode, asked of a copy: even a mode=ro reader leaves -wal and -shm beside a WAL database."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = shutil.copyfile(path, Path(scratch) / "copy.db")
        conn = sqlite3.connect(copy)
        try:
            return conn.execute("PRAGMA journal_mode").fetchone()[0]
        finally:
            conn.close()


def python(code: str, *args: str) -> subprocess.CompletedProcess:
    """Python in a real subprocess, importing this checkout's gpucompat."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=300)


def at_rest(tmp_path, name="r.db") -> Path:
    """A gpucompat database with one sweep, all its connections closed: no -wal or -shm beside it."""
    path = tmp_path / "ro" / name
    store = Store(f"sqlite:///{path}")
    sweep = sample(store)
    store.record_result(store.cells_of(sweep)[0].id, Outcome("PASS", "compute", "ran"), None)
    store.close()
    assert os.listdir(path.parent) == [name] and journal_mode(path) == "wal"
    return path


# -- 1. a sweep is stored whole or not at all ---------------------------------------------------


def test_a_sweep_is_stored_with_its_cells_and_predictions_in_one_transaction(tmp_path):
    path = tmp_path / "s.db"
    store = Store(f"sqlite:///{path}")
    seen = []

    def predict(resolved, target):
        # no write lock is held while predicting: another process could write now
        other = sqlite3.connect(path, timeout=0)
        other.execute("BEGIN IMMEDIATE")
        other.rollback()
        other.close()
        seen.append((resolved.stack.framework, target.name))
        return {**PREDICTED, "verdict": "pass" if resolved.ok else "fail"}

    a = ResolvedStack(Stack("cupy", "13.3.0", "default", "3.11", "uv"), True)
    b = ResolvedStack(Stack("torch", "2.4.1", "default", "3.13", "uv"), False, error="no cp313 wheels")
    sweep = store.create_sweep("one", "sweep", "", None, {}, [Target("A100", "8.0"), Target("H100", "9.0")], [a, b], predict)
    assert seen == [("cupy", "A100"), ("cupy", "H100"), ("torch", "A100"), ("torch", "H100")]
    predicted = store.predictions_of(sweep)
    assert [(c.stack.framework, c.target.name, predicted[c.id]["verdict"]) for c in store.cells_of(sweep)] == [
        ("cupy", "A100", "pass"), ("cupy", "H100", "pass"), ("torch", "A100", "fail"), ("torch", "H100", "fail")]
    assert not hasattr(store, "add_cells") and not hasattr(store, "add_predictions")

    def failing(resolved, target):
        if target.name == "H100":
            raise RuntimeError("predictor broke")
        return PREDICTED

    with pytest.raises(RuntimeError, match="predictor broke"):
        store.create_sweep("half", "sweep", "", None, {}, [Target("A100", "8.0"), Target("H100", "9.0")], [a, b], failing)
    assert counts(path) == {"sweeps": 1, "targets": 2, "stacks": 2, "cells": 4, "predictions": 4, "results": 0}


KILL_MIDWAY = """
import os, signal, sys
import sqlalchemy as sa
from gpucompat.model import ResolvedStack, Stack, Target
from gpucompat.store import Store

store = Store(sys.argv[1])
@sa.event.listens_for(store.engine, "before_cursor_execute")
def kill(conn, cursor, statement, *args):
    if statement.startswith("INSERT INTO predictions"):
        os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer or a scheduler would, inside the transaction
store.create_sweep("killed", "sweep", "", None, {}, [Target("A100", "8.0")], [ResolvedStack(Stack("torch", "2.4.1", "default", "3.11", "uv"), True)],
                   lambda r, t: {"verdict": "pass", "code": None, "stage": None, "warnings": [], "reasons": []})
"""


def test_a_sweep_killed_while_being_stored_leaves_nothing(tmp_path):
    path = tmp_path / "k.db"
    proc = python(KILL_MIDWAY, f"sqlite:///{path}")
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert counts(path) == dict.fromkeys(TABLES, 0)
    store = Store(f"sqlite:///{path}")  # and the store opens as before
    assert store.list_sweeps() == []


# -- 2. concurrent processes ---------------------------------------------------------------------


def _open_at_once(url, barrier, failures):
    barrier.wait()
    try:
        Store(url)
    except BaseException:  # noqa: BLE001 - every failure counts, whatever it is
        failures.put(traceback.format_exc())


def test_four_processes_opening_a_new_database_at_once(tmp_path):
    openers, rounds, failures = 4, 15, FORK.Queue()
    for round_ in range(rounds):
        path = tmp_path / f"new-{round_}.db"
        barrier = FORK.Barrier(openers)
        procs = [FORK.Process(target=_open_at_once, args=(f"sqlite:///{path}", barrier, failures)) for _ in range(openers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(120)
        assert [p.exitcode for p in procs] == [0] * openers
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchall() == [(str(SCHEMA_VERSION),)]
        assert journal_mode(path) == "wal"
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == [], f"{len(found)} of {openers * rounds} opens failed; the first:\n{found[0]}"


def _writer(url, n, barrier, failures):
    try:
        store = Store(url)
        barrier.wait()
        for i in range(n):
            sweep = sample(store)
            for cell in store.cells_of(sweep):
                assert store.record_result(cell.id, Outcome("PASS", "compute", f"ran {i}"), None)
            store.finish_sweep(sweep, "done")
    except BaseException:  # noqa: BLE001
        failures.put(traceback.format_exc())


def _reader(url, barrier, stop, failures, reads):
    try:
        store = Store(url, readonly=True)
        barrier.wait()
        while not stop.is_set():
            listed = store.list_sweeps()
            rows = store.result_rows(None)
            # a sweep is never seen half-stored: 4 cells, each with its prediction, from the moment it exists
            assert all(s["cells"] == 4 for s in listed) and len(rows) % 4 == 0
            assert all(r["predicted"] == "uncertain" for r in rows)
            reads.value += 1
    except BaseException:  # noqa: BLE001
        failures.put(traceback.format_exc())


def test_two_writers_and_a_reader_at_once(tmp_path):
    path, per_writer = tmp_path / "busy.db", 8
    url = f"sqlite:///{path}"
    Store(url).close()
    barrier, stop, failures, reads = FORK.Barrier(3), FORK.Event(), FORK.Queue(), FORK.Value("i", 0)
    writers = [FORK.Process(target=_writer, args=(url, per_writer, barrier, failures)) for _ in range(2)]
    reader = FORK.Process(target=_reader, args=(url, barrier, stop, failures, reads))
    for p in [*writers, reader]:
        p.start()
    for p in writers:
        p.join(300)
    stop.set()
    reader.join(60)
    found = []
    while not failures.empty():
        found.append(failures.get())
    assert found == [], found[0]
    assert [p.exitcode for p in [*writers, reader]] == [0, 0, 0] and reads.value > 0
    assert counts(path) == {"sweeps": 16, "targets": 32, "stacks": 32, "cells": 64, "predictions": 64, "results": 64}
    listed = Store(url).list_sweeps()
    assert [(s["status"], s["cells"], s["done"], s["passed"]) for s in listed] == [("done", 4, 4, 4)] * 16


# -- 3. reading only ----------------------------------------------------------------------------


@pytest.mark.parametrize("form", ["readonly", "uri mode=ro", "mode=ro"])
def test_a_read_only_open_writes_nothing_and_leaves_no_files_behind(tmp_path, form):
    path = at_rest(tmp_path)
    before = state(path)
    url = {"readonly": f"sqlite:///{path}", "uri mode=ro": f"sqlite:///file:{path}?mode=ro&uri=true", "mode=ro": f"sqlite:///{path}?mode=ro"}[form]
    store = Store(url, readonly=form == "readonly")
    assert store.readonly
    assert [(s["cells"], s["done"]) for s in store.list_sweeps()] == [(4, 1)]
    assert len(store.result_rows(None)) == 4 and store.latest_sweep_id() == 1
    with pytest.raises(UserError, match="cannot be written here"):
        store.finish_sweep(1, "done")
    store.close()
    assert state(path) == before
    # the same in a process of its own, as the CLI uses it: nothing beside the file when it exits
    proc = python("import sys; from gpucompat.store import Store; print(len(Store(sys.argv[1], readonly=True).result_rows(None)))", url)
    assert proc.stdout.strip() == "4", proc.stderr
    assert state(path) == before


def test_a_read_only_open_sees_what_a_writer_has_in_its_wal(tmp_path):
    path = at_rest(tmp_path)
    writer = Store(f"sqlite:///{path}")
    sample(writer)  # committed to the -wal, not yet checkpointed into the file
    assert sorted(os.listdir(path.parent)) == ["r.db", "r.db-shm", "r.db-wal"]
    reader = Store(f"sqlite:///{path}", readonly=True)
    assert [s["cells"] for s in reader.list_sweeps()] == [4, 4]
    reader.close()
    writer.close()
    assert os.listdir(path.parent) == ["r.db"]


def test_a_read_only_open_of_nothing_reads_as_empty_and_creates_nothing(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'no' / 'such.db'}", readonly=True)
    assert store.list_sweeps() == [] and store.result_rows(None) == []
    with pytest.raises(UserError, match="no sweeps stored"):
        store.latest_sweep_id()
    assert not (tmp_path / "no").exists()


def test_an_old_schema_is_read_without_migrating_the_file(tmp_path):
    path = tmp_path / "old.db"
    shutil.copyfile(REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db", path)  # schema version 1
    before = state(path)
    store = Store(f"sqlite:///{path}", readonly=True)
    rows = store.result_rows(1)
    assert len(rows) == 10 and sum(r["code"] == "PASS" for r in rows) == 9 and all(r["observed"] for r in rows)
    assert store.predictions_of(1) == {} and store.latest_sweep_id() == 1
    with pytest.raises(UserError, match="cannot be written here"):
        store.finish_sweep(1, "done")
    store.close()
    assert state(path) == before
    with sqlite3.connect(f"file:{path}?immutable=1", uri=True) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"


@pytest.fixture
def immutable():
    """chattr +i: what stops even root from writing (chmod does not; the tests run as root)."""
    if not shutil.which("chattr"):
        pytest.skip("no chattr here")
    marked = []

    def mark(*paths):
        proc = subprocess.run(["chattr", "+i", *map(str, paths)], capture_output=True, text=True)
        if proc.returncode:
            pytest.skip(f"chattr +i does not work here: {proc.stderr.strip()}")
        marked.extend(paths)

    yield mark
    subprocess.run(["chattr", "-i", *map(str, marked)], check=False)


@pytest.mark.parametrize("what", ["directory", "file", "both"])
def test_a_database_nobody_may_write_is_read(tmp_path, immutable, what):
    path = at_rest(tmp_path)
    before = state(path)
    immutable(*{"directory": [path.parent], "file": [path], "both": [path, path.parent]}[what])
    store = Store(f"sqlite:///{path}", readonly=True)
    assert [(s["cells"], s["done"]) for s in store.list_sweeps()] == [(4, 1)]
    store.close()
    assert state(path) == before
    with pytest.raises(UserError, match="cannot write the database .* not writable here"):
        Store(f"sqlite:///{path}")  # writable it cannot be: one sentence
    assert state(path) == before


# -- 4. a refused store is not written to at all --------------------------------------------------


@pytest.mark.parametrize("readonly", [False, True])
@pytest.mark.parametrize("kind, expected", [("newer", "newer than this gpucompat understands"), ("foreign", "not gpucompat's")])
def test_a_refused_store_keeps_its_bytes_and_its_journal_mode(tmp_path, kind, expected, readonly):
    path = tmp_path / "refused.db"
    with sqlite3.connect(path) as conn:  # sqlite3's own default: a rollback journal, not WAL
        if kind == "newer":
            conn.execute("CREATE TABLE meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)")
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
        else:
            conn.execute("CREATE TABLE invoices (id INTEGER)")
    conn.close()
    before = state(path)
    with pytest.raises(UserError, match=expected):
        Store(f"sqlite:///{path}", readonly=readonly)
    assert state(path) == before and journal_mode(path) == "delete"


# -- 5. damaged stores are the user's to fix: one sentence ------------------------------------------


def _not_sqlite(path):
    path.write_text("name,verdict\ntorch,PASS\n" * 40)


def _few_bytes(path):
    path.write_bytes(b"SQLi")


def _truncated(path):
    os.truncate(path, 3 * 4096)


def _scribbled(path):
    with path.open("r+b") as f:
        f.seek(100)
        f.write(bytes(range(256)) * 12)


@pytest.mark.parametrize("damage, expected", [
    (_not_sqlite, "is not a SQLite database"),
    (_few_bytes, "is not a SQLite database"),
    (_truncated, r"is damaged \(database disk image is malformed\)"),
    (_scribbled, r"is damaged \(database disk image is malformed\)"),
])
@pytest.mark.parametrize("readonly", [False, True])
def test_a_damaged_store_is_a_user_error_and_stays_as_it_is(tmp_path, damage, expected, readonly):
    path = at_rest(tmp_path)
    damage(path)
    before = state(path)
    with pytest.raises(UserError, match=expected):
        Store(f"sqlite:///{path}", readonly=readonly).result_rows(None)
    assert state(path)[0] == before[0]


def test_a_store_damaged_while_in_use(tmp_path):
    path = at_rest(tmp_path)
    store = Store(f"sqlite:///{path}")
    assert len(store.result_rows(None)) == 4
    _truncated(path)
    store.engine.dispose()  # the next query reads the file again
    for use in (store.list_sweeps, lambda: store.result_rows(None), lambda: store.cells_of(1), lambda: store.finish_sweep(1, "done")):
        with pytest.raises(UserError, match=rf"the database sqlite:///{path} is damaged"):
            use()


def test_an_empty_file_is_a_new_database(tmp_path):
    path = tmp_path / "empty.db"
    path.touch()
    Store(f"sqlite:///{path}")
    assert journal_mode(path) == "wal" and counts(path)["sweeps"] == 0


def test_a_new_database_where_none_can_be_created(tmp_path, immutable):
    (tmp_path / "plain-file").write_text("x")
    with pytest.raises(UserError, match="cannot create the directory .*plain-file"):
        Store(f"sqlite:///{tmp_path / 'plain-file' / 'sub' / 'g.db'}")
    with pytest.raises(UserError, match="is a directory, not a database file"):
        Store(f"sqlite:///{tmp_path}")
    locked = tmp_path / "locked"
    locked.mkdir()
    immutable(locked)
    with pytest.raises(UserError, match="its directory is not writable"):
        Store(f"sqlite:///{locked / 'g.db'}")
    assert os.listdir(locked) == []


@pytest.mark.parametrize("damage", [_not_sqlite, _truncated])
def test_the_cli_says_one_sentence_about_a_damaged_store(tmp_path, damage):
    path = at_rest(tmp_path)
    damage(path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "gpucompat", "results", "--db", f"sqlite:///{path}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error:") and str(path) in " ".join(lines)
