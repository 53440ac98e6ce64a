"""What a plan or a requirements file may say, by allowlist (issue 36, items 2 and 3).

`[slurm] extra_sbatch` takes only sbatch options that cannot change the job's environment, identity, output or
timing (sbatch_options.py, each with why), read as sbatch reads them: `--opt=value`, `--opt value`, short forms.
[htcondor] and [kubernetes] have no free-form keys at all. A requirements file that pins one package in two ways
that cannot both hold is refused as pip refuses it. A container image's relative path is the plan file's neighbour,
written absolute into each run.sh. Each refusal is the real command: exit 2, one sentence, nothing written.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_cli, write

from gpucompat.errors import UserError
from gpucompat.plan import parse_plan
from gpucompat.sbatch_options import ALLOWED_SBATCH, HOLDING_SBATCH, OWN_SBATCH, REFUSED_SBATCH, SBATCH_OPTIONS, SBATCH_SHORT

CURRENT = '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n'
SLURM = 'executor = "slurm"\n[slurm]\nextra_sbatch = {options}\n[[targets]]\nname = "A100"\ncc = "8.0"\n' + CURRENT
ONLY = "extra_sbatch takes only options that leave the job's environment, identity, output and timing as gpucompat writes them"


def refused(proc, expected: str) -> None:
    said = proc.stdout + proc.stderr
    assert proc.returncode == 2, said
    assert "Traceback" not in said and "internal error" not in said, said
    assert proc.stderr.strip() == f"error: {expected}", said


def slurm_plan(options: list[str]) -> str:
    return SLURM.format(options=json.dumps(options))


# -- [slurm] extra_sbatch ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option, why", [
    ("--export=ALL,LD_PRELOAD=/tmp/x.so", "--export sets the variables the job starts with (an LD_PRELOAD or a PATH changes what the probe tests)"),
    ("--uid=0", "--uid submits the job as another user"),
])
def test_options_that_change_the_environment_or_the_user_are_refused_by_the_dry_run(isolated, option, why):
    plan = write(isolated / "plan.toml", slurm_plan(["--mail-type=END", option]))
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"{plan}: [slurm] extra_sbatch {option!r}: {why}; remove it: {ONLY}.")
    assert not (isolated / "out").exists() and not (isolated / "gpucompat.db").exists()


def test_allowed_options_are_written_into_the_array_script_in_their_long_form(isolated):
    options = ["--mail-type=END,FAIL", "--mail-user me@example.org", "-L scratch:1", "-xgpu[01-02]", "--exclusive", "--no-requeue",
               "--comment=weekly", "--nice=10", "--wait-all-nodes=1"]
    plan = write(isolated / "plan.toml", slurm_plan(options))
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    script = (isolated / "out" / "array-0.sh").read_text()
    assert ("#SBATCH --mail-type=END,FAIL\n#SBATCH --mail-user=me@example.org\n#SBATCH --licenses=scratch:1\n#SBATCH --exclude=gpu[01-02]\n"
            "#SBATCH --exclusive\n#SBATCH --no-requeue\n#SBATCH --comment=weekly\n#SBATCH --nice=10\n#SBATCH --wait-all-nodes=1\n") in script


def _refusal(option: str) -> str:
    """The one sentence a plan whose extra_sbatch holds this option is refused with."""
    with pytest.raises(UserError) as raised:
        parse_plan(slurm_plan([option]), "plan.toml")
    return str(raised.value)


@pytest.mark.parametrize("option, expected", [
    # the three forms sbatch reads, each to the same option
    ("--export ALL", "'--export ALL': --export sets the variables"),
    ("--get-user-env", "'--get-user-env': --get-user-env loads a login shell's environment into the job"),
    ("--propagate=NOFILE", "--propagate carries the submitting shell's resource limits into the job"),
    ("--gid=0", "--gid submits the job as another group"),
    ("--open-mode=append", "--open-mode changes how the job's log is opened"),
    ("-Q", "'-Q' (sbatch reads it as --quiet): --quiet stops sbatch printing the job ID, which gpucompat reads"),
    ("--signal=B:USR1@60", "--signal signals the job before its time limit"),
    ("--gpu-freq=low", "--gpu-freq sets the GPUs' clocks, which the bench measures"),
    ("-M other", "'-M other' (sbatch reads it as --clusters): --clusters submits the array to another cluster"),
    ("--gpus-per-task=1", "--gpus-per-task asks for GPUs beside the --gres gpucompat writes"),
    ("--gpu-bind=closest", "--gpu-bind changes which GPUs each task sees (CUDA_VISIBLE_DEVICES)"),
    ("--requeue", "--requeue lets Slurm start a cell again from the beginning"),
    ("--container=/oci/bundle", "--container runs the job inside an OCI container"),
    ("--get-user", "'--get-user' (sbatch reads it as --get-user-env): --get-user-env loads a login shell's environment"),
    ("--expo=ALL", "which option --expo abbreviates (--export or --export-file)"),
])
def test_every_other_option_is_refused_naming_it_and_why(option, expected):
    said = _refusal(option)
    assert said.startswith("plan.toml: [slurm] extra_sbatch ") and expected in said, said
    assert said.endswith(f"remove it: {ONLY}.") or "abbreviates" in said, said


@pytest.mark.parametrize("option, expected", [
    ("-t 5", "'-t 5' (sbatch reads it as --time) would override --time, which gpucompat sets from [timeouts] install and cell; remove it."),
    ("-p debug", "would override --partition, which the plan sets with [slurm] partition; remove it."),
    ("--qos=high", "would override --qos, which the plan sets with [slurm] qos; remove it."),
    ("--reservation=x", "would override --reservation, which the plan sets with [slurm] reservation; remove it."),
    ("-C hbm", "(sbatch reads it as --constraint) would override --constraint, which gpucompat sets from the [[targets]] features"),
    ("-d afterok:1", "(sbatch reads it as --dependency) would hold the array until other jobs end"),
    ("--tim=5", "sbatch cannot tell which option --tim abbreviates (--time or --time-min); write the whole name of the one you mean."),
    ("--mail", "sbatch cannot tell which option --mail abbreviates (--mail-type or --mail-user)"),
    ("--mail-t=END", "write --mail-type whole; an abbreviation may name another option in another Slurm release."),
    ("--frobnicate", "sbatch has no option --frobnicate (as of Slurm 26.11); remove it."),
    ("-Z", "sbatch has no option -Z"),
    ("--mail-type", "--mail-type needs a value (BEGIN, END, FAIL, ALL... separated by commas)"),
    ("--mail-type=SOMETIMES", "'SOMETIMES' is not a value of --mail-type"),
    ("--exclusive=all", "'all' is not a value of --exclusive, which takes user, mcs or topo."),
    ("--no-requeue=1", "--no-requeue takes no value"),
    ("--comment=two words", "must be a list of sbatch options, one string each"),
    ("--mail-user='me'", "must be a list of sbatch options, one string each"),
    ("--exclusive\n#SBATCH --uid=0", "must be a list of sbatch options, one string each"),
    ("END", "must be a list of sbatch options, one string each"),
])
def test_options_gpucompat_sets_and_malformed_ones_are_one_sentence(option, expected):
    said = _refusal(option)
    assert expected in said and "\n" not in said.replace(repr(option)[1:-1], ""), said


def test_every_sbatch_option_is_allowed_or_refused_with_a_reason():
    """Slurm's own list (slurm_opt.c) is covered whole: a new table entry cannot leave an option to chance."""
    tables = [OWN_SBATCH, HOLDING_SBATCH, ALLOWED_SBATCH, REFUSED_SBATCH]
    named = [option for table in tables for option in table]
    assert sorted(named) == sorted(f"--{name}" for name in SBATCH_OPTIONS), "each option in exactly one table"
    assert set(SBATCH_SHORT.values()) <= set(SBATCH_OPTIONS)
    for option, (value, why) in ALLOWED_SBATCH.items():
        assert why and (value is None) == (SBATCH_OPTIONS[option[2:]] == "none"), option
    assert all(REFUSED_SBATCH.values())
    for refused_here in ("--export", "--export-file", "--uid", "--gid", "--get-user-env", "--propagate", "--open-mode", "--signal"):
        assert refused_here in REFUSED_SBATCH


