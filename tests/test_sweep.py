"""End to end through the real CLI: real uv, real venvs, real probes, a real SQLite file."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from conftest import REPO, have_torch, run_cli, write

pytestmark = pytest.mark.integration


def results_json(*extra):
    proc = run_cli("results", "--format", "json", *extra, check=0)
    return json.loads(proc.stdout)


def by_stack(data):
    return {(r["framework"], r["version"], r["python"] if r["env"] == "uv" else "current"): r for r in data["valid"] + data["invalid"] + data["untested"]}


def test_quick_plan_end_to_end(isolated):
    proc = run_cli("sweep", str(REPO / "examples" / "plans" / "quick.toml"), check=0)
    assert "Invalid combinations" in proc.stdout
    data = results_json()
    assert data["counts"]["pending"] == 0 and data["sweep"]["status"] == "done"
    cells = by_stack(data)
    py = f"{sys.version_info[0]}.{sys.version_info[1]}"
    for series in ("11.8", "12.4", "13.0"):
        cell = cells[("cuda-runtime", series, py)]
        # really installed and probed: the runtime library loaded, then no driver was found: could not test, never invalid
        assert (cell["code"], cell["cause"], cell["stage"], cell["cuda_runtime"]) == ("UNTESTED", "no-gpu", "device", series)
        assert "no kernel module, no libcuda.so.1" in cell["reason"]
    impossible = cells[("torch", "2.4.1", "3.13")]
    assert (impossible["code"], impossible["stage"]) == ("ENV_UNRESOLVABLE", "resolve") and "cp313" in impossible["reason"]
    current = next(r for k, r in cells.items() if k[0] == "torch" and k[2] == "current")
    if have_torch():
        assert current["code"] == "NO_DEVICE" and "CPU-only" in current["reason"]
    else:  # nothing installed to test: no verdict (UNTESTED, its own cause), never an invalid combination
        assert (current["code"], current["cause"]) == ("UNTESTED", "not-installed") and "not installed here" in current["reason"]
    csv_text = run_cli("results", "--format", "csv", check=0).stdout
    assert csv_text.splitlines()[0].startswith("cell,framework,version") and csv_text.count("\n") == 6
    md = run_cli("results", "--format", "md", check=0).stdout
    assert "## Valid combinations" in md and "| torch | 2.4.1 |" in md
    listed = json.loads(run_cli("results", "--list", "--json", check=0).stdout)
    assert listed[-1]["cells"] == 5 and listed[-1]["done"] == 5


def test_check_reuses_the_environment_and_exits_1_when_broken(isolated):
    first = run_cli("check", "cuda-runtime==12.4", "--json", check=4)  # no GPU here: could not test
    data = json.loads(first.stdout)
    assert [r["cause"] for r in data["untested"]] == ["no-gpu"] and data["invalid"] == []
    envs = list((isolated / "cache" / "envs").glob("*.install.log"))
    assert len(envs) == 1
    built = envs[0].stat().st_mtime_ns
    second = run_cli("check", "cuda-runtime==12.4", "--json", check=4)
    assert json.loads(second.stdout)["untested"][0]["cause"] == "no-gpu"
    assert envs[0].stat().st_mtime_ns == built, "the cached environment was rebuilt"


def test_wheelhouse_installs_with_no_index(isolated):
    wheelhouse = isolated / "wheelhouse"
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", str(wheelhouse),
                    "nvidia-cuda-runtime-cu12==12.4.127", "nvidia-cuda-nvrtc-cu12==12.4.127"], check=True, capture_output=True)
    ok = json.loads(run_cli("check", "cuda-runtime==12.4", "--wheelhouse", str(wheelhouse), "--json", check=4).stdout)
    assert ok["untested"][0]["cause"] == "no-gpu" and ok["untested"][0]["stage"] == "device"  # installed from the wheelhouse, probed, no driver here
    # a wheelhouse is a partial copy of the index: what it lacks is a gap in it, not a fact about the stack
    missing = json.loads(run_cli("check", "cuda-runtime==12.6", "--wheelhouse", str(wheelhouse), "--json", check=4).stdout)
    assert missing["invalid"] == [] and missing["counts"]["untested"] == 1
    assert missing["untested"][0]["cause"] == "wheelhouse" and missing["untested"][0]["stage"] == "resolve"


FAKES = {
    # a framework whose import never returns
    "torch/__init__.py": "import time\ntime.sleep(120)\n",
    # one whose import kills the interpreter
    "jax/__init__.py": "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    # one that imports, then hangs asking for the device count
    "cupy/__init__.py": (
        "__version__ = '0.0.fake'\n"
        "class _Runtime:\n"
        "    def runtimeGetVersion(self): return 12040\n"
        "    def driverGetVersion(self): return 12040\n"
        "    def getDeviceCount(self):\n"
        "        import time; time.sleep(120)\n"
        "class cuda:\n    runtime = _Runtime()\n"
    ),
}


def test_timeouts_name_the_stage_and_crashes_name_the_signal(isolated):
    fakes = isolated / "fakes"
    for name, text in FAKES.items():
        (fakes / name).parent.mkdir(parents=True, exist_ok=True)
        (fakes / name).write_text(text)
    plan = write(isolated / "plan.toml", """
