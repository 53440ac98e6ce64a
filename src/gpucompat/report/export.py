"""Exports of a sweep's results: CSV, JSON, Markdown."""

from __future__ import annotations

import csv
import html
import io
import json
import xml.etree.ElementTree as ET

from ..model import is_verified
from ..quoting import csv_row
from .rows import Verdicts

COLUMNS = ["cell", "framework", "version", "variant", "python", "env", "gpu", "cc", "driver",
           "cuda_runtime", "cudnn", "code", "cause", "stage", "reason", "warnings", "gpu_note", "source", "verified", "observed", "predicted",
           "predicted_code", "surprise"]


def to_json(sweep: dict, verdicts: Verdicts) -> str:
    return json.dumps({
        "sweep": {k: sweep[k] for k in ("id", "name", "kind", "status", "created_at", "finished_at")},
        "counts": {"surprises": len(verdicts.surprises), "valid": len(verdicts.valid), "invalid": len(verdicts.invalid),
                   "untested": len(verdicts.untested), "pending": len(verdicts.pending)},
        "surprises": verdicts.surprises,
        "valid": verdicts.valid,
        "invalid": verdicts.invalid,
        "untested": verdicts.untested,
    }, indent=2, default=str)


def to_csv(verdicts: Verdicts) -> str:
    """Every cell with a verdict, or with none because it could not be tested (code UNTESTED, its cause)."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    surprising = {r["cell"] for r in verdicts.surprises}
    for row in sorted(verdicts.valid + verdicts.invalid + verdicts.untested, key=lambda r: r["cell"]):
        writer.writerow(csv_row({**row, "warnings": " | ".join(row["warnings"]), "surprise": row["cell"] in surprising}))
    return out.getvalue()


def _md_cell(value) -> str:
    """A value as Markdown text: HTML escaped (a name's `<script>` is shown, never run where the Markdown is rendered),
    a table's | escaped, one line."""
    return html.escape(str(value), quote=False).replace("|", "\\|").replace("\r", " ").replace("\n", " ")


def _md_table(head: list[str], lines: list[list]) -> list[str]:
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    out += ["| " + " | ".join(_md_cell(c) for c in line) + " |" for line in lines]
    return out + [""]


def to_markdown(sweep: dict, verdicts: Verdicts) -> str:
    """The seed's two tables (CUDA runtimes collapsed into runs), surprises first, then what could not be tested."""
    from .rows import python_differs, seed_table

    surprises, valid, invalid = verdicts.surprises, verdicts.valid, verdicts.invalid
    from .rows import unverified_note

    lines = [f"# gpucompat sweep {sweep['id']}: {_md_cell(sweep['name'])}", ""]
    note = unverified_note(verdicts.valid + verdicts.invalid + verdicts.untested)
    lines += [f"**{_md_cell(note)}**", ""] if note else []
    if surprises:
        lines += ["## Surprises (observed differs from predicted)", ""]
        lines += _md_table(["Framework", "Version", "Variant", "Python", "GPU", "CC", "Driver", "Observed", "Predicted", "Reason", "Source"],
                           [[r["framework"], r["version"], r["variant"], r["python"], r["gpu"], r["cc"], r["driver"], r["code"],
                             f"{r['predicted']} {r['predicted_code']}".strip(), r["reason"], _md_source(r)] for r in surprises])
    by_python = python_differs(valid + invalid)  # then each line's version says its Python
    head = ["Framework", "Framework Version", "Compute Capability", "CUDA Runtime Version"]
    lines += ["## Valid combinations", ""]
    lines += _md_table(head, [[g["framework"], _with_python(g), g["cc"], g["cuda_runtime"]] for g in seed_table(valid, False, by_python)])
    lines += ["## Invalid combinations", ""]
    lines += _md_table(head + ["Failure Reason"], [[g["framework"], _with_python(g), g["cc"], g["cuda_runtime"], g["failure"]]
                                                    for g in seed_table(invalid, True, by_python)])
    if verdicts.untested:
        lines += ["## Could not test (no verdict; `gpucompat sweep --resume ID` retries them)", ""]
        lines += _md_table(["Framework", "Version", "Variant", "Python", "GPU", "Driver", "Cause", "Reason", "Source"],
                           [[r["framework"], r["version"], r["variant"], r["python"], r["gpu"], r["driver"], r["cause"], r["reason"], _md_source(r)]
                            for r in verdicts.untested])
    # the grouped lines above say no GPU, driver, Python or site: each cell with them, as `results --cells` lists it
    lines += ["## Cells", ""]
    lines += _md_table(["Framework", "Version", "Variant", "Python", "GPU", "CC", "Driver", "CUDA runtime", "Verdict", "Source"],
                       [[r["framework"], r["version"], r["variant"], r["python"], r["gpu"], r["cc"], r["driver"], r["cuda_runtime"],
                         _md_verdict(r), _md_source(r)] for r in sorted(valid + invalid + verdicts.untested, key=lambda r: r["cell"])])
    return "\n".join(lines)


def _md_verdict(row: dict) -> str:
    if row["code"] == "UNTESTED":
        return f"UNTESTED ({row['cause']})"
    return f"{row['code']} ({row['stage'] or '-'}{'' if row['observed'] else ', predicted'})"


def _md_source(row: dict) -> str:
    """Where the cell was observed: local (run here) or the site a bundle came from, UNVERIFIED where no trusted key signed it."""
    return row["source"] + ("" if is_verified(row) else " (UNVERIFIED)")


def _with_python(line: dict) -> str:
    """A grouped line's version, with its Python where the lines are kept apart by it ('2.4.1 (Python 3.13)')."""
    return f"{line['version']} (Python {line['python']})" if line.get("python") else line["version"]


def to_junit(sweep: dict, verdicts: Verdicts) -> str:
    """JUnit XML, one testcase per cell, so CI systems can show a sweep; untested and predicted cells are skipped."""
    cases = sorted(verdicts.valid + verdicts.invalid + verdicts.untested, key=lambda r: r["cell"])
    failures = sum(1 for r in verdicts.invalid if r["observed"])
    suite = ET.Element("testsuite", name=f"gpucompat sweep {sweep['id']}: {sweep['name']}", tests=str(len(cases)),
                       failures=str(failures), skipped=str(len(cases) - len(verdicts.valid) - failures))
    for row in cases:
        case = ET.SubElement(suite, "testcase", classname=f"{row['framework']}.{row['version']}",
                             name=f"{row['variant']} py{row['python']} {row['env']} on {row['gpu']} (cc {row['cc'] or '?'})",
                             time=str(row["duration_s"] or 0))
        if row["code"] == "PASS":
            continue
        if row["code"] == "UNTESTED":
            ET.SubElement(case, "skipped", message=f"UNTESTED ({row['cause']}): could not test").text = row["reason"]
        elif not row["observed"]:
            ET.SubElement(case, "skipped", message=f"{row['code']} (predicted, not run)").text = row["reason"]
        else:
            ET.SubElement(case, "failure", message=f"{row['code']} at {row['stage']}", type=row["code"]).text = row["reason"]
    return ET.tostring(suite, encoding="unicode", xml_declaration=True)
