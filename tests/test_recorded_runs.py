"""Classification re-run on probe results recorded on a real H200 (docs/evidence/): the
verdicts must come out the same from the stored facts, so a change to the rules that
would misread real GPU output fails here, on a machine with no GPU."""

import json
import sqlite3

import pytest

from conftest import REPO
from gpucompat.analysis import classify
from gpucompat.model import Observation, ResolvedStack, Stack

EVIDENCE = REPO / "docs" / "evidence"


def recorded(db_name: str):
    with sqlite3.connect(EVIDENCE / db_name) as conn:
        query = ("SELECT s.framework, s.version, s.data, r.code, r.probe FROM results r JOIN cells c ON c.id = r.cell_id "
                 "JOIN stacks s ON s.id = c.stack_id WHERE r.probe IS NOT NULL AND c.sweep_id = 1")
        return [(fw, version, json.loads(data), code, json.loads(probe)) for fw, version, data, code, probe in conn.execute(query)]


def reclassify(stack_data: dict, probe: dict):
    stack = Stack(**{**stack_data, "requirements": tuple(stack_data["requirements"])})
    return classify(ResolvedStack(stack, ok=True), Observation(facts=probe, returncode=0))


@pytest.mark.parametrize("db_name", ["gpu-node-h200/gpu-node.db", "knowledge-h200/knowledge.db", "hidden-gpu-h200/hidden.db"])
def test_recorded_verdicts_are_reproduced(db_name):
    rows = recorded(db_name)
    assert len(rows) == 10
    for framework, version, stack, code, probe in rows:
        assert reclassify(stack, probe).code == code, (framework, version)


def test_minor_version_compatibility_seen_on_the_h200_is_flagged():
    warned = {(fw, v): reclassify(stack, probe).warnings for fw, v, stack, _, probe in recorded("gpu-node-h200/gpu-node.db")}
    assert any("minor-version compatibility" in w for w in warned[("cuda-runtime", "13.5")])
    assert not warned[("cuda-runtime", "12.4")]


def test_a_hidden_gpu_says_where_to_look():
    outcomes = {fw: reclassify(stack, probe) for fw, _, stack, _, probe in recorded("hidden-gpu-h200/hidden.db")}
    torch = outcomes["torch"]  # torch raises "No CUDA GPUs are available" with CUDA_VISIBLE_DEVICES=''
    assert torch.code == "NO_DEVICE" and "CUDA_VISIBLE_DEVICES" in torch.summary
    assert "CUDA_VISIBLE_DEVICES" in torch.evidence["signature"]["fix"]
    assert "CUDA_VISIBLE_DEVICES=''" in outcomes["jax"].summary
