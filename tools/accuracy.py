"""Measure the predictor: docs/accuracy.md is this script's output.

    python tools/accuracy.py > docs/accuracy.md

(a) the CHTC 2022 seed's sample table, (b) PyTorch's published support matrix
(the rows of knowledge/data/torch_builds.csv taken from RELEASE.md), (c) the real runs
stored under docs/evidence/ (every cell that has both a prediction and an observation).
"""

from __future__ import annotations

import sqlite3
import sys
from collections import Counter
from pathlib import Path

from gpucompat.knowledge import tables
from gpucompat.knowledge.rules import predict

REPO = Path(__file__).resolve().parent.parent
CHTC_DRIVER = "515.43.04"  # CUDA 11.7: the newest driver CUDA the talk shows in the pool
NEW_DRIVER = "580.65.06"


def chtc_rows():
    """The seed's two tables, with its CUDA ranges expanded to one row per minor version."""
    for fw, version in (("tensorflow", "2.6.0"), ("tensorflow", "2.7.0"), ("torch", "1.10.0"), ("torch", "1.11.0")):
        for cc in ("7.5", "8.0"):
            for minor in range(1, 6):
                yield fw, version, cc, f"11.{minor}", "PASS"
    yield "tensorflow", "2.4.0", "8.0", "11.4", "ENV_UNRESOLVABLE"
    yield "tensorflow", "2.6.0", "8.0", "11.6", "NO_MATCH"
    yield "torch", "1.11.0", "8.0", "11.1", "ENV_UNRESOLVABLE"
    yield "torch", "1.11.0", "8.0", "11.6", "NO_MATCH"


def outcome(expected: str, prediction) -> str:
    if prediction.verdict == "uncertain":
        return "uncertain"
    if expected == "PASS":
        return "agree" if prediction.verdict == "pass" else "disagree"
    return "agree" if prediction.verdict == "fail" and prediction.code == expected else "disagree"


def section_a(lines: list[str]) -> None:
    lines += ["## (a) The CHTC 2022 sample output (seed)", "",
              f"Each seed row, its CUDA range expanded; driver {CHTC_DRIVER} (CUDA 11.7, the newest the talk shows in the pool); "
              "for PyTorch the pip build named by that CUDA (cuXYZ), for TensorFlow its tested build.", "",
              "| framework | version | CC | CUDA | seed | predicted | result | why |", "|---|---|---|---|---|---|---|---|"]
    counts = Counter()
    for fw, version, cc, cuda, expected in chtc_rows():
        if fw == "torch":
            p = predict(fw, version, f"cu{cuda.replace('.', '')}", cc, CHTC_DRIVER)
        else:
            p = predict(fw, version, "and-cuda", cc, CHTC_DRIVER, cuda_runtime=cuda)
        result = outcome(expected, p)
        counts[result] += 1
        deciding = next((r for r in p.reasons if r.verdict == p.verdict), p.reasons[0])
        lines.append(f"| {fw} | {version} | {cc} | {cuda} | {expected} | {p.verdict} {p.code or ''} | {result} | {deciding.text} |")
    lines += ["", f"**{counts['agree']} agree, {counts['disagree']} disagree, {counts['uncertain']} uncertain.**", "",
              "Disagreements explained:",
              "- PyTorch 1.10 with CUDA 11.2/11.4/11.5 and 1.11 with 11.1/11.2/11.4: PyTorch published no pip build for those CUDA "
              "versions (1.10: cu102, cu111, cu113; 1.11: cu102, cu113, cu115), so the predictor says ENV_UNRESOLVABLE. CHTC installed "
              "with conda, where `cudatoolkit=11.x` runs a PyTorch built for another 11.x under minor-version compatibility; the seed's "
              "collapsed range 11.1-11.5 also contradicts its own invalid row (PT 1.11, 8.0, 11.1). gpucompat models pip wheels; a "
              "conda provider is not built yet.",
              "- NO_MATCH rows: no node in CHTC's pool advertised CUDA 11.6. That is a fact about the pool, not the stack: the predictor "
              "cannot know it and predicts the stack itself.",
              "- TensorFlow 2.4 with CUDA 11.4 (conda could not resolve `tensorflow-gpu=2.4` with `cudatoolkit=11.4`): the tables hold "
              "TensorFlow's tested CUDA (11.0), not conda's pins, and a newer runtime is allowed under minor-version compatibility.",
              "- Uncertain TensorFlow rows: TensorFlow's architecture list is not in the tables, so the predictor does not guess.", ""]


