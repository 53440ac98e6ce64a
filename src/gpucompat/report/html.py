"""`gpucompat report`: one self-contained HTML file (no network to view it).

Jinja2 with autoescape: every captured text (error messages, logs, names) is escaped.
A matrix per framework (rows: version/variant/Python/env; columns: GPU classes), each
cell coloured by its code with the evidence and the prediction one click away
(<details>, so it works without JavaScript). Only real GPU classes are columns and only stacks with
something besides cells that could not be tested are rows (the rules of report --site, site.py): the
stand-in target of a machine without a GPU, and a class whose every job found no GPU, are no column; the
cells that could not be tested (UNTESTED, with a cause) are listed apart, grouped by cause with its
sentence, and counted apart in the summary; a verdict reached off any GPU class (an unresolvable stack
swept where no GPU was visible) is listed as reached before any GPU, and counted invalid. With bench figures, a Benchmarks section: the
matrix-product throughput and a trend across framework versions as inline SVG (report/charts.py),
and a table of every figure; where measured, sharing one GPU among N processes, data-parallel
scaling over N GPUs (chart and table) and NVML telemetry per cell, each in its own sub-section.
"""

from __future__ import annotations

import datetime
import json

from jinja2 import Environment, PackageLoader, select_autoescape

from .. import __version__
from ..model import PASS, UNTESTED
from ..quoting import printable
from .rows import display_row, is_surprise, python_differs, seed_table, troubled_gpus
from .rows import apart_cause, apart_summary, is_gpu_class, unverified_note

PLAIN_CSS = {"PASS", "NO_MATCH", "TIMEOUT", "ENV_UNRESOLVABLE", "ENV_INSTALL_FAILED", "INTERNAL", "PENDING", "UNTESTED"}


def _row(raw: dict) -> dict:
    row = display_row(raw)
    row["css"] = row["code"] if row["code"] in PLAIN_CSS else "FAIL"
    row["surprise"] = is_surprise(row)
    evidence = dict(raw.get("evidence") or {})
    row["evidence_text"] = json.dumps(evidence, indent=1, default=str)[:6000] if evidence else ""
    return row


def _milliseconds(seconds) -> str:
    return f"{seconds * 1000:.2f} ms" if isinstance(seconds, (int, float)) else "–"