name = "misbehaving frameworks"
[timeouts]
import = "3s"
device = "3s"
cell = "60s"
[[stacks]]
framework = "torch"
env = "current"
[[stacks]]
framework = "jax"
env = "current"
[[stacks]]
framework = "cupy"
env = "current"
""")
    began = time.monotonic()
    run_cli("sweep", str(plan), env={"PYTHONPATH": str(fakes)}, check=0)
    assert time.monotonic() - began < 60, "a hung stage was not killed on time"
    cells = {r["framework"]: r for r in results_json()["invalid"]}
    assert (cells["torch"]["code"], cells["torch"]["stage"]) == ("TIMEOUT", "import")
    assert (cells["jax"]["code"], cells["jax"]["stage"]) == ("CRASHED", "import") and "SIGSEGV" in cells["jax"]["reason"]
    assert (cells["cupy"]["code"], cells["cupy"]["stage"]) == ("TIMEOUT", "device")


def _count_results(db):
    try:
        with sqlite3.connect(db) as conn:
            return conn.execute("SELECT count(*) FROM results").fetchone()[0]
    except sqlite3.Error:
        return 0


def test_a_sweep_killed_with_sigkill_resumes_without_loss_or_duplicates(isolated):
    series = ["11.7", "11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0"]
    plan = write(isolated / "plan.toml", f"""
