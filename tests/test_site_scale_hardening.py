"""Big and broken sweeps never strand or flood a site (issue 23, items 6 and 7).

Each case is the real command, run as a user runs it (conftest's run_cli, an isolated store), with
its exit status and its one sentence: a plan past max_cells, the size said before anything is written
and the probe shipped once per sweep, a --workdir that is a file or cannot be written, a resume in
another --workdir, --out that is a file or holds files, two gpucompats on one sweep, Ctrl-C in a dry
run and in a sweep, inspect on a folder whose files vanish or cannot be read, bidirectional overrides
in names, extra_sbatch lines that override gpucompat's own, misleading plan messages, and
`results --bench` after a later sweep without figures.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, run_cli, write

CURRENT = '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n'
TWO_CURRENT = CURRENT + '[[stacks]]\nframework = "torch"\nenv = "current"\n'


@pytest.fixture(autouse=True)
def a_torch_to_find(tmp_path, monkeypatch):
    """An importable torch package for the plans' `env = "current"` torch stack: without one (a fresh machine) that
    stack is 'not installed here' and gets no job files, which is not what these tests count."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('a stand-in: only found, never imported by the submit side')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(package.parent), os.environ.get("PYTHONPATH")])))


def slurm_plan(targets: int, extra: str = "") -> str:
    classes = "".join(f'[[targets]]\nname = "GPU {i}"\ncc = "8.0"\n' for i in range(targets))
    return f'executor = "slurm"\n{extra}\n{classes}{TWO_CURRENT}'


def sentence(proc, expected: str, code: int = 2) -> str:
    """The command ended with `code` and said `expected` in one line (no traceback)."""
    said = proc.stdout + proc.stderr
    assert proc.returncode == code, said
    assert "Traceback" not in said and "internal error" not in said, said
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    if code == 2:
        assert len(errors) == 1, said
        said = errors[0]
    assert expected in said, said
    return said


def sweeps(*db: str) -> list[dict]:
    return json.loads(run_cli("results", "--list", "--json", *db, check=0).stdout)


# -- the size of a sweep ------------------------------------------------------------------------------------

def test_a_plan_past_max_cells_is_refused_before_anything_is_written(isolated):
    out = isolated / "out"
    # the default limit: 2 stacks x 5,001 GPU classes
    big = write(isolated / "big.toml", slurm_plan(5001))
    said = sentence(run_cli("sweep", str(big), "--dry-run", "--out", str(out)),
                    "the plan expands to 10,002 cells (2 stacks × 5,001 GPU classes), more than its max_cells of 10,000")
    assert "raise max_cells in the plan" in said
    assert not out.exists() and not (isolated / "gpucompat.db").exists()
    # a limit the plan sets, for a real sweep: nothing stored
    small = write(isolated / "small.toml", slurm_plan(3, "max_cells = 5"))
    sentence(run_cli("sweep", str(small)), "the plan expands to 6 cells (2 stacks × 3 GPU classes), more than its max_cells of 5")
    assert sweeps() == []
    # and raised, it is accepted
    raised = write(isolated / "raised.toml", slurm_plan(3, "max_cells = 6"))
    assert run_cli("sweep", str(raised), "--dry-run", "--out", str(out)).returncode == 0
    sentence(run_cli("sweep", str(write(isolated / "zero.toml", "max_cells = 0\n" + CURRENT))), "max_cells must be a whole number")


