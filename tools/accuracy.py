"""Measure the predictor against what really happened: docs/accuracy.md is this script's output.

    python tools/accuracy.py > docs/accuracy.md

(a) real cases from public bug reports (tools/facts/accuracy_cases_*.csv: each with its URL, the
versions as the reporter gave them, and what happened), (b) the real GPU runs stored under
docs/evidence/ (every cell with both a prediction and an observation), (c) wheels read with
`gpucompat inspect` (docs/evidence/wheels/*.json) against the arch lists in the tables.
A case is *agree* (same verdict, and for a failure the same code), *confident wrong* (a pass
or fail that did not happen), *uncertain* (the predictor said it cannot judge) or *unanswered*
(the report lacks what any prediction needs: the version).
"""

from __future__ import annotations

import csv
import json
import re
import sqlite3
import sys
from collections import Counter
from pathlib import Path

from gpucompat.knowledge import tables
from gpucompat.knowledge.rules import predict_stack

REPO = Path(__file__).resolve().parent.parent
FACTS = REPO / "tools" / "facts"
PLAIN_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,2}", re.ASCII)


def slices() -> dict[str, dict]:
    """Which slice each case file belongs to, with what the slice covers (tools/facts/accuracy_slices.csv);
    a case file the list does not name is a slice of its own, named after the file."""
    path = FACTS / "accuracy_slices.csv"
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        return {r["file"]: r for r in csv.DictReader(handle)}


def cases() -> list[dict]:
    rows, named = [], slices()
    for path in sorted(FACTS.glob("accuracy_cases_*.csv")):
        with path.open(newline="", encoding="utf-8") as handle:
            found = named.get(path.name, {"slice": path.stem[len("accuracy_cases_"):]})["slice"]
            rows += [{**row, "slice": found, "file": path.name} for row in csv.DictReader(handle)]
    return rows


def notes() -> dict[str, str]:
    path = FACTS / "accuracy_notes.csv"
    if not path.exists():
        return {}
    with path.open(newline="", encoding="utf-8") as handle:
        return {r["case"]: r["why"] for r in csv.DictReader(handle)}


def variant_of(case: dict) -> str:
    """The reporter's variant in gpucompat's words; a variant not stated is the framework's plain install
    (for CuPy there is none: `pip install cupy` builds from source, so an unstated package stays unknown)."""
    framework, variant = case["framework"], case["variant"].strip()
    local = re.search(r"\+(cu[0-9]+|cpu)", case["version"])
    if framework == "torch":
        return local.group(1) if local else (variant if re.fullmatch(r"cu[0-9]+|cpu", variant) else "default")
    if framework == "tensorflow":
        return {"gpu": "gpu", "and-cuda": "and-cuda"}.get(variant, "plain")
    if framework == "jax":
        old_local = re.fullmatch(r"cuda([0-9]{2,3})\.cudnn([0-9]{2,3})", variant)
        if old_local:  # jaxlib 0.x.y+cuda11.cudnn82 is what jax[cuda11_cudnn82] (later jax[cuda11_pip]/[cuda11_local]) installed
            named = [f"cuda{old_local.group(1)}_cudnn{old_local.group(2)}", f"cuda{old_local.group(1)}_pip", f"cuda{old_local.group(1)}_local"]
            variant = next((v for v in named if tables.jax_build(case["version"], v)), named[0])
        if re.fullmatch(r"cpu|cuda([0-9]{2,3})?(_pip|_local|_cudnn[0-9]{2,3})?", variant):
            if tables.jax_build(case["version"], variant) is None and tables.version(case["version"]) and \
                    tables.version(case["version"]) < tables.version("0.2.11"):
                return f"jaxlib+{variant}"  # before jax had CUDA extras: a jaxlib wheel from Google's index, not an extra
            return variant
        # not stated: the CUDA extra of that era, jax[cuda] (CUDA 11, then 12) until jax[cuda12] replaced it
        return "cuda" if tables.jax_build(case["version"], "cuda") else "cuda12"
    if framework == "cupy":
        return variant if re.fullmatch(r"cuda[0-9]{2,3}x?", variant) else "source"
    return variant


