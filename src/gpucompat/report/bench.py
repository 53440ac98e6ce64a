"""Bench figures: the terminal table, CSV/JSON, the comparison of two sweeps, and the HTML report's
tables (every figure, scaling over GPUs, MIG instances); the hand-drawn SVG charts are in charts.py.

A bench row is one figure the probe measured after a cell passed (store.bench_rows): a stack on a GPU,
a `measurement` (matmul per data type, copy, h2d, d2h, launch, train, first_step), its median `value`
in `unit`, which way is `better`, the interquartile `spread` of the repetitions, the datasheet `peak`
and `share` of it where known, and what it was measured under: `condition` ("normal", "at power limit
(700 W)", or the warnings: other processes computing, thermal or hardware slowdown, a lower limit set by
an administrator, idle clocks), `contended` (another process computed meanwhile) and `throttled` (a clock
warning). A figure the bench could not make is a row with value None, `missing` (its kind) and
`missing_reason` (bench.missing_reason): every view lists it.

Everything here is a pure function of the rows.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

from packaging.version import InvalidVersion, Version
from rich.console import Group
from rich.text import Text

from ..quoting import csv_row
from .terminal import Col, FitTable, Step

MEASUREMENTS = ["matmul", "copy", "h2d", "d2h", "launch", "train", "first_step",
                "shared_matmul", "shared_train", "scaling_cnn", "scaling_large"]
DTYPES = ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]
LABELS = {"matmul": "matmul", "copy": "device copy", "h2d": "host→device", "d2h": "device→host",
          "launch": "kernel launch", "train": "CNN training", "first_step": "first step",
          "shared_matmul": "matmul, GPU shared", "shared_train": "CNN training, GPU shared",
          "scaling_cnn": "CNN, data-parallel", "scaling_large": "large model, data-parallel"}
TITLES = {"matmul": "Matrix-product throughput", "copy": "Device memory bandwidth (copy)", "h2d": "Host→device transfer",
          "d2h": "Device→host transfer", "launch": "Kernel launch latency", "train": "Small CNN training throughput",
          "first_step": "Time to the first training step",
          "shared_matmul": "Matrix-product throughput, one GPU shared by N processes",
          "shared_train": "Small CNN training throughput, one GPU shared by N processes",
          "scaling_cnn": "Small CNN, data-parallel training", "scaling_large": "Larger model, data-parallel training"}
MODELS = {"scaling_cnn": "CNN", "scaling_large": "large model"}
KEY_FIELDS = ("framework", "version", "variant", "python", "gpu", "measurement", "dtype", "processes")
CSV_COLUMNS = ["cell", "sweep", "framework", "version", "variant", "python", "env", "gpu", "cc", "driver", "measurement", "dtype",
               "processes", "value", "unit", "better", "spread", "repetitions", "peak", "share", "condition", "contended", "contention",
               "throttled", "missing", "missing_reason", "loss", "sm_mhz_before", "sm_mhz_after", "power_w_after", "temp_c_after",
               "throttle_after", "note"]
THRESHOLD = 0.10  # a figure moved only when the median moved by more than this share of the old value (and the spreads)


# ---- ordering and display -----------------------------------------------------------------------

def _version_key(text) -> tuple:
    try:
        return (0, Version(str(text)), "")
    except InvalidVersion:
        return (1, Version("0"), str(text))


def _order(items: list[str], value) -> tuple:
    return (items.index(value), "") if value in items else (len(items), str(value or ""))


def stack_label(row: dict) -> str:
    """'torch 2.11.0+cu130 [installed]': the framework, its version and variant."""
    return f"{row.get('framework', '')} {row.get('version', '')} [{row.get('variant', '')}]"


def _stack_key(row: dict) -> tuple:
    return (str(row.get("framework") or ""), _version_key(row.get("version")), str(row.get("variant") or ""),
            _version_key(row.get("python")), str(row.get("env") or ""))


def sort_key(row: dict) -> tuple:
    """GPU, then stack, then measurement in MEASUREMENTS order (matmul by data type in DTYPES order)."""
    return (str(row.get("gpu") or ""), _stack_key(row), _order(MEASUREMENTS, row.get("measurement")),
            _order(DTYPES, row.get("dtype")), str(row.get("dtype") or ""), _processes(row), row.get("cell") or 0)


def _processes(row: dict) -> int:
    """How many processes ran the figure at once: on one GPU (shared_*) or one per GPU (scaling_*); 1 otherwise."""
    try:
        return max(1, int(row.get("processes") or 1))
    except (TypeError, ValueError):
        return 1


def is_shared(row: dict) -> bool:
    """A figure of N processes sharing one GPU (shared_matmul, shared_train)."""
    return str(row.get("measurement") or "").startswith("shared_")


def is_scaling(row: dict) -> bool:
    """A figure of data-parallel training over N GPUs (scaling_cnn, scaling_large)."""
    return str(row.get("measurement") or "").startswith("scaling_")


def plain_rows(rows: list[dict]) -> list[dict]:
    """The figures of one workload alone on one GPU: neither sharing nor scaling (those have their own charts)."""
    return [r for r in rows if not is_shared(r) and not is_scaling(r)]


def sorted_rows(rows: list[dict]) -> list[dict]:
    return sorted(rows, key=sort_key)


def number(value) -> str:
    """A figure as people read it: 781.2, 4100, 3.45, 0.0123; '' for none."""
    if value is None:
        return ""
    a = abs(value)
    if a >= 1000:
        return f"{value:.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    return "0" if a == 0 else f"{value:.3g}"


def spread_number(value) -> str:
    """A spread to two significant figures: 4.1, 21, 0.09, 130."""
    if value is None:
        return ""
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.2g}"


def _trim(text: str) -> str:
    """number()'s text without a trailing zero after the point: '309.0' -> '309', '1.50' -> '1.5'."""
    return text.rstrip("0").rstrip(".") if "." in text and "e" not in text else text


