"""The accuracy measurement's inputs and its committed output (docs/accuracy.md) stay honest."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

from gpucompat.model import FAILURE_CODES

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tools"))
import accuracy  # noqa: E402


def test_every_case_is_a_real_report_with_a_known_outcome():
    cases = accuracy.cases()
    assert len(cases) >= 100
    assert len({c["case"] for c in cases}) == len(cases)
    for case in cases:
        assert case["url"].startswith("https://"), case["case"]
        assert case["observed"] in ("pass", "fail"), case["case"]
        assert (case["observed_code"] in FAILURE_CODES) if case["observed"] == "fail" else not case["observed_code"], case["case"]
        assert case["evidence"].strip(), case["case"]


def test_every_confidently_wrong_case_is_explained():
    notes = accuracy.notes()
    wrong = [c["case"] for c in accuracy.cases()
             if "confident wrong" in (accuracy.judge(c, accuracy.predict_case(c)), accuracy.judge(c, accuracy.predict_case(c, True)))]
    assert [c for c in wrong if c not in notes] == []


def test_the_page_scores_each_slice_apart_and_no_slice_loses_a_case():
    lines: list[str] = []
    accuracy.section_cases(lines)
    page = "\n".join(lines)
    by_slice = Counter(c["slice"] for c in accuracy.cases())
    titles = {r["slice"]: r["title"] for r in accuracy.slices().values()}
    for name, count in by_slice.items():
        assert f"| **{name}**: {titles.get(name, name)} | {count} |" in page, name
        assert f"### Slice {name}: {titles.get(name, name)}" in page, name
    assert by_slice["first"] >= 130, "the first corpus's cases stay (issue 35)"
    assert by_slice["thin"] >= 60, "issue 40.9's slice: datacenter Blackwell/Hopper, old drivers, conda, CuPy/JAX on new GPUs"
    seen = Counter((c["url"], c["framework"], c["version"], c["variant"], c["gpu"], c["observed"]) for c in accuracy.cases())
    assert [key for key, n in seen.items() if n > 1] == [], "one report's stack is one case, in one slice"


def test_docs_accuracy_md_is_the_tools_current_output():
    produced = subprocess.run([sys.executable, str(REPO / "tools" / "accuracy.py")], capture_output=True, text=True, check=True,
                              env={"PYTHONPATH": str(REPO / "src"), "PATH": "/usr/bin:/bin"}).stdout
    assert produced == (REPO / "docs" / "accuracy.md").read_text(), "run: python tools/accuracy.py > docs/accuracy.md"
