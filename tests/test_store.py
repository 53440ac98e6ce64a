import sqlite3

import pytest

from gpucompat.errors import UserError
from gpucompat.model import Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.store import SCHEMA_VERSION, Store


PREDICTED = {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}


def sample(store, kind="sweep"):
    a = ResolvedStack(Stack("cuda-runtime", "12.4", "default", "3.11", "uv", ("nvidia-cuda-runtime-cu12==12.4.*",)), True,
                      ("nvidia-cuda-runtime-cu12==12.4.127",), "12.4")
    b = ResolvedStack(Stack("torch", "2.4.1", "default", "3.13", "uv", ("torch==2.4.1",)), False, error="no cp313 wheels")
    targets = [Target("NVIDIA H100 80GB HBM3", "9.0", "580.1", "13.0", 81559, 1, ("GPU-1",)), Target("no GPU visible")]
    return store.create_sweep("s", kind, "plan text", "p.toml", {"offline": False, "wheelhouse": None, "workdir": None},
                              targets, [a, b], lambda resolved, target: PREDICTED)


def test_round_trip_of_cells_and_results(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'r.db'}")
    sweep = sample(store)
    cells = store.cells_of(sweep)
    assert len(cells) == 4
    first = cells[0]
    assert first.stack.requirements == ("nvidia-cuda-runtime-cu12==12.4.*",)
    assert first.target.devices == ("GPU-1",) and first.resolved.pins == ("nvidia-cuda-runtime-cu12==12.4.127",)
    assert store.record_result(first.id, Outcome("PASS", "compute", "ran", {"x": 1}, ("w",)), Observation({"stages": {}}, duration_s=1.5))
    # a second verdict for the same cell is refused, never duplicated
    assert not store.record_result(first.id, Outcome("NO_DEVICE", "device", "again"), None)
    assert [c.id for c in store.cells_of(sweep, pending_only=True)] == [c.id for c in cells[1:]]
    rows = store.result_rows(sweep)
    assert rows[0]["code"] == "PASS" and rows[0]["warnings"] == ["w"] and rows[0]["probe_version"] is None
    assert rows[1]["code"] is None
    listed = store.list_sweeps()
    assert (listed[0]["cells"], listed[0]["done"], listed[0]["passed"]) == (4, 1, 1)


def test_sqlite_uses_wal_and_records_the_schema_version(tmp_path):
    path = tmp_path / "w.db"
    Store(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_newer_schema_is_refused_and_left_untouched(tmp_path):
    path = tmp_path / "new.db"
    store = Store(f"sqlite:///{path}")
    sweep = sample(store)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(UserError, match=f"schema version {SCHEMA_VERSION + 1}, newer than this gpucompat understands"):
        Store(f"sqlite:///{path}")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM cells WHERE sweep_id=?", (sweep,)).fetchone()[0] == 4


def test_foreign_database_and_bad_urls(tmp_path):
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE invoices (id INTEGER)")
    with pytest.raises(UserError, match="not gpucompat's"):
        Store(f"sqlite:///{path}")
    with pytest.raises(UserError, match="is not a database URL"):
        Store("results.db")
    with pytest.raises(UserError, match="no database driver|not installed"):
        Store("nosuchdb://host/db")
    with pytest.raises(UserError, match="no sweep 42"):
        Store(f"sqlite:///{tmp_path / 'e.db'}").sweep(42)
    with pytest.raises(UserError, match="no sweeps stored"):
        Store(f"sqlite:///{tmp_path / 'e.db'}").latest_sweep_id()


def test_latest_counts_sweeps_only_and_a_check_is_addressed_by_id(tmp_path):
    from gpucompat.sweep_refs import resolve

    store = Store(f"sqlite:///{tmp_path / 'l.db'}")
    assert sample(store, "check") == 1
    assert store.latest_sweep_id() == 1  # no sweep yet: `results` right after a `check` shows the check
    with pytest.raises(UserError, match="no sweep run here is stored"):
        resolve(store, "latest")
    assert [sample(store, kind) for kind in ("sweep", "check", "sweep", "check")] == [2, 3, 4, 5]
    assert store.latest_sweep_id() == 4
    assert (resolve(store, "latest"), resolve(store, "latest~1"), resolve(store, " 5 ")) == (4, 2, 5)
    with pytest.raises(UserError, match=r"plan 's' has 2 sweeps run here in .*, so latest~2 does not exist"):
        resolve(store, "latest~2")
    with pytest.raises(UserError, match="there is no sweep 9"):
        resolve(store, "9")
    with pytest.raises(UserError, match="not a sweep"):
        resolve(store, "newest")


def test_a_password_in_the_url_is_never_shown(tmp_path):
    pytest.importorskip("psycopg")
    with pytest.raises(UserError) as caught:
        Store("postgresql+psycopg://gpucompat:s3cret@127.0.0.1:1/none")
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
