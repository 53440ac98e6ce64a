"""A sweep's verdicts and bench figures as a Prometheus text file, for the node exporter's textfile
collector (docs/monitoring.md): one series per cell and GPU class, no sample timestamps (the collector
rejects a file that has any), every family with its HELP and TYPE lines, the file ending with a newline.

What is a sample and what is not:
- gpucompat_cell_up is 1 for PASS and 0 for a failure code, for observed verdicts only. A cell that
  could not be tested (UNTESTED), one still pending, and one whose failure was predicted but not run
  (--skip-predicted-failures) are no fact about the stack, so they have no sample there.
- gpucompat_cell_code is 1 for every cell with a verdict, observed or predicted (label observed), so a
  table can show the code and the stage; gpucompat_cell_untested is 1 for each cell that could not be
  tested, with its cause, and gpucompat_sweep_untested_cells counts them by cause (0 for every cause
  gpucompat knows that no cell had, so an alert on one cause has a series to read).
- A cell of the stand-in target that a sweep on a machine without a GPU runs on (discover/local.py's
  NO_GPU, "no GPU visible": no compute capability) is on no GPU: its gpu, cc and driver labels are
  empty, never "no GPU visible" as if that were a GPU class. There, a failure at a stage that needs a
  GPU (a NO_DEVICE stored before the cause no-gpu existed) is no verdict on the stack: it is
  gpucompat_cell_untested with cause no-gpu, as in the HTML report and the site.
- A bench figure says what it was measured under with low-cardinality series beside its value:
  gpucompat_bench_contended (1: another process computed on the GPU meanwhile, so the value is not the
  stack's alone; the processes themselves, pids and names, are in `results --bench --json`, not labels),
  gpucompat_bench_condition (one series per condition: normal, at_power_limit, contended, thermal, ...),
  gpucompat_bench_throttled (a clock warning; the card's own power cap is not one). A figure the bench
  could not make has no value sample but a gpucompat_bench_missing series with its reason's kind.
- A family with no samples (no bench rung, a sweep still running) keeps its HELP and TYPE lines: the
  set of families a file declares does not depend on its data (Prometheus' parser drops empty ones).

Cells are told apart by framework, version, variant, python, env, gpu, cc and driver (a stack and a
GPU class, what the store keeps unique within a sweep); should two rows still carry the same labels,
the later cell is kept, as a duplicate series would make the collector skip the whole file. Samples
are sorted by their label values, families come in a fixed order: the same sweep gives the same bytes.
"""

from __future__ import annotations

import math

from ..discover.local import NO_GPU
from ..model import PASS, UNTESTED, UNTESTED_CAUSES

GPU_STAGES = ("device", "compute", "bench")  # the rungs that need a GPU to be there
CELL_LABELS = ("framework", "version", "variant", "python", "env", "gpu", "cc", "driver")
BENCH_LABELS = CELL_LABELS + ("measurement", "dtype", "unit", "processes")  # processes: sharing one GPU, or GPUs in a scaling run
MISSING_LABELS = CELL_LABELS + ("measurement", "dtype", "processes")  # a figure not made has no unit

# name: help text, in the order they are written
FAMILIES = {
    "gpucompat_sweep_info": "The sweep these figures come from (always 1): its id, name and status.",
    "gpucompat_sweep_created_timestamp_seconds": "When the sweep started, in seconds since the Unix epoch.",
    "gpucompat_sweep_finished_timestamp_seconds": "When the sweep finished, in seconds since the Unix epoch (no sample while it runs).",
    "gpucompat_cell_up": "1 if the stack passed on this GPU class, 0 if it failed (observed verdicts only; untested, pending and predicted cells have no sample).",
    "gpucompat_cell_code": "1 for each cell with a verdict: its code and the stage it reached; observed=false where the verdict was predicted, not run.",
    "gpucompat_cell_untested": "1 for each cell that could not be tested (no verdict), with the cause; gpu, cc and driver are empty where the sweep found no GPU at all.",
    "gpucompat_sweep_untested_cells": "How many cells of the sweep could not be tested (no verdict), by cause; 0 for each known cause that no cell had.",
    "gpucompat_bench_value": "A bench figure of the stack on this GPU class, in the unit of its label (median of the repetitions).",
    "gpucompat_bench_spread": "The interquartile range of a bench figure's repetitions, in the unit of its label.",
    "gpucompat_bench_share_of_peak": "A bench figure as a share of the GPU's datasheet dense peak (0 to 1), where that peak is known.",
    "gpucompat_bench_throttled": "1 if the GPU's clocks were held below what the card gives as set up while the figure was taken (thermal or hardware slowdown, power brake, a power limit or application clocks set below the default, idle clocks at the start), 0 otherwise; the card's own power cap is its normal ceiling, not throttling.",
    "gpucompat_bench_contended": "1 if another process computed on the GPU (NVML per-process SM utilisation above 0) while the figure was measured, so the value is not the stack's alone; 0 otherwise.",
    "gpucompat_bench_condition": "1 for each condition the figure was measured under: normal, at_power_limit (the card's own cap, expected), contended, thermal, hw_slowdown, power_brake, power_limit_lowered, applications_clocks, idle_clocked.",
    "gpucompat_bench_missing": "1 for each figure the bench could not make, with the kind of reason: out_of_memory, gpu (the GPU lacks the data type), framework (no such operation), environment, depends (a figure it needed was not made), skipped, error.",
}