def section_b(lines: list[str]) -> None:
    ccs = ("5.0", "6.0", "6.1", "7.0", "7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0")
    rows = [r for r in tables.table("torch_builds") if "RELEASE.md" in r["source"]]
    lines += ["## (b) PyTorch's published support matrix", "",
              f"Every (release, CUDA variant) whose arch list comes from PyTorch's RELEASE.md support matrix ({len(rows)} builds), on "
              f"{len(ccs)} compute capabilities, driver {NEW_DRIVER}. *Published* means the matrix lists that exact sm_XY.", "",
              "| release | variant | published | predicted pass | agree | disagree | uncertain |", "|---|---|---|---|---|---|---|"]
    total = Counter()
    reasons = Counter()
    for row in rows:
        counts = Counter()
        listed = set(row["sass"].split(";"))
        for cc in ccs:
            p = predict("torch", f"{row['release']}+{row['variant']}", row["variant"], cc, NEW_DRIVER)
            if p.verdict == "uncertain":
                counts["uncertain"] += 1
                continue
            published = f"sm_{cc.replace('.', '')}" in listed
            if published == (p.verdict == "pass"):
                counts["agree"] += 1
            else:
                counts["disagree"] += 1
                reasons[p.code or ("pass by SASS of the same major" if p.verdict == "pass" else "?")] += 1
        total += counts
        lines.append(f"| {row['release']} | {row['variant']} | {row['sass'].replace(';', ' ')} | "
                     f"{sum(1 for cc in ccs if predict('torch', row['release'] + '+' + row['variant'], row['variant'], cc, NEW_DRIVER).verdict == 'pass')} | "
                     f"{counts['agree']} | {counts['disagree']} | {counts['uncertain']} |")
    lines += ["", f"**{total['agree']} agree, {total['disagree']} disagree, {total['uncertain']} uncertain.**", "",
              "Every disagreement is the same one: " + ", ".join(f"{k} ({v})" for k, v in reasons.items()) + ". The matrix lists the "
              "architectures PyTorch compiled; NVIDIA's binary compatibility runs SASS for sm_X.Y on every device of major X with minor "
              ">= Y (CUDA C++ Programming Guide, 'Binary Compatibility'), so a build with sm_86 also runs on an sm_89 L40S and one "
              "with sm_60 on an sm_61 GTX 1080. The predictor says pass there on purpose. Where drivers or CUDA 13 drop an "
              "architecture (compute capability below 7.5 with cu130), predicted and published agree on the failure.", ""]


def section_c(lines: list[str]) -> None:
    lines += ["## (c) Real GPU runs (docs/evidence/)", "", "| evidence | cell | predicted | observed | result |", "|---|---|---|---|---|"]
    counts = Counter()
    for db in sorted((REPO / "docs" / "evidence").glob("*/*.db")):
        with sqlite3.connect(db) as conn:
            if not conn.execute("SELECT name FROM sqlite_master WHERE name='predictions'").fetchone():
                continue
            query = ("SELECT s.framework, s.version, t.name, p.verdict, p.code, r.code FROM cells c JOIN stacks s ON s.id=c.stack_id "
                     "JOIN targets t ON t.id=c.target_id JOIN predictions p ON p.cell_id=c.id JOIN results r ON r.cell_id=c.id")
            for fw, version, gpu, verdict, code, observed in conn.execute(query):
                if verdict == "uncertain":
                    result = "uncertain"
                elif verdict == "pass":
                    result = "agree" if observed == "PASS" else "disagree"
                else:
                    result = "agree" if observed == code else "disagree"
                counts[result] += 1
                lines.append(f"| {db.parent.name}/{db.name} | {fw} {version} on {gpu} | {verdict} {code or ''} | {observed} | {result} |")
    lines += ["", f"**{counts['agree']} agree, {counts['disagree']} disagree, {counts['uncertain']} uncertain.**", ""]


def main() -> None:
    lines = ["# Accuracy of the predictor", "",
             "Generated by `python tools/accuracy.py > docs/accuracy.md` from the knowledge tables in this repository; "
             "nothing here is typed by hand except the explanations.", ""]
    section_a(lines)
    section_b(lines)
    section_c(lines)
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
