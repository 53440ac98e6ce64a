"""The site a facilitator publishes from the lent H200's sweep (docs/evidence/clean-rerun-h200): this site's own results
decide its rows, a sister site's observations support them, and another site's could-not-test is none of this site's.

Here: JAX on the H200 could not be tested (the shell's XLA_FLAGS, found by the clean re-run), the declared L40S ran
nothing. siteb (trusted): the H200 sweep of examples/plans/gpu-node.toml, JAX passing there, TensorFlow not installed."""

import re
import shutil
from pathlib import Path

import pytest

from conftest import run_cli

EVIDENCE = Path(__file__).resolve().parent.parent / "docs" / "evidence"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth")
    shutil.copyfile(EVIDENCE / "clean-rerun-h200" / "site.db", tmp / "here.db")
    shutil.copyfile(EVIDENCE / "gpu-node-h200" / "gpu-node.db", tmp / "siteb.db")
    here, siteb = {"XDG_CONFIG_HOME": str(tmp / "here")}, {"XDG_CONFIG_HOME": str(tmp / "siteb")}
    run_cli("key", env=siteb, check=0)
    run_cli("export", "--db", f"sqlite:///{tmp / 'siteb.db'}", "--bundle", str(tmp / "siteb.gz"), "--site", "siteb", env=siteb, check=0)
    run_cli("trust", "add", "siteb", str(tmp / "siteb" / "gpucompat" / "site-key.pub"), env=here, check=0)
    url = f"sqlite:///{tmp / 'here.db'}"
    run_cli("import", str(tmp / "siteb.gz"), "--db", url, env=here, check=0)
    run_cli("report", "--db", url, "--site", str(tmp / "site"), "--pool", str(EVIDENCE / "clean-rerun-h200" / "site-plan.toml"), check=0)
    return tmp / "site"


def _text(page: Path) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def test_this_sites_could_not_test_is_not_hidden_by_a_sister_sites_verdict(site):
    index = _text(site / "index.html")
    apart = index[index.index("Could not test"):]
    assert "env-fault" in apart and "XLA_FLAGS made the difference" in apart  # JAX here: the shell's fault, kept
    assert "ModuleNotFoundError" not in apart  # siteb's TensorFlow could not be tested there: none of this site's cells


def test_a_sister_sites_observation_supports_the_class_it_matches(site):
    gpu = _text(next(site.glob("gpu-NVIDIA-H200*.html")))
    assert "observed at siteb on NVIDIA H200, driver 580.159.04, verified" in gpu
    assert "Drivers seen: 580.159.04" in gpu


def test_the_class_no_node_has_is_no_column_and_says_why(site):
    index = _text(site / "index.html")
    assert not list(site.glob("gpu-NVIDIA-L40S*.html"))
    assert "NVIDIA L40S (CC 8.9): not tested: no job of it started: no local GPU matches the declared class" in index
    assert "py? current on NVIDIA L40S" in index and "pycurrent" not in index  # a probe that never ran read no Python