def test_a_dry_run_says_its_size_first_and_ships_the_probe_once(isolated):
    plan = write(isolated / "plan.toml", slurm_plan(3))
    out = isolated / "out"
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(out), "--list-files", check=0)
    said = " ".join(proc.stderr.split())
    assert "6 cells (2 stacks × 3 GPU classes): about 0.4 MB of job files with one probe.pyz for the sweep" in said
    assert said.index("6 cells") < said.index(f"{len(proc.stdout.split())} files written under")  # said before anything is written
    probes = sorted(out.rglob("probe.pyz"))
    assert probes == [out / "probe.pyz"], "the probe is copied once per sweep, not once per cell"
    scripts = sorted(out.glob("cell-*/run.sh"))
    assert len(scripts) == 6 and all("../probe.pyz --framework" in s.read_text() for s in scripts)
    # a cell's own script runs the sweep's probe (as a Slurm node would, from its cell directory)
    cell = scripts[0].parent
    job = subprocess.run(["bash", str(scripts[0])], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "SLURM_ARRAY_JOB_ID": "7", "SLURM_ARRAY_TASK_ID": "0"})
    result = json.loads((cell / "result.json").read_text())  # the probe ran from ../probe.pyz (exit 1: no driver here)
    assert job.returncode in (0, 1) and result["finished"] and result["stages"]["import"]["ok"], job.stderr


def test_a_local_sweep_runs_every_cell_from_the_one_probe(isolated):
    plan = write(isolated / "plan.toml", CURRENT)
    proc = run_cli("sweep", str(plan), check=0)
    assert "1 cell (1 stack × 1 GPU class): about" in " ".join(proc.stderr.split())
    sweep_dir = isolated / "gpucompat-runs" / "sweep-1"
    assert (sweep_dir / "probe.pyz").is_file() and not (sweep_dir / "cell-1" / "probe.pyz").exists()
    data = json.loads(run_cli("results", "--json", "--cells", check=0).stdout)
    assert [row["cause"] for row in data["untested"]] == ["no-gpu"] and data["invalid"] == []  # the probe ran: no driver here, said so


# -- work directories -------------------------------------------------------------------------------------

def test_a_workdir_that_is_a_file_is_refused_before_the_sweep_is_stored(isolated):
    plan = write(isolated / "plan.toml", CURRENT)
    afile = write(isolated / "afile", "")
    sentence(run_cli("sweep", str(plan), "--workdir", str(afile)), "must be a directory, and it is a file")
    sentence(run_cli("sweep", str(plan), "--workdir", str(afile / "sub")), "is a file, not a directory")
    assert sweeps() == []


def test_a_sweep_whose_jobs_cannot_be_written_is_marked_failed_and_resumes_in_a_new_workdir(isolated):
    plan = write(isolated / "plan.toml", CURRENT)
    blocked = isolated / "blocked"
    blocked.mkdir()
    write(blocked / "sweep-1", "")  # where sweep 1's job directories would go: a file
    said = sentence(run_cli("sweep", str(plan), "--workdir", str(blocked)), "cannot write the job files under")
    assert "sweep-1': a file stands where a directory goes; choose another --workdir" in said
    assert "sweep 1 is kept, and `gpucompat sweep --resume 1` (with --workdir DIR" in said
    assert [s["status"] for s in sweeps()] == ["failed"]  # never left "running"
    good = isolated / "good"
    run_cli("sweep", "--resume", "1", "--workdir", str(good), check=0)
    assert [(s["status"], s["done"]) for s in sweeps()] == [("done", 1)]
    assert (good / "sweep-1" / "cell-1" / "result.json").is_file()


# -- --out ----------------------------------------------------------------------------------------------

def test_dry_run_out_must_be_a_new_or_empty_directory_unless_forced(isolated):
    plan = write(isolated / "plan.toml", slurm_plan(1))
    afile = write(isolated / "afile", "keep")
    sentence(run_cli("sweep", str(plan), "--dry-run", "--out", str(afile)), "must be a directory, and it is a file")
    out = isolated / "out"
    out.mkdir()
    write(out / "notes.txt", "mine")
    sentence(run_cli("sweep", str(plan), "--dry-run", "--out", str(out)), "is not empty (1 entry); choose a new or empty directory, "
                                                                          "or add --force to write over it")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    forced = run_cli("sweep", str(plan), "--dry-run", "--out", str(out), "--force", "--list-files", check=0)
    listed = forced.stdout.split()
    assert str(out / "notes.txt") not in listed and (out / "notes.txt").read_text() == "mine"
    assert f"{len(listed)} files written under" in forced.stderr and len(listed) == 6  # array, 2 x (job.json, run.sh), probe