def predict_case(case: dict, assume_driver: bool = False):
    """The prediction for one reported case, or None when the report gives no version to judge.
    With assume_driver, a driver the report does not state is taken as the oldest one that supports
    the stack's CUDA (the report is about the stack, not the driver); a stated driver is always used."""
    raw = case["version"].strip().split("+")[0]
    if tables.version(raw) is None:
        plain = PLAIN_VERSION.match(raw)
        if not plain:
            return None
        raw = plain.group(0)
    cc = case["cc"].strip() or None
    if cc is None and case["gpu"].strip():
        row = tables.gpu(case["gpu"])
        cc = row["cc"] if row else None
    driver = case["driver"].strip()
    driver = driver if re.fullmatch(r"[0-9]{3}(\.[0-9]+){1,2}", driver) else None  # '535' alone is no driver version
    python = ".".join(case["python"].strip().split(".")[:2]) or None
    variant = variant_of(case)
    release = raw + (f"+{variant}" if case["framework"] == "torch" and variant.startswith("cu") else "")
    gpu = case["gpu"].strip() or None
    prediction = predict_stack(case["framework"], release, variant, cc, driver, python, gpu=gpu)
    cuda = prediction.resolved.get("cuda_runtime")
    if assume_driver and driver is None and cuda:
        # 'just new enough': the toolkit minimum of that CUDA, or for a whole major (jax, cupy-cudaXXx) its compatibility floor
        floor = tables.compat_floor(int(cuda.split(".")[0])) if cuda.endswith(".x") else None
        row = tables.cuda_row(cuda.replace(".x", ".0"))
        assumed = floor["compat_driver_min"] if floor else (row["toolkit_driver_min"] if row else None)
        bounds = tables.driver_branches(cc, gpu) if assumed else None
        if bounds and bounds["first"] and int(assumed.split(".")[0]) < int(bounds["first"]["branch"]):
            # the reporter's driver drove their GPU: the oldest driver the knowledge names of a branch that does
            first = int(bounds["first"]["branch"])
            assumed = min((r["toolkit_driver_min"] for r in tables.table("cuda_drivers") if int(r["toolkit_driver_min"].split(".")[0]) >= first),
                          key=tables.version, default=assumed)
        if assumed:
            from gpucompat.knowledge.rules import FAIL, driver_drives_rule, driving_branch
            drives = driver_drives_rule(cc, gpu, assumed)
            if drives is not None and drives.verdict == FAIL:  # its release does not list the GPU (driver_devices.csv): one that does
                assumed = driving_branch(cc, gpu, assumed)[1] or assumed
            prediction = predict_stack(case["framework"], release, variant, cc, assumed, python, gpu=gpu)
    return prediction


def judge(case: dict, prediction) -> str:
    if prediction is None:
        return "unanswered"
    if prediction.verdict == "uncertain":
        return "uncertain"
    observed_pass = case["observed"].strip() == "pass"
    if prediction.verdict == "pass":
        return "agree" if observed_pass else "confident wrong"
    return "agree" if not observed_pass and prediction.code == case["observed_code"].strip() else "confident wrong"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _said(prediction) -> tuple[str, str]:
    if prediction is None:
        return "—", "the report names no version"
    deciding = next((r.text for r in prediction.reasons if r.verdict == prediction.verdict), "") or \
        next((r.text for r in prediction.reasons if r.verdict == "uncertain"), "")
    return f"{prediction.verdict} {prediction.code or ''}".strip(), deciding


def _summary(title: str, by_framework: dict) -> list[str]:
    total = Counter()
    lines = [f"**{title}**", "", "| | agree | confident wrong | uncertain | unanswered | total |", "|---|---|---|---|---|---|"]
    for framework, c in sorted(by_framework.items()):
        total += c
        lines.append(f"| {framework} | {c['agree']} | {c['confident wrong']} | {c['uncertain']} | {c['unanswered']} | {sum(c.values())} |")
    n = sum(total.values())
    verdicts = total["agree"] + total["confident wrong"]
    lines += [f"| **all** | **{total['agree']}** | **{total['confident wrong']}** | **{total['uncertain']}** | **{total['unanswered']}** | **{n}** |", "",
              f"{total['agree']} of {n} agree ({100 * total['agree'] / n:.0f} %); of the {verdicts} cases given a verdict, "
              f"{100 * total['agree'] / max(verdicts, 1):.0f} % agree and {total['confident wrong']} are confidently wrong.", ""]
    return lines


def _slice_summary(by_slice: dict, about: dict) -> list[str]:
    """One line per slice for both scorings: how many agree, and how many of the verdicts given are right."""
    lines = ["| slice | cases | agree (stated) | confident wrong (stated) | agree (driver assumed) | confident wrong (driver assumed) | "
             "uncertain or unanswered (driver assumed) | right of the verdicts given (driver assumed) |",
             "|---|---|---|---|---|---|---|---|"]
    for name, (strict, assumed) in by_slice.items():
        n = sum(assumed.values())
        verdicts = assumed["agree"] + assumed["confident wrong"]
        share = f"{100 * assumed['agree'] / verdicts:.0f} % of {verdicts}" if verdicts else "no verdict given"
        lines.append(f"| **{name}**: {_cell(about.get(name, name))} | {n} | {strict['agree']} ({100 * strict['agree'] / n:.0f} %) | {strict['confident wrong']} | "
                     f"{assumed['agree']} ({100 * assumed['agree'] / n:.0f} %) | {assumed['confident wrong']} | "
                     f"{assumed['uncertain'] + assumed['unanswered']} | {share} |")
    return lines + [""]