# -- [htcondor] and [kubernetes]: no free-form keys ----------------------------------------------------------------

@pytest.mark.parametrize("section, key", [
    ("htcondor", "environment"), ("htcondor", "getenv"), ("htcondor", '"+SingularityImage"'), ("htcondor", "requirements"),
    ("kubernetes", "env"), ("kubernetes", "securityContext"), ("kubernetes", "hostPath"), ("kubernetes", "serviceAccountName"),
])
def test_htcondor_and_kubernetes_tables_take_only_their_own_keys(isolated, section, key):
    plan = write(isolated / "plan.toml", f'executor = "{section}"\n[{section}]\n{key} = "x"\n' + CURRENT)
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"))
    assert proc.returncode == 2 and f"[{section}]: unknown key {key.strip(chr(34))!r}; expected one of: " in proc.stderr, proc.stderr
    assert not (isolated / "out").exists()


# -- a requirements file that asks for one package twice --------------------------------------------------------------

GPU = ("--gpu", "NVIDIA A100-SXM4-80GB", "--driver", "535.104.05")


def test_two_pins_of_one_package_are_refused_as_pip_refuses_them(isolated):
    path = write(isolated / "requirements.txt", "torch==2.0.0\nnumpy==1.26.4\ntorch==2.7.0\n")
    refused(run_cli("explain", "-r", str(path), *GPU),
            f"{path} asks for torch twice in ways that cannot both hold, line 1 'torch==2.0.0' and line 3 'torch==2.7.0'; "
            "pip refuses such a file (ResolutionImpossible), so keep the one you mean.")
    ranged = write(isolated / "ranged.txt", "torch>=2.1\ntorch==2.0.0\n")
    refused(run_cli("explain", "-r", str(ranged), *GPU),
            f"{ranged} asks for torch twice in ways that cannot both hold, line 1 'torch>=2.1' and line 2 'torch==2.0.0'; "
            "pip refuses such a file (ResolutionImpossible), so keep the one you mean.")