def _shortened(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _profiles(profiles: list[dict]) -> list[dict]:
    """Each cell's profiling window as the report shows it: step times, what the window cost the steps
    outside it, and its top kernels with their share of device time (the bars' widths are our numbers)."""
    shown = []
    for p in profiles:
        window = p["profile"]
        label = f"cell {p.get('cell', '?')}: {p.get('framework') or ''} {p.get('version') or ''} on {p.get('gpu') or ''}"
        if window.get("error"):
            shown.append({"label": label, "error": printable(window["error"].get("message") if isinstance(window["error"], dict) else window["error"])[:300]})
            continue
        cost = window.get("overhead_outside")
        shown.append({"label": label, "steps": f"{window.get('steps')} steps from step {window.get('start')}",
                      "times": [("before", _milliseconds(window.get("step_s_before"))), ("inside", _milliseconds(window.get("step_s_inside"))),
                                ("after", _milliseconds(window.get("step_s_after"))), ("control", _milliseconds(window.get("step_s_control")))],
                      "cost": f"{cost * 100:+.1f} %" if isinstance(cost, (int, float)) else "–",
                      "trace": f"{window.get('trace_bytes') or 0:,} bytes" + ("" if window.get("trace") else " (not kept)"),
                      "kernels": [{"name": str(k.get("kernel")), "short": _shortened(str(k.get("kernel")), 100),
                                   "share": f"{100 * float(k.get('share') or 0):.1f}",
                                   "device_us": f"{float(k.get('device_us') or 0):,.1f}"} for k in window.get("top_kernels") or []]})
    return shown


def _bench(bench_rows: list[dict] | None, telemetry: list[dict] | None = None, mig_reference: list[dict] = (),
           profiles: list[dict] = ()) -> dict | None:
    """The Benchmarks section: the charts (inline SVG, escaped by charts.py) and every figure of a workload
    alone on one GPU; the figures of N processes sharing one GPU and of training over N GPUs in their own
    sub-sections (never mixed into the plain chart and table), each MIG instance's figures against the whole
    GPU's (from this sweep or `mig_reference`, other sweeps' figures), NVML's telemetry per cell, and each
    cell's profiling window (`profiles`)."""
    if not bench_rows and not telemetry and not profiles:
        return None
    from . import bench, charts

    every = list(bench_rows or [])
    rows = [r for r in every if r.get("value") is not None]  # the charts draw what was measured
    absent = [r for r in every if r.get("value") is None]  # the table lists what was not, with why
    plain = bench.plain_rows(rows)
    shared = [r for r in rows if bench.is_shared(r)]
    scaling = [r for r in rows if bench.is_scaling(r)]
    dtype = charts.trend_dtype(plain)
    series = []
    for s in sorted(telemetry or [], key=lambda s: (str(s.get("gpu") or ""), s.get("cell") or 0)):
        chart = charts.telemetry_chart(s, memory=True)
        if chart:
            times = [x[0] for x in s.get("samples") or [] if x and isinstance(x[0], (int, float))]
            series.append({"cell": s.get("cell"), "label": f"cell {s.get('cell', '?')}: {s.get('framework') or ''} {s.get('version') or ''} on {s.get('gpu') or ''}",
                           "samples": len(s.get("samples") or []), "seconds": bench._trim(bench.number(max(times) if times else 0)), "chart": chart})
    count, contended, throttled, missing = bench.tally(every)
    return {"count": count, "plain": len(plain), "throttled": throttled, "contended": contended, "missing": missing,
            "throughput": charts.throughput_chart(plain),
            "trend": charts.trend_chart(plain, "matmul", dtype) if dtype and charts.trend_versions(plain, "matmul", dtype) > 1 else "",
            "trend_dtype": dtype, "summary": bench.bench_summary(plain + absent),
            "sharing": charts.sharing_chart(shared), "shared_count": len(shared), "mig": bench.mig_table(rows, mig_reference),
            "scaling": charts.scaling_chart(scaling), "scaling_table": bench.scaling_table(scaling),
            "telemetry": series, "profiles": _profiles(list(profiles))}


def _column(row: dict) -> str:
    return f"{row['gpu']} (CC {row['cc'] or '?'}, driver {row['driver'] or '?'})"


def _stack(row: dict) -> tuple:
    return (row["framework"], row["version"], row["variant"], row["python"], row["env"], row.get("image") or "")


def _placed(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """The rows of real GPU classes and real stacks (the matrices), the verdicts reached off any GPU class (before any
    GPU), and the cells that could not be tested (each row's "apart": its cause, or None for a verdict or a pending cell).

    A column is a real GPU class (rows.is_gpu_class): not the stand-in target of a machine without a GPU, nor a target
    whose every job that went past resolving found no GPU. A stack is a matrix row only where it has something besides
    cells that could not be tested (a verdict, or a cell still pending); inside a real class and stack such a cell keeps
    its mark. Off any class, a failure at a stage that needs a GPU (a NO_DEVICE stored before the cause no-gpu) is no-gpu."""
    by_column: dict[str, list[dict]] = {}
    for row in rows:
        by_column.setdefault(_column(row), []).append(row)
    real = {column for column, mine in by_column.items() if is_gpu_class((mine[0]["gpu"], mine[0]["cc"]), mine)}
    for row in rows:
        row["on_class"] = _column(row) in real
        row["apart"] = apart_cause(row, row["on_class"])
    stacks = {_stack(r) for r in rows if r["apart"] is None}
    grid = [r for r in rows if r["on_class"] and _stack(r) in stacks]
    before = [r for r in rows if not r["on_class"] and r["apart"] is None and r["code"] != "PENDING"]
    return grid, before, [r for r in rows if r["apart"] is not None]


def render(sweep: dict, raw_rows: list[dict], bench_rows: list[dict] | None = None, telemetry: list[dict] | None = None,
           mig_reference: list[dict] = (), profiles: list[dict] = ()) -> str:
    """The report of one sweep; `bench_rows` (store.bench_rows, as bench.present shows them) adds its benchmark
    figures, `telemetry` (store.telemetry) NVML's samples of each cell while its bench ran, `mig_reference`
    other sweeps' figures of whole GPUs that this sweep's MIG instances are set against, `profiles` (store.profiles)
    each cell's profiling window."""
    rows = [_row(r) for r in raw_rows]
    grid, before, apart = _placed(rows)
    done = [r for r in rows if r["code"] != "PENDING"]
    verdicts = [r for r in done if r["apart"] is None]
    valid = [r for r in verdicts if r["code"] == PASS]
    invalid = [r for r in verdicts if r["code"] != PASS]
    untested = apart_summary(apart, len(apart))  # every cell that could not be tested, by cause, with its sentence and its own words
    matrices = []
    for framework in sorted({r["framework"] for r in grid}):
        mine = [r for r in grid if r["framework"] == framework]
        columns = sorted({_column(r) for r in mine})
        lines: dict[str, list] = {}
        for r in mine:
            label = f"{r['version']} [{r['variant']}] py{r['python']} {r['env']}" + (f" {r['image']}" if r.get("image") else "")
            lines.setdefault(label, [None] * len(columns))[columns.index(_column(r))] = r
        matrices.append({"framework": framework, "columns": columns,
                         "lines": [{"label": label, "cells": cells} for label, cells in lines.items()]})
    environment = Environment(loader=PackageLoader("gpucompat.report", "templates"), autoescape=select_autoescape(["html", "j2"]))
    template = environment.get_template("report.html.j2")
    created = datetime.datetime.fromtimestamp(sweep["created_at"]).strftime("%Y-%m-%d %H:%M")
    counts = {"cells": len(rows), "valid": len(valid), "invalid": len(invalid), "untested": len(apart), "pending": len(rows) - len(done),
              "surprises": sum(r["surprise"] for r in verdicts), "predicted": sum(1 for r in done if r["observed"] is False)}
    by_python = python_differs(valid + invalid)  # the seed's lines say their Python where a version's cells differ by it
    return template.render(sweep=sweep, created=created, version=__version__, counts=counts, matrices=matrices, before=before,
                           surprises=[r for r in verdicts if r["surprise"]], valid=seed_table(valid, False, by_python),
                           invalid=seed_table(invalid, True, by_python),
                           untested=untested, troubled=troubled_gpus([r for r in apart if r["code"] == UNTESTED]),
                           bench=_bench(bench_rows, telemetry, mig_reference, profiles), unverified=unverified_note(rows))
