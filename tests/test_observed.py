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
    proc = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "550.90.07", "--python", "3.11", "--db", url,
                   "--json", *extra, check=0)
    return json.loads(proc.stdout)


def test_an_observed_pass_answers_first_and_names_where_it_was_seen(tmp_path):
    url = store_with(tmp_path, "PASS", "compute", "ran a test op on NVIDIA L40S")
    answer = ask(url)
    assert answer["source"] == "observed" and answer["verdict"] == "pass"
    assert answer["decided_by"].startswith("observed: torch 2.4.1+cu121 PASS on NVIDIA L40S, driver 550.90.07, Python 3.11, in sweep 1 on ")
    assert answer["predicted"]["verdict"] == "pass" and answer["disagreement"] is None


def test_an_observation_that_contradicts_the_rules_wins_and_shows_both(tmp_path):
    url = store_with(tmp_path, "COMPUTE_ERROR", "compute", "a small op on the GPU failed: RuntimeError: boom")
    answer = ask(url)
    assert (answer["source"], answer["verdict"], answer["code"]) == ("observed", "fail", "COMPUTE_ERROR")
    assert answer["predicted"]["verdict"] == "pass"
    assert answer["disagreement"].startswith("the rules predicted PASS; observed COMPUTE_ERROR")
    shown = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "550.90.07", "--python", "3.11", "--db", url,
                    env={"COLUMNS": "100"}, check=0).stdout
    assert "observed: torch 2.4.1+cu121 COMPUTE_ERROR on NVIDIA L40S" in " ".join(shown.split()) and "surprise: the rules predicted PASS" in " ".join(shown.split())
    listed = json.loads(run_cli("results", "--surprises", "--json", "--db", url, check=0).stdout)
    assert [(r["framework"], r["code"], r["predicted"]) for r in listed] == [("torch", "COMPUTE_ERROR", "pass")]


def test_another_driver_branch_is_not_the_same_question(tmp_path):
    url = store_with(tmp_path, "COMPUTE_ERROR", "compute", "boom")
    proc = run_cli("explain", "torch==2.4.1+cu121", "--gpu", "NVIDIA L40S", "--driver", "535.104.05", "--python", "3.11", "--db", url,
                   "--json", check=0)
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


# --- issue 29, part 4: a cell answers a question about the build it is ------------------------------------------

H200 = Target("NVIDIA H200", "9.0", "580.159.04", cuda_driver="13.0", count=1)
EVIDENCE = Path(__file__).resolve().parent.parent / "docs" / "evidence"


def installed_store(tmp_path, *cells: tuple[str, dict, list]) -> str:
    """A store of `check`-style cells (the interpreter as installed), each probe's import facts and loaded libraries
    as the real probe writes them, written through the Store API as a sweep writes them."""
    url = f"sqlite:///{tmp_path / 'installed.db'}"
    store = Store(url)
    stacks = [ResolvedStack(Stack(framework, "installed", "installed", "current", "current"), ok=True) for framework, _, _ in cells]
    sweep = store.create_sweep("check", "check", "", None, {}, [H200], stacks, lambda r, t: predict(Cell(0, r.stack, t, r)).to_dict())
    for cell, (framework, facts, libraries) in zip(store.cells_of(sweep), cells):
        probe = {"finished": True, "framework": framework, "system": {"python": "3.12.3"}, "loaded_libraries": libraries,
                 "stages": {"import": {"ok": True, "facts": facts}, "device": {"ok": True, "facts": {}}, "compute": {"ok": True, "facts": {}}}}
        store.record_result(cell.id, Outcome("PASS", "compute", f"ran a test op with {framework} on NVIDIA H200", {}),
                            Observation(facts=probe, returncode=0))
    store.close()
    return url


def library(name: str, version: str) -> dict:
    return {"name": name, "path": f"/venv/lib/python3.12/site-packages/nvidia/cu{version}/lib/{name}.so.{version}", "version": version}


TORCH_CU130 = ("torch", {"version": "2.11.0+cu130", "cuda_runtime": "13.0"}, [library("libcudart", "13")])
JAX_CUDA13 = ("jax", {"version": "0.11.2", "jaxlib": "0.11.2"}, [library("libcublas", "13"), library("libcudart", "13")])
JAX_UNRECORDED = ("jax", {"version": "0.11.2", "jaxlib": "0.11.2"}, [])  # a probe older than loaded_libraries
CUPY_CUDA13 = ("cupy", {"version": "14.2.0", "cuda_runtime": "13.2"}, [library("libcublas", "13")])


