"""Predictions stored beside observations, surprises first, and --skip-predicted-failures."""

import json
import shutil
import sqlite3

import pytest

from conftest import REPO, run_cli, write
from gpucompat.store import SCHEMA_VERSION, Store

pytestmark = pytest.mark.integration

PLAN = """
name = "declared classes"
[[targets]]
name = "NVIDIA H100 80GB HBM3"
cc = "9.0"
driver = "535.104.05"
[[stacks]]
framework = "cuda-runtime"
versions = ["12.2", "13.0"]
"""


def test_every_cell_gets_a_prediction_and_a_cell_that_never_ran_is_no_surprise(isolated):
    plan = write(isolated / "plan.toml", PLAN)
    proc = run_cli("sweep", str(plan), check=4)  # could not test: the jobs never started
    assert "Surprises" not in proc.stdout
    data = json.loads(run_cli("results", "--json", check=0).stdout)
    # this machine has no H100: the local executor cannot place either cell, so neither is tested (issue 39 section 2):
    # could not test (not-scheduled), never invalid, never a surprise against its prediction
    assert data["invalid"] == [] and data["counts"]["surprises"] == 0
    cells = {r["version"]: r for r in data["untested"]}
    assert {(r["code"], r["cause"]) for r in cells.values()} == {("UNTESTED", "not-scheduled")}
    assert all("no local GPU matches the declared class" in r["reason"] for r in cells.values())
    # ... while the knowledge's prediction is stored beside each: 12.2 works on driver 535, 13.0 needs a newer driver
    assert (cells["12.2"]["predicted"], cells["12.2"]["predicted_code"]) == ("pass", "")
    assert (cells["13.0"]["predicted"], cells["13.0"]["predicted_code"]) == ("fail", "DRIVER_TOO_OLD")
    assert "## Surprises" not in run_cli("results", "--format", "md", check=0).stdout
    csv_lines = run_cli("results", "--format", "csv", check=0).stdout.splitlines()
    assert csv_lines[0].endswith("observed,predicted,predicted_code,surprise")


def test_skip_predicted_failures_runs_nothing_for_them_and_says_so(isolated):
    plan = write(isolated / "plan.toml", PLAN)
    run_cli("sweep", str(plan), "--skip-predicted-failures", check=4)  # 12.2's job could not be placed here
    data = json.loads(run_cli("results", "--json", check=0).stdout)
    cells = {r["version"]: r for r in data["invalid"]}
    skipped = cells["13.0"]
    assert (skipped["code"], skipped["observed"]) == ("DRIVER_TOO_OLD", False)
    assert skipped["reason"].startswith("predicted, not run:") and "580.65.06" in skipped["reason"]
    placed = data["untested"][0]
    assert placed["version"] == "12.2" and placed["observed"] and placed["cause"] == "not-scheduled"
    assert data["counts"]["surprises"] == 0  # a prediction is never its own surprise, nor a cell that never ran
    assert "(device, predicted)" in run_cli("results", check=0).stdout
    assert "(predicted)" in run_cli("results", "--cells", check=0).stdout
    assert not list((isolated / "data").rglob("cell-*/result.json")), "a job ran"


def test_unresolvable_and_current_predictions(isolated):
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "torch"\nversions = ["2.4.1"]\npython = ["3.13"]\n'
                                         '[[stacks]]\nframework = "cupy"\nenv = "current"\n')
    run_cli("sweep", str(plan), check=0)
    store = Store()
    predicted = store.predictions_of(store.latest_sweep_id())
    verdicts = sorted((p["verdict"], p["code"]) for p in predicted.values())
    # no cupy in this interpreter: nothing to test, so no verdict is predicted either
    assert ("fail", "ENV_UNRESOLVABLE") in verdicts and ("uncertain", None) in verdicts


def test_a_schema_1_database_is_migrated_and_keeps_its_results(tmp_path):
    source = REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db"
    db = tmp_path / "old.db"
    shutil.copyfile(source, db)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == "1"
    store = Store(f"sqlite:///{db}")
    rows = store.result_rows(1)
    assert len(rows) == 10 and sum(r["code"] == "PASS" for r in rows) == 9 and all(r["observed"] for r in rows)
    with sqlite3.connect(db) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION)


def test_a_class_known_only_by_its_drivers_cuda_is_judged_by_the_oldest_such_driver(isolated):
    plan = write(isolated / "plan.toml", """
name = "htcondor-like"
executor = "htcondor"
[[targets]]
name = "NVIDIA GeForce GTX 1080"
cc = "6.1"
cuda_driver = "11.6"
[[stacks]]
framework = "cuda-runtime"
versions = ["11.8", "12.4"]
""")
    run_cli("sweep", str(plan), check=2)  # no schedd here: one sentence, exit 2; the predictions are stored before the submit
    store = Store()
    predicted = {c.stack.version: store.predictions_of(store.latest_sweep_id())[c.id] for c in store.cells_of(store.latest_sweep_id())}
    assert predicted["11.8"]["verdict"] == "pass"  # same major, minor-version compatibility from 510.39.01 >= 450.80.02
    assert (predicted["12.4"]["verdict"], predicted["12.4"]["code"]) == ("fail", "DRIVER_TOO_OLD")