def section_cases(lines: list[str]) -> None:
    why_by_case = notes()
    rows, strict, assumed, by_slice, wrong, files = {}, {}, {}, {}, [], {}
    for case in cases():
        first, second = predict_case(case), predict_case(case, assume_driver=True)
        result, result2 = judge(case, first), judge(case, second)
        strict.setdefault(case["framework"], Counter())[result] += 1
        assumed.setdefault(case["framework"], Counter())[result2] += 1
        counts = by_slice.setdefault(case["slice"], (Counter(), Counter()))
        counts[0][result] += 1
        counts[1][result2] += 1
        if case["file"] not in files.setdefault(case["slice"], []):
            files[case["slice"]].append(case["file"])
        if "confident wrong" in (result, result2):
            wrong.append(case)
        said, _ = _said(first)
        said2, deciding = _said(second)
        what = f"{case['observed']} {case['observed_code']}".strip()
        target = case["gpu"] or (f"CC {case['cc']}" if case["cc"] else "GPU not stated")
        stack = f"{case['framework']} {case['version']}" + (f" [{case['variant']}]" if case["variant"] else "")
        extra = ", ".join(x for x in (f"driver {case['driver']}" if case["driver"] else "", f"Python {case['python']}" if case["python"] else "") if x)
        note = why_by_case.get(case["case"], "") if "agree" not in (result, result2) or result2 != "agree" else ""
        rows.setdefault(case["slice"], []).append(f"| [{case['case']}]({case['url']}) | {_cell(stack)} | {_cell(target)}{'; ' + _cell(extra) if extra else ''} | {what} | "
                    f"{said} | {result} | {said2} | **{result2}** | {_cell(deciding)}{' — *' + _cell(note) + '*' if note else ''} |")
    total = sum(sum(c.values()) for c in strict.values())
    about = {r["slice"]: r["title"] for r in slices().values()}
    listed = ", ".join(f"`tools/facts/{f}`" for names in files.values() for f in names)
    lines += ["## (a) Real cases from public bug reports", "",
              f"{total} cases collected from the PyTorch, TensorFlow, JAX and CuPy issue trackers and the projects that use them "
              f"({listed}; `tools/facts/accuracy_slices.csv` says which slice each file is): each with its URL, the versions exactly "
              "as the reporter gave them, the GPU, driver and Python where stated, and what happened. The predictor is given only "
              "what the reporter stated: a GPU name is mapped to its compute capability by the knowledge itself; a driver given "
              "as a branch number only ('535') is not used; a variant not stated is the plain `pip install` of that framework.", "",
              "Most reports do not state the driver, and a prediction of *pass* needs one (any stack fails on a driver too old for "
              "its CUDA). So the cases are scored twice: with the stated facts only, and with a driver the report does not state "
              "taken as the oldest that supports the stack's CUDA (the report is about the stack; a stated driver is always used, "
              "and every case that reports DRIVER_TOO_OLD states one).", "",
              "**Per slice.** Each slice is a set of cases collected together, for the part of the question it was collected for; a "
              "slice added for what the corpus lacked says how well the predictor does there, which the overall figure hides.", "",
              *_slice_summary(by_slice, about),
              *_summary("Stated facts only", strict), *_summary("A driver the report does not state taken as just new enough", assumed),
              "**Every confident wrong answer**, in either scoring, with its diagnosis: a fact the knowledge does not model yet, or a case "
              "whose record was wrong (`tools/facts/accuracy_notes.csv`).", "",
              *([f"- [{c['case']}]({c['url']}) (slice {c['slice']}): {_cell(why_by_case.get(c['case'], ''))}" for c in wrong]
                or ["- none"]), "",
              "Every miss (a result other than *agree* in the second scoring) is explained in italics after the predictor's reason.", ""]
    for name, slice_rows in rows.items():
        lines += [f"### Slice {name}: {_cell(about.get(name, name))}", "",
                  "| case | stack | GPU | happened | predicted (stated) | result | predicted (driver assumed) | result | the predictor's reason — *why it missed* |",
                  "|---|---|---|---|---|---|---|---|---|", *slice_rows, ""]


