"""Exports of a sweep's results: CSV, JSON, Markdown."""

from __future__ import annotations

import csv
import io
import json

COLUMNS = ["cell", "framework", "version", "variant", "python", "env", "gpu", "cc", "driver",
           "cuda_runtime", "cudnn", "code", "stage", "reason", "warnings"]


def to_json(sweep: dict, valid: list[dict], invalid: list[dict], pending: int) -> str:
    return json.dumps({
        "sweep": {k: sweep[k] for k in ("id", "name", "kind", "status", "created_at", "finished_at")},
        "counts": {"valid": len(valid), "invalid": len(invalid), "pending": pending},
        "valid": valid,
        "invalid": invalid,
    }, indent=2, default=str)


def to_csv(valid: list[dict], invalid: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in sorted(valid + invalid, key=lambda r: r["cell"]):
        writer.writerow({**row, "warnings": " | ".join(row["warnings"])})
    return out.getvalue()


def _md_cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def to_markdown(sweep: dict, valid: list[dict], invalid: list[dict]) -> str:
    lines = [f"# gpucompat sweep {sweep['id']}: {_md_cell(sweep['name'])}", ""]
    head = ["Framework", "Version", "Variant", "Python", "GPU", "CC", "CUDA runtime"]
    keys = ["framework", "version", "variant", "python", "gpu", "cc", "cuda_runtime"]
    for title, rows, extra in (("Valid combinations", valid, []), ("Invalid combinations", invalid, ["Failure", "Stage", "Reason"])):
        lines += [f"## {title}", "", "| " + " | ".join(head + extra) + " |", "|" + "---|" * (len(head) + len(extra))]
        for row in rows:
            cells = [row[k] for k in keys] + ([row["code"], row["stage"], row["reason"]] if extra else [])
            lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)