def _numbers(values) -> list[float]:
    return [float(v) for v in values or [] if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def _clock(row: dict, when: str) -> dict:
    return ((row.get("clocks") or {}).get(when)) or {}


def condition_cell(row: dict) -> str:
    """The Conditions cell: "normal", "at power limit (700 W)", the warnings, or why the figure is missing."""
    if row.get("value") is None:  # the Value cell already says "not measured"
        return str(row.get("missing_reason") or "no value recorded")
    return str(row.get("condition") or "")


def warned(row: dict) -> bool:
    """A figure not to take at face value: contended, a clock warning, or missing."""
    return row.get("value") is None or bool(row.get("contended")) or bool(row.get("throttled"))


def display(row: dict) -> dict:
    """One figure as text, shared by the terminal table and the HTML summary."""
    value = row.get("value")
    return {
        "stack": stack_label(row),
        "python": str(row.get("python") or ""),
        "gpu": str(row.get("gpu") or ""),
        "cc": str(row.get("cc") or ""),
        "measurement": LABELS.get(row.get("measurement"), str(row.get("measurement") or "")),
        "dtype": str(row.get("dtype") or ""),
        "value": f"{number(value)} {row.get('unit') or ''}".strip() if value is not None else "not measured",
        "spread": f"± {spread_number(row['spread'])}" if row.get("spread") is not None else "",
        "share": f"{row['share'] * 100:.0f} %" if row.get("share") is not None else "",
        "peak": f"{number(row['peak'])} {row.get('unit') or ''}".strip() if row.get("peak") is not None else "",
        "condition": condition_cell(row),
        "repetitions": row.get("repetitions"),
        "note": str(row.get("note") or ""),
    }


def tally(rows: list[dict]) -> tuple[int, int, int, int]:
    """(measured, contended, with a clock warning, not measured): the counts every view's heading gives."""
    made = [r for r in rows if r.get("value") is not None]
    return (len(made), sum(1 for r in made if r.get("contended")), sum(1 for r in made if r.get("throttled")),
            len(rows) - len(made))


def closing_note(rows: list[dict]) -> str | None:
    """The sweep's closing line's bench part: how many figures, how many contended, with a clock warning, not made."""
    if not rows:
        return None
    made, contended, throttled, absent = tally(rows)
    parts = [f"{contended} contended by other processes" if contended else "none contended"]
    parts += [f"{throttled} with a clock warning"] if throttled else []
    parts += [f"{absent} not measured"] if absent else []
    return f"{made} bench figure{'' if made == 1 else 's'} ({', '.join(parts)}; `gpucompat results --bench` says why)"


def _change(loss: float) -> str:
    """A loss against the figure alone as the change it is: 0.068 -> '−6.8 %', -0.02 -> '+2.0 %'."""
    change = -loss * 100
    return f"{'−' if change < 0 else '+'}{abs(change):.1f} %" if round(change, 1) else "±0.0 %"


def _n_note(row: dict) -> str:
    """The terminal's note on a sharing or scaling figure: the loss against alone, the speed-up and efficiency."""
    n = _processes(row)
    if is_shared(row) and n > 1 and isinstance(row.get("loss"), (int, float)):
        return f"{n} processes on one GPU: {_change(row['loss'])} against alone"
    if is_scaling(row) and n > 1 and isinstance(row.get("efficiency"), (int, float)):
        speedup = f"speed-up {row['speedup']:.2f}×, " if isinstance(row.get("speedup"), (int, float)) else ""
        return f"{n} GPUs: {speedup}efficiency {row['efficiency'] * 100:.1f} %"
    return ""


# ---- terminal --------------------------------------------------------------------------------------

def _t(value, style: str | None = None, justify: str | None = None) -> Text:
    return Text("" if value is None else str(value), style=style or "", justify=justify)


def bench_table(rows: list[dict], wide: bool = False):
    """Every figure of a sweep, one line each, sorted by GPU, stack, measurement; fits the terminal
    (the note goes first, then CC, Python, data type, spread and the throttle flag merge into their
    neighbours), or with `wide` keeps every column."""
    if not rows:
        return Text("This sweep has no benchmark figures (run the sweep with --bench).")
    rows = sorted_rows(rows)
    shown = [display(r) for r in rows]
    notes = ["; ".join(filter(None, [_n_note(r), s["note"]])) for s, r in zip(shown, rows)]
    with_spread = [f"{s['value']} {s['spread']}" if s["spread"] else s["value"] for s in shown]
    def condition_style(r):
        return "red" if r.get("value") is None or r.get("contended") else "yellow" if r.get("throttled") else None
    columns = [
        Col("stack", "Stack", [_t(s["stack"]) for s in shown], "words", 14),
        Col("python", "Python", [_t(s["python"]) for s in shown]),
        Col("gpu", "GPU", [_t(s["gpu"]) for s in shown], "words", 12),
        Col("cc", "CC", [_t(s["cc"]) for s in shown]),
        Col("measurement", "Measurement", [_t(s["measurement"]) for s in shown], "words"),
        Col("dtype", "Type", [_t(s["dtype"]) for s in shown]),
        Col("value", "Value", [_t(s["value"], justify="right") for s in shown], "words", 13),  # '781.2 TFLOP/s' on one line
        Col("spread", "± IQR", [_t(s["spread"], justify="right") for s in shown]),
        Col("share", "Of peak", [_t(s["share"], justify="right") for s in shown]),
        Col("condition", "Conditions", [_t(s["condition"], condition_style(r)) for s, r in zip(shown, rows)], "flex", 12, share=0),
    ]
    steps = [Step("note"), Step("cc", into="gpu"), Step("python", into="stack", header="Stack (Python)"),
             Step("dtype", into="measurement"),
             Step("spread", into="value", header="Value ± IQR", cells=[_t(v, justify="right") for v in with_spread])]
    if any(_processes(r) > 1 for r in rows):  # sharing one GPU or scaling over GPUs: how many processes ran at once
        counts = [str(_processes(r)) if is_shared(r) or is_scaling(r) else "" for r in rows]
        columns.insert(6, Col("processes", "Processes", [_t(c, justify="right") for c in counts]))
        steps.insert(1, Step("processes", into="measurement", cells=[_t(f"{s['measurement']} ×{c}" if c else s["measurement"])
                                                                   for s, c in zip(shown, counts)]))
    if any(notes):
        columns.append(Col("note", "Note", [_t(n) for n in notes], "flex", 12, share=0))
    # the narrowest terminal: the conditions go under the value, never away
    steps.append(Step("condition", into="value", header="Value ± IQR, conditions", cells=[
        Text.assemble(Text(v, justify="right"), "\n", (s["condition"], condition_style(r) or "")) for v, s, r in zip(with_spread, shown, rows)]))
    made, contended, throttled, absent = tally(rows)
    title = (f"Benchmarks ({made} figure{'' if made == 1 else 's'}; ± is the interquartile range of the repetitions"
             + (f"; {contended} measured while other processes computed on the GPU" if contended else "")
             + (f"; {throttled} with a clock warning" if throttled else "")
             + (f"; {absent} not measured, with why" if absent else "") + ")")
    return FitTable(title, columns, steps, wide)


# ---- exports ---------------------------------------------------------------------------------------

def bench_csv(rows: list[dict]) -> str:
    """One line per figure; the clocks flattened into sm_mhz_before/after, power_w_after, temp_c_after and
    throttle_after (reasons joined by ' | ')."""
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in sorted_rows(rows):
        before, after = _clock(row, "before"), _clock(row, "after")
        writer.writerow(csv_row({**row, "condition": condition_cell(row),
                         "contention": "; ".join(f"{p.get('pid')} {p.get('name') or ''} {p.get('sm_pct_mean')}%".strip()
                                                 for p in row.get("contention") or []),
                         "sm_mhz_before": before.get("sm_mhz"), "sm_mhz_after": after.get("sm_mhz"),
                         "power_w_after": after.get("power_w"), "temp_c_after": after.get("temp_c"),
                         "throttle_after": " | ".join(map(str, after.get("throttle") or []))}))
    return out.getvalue()


def bench_json(rows: list[dict]) -> str:
    """Every figure as stored, clocks included, in the table's order."""
    return json.dumps(sorted_rows(rows), indent=2, default=str)


# ---- comparing two sweeps --------------------------------------------------------------------------

def figure_key(row: dict) -> tuple:
    """The same stack on the same GPU class, the same measurement, data type and number of processes sharing the GPU."""
    return tuple((row.get(f) or 1) if f == "processes" else str(row.get(f) or "") for f in KEY_FIELDS)


def _pooled(rows: list[dict]) -> dict:
    """Several rows with one key in one sweep (the same GPU class on several nodes or drivers): their median,
    and as spread the larger of their largest spread and the range of their values."""
    values = [r["value"] for r in rows if r.get("value") is not None]
    spreads = [r["spread"] for r in rows if r.get("spread") is not None]
    pooled = {"unit": rows[0].get("unit"), "better": rows[0].get("better"), "throttled": any(r.get("throttled") for r in rows),
              "cells": [r.get("cell") for r in rows], "sweep": rows[0].get("sweep"),
              "units": {r.get("unit") for r in rows if r.get("value") is not None},
              "contended": _contended_text(rows), "contention_unknown": _unknown_text(rows),
              "missing_reason": next((r.get("missing_reason") for r in rows if r.get("missing_reason")), None)}
    if len(rows) == 1:  # its own value and spread, None kept
        return {**pooled, "value": rows[0].get("value"), "spread": rows[0].get("spread")}
    return {**pooled, "value": statistics.median(values) if values else None,
            "spread": max([*spreads, (max(values) - min(values)) if values else 0.0])}


def _contended_text(rows: list[dict]) -> str:
    """'' where no row was contended; else who computed beside it: 'pid 4242 python3 (SM 48 %)'."""
    return "; ".join(str(r.get("contention_text") or "another process") for r in rows if r.get("contended") and r.get("value") is not None)


def _unknown_text(rows: list[dict]) -> str:
    """'' where every made row says whether another process computed beside it; else why some cannot (each reason once).
    A row without the key (made by hand, not by present()) is taken as known."""
    reasons = [str(r["contention_unknown"]) for r in rows if r.get("value") is not None and r.get("contention_unknown")]
    return "; ".join(dict.fromkeys(reasons))


# What moves between two runs of the same cell on an idle GPU beyond their own repetitions' spread:
# two identical sweeps on an H100 (docs/evidence/bench-h100, diff in extra.tar.gz) moved launch
# latency by up to 25 %, the time to the first step (disk caches, JIT) by 37 % and JAX's small CNN
# by 45 %, while matrix products and bandwidths stayed within 3 %. Their floor is set above that.
NOISE_FLOOR = {"launch": 0.30, "first_step": 0.50, "train": 0.50}


def compare(before_rows: list[dict], after_rows: list[dict], threshold: float = THRESHOLD) -> dict[str, list[dict]]:
    """Bench figures of two sweeps -> {"slower", "faster", "unchanged", "not_compared"}.

    Rows are matched by (framework, version, variant, python, gpu, measurement, dtype). A figure changed
    only when its median moved by more than the larger of `threshold` (10 %) of the old value (or the
    measurement's NOISE_FLOOR) and the two spreads (interquartile ranges) added: noise within what the
    repetitions, or two runs of the same cell, already show is no change. A figure measured while another
    process computed on the GPU (contended) is compared with nothing: its pair is not_compared, saying so.
    A pair where either side cannot say whether another process computed (no per-process samples, another pid
    namespace, an older probe) is compared, and its `contention_unknown` says why: --fail-on-slowdown does not
    count it (counted_slowdowns).

    Each entry: {"key": {...the seven fields}, "before", "after", "unit", "better", "change",
    "spread_before", "spread_after", "throttled_before", "throttled_after", "cells_before", "cells_after"}.
    `change` is the relative change in the direction of `better`: positive is faster, negative slower;
    (after - before) / before when higher is better, (before - after) / before when lower is better.
    So -0.12 is 12 % slower: a throughput 12 % lower, or a latency 12 % higher. `slower` is sorted worst
    first, `faster` best first. A not_compared entry carries a `reason` instead of a change.
    """
    def grouped(rows):
        out: dict[tuple, list[dict]] = {}
        for r in rows:
            out.setdefault(figure_key(r), []).append(r)
        return out

    old, new = grouped(before_rows), grouped(after_rows)
    result: dict[str, list[dict]] = {"slower": [], "faster": [], "unchanged": [], "not_compared": []}
    for key in sorted(set(old) | set(new), key=lambda k: sort_key(dict(zip(KEY_FIELDS, k)))):
        named = dict(zip(KEY_FIELDS, key))
        a = _pooled(old[key]) if key in old else None
        b = _pooled(new[key]) if key in new else None
        valued = b if b is not None and b["value"] is not None else a if a is not None and a["value"] is not None else (b or a)
        entry = {"key": named, "before": a and a["value"], "after": b and b["value"], "unit": valued["unit"],
                 "better": valued["better"], "change": None, "spread_before": a and a["spread"], "spread_after": b and b["spread"],
                 "throttled_before": bool(a and a["throttled"]), "throttled_after": bool(b and b["throttled"]),
                 "cells_before": a["cells"] if a else [], "cells_after": b["cells"] if b else [],
                 "contended_before": (a and a.get("contended")) or "", "contended_after": (b and b.get("contended")) or "",
                 "contention_unknown": _unknown_side(a, b)}
        reason = None
        if a is None:
            reason = "only in the later sweep"
        elif b is None:
            reason = "only in the earlier sweep"
        elif len(a["units"] | b["units"]) > 1:
            reason = f"the unit differs ({a['unit']} before, {b['unit']} after)"
        elif a["value"] is None or b["value"] is None:
            reason = "not measured in " + ("both sweeps" if a["value"] is None and b["value"] is None else
                                           "the earlier sweep" if a["value"] is None else "the later sweep")
            why = b.get("missing_reason") if b["value"] is None else a.get("missing_reason")
            reason += f": {why}" if why else ""
        elif a.get("contended") or b.get("contended"):
            side = ("both sweeps" if a.get("contended") and b.get("contended") else
                    "the earlier sweep" if a.get("contended") else "the later sweep")
            who = "; ".join(filter(None, [a.get("contended"), b.get("contended")]))
            reason = f"contended in {side}: {who} computed on the GPU while it was measured, so the change is not the stack's"
        elif a["value"] <= 0:
            reason = f"the earlier value ({a['value']}) cannot be the base of a relative change"
        elif entry["better"] not in ("higher", "lower"):
            reason = f"unknown direction better={entry['better']!r}"
        if reason:
            result["not_compared"].append({**entry, "reason": reason})
            continue
        moved = b["value"] - a["value"]
        sign = 1 if entry["better"] == "higher" else -1
        entry["change"] = sign * moved / a["value"]
        floor = max(threshold, NOISE_FLOOR.get(named["measurement"], 0.0))
        margin = max(floor * abs(a["value"]), (a["spread"] or 0.0) + (b["spread"] or 0.0))
        if abs(moved) <= margin:
            result["unchanged"].append(entry)
        else:
            result["slower" if entry["change"] < 0 else "faster"].append(entry)
    result["slower"].sort(key=lambda e: e["change"])
    result["faster"].sort(key=lambda e: -e["change"])
    return result


def _unknown_side(a: dict | None, b: dict | None) -> str:
    """'' where both sides say whether another process computed; else which side cannot, and why."""
    before, after = (a or {}).get("contention_unknown") or "", (b or {}).get("contention_unknown") or ""
    if not (before or after):
        return ""
    side = "both sweeps" if before and after else "the earlier sweep" if before else "the later sweep"
    why = before if before == after or not after else after if not before else f"{before}; {after}"
    return f"contention unknown in {side}: {why}"


def counted_slowdowns(result: dict) -> tuple[list[dict], list[dict]]:
    """compare()'s slower figures split into those --fail-on-slowdown fails on and those it does not: a pair where
    either side could not say whether another process computed on the GPU (its `contention_unknown`). Contended
    pairs are not compared at all."""
    slower = result.get("slower", [])
    return [e for e in slower if not e.get("contention_unknown")], [e for e in slower if e.get("contention_unknown")]


def _side(value, spread, unit, throttled: bool) -> Text:
    if value is None:
        return Text("")
    text = Text(f"{number(value)} {unit or ''}".strip() + (f" ± {spread_number(spread)}" if spread is not None else ""), justify="right")
    if throttled:
        text.append(" throttled", style="yellow")
    return text


def compare_table(result: dict, before: int | str | None = None, after: int | str | None = None):
    """diff's "Performance changes" section: the slower figures (worst first), the faster, then those not
    compared and why. `before`/`after`: the sweep ids, for the headers."""
    slower, faster, skipped = result["slower"], result["faster"], result["not_compared"]
    unchanged = len(result.get("unchanged", []))
    a = f"Sweep {before}" if before is not None else "Before"
    b = f"Sweep {after}" if after is not None else "After"
    contended = sum(1 for e in skipped if e.get("contended_before") or e.get("contended_after"))
    doubtful = counted_slowdowns(result)[1]
    summary = (f"Performance changes: {len(slower)} slower, {len(faster)} faster, {unchanged} within noise, {len(skipped)} not compared"
               + (f" ({contended} measured while another process computed on the GPU)" if contended else "")
               + (f"; {len(doubtful)} of the slower with contention unknown, which --fail-on-slowdown does not count" if doubtful else "")
               + f" (a change is a median moving by more than {THRESHOLD * 100:.0f} % and the two interquartile ranges)")
    items: list = [Text(summary, style="bold red" if len(doubtful) < len(slower) else "bold")]
    moved = slower + faster
    if moved:
        def change(e):
            word = "slower" if e["change"] < 0 else "faster"
            text = Text(f"{abs(e['change']) * 100:.0f} % {word}", style="red" if e["change"] < 0 else "green")
            if e.get("contention_unknown"):
                text.append(" (contention unknown)", style="yellow")
            return text
        columns = [
            Col("change", "Change", [change(e) for e in moved]),
            Col("stack", "Stack", [_t(stack_label(e["key"])) for e in moved], "words", 14),
            Col("python", "Python", [_t(e["key"]["python"]) for e in moved]),
            Col("gpu", "GPU", [_t(e["key"]["gpu"]) for e in moved], "words", 12),
            Col("measurement", "Measurement", [_t(LABELS.get(e["key"]["measurement"], e["key"]["measurement"])) for e in moved], "words"),
            Col("dtype", "Type", [_t(e["key"]["dtype"]) for e in moved]),
            Col("before", a, [_side(e["before"], e["spread_before"], e["unit"], e["throttled_before"]) for e in moved], "words", 13),
            Col("after", b, [_side(e["after"], e["spread_after"], e["unit"], e["throttled_after"]) for e in moved], "words", 13),
        ]
        items.append(FitTable(f"Slower ({len(slower)}), faster ({len(faster)})", columns,
                              [Step("dtype", into="measurement"), Step("python", into="stack", header="Stack (Python)")],
                              title_style="bold red" if slower else None))
    if skipped:
        columns = [
            Col("stack", "Stack", [_t(stack_label(e["key"])) for e in skipped], "words", 14),
            Col("python", "Python", [_t(e["key"]["python"]) for e in skipped]),
            Col("gpu", "GPU", [_t(e["key"]["gpu"]) for e in skipped], "words", 12),
            Col("measurement", "Measurement", [_t(LABELS.get(e["key"]["measurement"], e["key"]["measurement"])) for e in skipped], "words"),
            Col("dtype", "Type", [_t(e["key"]["dtype"]) for e in skipped]),
            Col("reason", "Why not compared", [_t(e["reason"]) for e in skipped], "flex", 20),
        ]
        items.append(FitTable(f"Not compared ({len(skipped)})", columns,
                              [Step("dtype", into="measurement"), Step("python", into="stack", header="Stack (Python)")]))
    return Group(*items)


# ---- the HTML report's tables (its charts are in charts.py) ----------------------------------------

def bench_summary(rows: list[dict]) -> list[dict]:
    """The HTML report's table: every figure as display text (the terminal table's columns), sorted the
    same way; the template escapes it."""
    return [{**display(r), "throttled_flag": warned(r), "measurement_key": r.get("measurement")} for r in sorted_rows(rows)]


def _scaling_series(rows: list[dict]) -> dict[tuple, dict[int, list[dict]]]:
    """Scaling figures by model x GPU x stack, then by the number of GPUs."""
    series: dict[tuple, dict[int, list[dict]]] = {}
    for r in sorted_rows(rows):
        if is_scaling(r) and r.get("value") is not None:
            key = (str(r.get("measurement")), str(r.get("gpu") or ""), _stack_key(r), str(r.get("python") or ""))
            series.setdefault(key, {}).setdefault(_processes(r), []).append(r)
    return series


def _scaling_points(by_n: dict[int, list[dict]]) -> tuple[float | None, list[tuple[int, float, float | None, float | None]]]:
    """(the 1-GPU figure, [(GPUs, images/s, speed-up, efficiency)]): medians where several cells measured one
    count; speed-up and efficiency the rows' own where there is one row, else against the 1-GPU median."""
    one = statistics.median(r["value"] for r in by_n[1]) if 1 in by_n else None
    points = []
    for n in sorted(by_n):
        members = by_n[n]
        value = statistics.median(r["value"] for r in members)
        speedup = efficiency = None
        if n == 1 and one:
            speedup, efficiency = value / one, value / one
        elif len(members) == 1 and isinstance(members[0].get("efficiency"), (int, float)):
            efficiency = float(members[0]["efficiency"])
            speedup = float(members[0]["speedup"]) if isinstance(members[0].get("speedup"), (int, float)) else efficiency * n
        elif one:
            speedup = value / one
            efficiency = speedup / n
        points.append((n, value, speedup, efficiency))
    return one, points


def scaling_table(rows: list[dict]) -> list[dict]:
    """The HTML report's scaling table (the cloud-Slurm seed's): per model x stack x GPU x number of GPUs the
    time per epoch (the mean of epoch_seconds), images/s, speed-up, efficiency, final loss and accuracy, as
    display text; the template escapes it."""
    out = []
    for (measurement, gpu, _, python), by_n in _scaling_series(rows).items():
        _, points = _scaling_points(by_n)
        for n, value, speed, efficiency in points:
            for r in by_n[n]:
                epochs = _numbers(r.get("epoch_seconds"))
                own_speed = r.get("speedup") if isinstance(r.get("speedup"), (int, float)) and len(by_n[n]) > 1 else speed
                own_efficiency = r.get("efficiency") if isinstance(r.get("efficiency"), (int, float)) and len(by_n[n]) > 1 else efficiency
                loss, accuracy = r.get("final_loss"), r.get("accuracy")
                out.append({"model": MODELS.get(measurement, measurement), "stack": stack_label(r), "python": python, "gpu": gpu,
                            "gpus": n, "cell": r.get("cell"),
                            "epoch_time": f"{number(statistics.fmean(epochs))} s" if epochs else "",
                            "images_per_second": f"{number(r['value'])} {r.get('unit') or 'images/s'}",
                            "speedup": f"{own_speed:.2f}×" if isinstance(own_speed, (int, float)) else "",
                            "efficiency": f"{own_efficiency * 100:.1f} %" if isinstance(own_efficiency, (int, float)) else "",
                            "final_loss": f"{loss:.4g}" if isinstance(loss, (int, float)) else "",
                            "accuracy": f"{accuracy * 100:.1f} %" if isinstance(accuracy, (int, float)) else "",
                            "throttled_flag": bool(r.get("throttled"))})
    return out


def _percent(value) -> str:
    return f"{value * 100:.0f} %" if isinstance(value, (int, float)) else ""


def mig_table(rows: list[dict], reference: list[dict] = ()) -> list[dict]:
    """Each MIG instance's figure against the whole GPU's (bench.mig_comparison), as display text for the HTML
    report's table and the terminal's: the instance's speed as a share of the whole GPU's, the share its compute
    slices promise (compute-bound figures only) and the one against the other. The template escapes it."""
    from ..bench import mig_comparison

    out = []
    for c in sorted(mig_comparison(rows, reference), key=lambda c: (str(c["gpu"]), sort_key(c), str(c["instance"]))):
        unit = c.get("unit") or ""
        n = _processes(c)
        out.append({"stack": stack_label(c), "python": str(c.get("python") or ""), "gpu": str(c["gpu"]),
                    "instance": f"{c['profile']}, {c['slices']} of {c['gpu_slices'] or '?'} slices", "cell": c.get("cell"),
                    "measurement": LABELS.get(c["measurement"], str(c["measurement"])) + (f" ×{n}" if n > 1 else ""),
                    "dtype": str(c.get("dtype") or ""),
                    "value": f"{number(c['value'])} {unit}".strip(),
                    "whole": f"{number(c['whole'])} {unit}".strip() if c["whole"] is not None else "no figure of the whole GPU",
                    "whole_from": f"sweep {c['whole_sweep']}, cell {c['whole_cell']}" if c["whole"] is not None else "",
                    "relative": _percent(c["relative"]), "expected": _percent(c["expected"]), "of_expected": _percent(c["of_expected"])})
    return out


def mig_terminal(rows: list[dict], reference: list[dict] = (), wide: bool = False):
    """`results --bench`: the MIG table below the figures; None without MIG figures."""
    shown = mig_table(rows, reference)
    if not shown:
        return None
    columns = [Col("stack", "Stack", [_t(s["stack"]) for s in shown], "words", 14),
               Col("python", "Python", [_t(s["python"]) for s in shown]),
               Col("gpu", "GPU", [_t(s["gpu"]) for s in shown], "words", 12),
               Col("instance", "MIG instance", [_t(s["instance"]) for s in shown], "words", 10),
               Col("measurement", "Measurement", [_t(s["measurement"]) for s in shown], "words"),
               Col("dtype", "Type", [_t(s["dtype"]) for s in shown]),
               Col("value", "Instance", [_t(s["value"], justify="right") for s in shown], "words", 13),
               Col("whole", "Whole GPU", [_t(s["whole"], justify="right") for s in shown], "words", 13),
               Col("relative", "Share", [_t(s["relative"], justify="right") for s in shown]),
               Col("expected", "Slices", [_t(s["expected"], justify="right") for s in shown]),
               Col("of_expected", "Of slices", [_t(s["of_expected"], justify="right") for s in shown])]
    steps = [Step("python", into="stack", header="Stack (Python)"), Step("dtype", into="measurement"),
             Step("instance", into="gpu", header="GPU (MIG instance)"), Step("expected", into="relative", header="Share (slices)")]
    return FitTable("MIG instances against the whole GPU (Share: the instance's speed over the whole GPU's; "
                    "Slices: its compute slices' share; Of slices: the one over the other)", columns, steps, wide)
