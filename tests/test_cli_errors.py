"""Every input a user can get wrong: one sentence on stderr, exit 2, no traceback, nothing stored lost."""

import sqlite3

import pytest

from conftest import run_cli, write
from gpucompat.store import SCHEMA_VERSION


def one_sentence_error(proc, expected):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error:"), proc.stderr
    assert expected in " ".join(lines)


@pytest.mark.parametrize("args, expected", [
    (["sweep", "nope.toml"], "does not exist"),
    (["sweep"], "give a plan file"),
    (["sweep", "--resume", "999"], "there is no sweep 999"),
    (["sweep", "x.toml", "--resume", "1"], "not both"),
    (["results", "--sweep", "7"], "no sweep 7"),
    (["results"], "no sweeps stored"),
    (["check", "torch=2.4"], "is not a stack spec"),
    (["check", "torch==2.4.1", "--python", "three"], "not a Python version"),
    (["check", "torch==2.4.1", "--wheelhouse", "/no/such/dir"], "is not a directory"),
    (["results", "--db", "not-a-url"], "is not a database URL"),
])
def test_bad_input(isolated, args, expected):
    one_sentence_error(run_cli(*args), expected)


def test_bad_plan_file(isolated):
    plan = write(isolated / "bad.toml", '[[stacks]]\nframework = "torch"\nversions = "latest:zero"\n')
    one_sentence_error(run_cli("sweep", str(plan)), "bad.toml: [[stacks]] #1 versions: 'latest:zero' is malformed")


def test_unknown_format_after_a_real_sweep_keeps_the_data(isolated):
    plan = write(isolated / "p.toml", '[[stacks]]\nframework = "torch"\nversions = ["2.4.1"]\npython = ["3.13"]\n')
    run_cli("sweep", str(plan), check=0)
    one_sentence_error(run_cli("results", "--format", "xml"), "unknown format 'xml'")
    assert "ENV_UNRESOLVABLE" in run_cli("results", "--format", "csv", check=0).stdout


def test_a_database_from_a_newer_gpucompat_is_refused_untouched(isolated):
    plan = write(isolated / "p.toml", '[[stacks]]\nframework = "torch"\nversions = ["2.4.1"]\npython = ["3.13"]\n')
    run_cli("sweep", str(plan), check=0)
    db = isolated / "gpucompat.db"
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    one_sentence_error(run_cli("results"), "newer than this gpucompat understands")
    one_sentence_error(run_cli("sweep", str(plan)), "newer than this gpucompat understands")
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT count(*) FROM results").fetchone()[0] == 1
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION + 1)


def test_nothing_is_created_before_every_value_is_checked(isolated):
    db = isolated / "new" / "store.db"
    one_sentence_error(run_cli("sweep", str(isolated / "missing.toml"), "--db", f"sqlite:///{db}"), "does not exist")
    plan = write(isolated / "p.toml", '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), "--db", f"sqlite:///{db}", check=0)
    assert not db.parent.exists(), "a store was created by a run that stores nothing"


def test_markup_in_the_database_path_prints(isolated):
    plan = write(isolated / "p.toml", '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    db = f"sqlite:///{isolated / 'x[/bold].db'}"
    run_cli("sweep", str(plan), "--db", db, check=0)
    assert "bold" in run_cli("results", "--db", db, check=0).stdout.splitlines()[-1]  # printed, not parsed as markup


def test_a_damaged_schema_version_is_one_sentence(isolated):
    plan = write(isolated / "p.toml", '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    run_cli("sweep", str(plan), check=0)
    with sqlite3.connect(isolated / "gpucompat.db") as conn:
        conn.execute("UPDATE meta SET value='x' WHERE key='schema_version'")
    one_sentence_error(run_cli("results"), "is damaged")