def ask_h200(url: str, spec: str, python: str = "3.12") -> dict:
    proc = run_cli("explain", spec, "--gpu", "NVIDIA H200", "--driver", "580.159.04", "--python", python, "--db", url, "--json", check=0)
    return json.loads(proc.stdout)


def test_torch_asked_without_a_build_finds_the_stored_build_that_is_pypis_default(tmp_path):
    url = installed_store(tmp_path, TORCH_CU130)
    answer = ask_h200(url, "torch==2.11.0")  # knowledge/data/torch_pypi_default.csv: PyPI's 2.11 is cu130
    assert answer["source"] == "observed" and answer["verdict"] == "pass"
    assert answer["decided_by"].startswith("observed: torch 2.11.0+cu130 (PyPI's default build of 2.11.0) PASS on NVIDIA H200, "
                                           "driver 580.159.04, Python 3.12.3, in sweep 1 on ")
    assert answer["observed"]["build"] == "torch 2.11.0+cu130" and answer["observed"]["build_from"] == "its version's local label"
    named = ask_h200(url, "torch==2.11.0+cu130")
    assert named["source"] == "observed" and named["observed"]["build_note"] is None  # asked as it is: nothing to explain


def test_another_build_of_the_same_release_is_not_the_observation(tmp_path):
    url = installed_store(tmp_path, TORCH_CU130)
    other = ask_h200(url, "torch==2.11.0+cu126")
    assert other["source"] == "rule" and other["observed"] is None


def test_jax_finds_the_cuda13_plugin_build_from_the_libraries_its_probe_loaded(tmp_path):
    url = installed_store(tmp_path, JAX_CUDA13)
    answer = ask_h200(url, "jax==0.11.2")
    assert answer["spec"] == "jax[cuda13]==0.11.2" and answer["source"] == "observed"
    assert answer["decided_by"].startswith("observed: jax[cuda13] 0.11.2 (read from the CUDA 13 libraries it loaded) PASS on NVIDIA H200")
    assert ask_h200(url, "jax[cuda13]==0.11.2")["source"] == "observed"
    assert ask_h200(url, "jax[cuda12]==0.11.2")["source"] == "rule"


def test_a_cell_whose_build_was_not_recorded_answers_only_a_question_that_left_the_build_open(tmp_path):
    url = installed_store(tmp_path, JAX_UNRECORDED)
    answer = ask_h200(url, "jax==0.11.2")
    assert answer["source"] == "observed"
    assert "jax 0.11.2 (its probe did not record which build it was) PASS" in answer["decided_by"]
    for named in ("jax[cuda13]==0.11.2", "jax[cuda12]==0.11.2"):
        assert ask_h200(url, named)["source"] == "rule"


@pytest.mark.parametrize("spec", ["cupy", "cupy==14.2.0", "cupy-cuda13x==14.2.0"])
def test_cupy_finds_cupy_cuda13x_from_the_cuda_runtime_its_probe_reported(tmp_path, spec):
    answer = ask_h200(installed_store(tmp_path, CUPY_CUDA13), spec)
    assert answer["source"] == "observed" and answer["observed"]["build"] == "cupy-cuda13x 14.2.0"
    assert "(read from the CUDA runtime 13.2 its probe reported)" in answer["decided_by"]


def test_cupy_cuda12x_is_not_answered_by_a_cupy_cuda13x_cell(tmp_path):
    assert ask_h200(installed_store(tmp_path, CUPY_CUDA13), "cupy-cuda12x==14.2.0")["source"] == "rule"


def test_an_observation_of_another_python_is_said_and_does_not_decide(tmp_path):
    url = installed_store(tmp_path, TORCH_CU130)
    answer = ask_h200(url, "torch==2.11.0", python="3.13")
    assert answer["source"] == "rule" and answer["observed"] is None
    said = [n for n in answer["notes"] if n.startswith("the store observed torch 2.11.0+cu130")]
    assert said and "with Python 3.12.3" in said[0] and said[0].endswith("give --python 3.12 for that observation to answer")


