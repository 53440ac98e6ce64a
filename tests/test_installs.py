"""A PASS only for what installs (issue 35, item 3): each release's GPU install line as uv resolved it against PyPI
(install_checks.csv, tools/build_install_checks.py, run 2026-11-26). tensorflow[and-cuda]==2.15.0 depends on
tensorrt-libs==8.6.1, which PyPI does not have; 2.15.0.post1 fixed exactly that; 2.14.x needs tensorrt 8.5.3.1,
which has no cp311 wheel."""

from gpucompat.knowledge import installs
from gpucompat.knowledge.rules import predict_stack


def test_an_install_line_uv_cannot_resolve_fails_with_uvs_reason_and_the_nearest_that_resolves():
    p = predict_stack("tensorflow", "2.15.0", "and-cuda", "8.6", "535.104.05", "3.11")
    assert (p.verdict, p.code, p.stage) == ("fail", "ENV_UNRESOLVABLE", "resolve")
    text = next(r.text for r in p.reasons if r.rule == "installs")
    assert "tensorrt-libs==8.6.1" in text and "2.15.0.post1 resolves" in text
    assert predict_stack("tensorflow", "2.15.0.post1", "and-cuda", "8.6", "535.104.05", "3.11").verdict == "pass"
    assert predict_stack("tensorflow", "2.15.0", "and-cuda", "8.6", "535.104.05", None).code == "ENV_UNRESOLVABLE"  # no Python resolves


def test_a_line_that_resolves_for_some_pythons_fails_only_for_the_others():
    assert predict_stack("tensorflow", "2.14.1", "and-cuda", "8.6", "535.104.05", "3.11").code == "ENV_UNRESOLVABLE"
    assert installs.unresolvable("tensorflow", "2.14.1", "and-cuda", "3.10") is None
    assert installs.unresolvable("tensorflow", "2.14.1", "and-cuda", None) is None  # some Python installs it
    assert installs.unresolvable("tensorflow", "9.9.9", "and-cuda", "3.11") is None  # unknown: nothing said
