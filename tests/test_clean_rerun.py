"""The probe's clean re-run (probe/clean_env.py, clean_rerun.py): a failure is the stack's only where a run with
nothing inherited fails the same way; else the variable that made the difference is found by halving and named.

The real probe.pyz runs a stand-in CuPy (tests/test_probe_rungs.py's) whose fault lives either in the stack (a file
in its package) or in the job's environment (a variable no rule of gpucompat names). Noise variables surround it,
as a real shell's do, so the halving has work to do.
"""

import json
import os
import subprocess
import sys
import textwrap

from test_probe_rungs import FAKE_CUDA, FAKE_CUPY, FAKE_CUPYX_SPARSE, FAKE_NVRTC, FAKE_RUNTIME

from gpucompat.analysis import classify
from gpucompat.model import ResolvedStack, Stack
from gpucompat.model import Observation
from gpucompat.probe.clean_env import MAX_RUNS
from gpucompat.probe_build import probe_pyz

# The fault's variables default to files inside the package: a mode written there is the stack's own.
PREAMBLE = textwrap.dedent('''
    import os as _os
    _here = _os.path.dirname(__file__)
    _os.environ.setdefault("FAKE_CUPY_CALLS", _os.path.join(_here, "calls.txt"))
    if _os.path.exists(_os.path.join(_here, "mode")):
        _os.environ.setdefault("FAKE_CUPY_MODE", open(_os.path.join(_here, "mode")).read().strip())
''')
NOISE = {f"SITE_SETTING_{i:02d}": f"value {i}" for i in range(40)}


def stand_in(tmp_path, stack_mode=None):
    package = tmp_path / "modules" / "cupy"
    (package / "cuda").mkdir(parents=True)
    (package / "__init__.py").write_text(PREAMBLE + textwrap.dedent(FAKE_CUPY))
    (package / "cuda" / "__init__.py").write_text(FAKE_CUDA)
    (package / "cuda" / "runtime.py").write_text(FAKE_RUNTIME)
    (package / "cuda" / "nvrtc.py").write_text(FAKE_NVRTC)
    sparse = tmp_path / "modules" / "cupyx" / "scipy" / "sparse"
    sparse.mkdir(parents=True)
    for folder in (sparse.parent.parent, sparse.parent):
        (folder / "__init__.py").write_text("")
    (sparse / "__init__.py").write_text(FAKE_CUPYX_SPARSE)
    if stack_mode:
        (package / "mode").write_text(stack_mode)
    return tmp_path / "modules"


def run(tmp_path, modules, env):
    """The probe as a job runs it, its environment the job's: the stand-in on PYTHONPATH as a module system puts it."""
    result = tmp_path / "result.json"
    job_env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "PYTHONPATH": str(modules), **NOISE, **env}
    proc = subprocess.run([sys.executable, str(probe_pyz()), "--framework", "cupy", "--result", str(result),
                           "--stage-timeouts", "import=60,device=60,compute=60"], env=job_env, capture_output=True, text=True, timeout=600)
    facts = json.loads(result.read_text())
    observation = Observation(facts=facts, returncode=proc.returncode if proc.returncode >= 0 else None,
                              signal=-proc.returncode if proc.returncode < 0 else None, stderr=proc.stderr)
    return proc, facts, classify(ResolvedStack(Stack("cupy", "installed", "installed", "current", "current"), ok=True), observation)


def test_a_fault_of_the_stack_fails_the_same_way_clean_and_stays_the_stacks(tmp_path):
    proc, facts, outcome = run(tmp_path, stand_in(tmp_path, stack_mode="wrong-blas"), {})
    assert proc.returncode == 1
    found = facts["clean_run"]
    assert found["same"] is True and len(found["runs"]) == 1 and "culprits" not in found
    assert "SITE_SETTING_00" not in found["kept"] and "PATH" in found["kept"]
    assert found["python_path"] == str(tmp_path / "modules")  # the framework's own entry is the stack under test
    assert (outcome.code, outcome.stage) == ("COMPUTE_WRONG", "compute")
    assert any("failed the same way" in w for w in outcome.warnings)


def test_a_variable_no_rule_names_is_found_by_halving_and_the_cell_is_could_not_test(tmp_path):
    proc, facts, outcome = run(tmp_path, stand_in(tmp_path), {"FAKE_CUPY_MODE": "wrong-blas"})
    found = facts["clean_run"]
    assert found["same"] is False and found["culprits"] == ["FAKE_CUPY_MODE"] and found["settled"]
    assert 2 <= len(found["runs"]) <= MAX_RUNS  # 42 inherited variables: a few halvings, not one run each
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "env-fault", "compute")
    assert "FAKE_CUPY_MODE made the difference" in outcome.summary and "passed" in outcome.summary
    assert outcome.evidence["stack_would_be"] == "COMPUTE_WRONG"


def test_a_crash_the_environment_causes_keeps_its_signal_and_is_not_the_stacks(tmp_path):
    proc, facts, outcome = run(tmp_path, stand_in(tmp_path), {"FAKE_CUPY_MODE": "crash-in-blas"})
    assert proc.returncode == -9  # the job ends as its stages did: the executor reads the same signal
    assert facts["clean_run"]["culprits"] == ["FAKE_CUPY_MODE"]
    assert (outcome.code, outcome.cause) == ("UNTESTED", "env-fault") and outcome.evidence["stack_would_be"] == "CRASHED"


def test_a_module_path_that_shadows_a_dependency_is_named_and_the_frameworks_own_entry_stays(tmp_path):
    modules = stand_in(tmp_path)
    shadow = tmp_path / "old-module" / "numpy"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('numpy of a module loaded years ago')\n")
    proc, facts, outcome = run(tmp_path, modules, {"PYTHONPATH": f"{shadow.parent}{os.pathsep}{modules}"})
    found = facts["clean_run"]
    assert found["python_path"] == str(modules) and found["culprits"] == ["PYTHONPATH"]
    assert (outcome.code, outcome.cause, outcome.stage) == ("UNTESTED", "env-fault", "import")
    assert "PYTHONPATH (past the framework's own entry)" in outcome.summary


def test_a_passing_cell_runs_nothing_more(tmp_path):
    proc, facts, outcome = run(tmp_path, stand_in(tmp_path), {})
    assert proc.returncode == 0 and "clean_run" not in facts and outcome.code == "PASS"


def test_turned_off_the_job_is_judged_as_before(tmp_path):
    proc, facts, outcome = run(tmp_path, stand_in(tmp_path), {"FAKE_CUPY_MODE": "wrong-blas", "GPUCOMPAT_CLEAN_RERUN": "0"})
    assert "clean_run" not in facts and outcome.code == "COMPUTE_WRONG"


def test_through_a_real_slurm_cluster_the_submitting_shells_variable_is_named(tmp_path, tmp_path_factory, isolated):
    """sbatch hands the job the submitting shell's environment: the re-run finds the variable there too, on each class."""
    from conftest import run_cli, write
    from test_slurm import start_cluster

    clusters = start_cluster(tmp_path_factory)
    cluster = next(clusters)
    try:
        modules = stand_in(tmp_path)
        plan = write(tmp_path / "plan.toml", """
name = "module-site"
executor = "slurm"
targets = "discover"
[timeouts]
pending = "2m"
cell = "3m"
[[stacks]]
framework = "cupy"
env = "current"
""")
        env = {**cluster, "PYTHONPATH": str(modules), "FAKE_CUPY_MODE": "wrong-blas", "GPUCOMPAT_CLEAN_RERUN": "1"}
        run_cli("sweep", str(plan), env=env, check=4, timeout=400)
        data = json.loads(run_cli("results", "--json", "--cells", check=0).stdout)
        cells = data["untested"]
        assert len(cells) == 2 and not data["invalid"], data
        for cell in cells:
            assert (cell["code"], cell["cause"], cell["stage"]) == ("UNTESTED", "env-fault", "compute"), cell
            assert "inherited FAKE_CUPY_MODE made the difference" in cell["reason"], cell["reason"]
    finally:
        next(clusters, None)