def test_a_torch_without_a_local_label_is_the_build_of_the_cuda_runtime_it_reports():
    from gpucompat.answers.observed import matching, stored_build

    assert stored_build("torch", "2.4.1", "installed", "12.1", None, "current") == ("cu121", "the CUDA runtime 12.1 its probe reported")
    assert stored_build("torch", "2.4.1+cu118", "default", "11.8", None, "current")[0] == "cu118"  # the label, not the stack's word
    assert stored_build("torch", "2.4.1", "cu118", None, None, "uv") == ("cu118", "the sweep's stack")
    row = {"cell": 1, "sweep": 1, "framework": "torch", "version": "2.4.1", "variant": "installed", "python": "3.12.3", "gpu": "NVIDIA L40S",
           "cc": "8.9", "driver": "550.90.07", "code": "PASS", "observed": True, "build": "cu121", "build_from": "x", "created_at": 0}
    assert matching([row], "torch", "2.4.1", "default", "3.12", "NVIDIA L40S", "8.9", "550.90.07")  # PyPI's 2.4 is cu121
    assert not matching([row], "torch", "2.4.1+cu118", "cu118", "3.12", "NVIDIA L40S", "8.9", "550.90.07")


def test_the_committed_h200_evidence_answers_torch_2_11_0_through_its_default_build(tmp_path):
    """docs/evidence/gpu-node-h200/gpu-node.db holds `torch 2.11.0+cu130` PASS; a copy is asked, the evidence is only read."""
    import shutil

    copy = tmp_path / "gpu-node.db"
    shutil.copyfile(EVIDENCE / "gpu-node-h200" / "gpu-node.db", copy)
    answer = ask_h200(f"sqlite:///{copy}", "torch==2.11.0")
    assert answer["source"] == "observed" and answer["verdict"] == "pass"
    assert answer["decided_by"].startswith("observed: torch 2.11.0+cu130 (PyPI's default build of 2.11.0) PASS on NVIDIA H200, driver 580.159.04")
    assert ask_h200(f"sqlite:///{copy}", "cupy")["observed"]["build"] == "cupy-cuda13x 14.2.0"


def test_a_schema_5_store_is_read_through_sqlite3_with_every_import_unverified(tmp_path):
    """A user's store from before signatures (schema 5, which reading alone does not upgrade) is read by explain through
    sqlite3, not SQLAlchemy: no signer, and an imported sweep unverified, as the upgrade would write it."""
    import sqlite3
    import subprocess
    import sys

    from gpucompat.answers.observed import SQLITE_READ_SCHEMAS, stored_rows
    from gpucompat.store import SCHEMA_VERSION

    assert SCHEMA_VERSION in SQLITE_READ_SCHEMAS
    from gpucompat.store import Store

    db = tmp_path / "old.db"
    store = Store(f"sqlite:///{db}")
    for _ in range(2):  # two sweeps of one cell each: the second stands for one imported from another site
        sweep = store.create_sweep("s", "sweep", "", None, {}, [Target("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", count=1)],
                                   [ResolvedStack(Stack("torch", "2.4.1", "default", "3.12", "uv"), True, cuda_runtime="12.1")],
                                   lambda r, t: {"verdict": "pass", "code": None, "stage": None, "warnings": [], "reasons": []})
        for cell in store.cells_of(sweep):
            store.record_result(cell.id, Outcome("PASS", "compute", "ran"), None)
    store.close()
    with sqlite3.connect(db) as conn:  # what gpucompat wrote before signatures: schema 5, sources without signer/verified
        conn.execute("ALTER TABLE sources DROP COLUMN signer")
        conn.execute("ALTER TABLE sources DROP COLUMN verified")
        conn.execute("INSERT INTO sources (site, origin, data) VALUES ('lab-a', 'digest', '{}')")
        conn.execute("UPDATE sweeps SET source_id = 1 WHERE id = 2")
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    rows = stored_rows(f"sqlite:///{db}")
    assert [(r["sweep"], r["source"], r["verified"], r["signer"]) for r in rows] == [(1, "local", True, None), (2, "lab-a", False, None)]
    code = ("import sys; from gpucompat.answers.observed import stored_rows; stored_rows(sys.argv[1]); "
            "print('sqlalchemy' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code, f"sqlite:///{db}"], capture_output=True, text=True, check=True).stdout.strip() == "False"