def section_evidence(lines: list[str]) -> Counter:
    lines += ["## (b) Real GPU runs (docs/evidence/)", "",
              "Every cell of the stores committed under docs/evidence/ that has both a prediction (made before the job ran) and an "
              "observation.", "", "| evidence | cell | predicted | observed | result |", "|---|---|---|---|---|"]
    counts = Counter()
    for db in sorted((REPO / "docs" / "evidence").glob("*/*.db")):
        with sqlite3.connect(f"file:{db}?immutable=1", uri=True) as conn:
            if not conn.execute("SELECT name FROM sqlite_master WHERE name='predictions'").fetchone():
                continue
            query = ("SELECT s.framework, s.version, s.variant, t.name, p.verdict, p.code, r.code FROM cells c JOIN stacks s ON s.id=c.stack_id "
                     "JOIN targets t ON t.id=c.target_id JOIN predictions p ON p.cell_id=c.id JOIN results r ON r.cell_id=c.id")
            for fw, version, variant, gpu, verdict, code, observed in conn.execute(query):
                if observed == "UNTESTED":
                    continue  # the test could not be carried out: nothing to compare
                if verdict == "uncertain":
                    result = "uncertain"
                elif verdict == "pass":
                    result = "agree" if observed == "PASS" else "confident wrong"
                else:
                    result = "agree" if observed == code else "confident wrong"
                counts[result] += 1
                lines.append(f"| {db.parent.name}/{db.name} | {fw} {version} [{variant}] on {gpu} | {verdict} {code or ''} | {observed} | {result} |")
    lines += ["", f"**{counts['agree']} agree, {counts['confident wrong']} confident wrong, {counts['uncertain']} uncertain.**", ""]
    return counts


WHEEL_NAME = re.compile(r"(torch|tensorflow|jax_cuda1[0-9]_plugin|cupy_cuda[0-9]+x?)-([0-9.]+)", re.ASCII)


def section_wheels(lines: list[str]) -> Counter:
    lines += ["## (c) Wheels read with `gpucompat inspect` against the tables", "",
              "Each wheel was downloaded from PyPI and read by `gpucompat inspect` (the ELF `.nv_fatbin` sections of every "
              "library in it; for torch only `libtorch_cuda*.so` count, since the bundled cuBLAS/cuDNN carry more architectures than "
              "torch's own kernels). docs/evidence/wheels/ holds each JSON. `tools/build_knowledge.py` then makes the wheel the "
              "source of that row, keeping what the documents said. *Agree* means the documents had exactly the wheel's SASS.", "",
              "| wheel | documented SASS / PTX | wheel SASS / PTX | result |", "|---|---|---|---|"]
    counts = Counter()
    rows = [*tables.table("torch_builds"), *tables.table("tensorflow_builds"), *tables.table("jax_builds"), *tables.table("cupy_archs")]
    for path in sorted((REPO / "docs" / "evidence" / "wheels").glob("*.json")):
        data = json.loads(path.read_text())
        wheel = Path(data["target"]).name
        if not WHEEL_NAME.match(wheel):
            continue
        # a row cites every wheel that fell on it: "read from A, B and C with gpucompat inspect (...)"
        row = next((r for r in rows if r["source"].startswith("read from ")
                    and wheel in re.split(r", | and ", r["source"][len("read from "):].split(" with gpucompat inspect", 1)[0])), None)
        if row is None:
            result, documented = "no row in the tables", "—"
        else:
            documented = row["source"].split(" ; documented: ", 1)[1].split(" (", 1)[0]
            said = set(filter(None, documented.split(" / ")[0].split(";"))) - {"-"}
            result = ("new row: no document gave its list" if not said else
                      "agree" if said == set(filter(None, row["sass"].split(";"))) else "differs: the table now follows the wheel")
        counts[result.split(":")[0]] += 1
        shown = f"{row['sass'].replace(';', ' ')} / {row['ptx'].replace(';', ' ') or '—'}" if row else "—"
        lines.append(f"| {wheel} | {documented.replace(';', ' ')} | {shown} | {result} |")
    lines += ["", ", ".join(f"**{v} {k}**" for k, v in counts.items()) + ".", ""]
    return counts


def _arch_key(text: str):
    digits = re.search(r"[0-9]+", text)
    return (int(digits.group(0)) if digits else 0, text)


def main() -> None:
    lines = ["# Accuracy of the predictor", "",
             "Generated by `python tools/accuracy.py > docs/accuracy.md`; nothing here is typed by hand except the cases' facts "
             "(collected from the reports, `tools/facts/accuracy_cases_*.csv`) and the explanations of misses "
             "(`tools/facts/accuracy_notes.csv`). The predictor is `gpucompat explain`'s: the knowledge tables and rules of this "
             "repository, offline. Earlier versions of this page scored the predictor against the very table it predicts from; "
             "that proved consistency, not accuracy, and is gone.", ""]
    section_cases(lines)
    section_evidence(lines)
    section_wheels(lines)
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
