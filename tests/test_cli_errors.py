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
    # names (issue 29, part 7): another vendor's GPU, a GPU or package name close to a known one
    (["explain", "torch==2.4.1", "--gpu", "MI250X", "--driver", "550.54.15"],
     "'MI250X' is an AMD GPU: gpucompat judges NVIDIA CUDA stacks only"),
    (["explain", "torch==2.4.1", "--gpu", "Intel Data Center GPU Max 1550", "--driver", "550.54.15"], "is an Intel GPU"),
    (["advise", "torch", "--gpu", "Instinct MI300X", "--driver", "550.54.15"], "is an AMD GPU"),
    (["explain", "torch==2.4.1", "--gpu", "RTX 4909", "--driver", "550.54.15"],
     "the knowledge holds no GPU named 'RTX 4909': did you mean GeForce RTX 4090"),
    (["explain", "pytroch==2.4", "--gpu", "A100", "--driver", "550.54.15"], "unknown framework 'pytroch'; did you mean pytorch (torch)?"),
    (["advise", "tensorflw", "--gpu", "A100", "--driver", "550.54.15"], "did you mean tensorflow?"),
    (["explain", "cupy-cuda12==13.3.0", "--gpu", "A100", "--driver", "550.54.15"], "did you mean cupy-cuda12x?"),
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


def test_a_gpu_name_run_together_is_answered_and_the_reading_said(isolated):
    """`--gpu RTX4090` through the real CLI: answered for the GeForce RTX 4090, with a note saying how it was read."""
    import json

    proc = run_cli("explain", "torch==2.4.1", "--gpu", "RTX4090", "--driver", "550.54.15", "--python", "3.11", "--json", check=0)
    answer = json.loads(proc.stdout)
    assert answer["target"]["cc"] == "8.9" and answer["target"]["matched"] == "GeForce RTX 4090"
    assert "--gpu 'RTX4090' read as 'RTX 4090': GeForce RTX 4090 (CC 8.9)" in answer["notes"]
    assert answer["verdict"] == "pass"


def test_a_gpu_name_far_from_every_known_one_is_still_answered_uncertain(isolated):
    import json

    proc = run_cli("explain", "torch==2.4.1", "--gpu", "NVIDIA Foo 9000", "--driver", "550.54.15", "--python", "3.11", "--json", check=0)
    assert json.loads(proc.stdout)["verdict"] == "uncertain"


def test_a_reader_that_closed_the_pipe_ends_the_output_quietly_with_the_usual_exit_code():
    """`gpucompat explain ... --json | head -c 5`: head has gone before gpucompat writes; the answer's exit code
    stands (0 pass, 1 fail with --exit-code), with no 'internal error' and no traceback."""
    import os
    import subprocess
    import sys

    for spec, code in (("torch==2.4.1", 0), ("torch==1.12.1", 1)):  # 1.12.1: no sm_90 and no PTX that runs there
        read, write = os.pipe()
        os.close(read)  # the reader is gone before the first byte
        try:
            proc = subprocess.run([sys.executable, "-m", "gpucompat", "explain", spec, "--gpu", "H100", "--driver", "550.54.14",
                                   "--python", "3.10", "--json", "--exit-code"], stdout=write, stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        assert proc.returncode == code, proc.stderr
        assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr
