"""Plans fail fast: what can be known before the first cell is one sentence and exit 2, with nothing
stored; and each database keeps its own job directories."""

from __future__ import annotations

import socket

import pytest
from conftest import run_cli, write


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("stack, sentence", [
    ('framework = "torch"\nversions = ["2.4.1", "2.5.1"]\nvariants = ["cu999"]',
     "torch variant 'cu999' was never built for 2.4.1, 2.5.1: PyTorch 2.4 has no cu999 build (its CUDA builds are cu118, cu121, cu124)"),
    ('framework = "jax"\nversions = ["0.4.30"]\nvariants = ["cuda13"]', "jax variant 'cuda13' was never built for 0.4.30: jax 0.4.30's metadata declares no [cuda13] extra"),
    ('framework = "cupy"\nversions = ["13.3.0"]\nvariants = ["cuda13x"]', "PyPI has no cupy-cuda13x 13.3.0 (cupy-cuda13x was published for CuPy 13.6.0, 14.0.0–14.2.0)"),
])
def test_a_variant_never_built_is_refused_before_anything_is_stored(isolated, stack, sentence):
    plan = write(isolated / "plan.toml", f"[[stacks]]\n{stack}\n")
    proc = run_cli("sweep", str(plan), check=2)
    assert sentence in proc.stderr and "Traceback" not in proc.stderr
    assert not (isolated / "gpucompat.db").exists()


def test_a_variant_built_for_one_listed_version_is_kept(isolated):
    """Only a variant that exists for none of the versions is a plan error; the rest is for the resolver."""
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "torch"\nversions = ["2.4.1", "2.7.1"]\nvariants = ["cu128"]\n')
    proc = run_cli("sweep", str(plan), "--dry-run", "--out", str(isolated / "out"))
    assert "never built" not in proc.stderr


def test_an_index_that_does_not_answer_is_one_sentence(isolated):
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    index = f"http://127.0.0.1:{closed_port()}/simple"
    proc = run_cli("sweep", str(plan), env={"UV_DEFAULT_INDEX": index}, check=2)
    assert f"the package index {index} does not answer" in proc.stderr and "Connection refused" in proc.stderr
    assert not (isolated / "gpucompat.db").exists()
    proc = run_cli("check", "cuda-runtime==12.4", env={"UV_DEFAULT_INDEX": index}, check=2)
    assert "does not answer" in proc.stderr


def test_a_missing_plan_wheelhouse_is_the_same_sentence_as_the_option(isolated):
    plan = write(isolated / "plan.toml", 'wheelhouse = "wheels/"\n[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')
    from_plan = run_cli("sweep", str(plan), check=2).stderr
    from_option = run_cli("sweep", str(write(isolated / "p2.toml", '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n')),
                          "--wheelhouse", str(isolated / "wheels"), check=2).stderr
    assert "is not a directory" in from_plan and "is not a directory" in from_option
    assert not (isolated / "gpucompat.db").exists()


def test_job_directories_live_beside_their_database(isolated):
    """Two databases, each with its sweep 1: neither overwrites the other's job directories."""
    plan = write(isolated / "plan.toml", '[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    for name in ("a", "b"):
        run_cli("sweep", str(plan), "--db", f"sqlite:///{isolated / name}.db")
    for name in ("a", "b"):
        cells = list((isolated / f"{name}-runs" / "sweep-1").glob("cell-*/result.json"))
        assert len(cells) == 1, f"{name}: {cells}"
    assert not (isolated / "gpucompat-runs").exists()