# -- one gpucompat per sweep, and Ctrl-C ----------------------------------------------------------------------

def test_a_second_resume_says_another_gpucompat_runs_the_sweep_and_ctrl_c_names_it(isolated):
    fakes = isolated / "fakes" / "jax"
    fakes.mkdir(parents=True)
    (fakes / "__init__.py").write_text("import time\ntime.sleep(300)\n")  # a framework whose import hangs
    plan = write(isolated / "plan.toml", '[timeouts]\nimport = "10m"\n[[stacks]]\nframework = "jax"\nenv = "current"\n')
    first = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan)], env={**os.environ, "PYTHONPATH": str(fakes.parent)},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lock = isolated / "gpucompat-runs" / "sweep-1.lock"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (isolated / "gpucompat-runs" / "sweep-1" / "cell-1" / "job.pid").exists():
            time.sleep(0.1)
        assert lock.read_text().strip() == str(first.pid)
        sentence(run_cli("sweep", "--resume", "1"), f"sweep 1 is being run or resumed by another gpucompat (pid {first.pid})")
        sentence(run_cli("sweep", "--resume", "1", "--workdir", str(isolated / "elsewhere")), "is being run or resumed")
        assert not (isolated / "elsewhere").exists()  # checked before anything else
        first.send_signal(signal.SIGINT)
        stdout, stderr = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 130, stdout + stderr
    assert "interrupted; the finished cells of sweep 1 are stored, and `gpucompat sweep --resume 1` completes it" in stderr
    assert "Traceback" not in stderr and "--resume ID" not in stderr
    assert [s["status"] for s in sweeps()] == ["interrupted"]


def test_ctrl_c_in_a_dry_run_says_nothing_is_stored(isolated):
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    with socket.socket() as index:  # an index that takes the connection and never answers
        index.bind(("127.0.0.1", 0))
        index.listen(1)
        index.settimeout(120)
        env = {**os.environ, "UV_DEFAULT_INDEX": f"http://127.0.0.1:{index.getsockname()[1]}/simple"}
        dry = subprocess.Popen([sys.executable, "-m", "gpucompat", "sweep", str(plan), "--dry-run", "--out", str(isolated / "out")],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            connection, _ = index.accept()  # gpucompat is waiting for the index now
            dry.send_signal(signal.SIGINT)
            stdout, stderr = dry.communicate(timeout=60)
            connection.close()
        finally:
            dry.kill()
    assert dry.returncode == 130, stdout + stderr
    assert "interrupted; a dry run stores nothing" in stderr and "Traceback" not in stderr
    assert "finished cells are stored" not in stderr and "--resume" not in stderr
    assert not (isolated / "gpucompat.db").exists()


# -- inspect ---------------------------------------------------------------------------------------------

def _elf() -> bytes:
    from test_inspect import synthetic_elf

    return synthetic_elf()


def test_inspect_goes_on_past_files_that_vanish_while_it_walks(tmp_path):
    root = tmp_path / "tree"
    (root / "kept").mkdir(parents=True)
    (root / "kept" / "libkernels.so").write_bytes(_elf())
    stop = threading.Event()

    def churn() -> None:  # a build writing and a cache being pruned, as fast as it goes
        i = 0
        while not stop.is_set():
            folder = root / f"d{i % 40}"
            if folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
            else:
                (folder / "sub").mkdir(parents=True, exist_ok=True)
                for k in range(20):
                    (folder / "sub" / f"lib{k}.so").write_bytes(b"\x7fELF")
            i += 1

    worker = threading.Thread(target=churn)
    worker.start()
    try:
        runs = [run_cli("inspect", str(root)) for _ in range(6)]
    finally:
        stop.set()
        worker.join()
    for proc in runs:
        assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
        assert "SASS sm_80 sm_90a" in " ".join(proc.stdout.split())


def test_inspect_names_the_files_it_cannot_read_and_reads_the_rest(tmp_path):
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv, to read as a process without root's read-anything capability")
    root = tmp_path / "tree"
    for folder in ("ok", "locked", "unsearchable"):
        (root / folder).mkdir(parents=True)
    (root / "ok" / "libkernels.so").write_bytes(_elf())
    (root / "libsecret.so").write_bytes(_elf())
    (root / "unsearchable" / "liba.so").write_bytes(_elf())
    (root / "libsecret.so").chmod(0)
    (root / "locked").chmod(0)
    (root / "unsearchable").chmod(0o444)  # listed, not entered: a stat of its files fails
    try:
        command = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", sys.executable, "-m", "gpucompat", "inspect", str(root)]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=120)
    finally:
        for folder in ("locked", "unsearchable"):
            (root / folder).chmod(0o755)
    if "Operation not permitted" in proc.stderr and proc.returncode != 0 and "gpucompat" not in proc.stderr:
        pytest.skip(f"setpriv cannot drop capabilities here: {proc.stderr.strip()[-200:]}")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    said, warned = " ".join(proc.stdout.split()), " ".join(proc.stderr.split())
    assert "SASS sm_80 sm_90a; PTX compute_86" in said and "1 file(s) with kernels" in said
    assert "skipped 3 file(s) or folder(s) that could not be read:" in warned
    for name in ("libsecret.so (PermissionError)", "locked (PermissionError)", "liba.so (PermissionError)"):
        assert name in warned


# -- names and [slurm] extra_sbatch ------------------------------------------------------------------------

@pytest.mark.parametrize("plan", [
    'name = "quarterly\u202e"\n' + CURRENT,
    'name = "a\u2066b"\n' + CURRENT,
    'executor = "slurm"\n[[targets]]\nname = "A100 \u200f"\ncc = "8.0"\n' + CURRENT,
])
def test_bidirectional_overrides_in_names_are_refused(isolated, plan):
    sentence(run_cli("sweep", str(write(isolated / "plan.toml", plan)), "--dry-run", "--out", str(isolated / "out")),
             "contains a control character (a newline, tab, escape, or a bidirectional mark or override such as U+202E")


@pytest.mark.parametrize("option, owned", [
    ("--time=5", "--time"), ("--time-mi=5", "--time-min"), ("--array=0-999", "--array"), ("--output=/dev/null", "--output"),
    ("--error=x", "--error"), ("--wrap=true", "--wrap"), ("--job-name=x", "--job-name"),
    ("--parsable", "--parsable"), ("--chdir=/tmp", "--chdir"), ("--partition=debug", "--partition"),
])
def test_extra_sbatch_may_not_override_gpucompats_own_options(isolated, option, owned):
    plan = write(isolated / "plan.toml", slurm_plan(1, f'[slurm]\nextra_sbatch = ["--exclusive", "{option}"]'))
    said = sentence(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")), f"would override {owned}, which ")
    assert said.rstrip().endswith("remove it.")


def test_extra_sbatch_of_the_sites_own_options_is_written(isolated):
    plan = write(isolated / "plan.toml", slurm_plan(1, '[slurm]\nextra_sbatch = ["--exclusive", "--mail-type=END"]'))
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    assert "#SBATCH --exclusive\n#SBATCH --mail-type=END\n" in (isolated / "out" / "array-0.sh").read_text()


# -- messages that misled --------------------------------------------------------------------------------

@pytest.mark.parametrize("plan, expected", [
    ('python = [3.11]\n' + CURRENT, 'python: 3.11 is a number, not a Python version string; quote it: python = ["3.11"]'),
    ('python = [3.10]\n' + CURRENT, 'python: 3.1 is a number, not a Python version string; quote it: python = ["3.10"]'),  # TOML's 3.10 is 3.1
    ('[[stacks]]\nframework = "torch"\nversions = ["2.4.1"]\npython = 3.12\n', 'is a number, not a Python version string; quote it: python = ["3.12"]'),
    ('stacks = "a"\n', "'stacks' must be [[stacks]] tables (framework = ..., versions = ...), not a string"),
    ('stacks = []\n', "the plan has no [[stacks]]"),
])
def test_plan_mistakes_are_named_as_they_are(isolated, plan, expected):
    sentence(run_cli("sweep", str(write(isolated / "plan.toml", plan)), "--dry-run", "--out", str(isolated / "out")), expected)


def test_a_plan_with_a_byte_order_mark_is_read(isolated):
    plan = isolated / "plan.toml"
    plan.write_bytes(b"\xef\xbb\xbf" + slurm_plan(1).encode())  # as Windows editors save UTF-8
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    assert "6 files written under" in proc.stderr


# -- results --bench finds what was measured -----------------------------------------------------------

def test_results_bench_shows_the_newest_sweep_with_figures(isolated):
    db = isolated / "bench.db"
    shutil.copyfile(REPO / "docs" / "evidence" / "bench-h100" / "bench.db", db)  # sweeps 1 and 2: H100 figures
    url = ("--db", f"sqlite:///{db}")
    run_cli("sweep", str(write(isolated / "plan.toml", CURRENT)), *url, check=0)  # sweep 3: no figures
    assert [s["id"] for s in sweeps(*url)] == [1, 2, 3]
    proc = run_cli("results", "--bench", *url, check=0, env={"COLUMNS": "200"})
    assert "bench figures of sweep 2 (gpu-bench), the newest with any" in proc.stderr
    assert "NVIDIA H100" in proc.stdout and "no benchmark figures" not in proc.stdout
    rows = json.loads(run_cli("results", "--bench", "--format", "json", *url, check=0).stdout)
    assert rows and {row["sweep"] for row in rows} == {2}
    chosen = run_cli("results", "--bench", "--sweep", "3", *url, check=0)
    assert "sweep 3 (sweep) has no benchmark figures; leave out --sweep to see the newest that has." in " ".join(chosen.stdout.split())


def test_results_bench_says_which_sweep_it_looked_at_when_none_has_figures(isolated):
    run_cli("sweep", str(write(isolated / "plan.toml", CURRENT)), check=0)
    proc = run_cli("results", "--bench", check=0)
    assert ("sweep 1 (sweep), the newest, has no benchmark figures, and no other stored sweep or check has any: "
            "run one with --bench.") in " ".join(proc.stdout.split())


# --- a big sweep's closing tables: each cell up to 500, grouped past them (a 2,040-row table took 30 MiB) ----------

def _stored_sweep(url: str, targets: int) -> int:
    from gpucompat.model import Outcome, ResolvedStack, Stack, Target
    from gpucompat.store import Store

    store = Store(url)
    resolved = [ResolvedStack(Stack("cuda-runtime", "12.4", "default", "3.12", "uv"), True, (), "12.4")]
    classes = [Target(name=f"NVIDIA A100 ({n})", cc="8.0", declared=True, count=1) for n in range(targets)]
    sweep = store.create_sweep("big", "sweep", "", None, {}, classes, resolved,
                               lambda r, t: {"verdict": "fail", "code": "NO_DEVICE", "stage": "device", "warnings": [], "reasons": []})
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome("NO_DEVICE", "device", "no GPU", {}), None)
    store.close()
    return sweep


@pytest.mark.parametrize("targets, grouped", [(500, False), (501, True)])
def test_a_sweeps_closing_tables_group_past_500_cells(tmp_path, monkeypatch, capsys, targets, grouped):
    from gpucompat.commands.printing import print_results
    from gpucompat.store import Store

    monkeypatch.setenv("COLUMNS", "120")
    url = f"sqlite:///{tmp_path / 'big.db'}"
    sweep = _stored_sweep(url, targets)
    print_results(Store(url), sweep, "table", closing=True)
    shown = capsys.readouterr().out
    assert ("NVIDIA A100 (499)" in shown) is not grouped  # a row per cell names its GPU class
    assert (f"`gpucompat results --sweep {sweep} --cells` lists each of the {targets}" in shown) is grouped
    print_results(Store(url), sweep, "table", per_cell=True)  # `results --cells` is never grouped
    assert "NVIDIA A100 (499)" in capsys.readouterr().out
