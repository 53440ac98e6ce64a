"""`gpucompat report`: one self-contained HTML file (no network to view it).

Jinja2 with autoescape: every captured text (error messages, logs, names) is escaped.
A matrix per framework (rows: version/variant/Python/env; columns: GPU classes), each
cell coloured by its code with the evidence and the prediction one click away
(<details>, so it works without JavaScript). With bench figures, a Benchmarks section: the
matrix-product throughput and a trend across framework versions as inline SVG (report/bench.py),
and a table of every figure.
"""

from __future__ import annotations

import datetime
import json

from jinja2 import Environment, PackageLoader, select_autoescape

from .. import __version__
from ..model import PASS, UNTESTED
from .rows import display_row, is_surprise, seed_table

PLAIN_CSS = {"PASS", "NO_MATCH", "TIMEOUT", "ENV_UNRESOLVABLE", "ENV_INSTALL_FAILED", "INTERNAL", "PENDING", "UNTESTED"}


def _row(raw: dict) -> dict:
    row = display_row(raw)
    row["css"] = row["code"] if row["code"] in PLAIN_CSS else "FAIL"
    row["surprise"] = is_surprise(row)
    evidence = dict(raw.get("evidence") or {})
    row["evidence_text"] = json.dumps(evidence, indent=1, default=str)[:6000] if evidence else ""
    return row


def _bench(bench_rows: list[dict] | None) -> dict | None:
    """The Benchmarks section: the two charts (inline SVG, escaped by bench.py) and every figure."""
    if not bench_rows:
        return None
    from . import bench

    dtype = bench.trend_dtype(bench_rows)
    return {"count": len(bench_rows), "throttled": sum(1 for r in bench_rows if r.get("throttled")),
            "throughput": bench.throughput_chart(bench_rows),
            "trend": bench.trend_chart(bench_rows, "matmul", dtype) if dtype and bench.trend_versions(bench_rows, "matmul", dtype) > 1 else "",
            "trend_dtype": dtype, "summary": bench.bench_summary(bench_rows)}


def render(sweep: dict, raw_rows: list[dict], bench_rows: list[dict] | None = None) -> str:
    """The report of one sweep; `bench_rows` (store.bench_rows) adds its benchmark figures."""
    rows = [_row(r) for r in raw_rows]
    done = [r for r in rows if r["code"] != "PENDING"]
    valid = [r for r in done if r["code"] == PASS]
    untested = [r for r in done if r["code"] == UNTESTED]
    invalid = [r for r in done if r["code"] not in (PASS, UNTESTED)]
    matrices = []
    for framework in sorted({r["framework"] for r in rows}):
        mine = [r for r in rows if r["framework"] == framework]
        columns = sorted({f"{r['gpu']} (CC {r['cc'] or '?'}, driver {r['driver'] or '?'})" for r in mine})
        lines: dict[str, list] = {}
        for r in mine:
            label = f"{r['version']} [{r['variant']}] py{r['python']} {r['env']}"
            column = columns.index(f"{r['gpu']} (CC {r['cc'] or '?'}, driver {r['driver'] or '?'})")
            lines.setdefault(label, [None] * len(columns))[column] = r
        matrices.append({"framework": framework, "columns": columns,
                         "lines": [{"label": label, "cells": cells} for label, cells in lines.items()]})
    environment = Environment(loader=PackageLoader("gpucompat.report", "templates"), autoescape=select_autoescape(["html", "j2"]))
    template = environment.get_template("report.html.j2")
    created = datetime.datetime.fromtimestamp(sweep["created_at"]).strftime("%Y-%m-%d %H:%M")
    counts = {"cells": len(rows), "valid": len(valid), "invalid": len(invalid), "untested": len(untested), "pending": len(rows) - len(done),
              "surprises": sum(r["surprise"] for r in rows), "predicted": sum(1 for r in done if r["observed"] is False)}
    return template.render(sweep=sweep, created=created, version=__version__, counts=counts, matrices=matrices,
                           surprises=[r for r in rows if r["surprise"]], valid=seed_table(valid, False), invalid=seed_table(invalid, True),
                           untested=untested, bench=_bench(bench_rows))
