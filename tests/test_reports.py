"""Result tables in the seed's format, and the JUnit export, on the stored H200 sweep."""

import re
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
    # the sweep's own column names, with where to find each cell
    assert "Valid combinations (9 cells)" in table and "--cells` lists each cell" in table
    assert "11.8-13.5" in table  # six CUDA runtimes, all passing on the H200, read as one run
    # tensorflow, not in the interpreter: stored IMPORT_FAILED before the cause not-installed existed, read as it (issue 39
    # item 8c): could not test, never an invalid combination
    assert "IMPORT_FAILED" not in table and "Could not test (1)" in table and "not-installed" in table
    assert "No module named 'tensorflow'" in table
    per_cell = run_cli("results", "--db", url, *sweep, "--cells", check=0).stdout
    assert per_cell.count("cuda-runtime") == 6
    suite = ET.fromstring(run_cli("results", "--db", url, *sweep, "--format", "junit", check=0).stdout.split("?>", 1)[1])
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("10", "0", "1")
    skipped = [c for c in suite.iter("testcase") if c.find("skipped") is not None]
    assert [c.get("classname") for c in skipped] == ["tensorflow.not installed"]
    assert skipped[0].find("skipped").get("message") == "UNTESTED (not-installed): could not test"


def _sweep(store, driver, outcomes):
    """A stored sweep on one H100 class: {cuda series: (code, stage, summary)}."""
    from gpucompat.model import Outcome, ResolvedStack, Stack, Target

    resolved = [ResolvedStack(Stack("cuda-runtime", series, "default", "3.12", "uv"), True, cuda_runtime=series) for series in outcomes]
    sweep = store.create_sweep("quarterly", "sweep", "", None, {}, [Target("NVIDIA H100 80GB HBM3", "9.0", driver, count=1)], resolved,
                               lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome(*outcomes[cell.stack.version]), None)
    return sweep


def test_markdown_names_each_cell_s_gpu_driver_python_and_site(tmp_path):
    """The grouped tables say none of them (issue 39 section 8): a table of cells under them does."""
    from gpucompat.store import Store

    url = f"sqlite:///{tmp_path / 'md.db'}"
    _sweep(Store(url), "550.54.15", {"12.4": ("PASS", "compute", "ran"), "13.0": ("DRIVER_TOO_OLD", "device", "runtime 13.0 is newer")})
    markdown = run_cli("results", "--db", url, "--format", "md", check=0).stdout
    cells = markdown.split("## Cells", 1)[1].strip().splitlines()
    assert cells[0] == "| Framework | Version | Variant | Python | GPU | CC | Driver | CUDA runtime | Verdict | Source |"
    assert cells[2:] == ["| cuda-runtime | 12.4 | default | 3.12 | NVIDIA H100 80GB HBM3 | 9.0 | 550.54.15 | 12.4 | PASS (compute) | local |",
                         "| cuda-runtime | 13.0 | default | 3.12 | NVIDIA H100 80GB HBM3 | 9.0 | 550.54.15 | 13.0 | DRIVER_TOO_OLD (device) | local |"]


def test_diff_and_history_after_a_driver_change(tmp_path):
    import json

    from gpucompat.store import Store

    url = f"sqlite:///{tmp_path / 'q.db'}"
    store = Store(url)
    ok = ("PASS", "compute", "ran")
    old = ("DRIVER_TOO_OLD", "device", "runtime 12.4 is newer than the driver supports")
    _sweep(store, "550.54.15", {"12.4": ok, "12.6": old, "11.8": ok})
    _sweep(store, "535.104.05", {"12.4": old, "12.6": ok, "13.0": ok})
    proc = run_cli("diff", "latest~1", "latest", "--db", url, "--json")
    assert proc.returncode == 1, "a newly broken cell must fail the routine"
    changes = json.loads(proc.stdout)
    assert [c["after"]["version"] for c in changes["newly_broken"]] == ["12.4"]
    assert changes["newly_broken"][0]["before"]["driver"] == "550.54.15" and changes["newly_broken"][0]["after"]["driver"] == "535.104.05"
    assert [c["after"]["version"] for c in changes["newly_working"]] == ["12.6"]
    assert [c["after"]["version"] for c in changes["added"]] == ["13.0"]
    assert [c["before"]["version"] for c in changes["removed"]] == ["11.8"]
    assert run_cli("diff", "1", "1", "--db", url).returncode == 0
    text = run_cli("diff", "1", "2", "--db", url).stdout
    assert "Newly broken (1)" in text
    rows = json.loads(run_cli("history", "cuda-runtime==12.4", "--cc", "9.0", "--db", url, "--json", check=0).stdout)
    assert [(r["sweep"], r["code"]) for r in rows] == [(1, "PASS"), (2, "DRIVER_TOO_OLD")]
    bad = run_cli("diff", "latest~7", "latest", "--db", url)
    assert bad.returncode == 2 and "plan 'quarterly' has 2 sweeps run here" in bad.stderr and "latest~7 does not exist" in bad.stderr