def escape_label(value) -> str:
    """A label value as the exposition format quotes it: backslash, double quote and newline escaped;
    None as the empty string; text that is not valid UTF-8 (lone surrogates) replaced."""
    text = "" if value is None else str(value)
    text = text.encode("utf-8", "replace").decode("utf-8")
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(value)


def _labels(row: dict, names: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    defaults = {"processes": 1}  # a figure of one process on one GPU
    return tuple((name, str(defaults.get(name, "")) if row.get(name) is None else str(row.get(name))) for name in names)


class _Family:
    """One metric family's samples, keyed by their labels; None adds no sample."""

    def __init__(self):
        self.samples: dict[tuple, object] = {}

    def add(self, labels: tuple[tuple[str, str], ...], value) -> None:
        if value is None:
            return
        self.samples[labels] = value


def _cell_order(row: dict) -> tuple:
    cell = row.get("cell")
    return (0, cell) if isinstance(cell, int) else (1, 0)


def to_prometheus(sweep: dict, rows: list[dict], bench_rows: list[dict]) -> str:
    """The text file for one sweep: `sweep` as Store.sweep returns it, `rows` as report.rows.display_row
    makes them, `bench_rows` as bench.present makes them."""
    families = {name: _Family() for name in FAMILIES}

    families["gpucompat_sweep_info"].add(
        (("sweep", str(sweep.get("id", ""))), ("name", str(sweep.get("name") or "")), ("status", str(sweep.get("status") or ""))), 1)
    families["gpucompat_sweep_created_timestamp_seconds"].add((), sweep.get("created_at"))
    families["gpucompat_sweep_finished_timestamp_seconds"].add((), sweep.get("finished_at"))

    untested = dict.fromkeys(UNTESTED_CAUSES, 0)
    for row in _latest([_placed(r) for r in rows], CELL_LABELS):
        code = row.get("code") or "PENDING"
        labels = _labels(row, CELL_LABELS)
        if code == "PENDING":
            continue
        if code == UNTESTED:
            cause = str(row.get("cause") or "")
            families["gpucompat_cell_untested"].add(labels + (("cause", cause),), 1)
            untested[cause] = untested.get(cause, 0) + 1
            continue
        observed = row.get("observed") is not False  # None (an older row) counts as observed, as the store's default does
        if observed:
            families["gpucompat_cell_up"].add(labels, 1 if code == PASS else 0)
        families["gpucompat_cell_code"].add(
            labels + (("code", code), ("stage", str(row.get("stage") or "")), ("observed", "true" if observed else "false")), 1)

    for cause, count in untested.items():
        families["gpucompat_sweep_untested_cells"].add((("cause", cause),), count)

    for row in _latest(bench_rows, BENCH_LABELS):
        if row.get("value") is None:  # not made: its reason, and no value, spread or condition
            families["gpucompat_bench_missing"].add(_labels(row, MISSING_LABELS) + (("reason", str(row.get("missing") or "error")),), 1)
            continue
        labels = _labels(row, BENCH_LABELS)
        families["gpucompat_bench_value"].add(labels, row.get("value"))
        families["gpucompat_bench_spread"].add(labels, row.get("spread"))
        families["gpucompat_bench_share_of_peak"].add(labels, row.get("share") if row.get("peak") else None)
        families["gpucompat_bench_throttled"].add(labels, bool(row.get("throttled")))
        families["gpucompat_bench_contended"].add(labels, bool(row.get("contended")))
        for kind in sorted({c.get("kind") for c in row.get("conditions") or [] if isinstance(c, dict) and c.get("kind")}) or ["normal"]:
            families["gpucompat_bench_condition"].add(labels + (("condition", str(kind)),), 1)

    lines = []
    for name, help_text in FAMILIES.items():
        lines.append(f"# HELP {name} {_escape_help(help_text)}")
        lines.append(f"# TYPE {name} gauge")
        for labels, value in sorted(families[name].samples.items()):
            text = ",".join(f'{key}="{escape_label(val)}"' for key, val in labels)
            lines.append(f"{name}{{{text}}} {format_value(value)}" if text else f"{name} {format_value(value)}")
    return "\n".join(lines) + "\n"


def _placed(row: dict) -> dict:
    """A cell of the stand-in target (no GPU was visible) with empty gpu, cc and driver labels; there, a failure at a
    stage that needs a GPU is could-not-test no-gpu (a store from before that cause existed)."""
    if row.get("gpu") != NO_GPU.name or row.get("cc"):
        return row
    row = {**row, "gpu": "", "cc": "", "driver": ""}
    if row.get("code") not in (None, "PENDING", PASS, UNTESTED) and row.get("stage") in GPU_STAGES:
        row.update(code=UNTESTED, cause="no-gpu")
    return row


def _latest(rows: list[dict], names: tuple[str, ...]) -> list[dict]:
    """One row per label set: where two rows would be the same series, the later cell's (the higher cell
    id; among equals, or rows without one, the later in the list)."""
    latest: dict[tuple, dict] = {}
    for row in sorted(rows, key=_cell_order):  # stable: equal keys keep the list's order
        latest[_labels(row, names)] = row
    return list(latest.values())