def test_a_pin_in_a_nested_file_names_both_files(isolated):
    write(isolated / "base.txt", "numpy\ntorch==2.0.0\n")
    path = write(isolated / "requirements.txt", "-r base.txt\ntorch==2.7.0\n")
    refused(run_cli("explain", "-r", str(path), *GPU),
            f"{path} asks for torch twice in ways that cannot both hold, base.txt, line 2 'torch==2.0.0' and {path}, line 2 "
            "'torch==2.7.0'; pip refuses such a file (ResolutionImpossible), so keep the one you mean.")


def test_lines_that_can_both_hold_are_one_requirement(isolated):
    """pip installs torch 2.7.0 for `torch>=2.1` and `torch==2.7.0`, and JAX with CUDA for jax[cuda12]==0.4.30 and jax==0.4.30."""
    path = write(isolated / "requirements.txt", "torch>=2.1\njax[cuda12]==0.4.30\ntorch==2.7.0\njax==0.4.30\ntorch==2.7.0\n")
    data = json.loads(run_cli("explain", "-r", str(path), *GPU, "--json", check=0).stdout)
    rows = {row["package"]: row for row in data["rows"]}
    assert rows["torch"]["read_as"].startswith("torch==2.7.0") and rows["torch"]["line"] == 3
    assert rows["jax"]["read_as"] == "jax[cuda12]==0.4.30" and rows["jax"]["line"] == 2


# -- a container image's relative path -----------------------------------------------------------------------------------

def test_a_relative_image_path_is_written_absolute_from_the_plans_directory(isolated):
    plans = isolated / "plans"
    (plans / "images").mkdir(parents=True)
    (plans / "images" / "pt.sif").write_bytes(b"SIF")
    plan = write(plans / "plan.toml", '[[stacks]]\nframework = "torch"\nenv = "container"\nimage = "images/../images/pt.sif"\n')
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    run_sh = (isolated / "out" / "cell-1" / "run.sh").read_text()
    absolute = str((plans / "images" / "pt.sif").resolve())
    assert f" {absolute} python3 " in run_sh and "images/../" not in run_sh


def test_a_relative_image_path_that_is_not_there_is_refused(isolated):
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "torch"\nenv = "container"\nimage = "../../../etc/passwd.sif"\n')
    where = str((isolated / "../../../etc").resolve() / "passwd.sif")  # from the plan's directory, not from a cell's
    refused(run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out")),
            f"{plan}: [[stacks]] #1 image '../../../etc/passwd.sif' is a path relative to the plan file, and {where!r} does "
            "not exist; put the image there, or give its absolute path (which may lie where only the compute nodes see it).")
    assert not (isolated / "out").exists()


@pytest.mark.parametrize("image", ["docker://nvcr.io/nvidia/pytorch:25.01-py3", "/cvmfs/unpacked.cern.ch/pt.sif"])
def test_references_and_absolute_paths_are_written_as_they_are(isolated, image):
    plan = write(isolated / "plan.toml", f'[[stacks]]\nframework = "torch"\nenv = "container"\nimage = "{image}"\n')
    run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"), check=0)
    assert image.removeprefix("docker://") in (isolated / "out" / "cell-1" / "run.sh").read_text()
