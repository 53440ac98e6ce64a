"""Result tables in the seed's format, and the JUnit export, on the stored H200 sweep."""

import shutil
import xml.etree.ElementTree as ET

from conftest import REPO, run_cli
from gpucompat.analysis import collapse_runs

H200_DB = REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db"


def test_runs_collapse_over_what_was_tested():
    axis = ["11.1", "11.2", "11.4", "11.5", "11.6", "12.0"]
    assert collapse_runs(["11.1", "11.2", "11.4", "11.5"], axis) == ["11.1-11.5"]  # 11.3 was not tested
    assert collapse_runs(["11.1", "11.5", "12.0"], axis) == ["11.1", "11.5", "12.0"]
    assert collapse_runs(["12.0", "11.6"], axis) == ["11.6-12.0"]
    assert collapse_runs(["-"], axis) == ["-"]


def test_seed_tables_and_junit_from_a_real_sweep(tmp_path):
    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    url = f"sqlite:///{db}"
    sweep = ("--sweep", "1")  # sweep 2 in that file is the `check` run beside it
    table = run_cli("results", "--db", url, *sweep, check=0).stdout
    assert "Framework Version" in table and "Compute Capability" in table
    assert "11.8-13.5" in table  # six CUDA runtimes, all passing on the H200, read as one run
    assert "IMPORT_FAILED (import)" in table
    per_cell = run_cli("results", "--db", url, *sweep, "--cells", check=0).stdout
    assert per_cell.count("cuda-runtime") == 6
    suite = ET.fromstring(run_cli("results", "--db", url, *sweep, "--format", "junit", check=0).stdout.split("?>", 1)[1])
    assert suite.get("tests") == "10" and suite.get("failures") == "1"
    failed = [c for c in suite.iter("testcase") if c.find("failure") is not None]
    assert [c.get("classname") for c in failed] == ["tensorflow.not installed"]
    assert failed[0].find("failure").get("type") == "IMPORT_FAILED"
