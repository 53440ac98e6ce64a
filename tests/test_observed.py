"""Observation first (issue 24, part 1): explain asks the store before the rules, says which decided,
shows the rules' prediction beside an observation and their disagreement; results --surprises lists
every such disagreement. The stores here are written through the real Store API, with the real
prediction of each cell made at creation as a sweep makes it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from gpucompat.model import Cell, Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.predict import predict
from gpucompat.store import Store

L40S = Target("NVIDIA L40S", "8.9", "550.90.07", cuda_driver="12.4", count=1)
TORCH = Stack("torch", "2.4.1", "cu121", "3.11", "uv", ("torch==2.4.1",))


def store_with(tmp_path, code: str, stage: str, summary: str) -> str:
    url = f"sqlite:///{tmp_path / 'site.db'}"
    store = Store(url)
    resolved = ResolvedStack(TORCH, ok=True, cuda_runtime="12.1")
    sweep = store.create_sweep("night", "sweep", "", None, {}, [L40S], [resolved],
                               lambda r, t: predict(Cell(0, r.stack, t, r)).to_dict())
    cell = store.cells_of(sweep)[0]
    store.record_result(cell.id, Outcome(code, stage, summary, {}), Observation(facts={"finished": True}, returncode=0))
    store.close()
    return url


def ask(url: str, *extra: str) -> dict:
    proc = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "550.90.07", "--db", url, "--json", *extra, check=0)
    return json.loads(proc.stdout)


def test_an_observed_pass_answers_first_and_names_where_it_was_seen(tmp_path):
    url = store_with(tmp_path, "PASS", "compute", "ran a test op on NVIDIA L40S")
    answer = ask(url)
    assert answer["source"] == "observed" and answer["verdict"] == "pass"
    assert answer["decided_by"].startswith("observed: PASS in sweep 1 (") and "on NVIDIA L40S, driver 550.90.07" in answer["decided_by"]
    assert answer["predicted"]["verdict"] == "pass" and answer["disagreement"] is None


def test_an_observation_that_contradicts_the_rules_wins_and_shows_both(tmp_path):
    url = store_with(tmp_path, "COMPUTE_ERROR", "compute", "a small op on the GPU failed: RuntimeError: boom")
    answer = ask(url)
    assert (answer["source"], answer["verdict"], answer["code"]) == ("observed", "fail", "COMPUTE_ERROR")
    assert answer["predicted"]["verdict"] == "pass"
    assert answer["disagreement"].startswith("the rules predicted PASS; observed COMPUTE_ERROR")
    shown = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "550.90.07", "--db", url,
                    env={"COLUMNS": "100"}, check=0).stdout
    assert "observed: COMPUTE_ERROR in sweep 1" in shown and "surprise: the rules predicted PASS" in " ".join(shown.split())
    listed = json.loads(run_cli("results", "--surprises", "--json", "--db", url, check=0).stdout)
    assert [(r["framework"], r["code"], r["predicted"]) for r in listed] == [("torch", "COMPUTE_ERROR", "pass")]


def test_another_driver_branch_is_not_the_same_question(tmp_path):
    url = store_with(tmp_path, "COMPUTE_ERROR", "compute", "boom")
    proc = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "535.104.05", "--db", url, "--json", check=0)
    answer = json.loads(proc.stdout)
    assert answer["source"] == "rule" and answer["decided_by"].startswith("predicted by rule")


def test_no_store_yet_means_the_rules_alone_and_nothing_is_created(tmp_path):
    missing = tmp_path / "none.db"
    answer = ask(f"sqlite:///{missing}")
    assert answer["source"] == "rule" and not missing.exists()


@pytest.mark.parametrize("source, expected", [("local", "observed"), ("imported", "rule")])
def test_source_filters_the_observations(tmp_path, source, expected):
    url = store_with(tmp_path, "PASS", "compute", "ran")
    assert ask(url, "--source", source)["source"] == expected


# --- part 4: older Pythons in questions; part 5: sources that disagree ------------------------------

def test_a_question_may_name_python_36_and_the_answer_says_the_probe_cannot_test_it():
    proc = run_cli("explain", "torch==2.0.1", "--gpu", "V100", "--driver", "535.104.05", "--python", "3.6", "--json", check=0)
    answer = json.loads(proc.stdout)
    assert answer["code"] == "ENV_UNRESOLVABLE"  # torch 2.0 has no Python 3.6 wheel: the wheel tables say so
    assert any("probe needs Python 3.8 or newer" in note for note in answer["notes"])
    refused = run_cli("check", "torch==2.0.1", "--python", "3.7", check=2)
    assert "cannot test Python 3.7" in refused.stderr and "gpucompat explain SPEC --python 3.7" in refused.stderr


def test_public_reports_that_contradict_each_other_make_the_answer_uncertain_naming_both(monkeypatch):
    from gpucompat.knowledge import rules, tables

    real = tables.table
    row = next(r for r in real("torch_builds") if r["release"] == "2.4" and r["variant"] == "cu121")
    other = {**row, "sass": "sm_90", "ptx": "", "source": "https://example.org/a-report-that-lists-only-sm_90"}
    monkeypatch.setattr(tables, "table", lambda name: real(name) + (other,) if name == "torch_builds" else real(name))
    prediction = rules.predict_stack("torch", "2.4.1", "cu121", "8.9", "550.90.07")
    assert prediction.verdict == "uncertain"
    disagree = next(r for r in prediction.reasons if r.rule == "architecture")
    assert disagree.text.startswith("sources disagree: the build has SASS") and row["source"] in disagree.source and other["source"] in disagree.source
    monkeypatch.setattr(tables, "table", real)
    assert rules.predict_stack("torch", "2.4.1", "cu121", "8.9", "550.90.07").verdict == "pass"  # one report: a confident answer


# --- explain reads a SQLite store through sqlite3, with the store's own query compiled once -------------------

def test_sqlite3_reads_exactly_what_the_store_reads_and_leaves_sqlalchemy_unimported(tmp_path, monkeypatch):
    from gpucompat.answers.observed import _row, stored_rows

    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    url = store_with(tmp_path, "COMPUTE_ERROR", "compute", "boom")
    for source in (None, "local", "imported", "a-site"):
        for framework in (None, "torch", "jax"):
            by_store = [_row(r) for r in Store(url, readonly=True).result_rows(None, source=source, framework=framework)]
            assert stored_rows(url, source, framework) == by_store
    code = ("import sys; from gpucompat.answers.observed import stored_rows; rows = stored_rows(sys.argv[1], None, 'torch'); "
            "print(len(rows), rows[0]['code'], 'sqlalchemy' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, url], capture_output=True, text=True, check=True,
                          env={**os.environ, "GPUCOMPAT_CACHE": str(tmp_path / "cache")})
    assert proc.stdout.split() == ["1", "COMPUTE_ERROR", "False"]


def test_a_store_of_another_schema_version_is_left_to_the_store(tmp_path, monkeypatch):
    from gpucompat.answers.observed import _sqlite_rows

    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    url = store_with(tmp_path, "PASS", "compute", "ran")
    path = tmp_path / "site.db"
    assert len(_sqlite_rows(path, None, "torch")) == 1
    with sqlite3.connect(path) as db:
        db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    assert _sqlite_rows(path, None, "torch") is None  # the store then refuses it with its own sentence
    proc = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "550.90.07", "--db", url, check=2)
    assert "schema version 99, newer than this gpucompat understands" in proc.stderr
    assert _sqlite_rows(tmp_path / "not-a-store.db", None, "torch") is None


def _wal_store(tmp_path, monkeypatch) -> Path:
    from contextlib import closing

    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "store"
    folder.mkdir()
    store_with(folder, "PASS", "compute", "ran")
    with closing(sqlite3.connect(folder / "site.db")) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"  # the store's own mode: what leaves the files
    assert sorted(p.name for p in folder.iterdir()) == ["site.db"]
    return folder / "site.db"


def test_reading_a_store_for_explain_leaves_no_wal_or_shm_beside_it(tmp_path, monkeypatch):
    from gpucompat.answers.observed import _sqlite_rows

    path = _wal_store(tmp_path, monkeypatch)
    assert len(_sqlite_rows(path, None, "torch")) == 1
    assert sorted(p.name for p in path.parent.iterdir()) == ["site.db"]


def test_reading_a_store_in_a_directory_we_cannot_write_leaves_nothing_either(tmp_path, monkeypatch):
    from gpucompat.answers.observed import _sqlite_rows

    path = _wal_store(tmp_path, monkeypatch)
    path.parent.chmod(0o555)  # a store others keep (immutable=1)
    try:
        if os.access(path.parent, os.W_OK):
            pytest.skip("running as root, who may write any directory: one we cannot write cannot be made here")
        assert len(_sqlite_rows(path, None, "torch")) == 1
        assert sorted(p.name for p in path.parent.iterdir()) == ["site.db"]
    finally:
        path.parent.chmod(0o755)