def test_advise_observed_first_then_predicted(tmp_path):
    import json

    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    data = json.loads(run_cli("advise", "--framework", "cuda-runtime", "--gpu", "NVIDIA H200", "--driver", "580.159.04",
                              "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    assert [o["version"] for o in data["observed"]] == ["13.5", "13.0", "12.9", "12.4", "12.0"]
    assert data["observed"][0]["install"] == "pip install 'nvidia-cuda-runtime==13.5.*' 'nvidia-cuda-nvrtc==13.5.*'"
    assert data["predicted"] and all(p["source"] == "predicted" for p in data["predicted"])
    torch = json.loads(run_cli("advise", "--framework", "torch", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "570.86.10",
                               "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    assert torch["observed"] == []  # no RTX 5090 in the stored sweeps
    commands = [p["install"] for p in torch["predicted"]]
    # exact releases; a default build (no index URL) only where PyPI's default is a CUDA 12.8+ build with sm_120
    assert all("cu12" in c or re.fullmatch(r"pip install 'torch==2\.(8|9|10)\.[0-9]+'", c) for c in commands), commands
    assert not any("cu121" in c or "cu124" in c for c in commands), "builds without sm_120 must not be advised for an RTX 5090"
    alias = json.loads(run_cli("advise", "pytorch", "--cc", "8.0", "--driver", "535.104.05", "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    assert alias["framework"] == "torch" and alias["notes"][0] == "pytorch (conda's name) read as torch"
    assert alias["notes"][1].startswith("Python 3.") and "this interpreter's" in alias["notes"][1]  # the Python assumed, said  # the framework positionally, as explain
    bad = run_cli("advise", "--framework", "pytorchz", "--cc", "8.0", "--driver", "535.104.05", "--db", f"sqlite:///{db}")
    assert bad.returncode == 2 and "unknown framework" in bad.stderr


def test_advise_leaves_out_observed_passes_the_asked_driver_or_python_cannot_run(tmp_path):
    """The H200 sweep saw CUDA 12.x/13.x pass on driver 580; asked about driver 550 (the first branch that drives an
    H200), the CUDA 13 ones cannot run. (This asked about R470 until R470 was known not to drive any Hopper GPU.)"""
    import json

    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    old_driver = json.loads(run_cli("advise", "--framework", "cuda-runtime", "--gpu", "NVIDIA H200", "--driver", "550.54.14",
                                    "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    # CUDA 12.x runs on R550 by minor-version compatibility; CUDA 13 is a newer major than it supports
    assert [o["version"] for o in old_driver["observed"]] == ["12.9", "12.4", "12.0", "11.8"]
    assert {o["version"] for o in old_driver["left_out"] if o["source"] == "observed"} == {"13.5", "13.0"}
    assert all("DRIVER" in o["why"] or "newer" in o["why"] for o in old_driver["left_out"] if o["source"] == "observed")
    assert [p["version"] for p in old_driver["predicted"]][:1] == ["12.9"]  # the newest CUDA an R550 driver runs
    text = run_cli("advise", "--framework", "cuda-runtime", "--gpu", "NVIDIA H200", "--driver", "550.54.14", "--explain",
                   "--db", f"sqlite:///{db}", check=0, env={"COLUMNS": "200"}).stdout
    assert "left out" in text and "13.5" in text
    undriven = json.loads(run_cli("advise", "--framework", "cuda-runtime", "--gpu", "NVIDIA H200", "--driver", "470.82.01",
                                  "--db", f"sqlite:///{db}", "--json", check=0).stdout)
    assert undriven["observed"] == [] and undriven["predicted"] == [] and "NVIDIA H200 needs R550" in undriven["undriven"]


def test_advise_covers_tensorflow_and_needs_a_known_gpu(tmp_path):
    import json

    tf = json.loads(run_cli("advise", "--framework", "tensorflow", "--cc", "8.0", "--driver", "550.54.14", "--python", "3.11",
                            "--db", f"sqlite:///{tmp_path / 'empty.db'}", "--json", check=0).stdout)
    assert tf["predicted"], tf["left_out"][:3]
    assert all(p["install"].startswith("pip install 'tensorflow") for p in tf["predicted"])
    unknown = run_cli("advise", "--framework", "torch", "--gpu", "NVIDIA Fantasy 9000", "--driver", "550.54.14",
                      "--db", f"sqlite:///{tmp_path / 'empty.db'}")
    assert unknown.returncode == 2 and "--cc" in unknown.stderr


def test_untested_cells_are_no_fact_for_diff_history_or_advise(tmp_path):
    """A cell that could not be tested is never newly broken, never in history, never advised from."""
    import json

    from gpucompat.model import Outcome
    from gpucompat.store import Store

    url = f"sqlite:///{tmp_path / 'q.db'}"
    store = Store(url)
    ok = ("PASS", "compute", "ran")
    untested = Outcome("UNTESTED", "install", "could not test: the network failed", {"cause": "network"}, cause="network")
    _sweep(store, "580.159.04", {"12.4": ok, "13.0": ok})
    second = _sweep(store, "580.159.04", {"12.4": ok, "13.0": ("PASS", "compute", "ran")})
    # the second sweep's 13.0 could not be tested: replace its verdict as --resume's retry would see it
    cell = next(c for c in store.cells_of(second) if c.stack.version == "13.0")
    assert store.retry_untested(second) == 0
    with store.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM results WHERE cell_id = ?", (cell.id,))
    store.record_result(cell.id, untested, None)
    proc = run_cli("diff", "latest~1", "latest", "--db", url, "--json", check=0)
    changes = json.loads(proc.stdout)
    assert changes["newly_broken"] == [] and [c["after"]["code"] for c in changes["untested"]] == ["UNTESTED"]
    assert "Not compared (could not test) (1)" in run_cli("diff", "1", "2", "--db", url, check=0).stdout
    rows = json.loads(run_cli("history", "cuda-runtime==13.0", "--cc", "9.0", "--db", url, "--json", check=0).stdout)
    assert [r["sweep"] for r in rows] == [1]
    listed = json.loads(run_cli("results", "--list", "--json", "--db", url, check=0).stdout)
    assert [s["untested"] for s in listed] == [0, 1]
    assert store.retry_untested(second) == 1 and len(store.cells_of(second, pending_only=True)) == 1


def test_the_grouped_view_keeps_pythons_apart_where_a_versions_cells_differ_by_python(tmp_path):
    """torch 2.4.1 passing on Python 3.12 and unresolvable on 3.13 (no cp313 wheel) is not 'invalid everywhere': the
    grouped tables get a Python column (Markdown and HTML: the version says its Python); a sweep of one Python does not."""
    from gpucompat.model import Outcome, ResolvedStack, Stack, Target
    from gpucompat.store import Store

    url = f"sqlite:///{tmp_path / 'py.db'}"
    store = Store(url)
    resolved = [ResolvedStack(Stack("torch", "2.4.1", "default", "3.12", "uv"), True, cuda_runtime="12.1"),
                ResolvedStack(Stack("torch", "2.4.1", "default", "3.13", "uv"), False, cause="no cp313 wheel")]
    sweep = store.create_sweep("pythons", "sweep", "", None, {}, [Target("NVIDIA A100-SXM4-80GB", "8.0", "550.54.14", count=1)], resolved,
                               lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    outcomes = {"3.12": Outcome("PASS", "compute", "ran"), "3.13": Outcome("ENV_UNRESOLVABLE", "resolve", "no wheels with a matching Python ABI tag (cp313)")}
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, outcomes[cell.stack.python], None)
    table = run_cli("results", "--db", url, env={"COLUMNS": "200"}, check=0).stdout
    header = next(line for line in table.splitlines() if "Failure (stage)" in line)
    assert "Python" in header
    invalid = table.split("Invalid combinations", 1)[1]
    assert "3.13" in invalid and "3.12" not in invalid.split("Could not test")[0]
    markdown = run_cli("results", "--db", url, "--format", "md", check=0).stdout
    assert "2.4.1 (Python 3.13)" in markdown and "2.4.1 (Python 3.12)" in markdown
    one = f"sqlite:///{tmp_path / 'one.db'}"
    store = Store(one)
    sweep = store.create_sweep("one", "sweep", "", None, {}, [Target("NVIDIA A100-SXM4-80GB", "8.0", "550.54.14", count=1)], resolved[:1],
                               lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, outcomes["3.12"], None)
    assert "(Python" not in run_cli("results", "--db", one, "--format", "md", check=0).stdout
