"""XLA's own targets per JAX build (knowledge/data/xla_targets.csv, tools/build_xla_targets.py) and the rule over them."""

from __future__ import annotations

import datetime
import re

from packaging.version import Version

from gpucompat.knowledge import tables, xla_targets
from gpucompat.knowledge.frameworks.jax import XLA_RULE, xla_rule
from gpucompat.knowledge.rules import predict_stack

PACKAGES = {"jax-cuda12-pjrt", "jax-cuda13-pjrt", "jaxlib"}


def test_every_row_parses_and_names_its_wheel():
    rows = tables.table("xla_targets")
    assert rows
    for row in rows:
        assert row["package"] in PACKAGES and Version(row["release"])
        targets = row["targets"].split(";")
        assert all(re.fullmatch(r"sm_[0-9]{2,3}[af]?", t) for t in targets), row
        assert row["newest_sm"] == max(targets, key=xla_targets.sm_key) and row["read"] in {"read", "inferred"}
        datetime.date.fromisoformat(row["checked"])
        if row["read"] == "read":  # a read row names the wheel file and PyPI's sha256 of it
            assert re.search(r"\.whl \(sha256 [0-9a-f]{64}\)", row["source"]), row
        assert "openxla/xla" in row["source"]


def test_every_plugin_release_the_build_table_names_is_held():
    held = {(r["package"], Version(r["release"])) for r in tables.table("xla_targets")}
    for build in tables.table("jax_builds"):
        if build["variant"] in ("cuda12", "cuda13") and Version(build["from_version"]) >= Version("0.4.23"):
            assert (f"jax-{build['variant']}-pjrt", Version(build["from_version"])) in held, build["from_version"]


def test_targets_only_grow_from_release_to_release():
    for name in PACKAGES:
        rows = [r for r in tables.table("xla_targets") if r["package"] == name]
        rows.sort(key=lambda r: Version(r["release"]))
        for older, newer in zip(rows, rows[1:]):
            assert xla_targets.sm_key(older["newest_sm"])[0] <= xla_targets.sm_key(newer["newest_sm"])[0], (older, newer)


def test_the_wheel_reads_the_issue_names():
    # issue 40: `strings` of xla_cuda_plugin.so names targets up to sm_90a in 0.4.31 and up to sm_121a in 0.6.2
    assert xla_targets.targets_of("jax-cuda12-pjrt", "0.4.31")["newest_sm"] == "sm_90a"
    assert xla_targets.targets_of("jax-cuda12-pjrt", "0.6.2")["newest_sm"] == "sm_121a"


def test_a_b200_under_a_jax_whose_xla_stops_at_sm_90a_fails_at_compute():
    first = xla_targets.first_targeting("jax-cuda12-pjrt", 100)
    assert first is not None and Version(first["release"]) > Version("0.4.31")
    reason = xla_rule("0.4.31", "cuda12", "10.0")
    assert (reason.verdict, reason.code, reason.stage) == ("fail", "ARCH_UNSUPPORTED", "compute")
    assert "jax-cuda12-plugin 0.4.31 targets up to sm_90a" in reason.text
    assert f"needs jax {first['release']} or newer (the first release whose XLA targets sm_100)" in reason.text
    whole = predict_stack("jax", "0.4.31", "cuda12", "10.0", "570.86.10")
    assert (whole.code, whole.stage) == ("ARCH_UNSUPPORTED", "compute")
    assert any(r.rule == XLA_RULE and r.verdict == "fail" for r in whole.reasons)
    # the first release whose XLA targets sm_100 adds nothing (no objection from this rule)
    assert xla_rule(first["release"], "cuda12", "10.0") is None
    assert not any(r.rule == XLA_RULE for r in predict_stack("jax", first["release"], "cuda12", "10.0", "570.86.10").reasons)


def test_jaxlibs_own_cuda_wheels_are_judged_by_the_same_release_of_xla():
    reason = xla_rule("0.4.30", "cuda12_pip", "12.0")
    assert reason.code == "ARCH_UNSUPPORTED" and "XLA in jaxlib 0.4.30" in reason.text
    assert xla_targets.targets_of("jaxlib", "0.4.30")["read"] == "inferred"


def test_a_gpu_xla_targets_or_older_than_every_target_gets_nothing_from_this_rule():
    assert xla_rule("0.4.31", "cuda12", "9.0") is None  # sm_90 is a target
    assert xla_rule("0.4.31", "cuda12", "8.6") is None
    assert xla_rule("0.4.31", "cuda12", "1.0") is None  # older than every target: the minimum rules say so
    assert xla_rule("0.4.31", "cpu", "10.0") is None
    assert xla_rule("0.4.10", "cuda12_pip", "10.0") is None  # the table holds no release before the plugin


def test_a_plain_fallback_below_hopper_is_a_pass_with_a_warning():
    # CC 8.8 (sm_88, which CUDA 13's ptxas knows) under an XLA that stops at sm_87 and sm_90: sm_87 is plain, its PTX carries
    reason = xla_rule("0.4.31", "cuda12", "8.8")
    assert reason.verdict == "pass" and "falls back to sm_87" in reason.text and "sm_87 code" in reason.warning