name = "killed"
max_parallel_installs = 1
[[stacks]]
framework = "cuda-runtime"
versions = {json.dumps(series)}
""")
    db = isolated / "gpucompat.db"
    proc = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env=os.environ.copy())
    deadline = time.monotonic() + 300
    while _count_results(db) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    with sqlite3.connect(db) as conn:
        before = dict(conn.execute("SELECT cell_id, finished_at FROM results").fetchall())
        sweep_id, status = conn.execute("SELECT id, status FROM sweeps").fetchone()
    assert 2 <= len(before) < len(series), f"the kill did not land part-way ({len(before)} of {len(series)} done)"
    assert status == "running"  # killed: it never got to say otherwise

    run_cli("sweep", "--resume", str(sweep_id), check=0)
    with sqlite3.connect(db) as conn:
        after = conn.execute("SELECT cell_id, finished_at, code FROM results").fetchall()
        cells = conn.execute("SELECT count(*) FROM cells").fetchone()[0]
        assert conn.execute("SELECT status FROM sweeps").fetchone()[0] == "done"
    assert cells == len(series) and len(after) == len(series)
    assert len({cell for cell, _, _ in after}) == len(after), "a cell has two verdicts"
    # no GPU here, so every cell is could-not-test (no-gpu), which --resume retries by design; a verdict it kept is
    # covered where cells have verdicts (tests/test_uv_causes.py)
    assert {code for _, _, code in after} == {"UNTESTED"}


PREVIEW_PLAN = """
name = "preview"
executor = "slurm"
[slurm]
max_running = 2
[[targets]]
name = "NVIDIA H100 80GB HBM3"
cc = "9.0"
driver = "535.104.05"
gres = "h100"
[[stacks]]
framework = "cuda-runtime"
versions = ["12.2", "13.0"]
[[stacks]]
framework = "torch"
versions = ["2.4.1"]
python = ["3.13"]
"""


@pytest.mark.parametrize("skip", [False, True])
def test_a_dry_run_says_what_was_decided_before_any_job_and_what_would_be_submitted(isolated, skip):
    from gpucompat import sweep as pipeline
    from gpucompat.plan import parse_plan

    options = pipeline.RunOptions(skip_predicted_failures=skip)
    out = isolated / "out"
    summary = pipeline.dry_run(parse_plan(PREVIEW_PLAN), PREVIEW_PLAN, options, out, pipeline.Progress())
    # torch 2.4.1 has no wheel for Python 3.13: decided at resolve, no job; CUDA 13.0 needs a newer driver than 535
    assert (summary.cells, summary.shape) == (3, "3 stacks × 1 GPU class")
    assert summary.decided_at_resolve == {"ENV_UNRESOLVABLE": 1} and summary.resolve_examples["ENV_UNRESOLVABLE"].startswith("torch")
    assert summary.skipped == ({"DRIVER_TOO_OLD": 1} if skip else {}) and summary.predicted_to_fail == (0 if skip else 1)
    assert summary.gpu_jobs == (1 if skip else 2) == len(list(out.glob("cell-*/run.sh")))  # exactly the cells the run would submit
    assert summary.submissions == "1 job array (one per GPU class and request), at most 2 tasks of each running at once ([slurm] max_running)"
    assert f"#SBATCH --array=0-{summary.gpu_jobs - 1}%2" in (out / "array-0.sh").read_text()
    assert sorted(summary.files) == sorted(str(p) for p in out.rglob("*") if p.is_file())
    lines = summary.lines()
    assert len(lines) == 5 and lines[0] == "dry run (slurm): 3 cells (3 stacks × 1 GPU class)"
    assert lines[1].startswith("  1 decided at resolve, no job: ENV_UNRESOLVABLE 1 (e.g. torch")
    if skip:
        assert lines[2] == "  1 predicted to fail, skipped (--skip-predicted-failures): DRIVER_TOO_OLD 1"
        assert lines[3].startswith("  1 GPU job the real run would submit: 1 job array")
    else:
        assert lines[2].startswith("  2 GPU jobs the real run would submit: 1 job array")
        assert lines[3] == "  1 of them predicted to fail: --skip-predicted-failures would run no job for it"
    assert lines[4].endswith("(--list-files lists them); nothing was submitted or stored") and str(out) in lines[4]
    assert json.loads(json.dumps(summary.as_dict()))["gpu_jobs"] == summary.gpu_jobs


def test_a_dry_run_previews_build_first(isolated):
    from gpucompat import sweep as pipeline
    from gpucompat.plan import parse_plan

    text = PREVIEW_PLAN.replace("max_running = 2", "build_first = true")
    summary = pipeline.dry_run(parse_plan(text), text, pipeline.RunOptions(), isolated / "out", pipeline.Progress())
    assert summary.submissions == ("1 job array (one per GPU class and request); first a CPU array building 2 environments, "
                                   "the GPU arrays after it (--dependency=afterok, [slurm] build_first)")
    assert len(list((isolated / "out" / "build").glob("*/build.sh"))) == 2


def test_the_dry_run_command_prints_a_few_lines_and_the_paths_only_when_asked(isolated):
    plan = write(isolated / "plan.toml", PREVIEW_PLAN)
    out = isolated / "out"
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(out), "--skip-predicted-failures", check=0)
    said = proc.stderr.splitlines()
    assert proc.stdout == "" and not any(str(out / "cell-") in line for line in said)  # no path unless --list-files
    assert "dry run (slurm): 3 cells (3 stacks × 1 GPU class)" in said
    assert "  1 predicted to fail, skipped (--skip-predicted-failures): DRIVER_TOO_OLD 1" in said
    assert any(line.startswith("  1 GPU job the real run would submit: 1 job array") for line in said)
    listed = run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "listed"), "--list-files", check=0).stdout.splitlines()
    assert sorted(listed) == sorted(str(p) for p in (isolated / "listed").rglob("*") if p.is_file()) and len(listed) == 10  # array, probe, 2 x 4
    data = json.loads(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "json"), "--json", check=0).stdout)
    assert (data["cells"], data["gpu_jobs"], data["decided_at_resolve"], data["predicted_to_fail"]) == (3, 2, {"ENV_UNRESOLVABLE": 1}, 1)
    assert data["files"] is None and data["file_count"] == 10  # the paths only with --list-files
    refused = run_cli("sweep", str(plan), "--list-files")
    assert refused.returncode == 2 and "--list-files lists the files a dry run writes; add --dry-run --out DIR." in refused.stderr
