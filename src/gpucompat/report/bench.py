"""Bench figures: the terminal table, CSV/JSON, the comparison of two sweeps, and hand-drawn SVG charts.

A bench row is one figure the probe measured after a cell passed (store.bench_rows): a stack on a GPU,
a `measurement` (matmul per data type, copy, h2d, d2h, launch, train, first_step), its median `value`
in `unit`, which way is `better`, the interquartile `spread` of the repetitions, the datasheet `peak`
and `share` of it where known, and whether the GPU was `throttled` while it ran.

Everything here is a pure function of the rows. The charts are inline SVG strings (no JavaScript, no
network, readable in any browser and as XML); every text that comes from data is escaped.
"""

from __future__ import annotations

import csv
import io
import json
import math
import statistics

from markupsafe import Markup, escape
from packaging.version import InvalidVersion, Version
from rich.console import Group
from rich.text import Text

from .terminal import Col, FitTable, Step

MEASUREMENTS = ["matmul", "copy", "h2d", "d2h", "launch", "train", "first_step"]
DTYPES = ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"]
LABELS = {"matmul": "matmul", "copy": "device copy", "h2d": "host→device", "d2h": "device→host",
          "launch": "kernel launch", "train": "CNN training", "first_step": "first step"}
TITLES = {"matmul": "Matrix-product throughput", "copy": "Device memory bandwidth (copy)", "h2d": "Host→device transfer",
          "d2h": "Device→host transfer", "launch": "Kernel launch latency", "train": "Small CNN training throughput",
          "first_step": "Time to the first training step"}
KEY_FIELDS = ("framework", "version", "variant", "python", "gpu", "measurement", "dtype", "processes")
CSV_COLUMNS = ["cell", "sweep", "framework", "version", "variant", "python", "env", "gpu", "cc", "driver", "measurement", "dtype",
               "processes", "value", "unit", "better", "spread", "repetitions", "peak", "share", "throttled", "loss",
               "sm_mhz_before", "sm_mhz_after", "power_w_after", "temp_c_after", "throttle_after", "note"]
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
            _order(DTYPES, row.get("dtype")), str(row.get("dtype") or ""), row.get("cell") or 0)


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


def _clock(row: dict, when: str) -> dict:
    return ((row.get("clocks") or {}).get(when)) or {}


def _throttle_reasons(row: dict) -> list[str]:
    return list(_clock(row, "after").get("throttle") or []) or list(_clock(row, "before").get("throttle") or [])


def display(row: dict) -> dict:
    """One figure as text, shared by the terminal table and the HTML summary."""
    value = row.get("value")
    reasons = _throttle_reasons(row)
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
        "throttled": ("yes" + (f" ({', '.join(map(str, reasons))})" if reasons else "")) if row.get("throttled") else "",
        "repetitions": row.get("repetitions"),
        "note": str(row.get("note") or ""),
    }


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
    notes = ["; ".join(filter(None, [s["note"], r.get("throttled") and _throttle_reasons(r) and "throttled: " + ", ".join(map(str, _throttle_reasons(r)))]))
             for s, r in zip(shown, rows)]
    with_spread = [f"{s['value']} {s['spread']}" if s["spread"] else s["value"] for s in shown]
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
    ]
    steps = [Step("note"), Step("cc", into="gpu"), Step("python", into="stack", header="Stack (Python)"),
             Step("dtype", into="measurement"),
             Step("spread", into="value", header="Value ± IQR", cells=[_t(v, justify="right") for v in with_spread])]
    if any(r.get("throttled") for r in rows):
        columns.append(Col("throttled", "Throttled", [_t("yes" if r.get("throttled") else "", "yellow") for r in rows]))
        steps.append(Step("throttled", into="value", header="Value ± IQR", cells=[
            Text.assemble(v, (" throttled", "yellow"), justify="right") if r.get("throttled") else _t(v, justify="right")
            for v, r in zip(with_spread, rows)]))
    if any(notes):
        columns.append(Col("note", "Note", [_t(n) for n in notes], "flex", 12, share=0))
    throttled = sum(1 for r in rows if r.get("throttled"))
    title = (f"Benchmarks ({len(rows)} figures; ± is the interquartile range of the repetitions"
             + (f"; {throttled} measured while the GPU was throttled" if throttled else "") + ")")
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
        writer.writerow({**row, "sm_mhz_before": before.get("sm_mhz"), "sm_mhz_after": after.get("sm_mhz"),
                         "power_w_after": after.get("power_w"), "temp_c_after": after.get("temp_c"),
                         "throttle_after": " | ".join(map(str, after.get("throttle") or []))})
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
    if len(rows) == 1:
        r = rows[0]
        return {"value": r.get("value"), "spread": r.get("spread"), "unit": r.get("unit"), "better": r.get("better"),
                "throttled": bool(r.get("throttled")), "cells": [r.get("cell")], "sweep": r.get("sweep")}
    values = [r["value"] for r in rows if r.get("value") is not None]
    spreads = [r["spread"] for r in rows if r.get("spread") is not None]
    return {"value": statistics.median(values) if values else None,
            "spread": max([*spreads, (max(values) - min(values)) if values else 0.0]),
            "unit": rows[0].get("unit"), "better": rows[0].get("better"), "throttled": any(r.get("throttled") for r in rows),
            "cells": [r.get("cell") for r in rows], "sweep": rows[0].get("sweep"),
            "units": {r.get("unit") for r in rows}}


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
    repetitions, or two runs of the same cell, already show is no change.

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
        entry = {"key": named, "before": a and a["value"], "after": b and b["value"], "unit": (b or a)["unit"],
                 "better": (b or a)["better"], "change": None, "spread_before": a and a["spread"], "spread_after": b and b["spread"],
                 "throttled_before": bool(a and a["throttled"]), "throttled_after": bool(b and b["throttled"]),
                 "cells_before": a["cells"] if a else [], "cells_after": b["cells"] if b else []}
        reason = None
        if a is None:
            reason = "only in the later sweep"
        elif b is None:
            reason = "only in the earlier sweep"
        elif len(a.get("units", {a["unit"]}) | b.get("units", {b["unit"]})) > 1:
            reason = f"the unit differs ({a['unit']} before, {b['unit']} after)"
        elif a["value"] is None or b["value"] is None:
            reason = "not measured in " + ("both sweeps" if a["value"] is None and b["value"] is None else
                                           "the earlier sweep" if a["value"] is None else "the later sweep")
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
    summary = (f"Performance changes: {len(slower)} slower, {len(faster)} faster, {unchanged} within noise, {len(skipped)} not compared "
               f"(a change is a median moving by more than {THRESHOLD * 100:.0f} % and the two interquartile ranges)")
    items: list = [Text(summary, style="bold red" if slower else "bold")]
    moved = slower + faster
    if moved:
        def change(e):
            word = "slower" if e["change"] < 0 else "faster"
            return Text(f"{abs(e['change']) * 100:.0f} % {word}", style="red" if e["change"] < 0 else "green")
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


# ---- SVG charts --------------------------------------------------------------------------------------

COLORS = {"fp64": "#3b5b92", "fp32": "#4e8a4e", "tf32": "#9a7b2f", "fp16": "#b5563c", "bf16": "#7d4a9e", "fp8": "#2b8a8a"}
PALETTE = ["#3b5b92", "#b5563c", "#4e8a4e", "#7d4a9e", "#9a7b2f", "#2b8a8a", "#a33b6b", "#5a6272"]
FONT = 'font-family="system-ui, sans-serif"'


def _a(value) -> str:
    """A value written into an attribute or text node: escaped."""
    return str(escape(str(value)))


def _nice(top: float) -> tuple[float, float]:
    """An axis end at or above `top` and a tick step of 1, 2 or 5 x 10^n, about five ticks."""
    if top <= 0:
        return 1.0, 0.2
    raw = top / 5
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    return step * math.ceil(top / step - 1e-9), step


def _ticks(end: float, step: float) -> list[float]:
    return [i * step for i in range(round(end / step) + 1)]


def _tick_label(value: float, step: float) -> str:
    return f"{value:.0f}" if step >= 1 else f"{value:.{max(0, -math.floor(math.log10(step)))}f}"


def _text_width(text: str, size: float = 11) -> float:
    return len(text) * size * 0.58


def _svg(width: float, height: float, title: str, body: list[str], standalone: bool) -> Markup:
    """Inline SVG for HTML (no namespace needed there, so the report names no URL at all); `standalone`
    adds the SVG namespace a .svg file needs."""
    title = _a(title)
    xmlns = 'xmlns="http://www.w3.org/2000/svg" ' if standalone else ""
    return Markup(f'<svg {xmlns}class="chart" width="{width:.0f}" height="{height:.0f}" '
                  f'viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-label="{title}" {FONT} font-size="11">'
                  f"<title>{title}</title>" + "".join(body) + "</svg>")


def throughput_chart(rows: list[dict], width: int = 760, standalone: bool = False) -> Markup:
    """Matrix-product TFLOP/s per data type as horizontal bars, one group per stack x GPU; the datasheet dense
    peak as a dark tick across the bar where known; the value (and share of peak) printed on each bar.
    Empty markup when there is no matmul figure. `standalone`: with the SVG namespace, to save as a .svg file."""
    rows = [r for r in sorted_rows(rows) if r.get("measurement") == "matmul" and r.get("value") is not None]
    if not rows:
        return Markup("")
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        groups.setdefault((str(r.get("gpu") or ""), _stack_key(r)), []).append(r)
    unit = rows[0].get("unit") or "TFLOP/s"
    end, step = _nice(max([r["value"] for r in rows] + [r["peak"] for r in rows if r.get("peak")]))
    x0, x1, bar, gap = 64, width - 24, 16, 4
    scale = (x1 - x0) / end
    dtypes = [d for d in DTYPES if any(r.get("dtype") == d for r in rows)]
    dtypes += sorted({str(r.get("dtype")) for r in rows} - set(dtypes))
    body, y = [], 8
    # legend: one swatch per data type, then the peak tick
    x = x0
    for d in dtypes:
        body.append(f'<rect x="{x}" y="{y}" width="10" height="10" fill="{COLORS.get(d, "#5a6272")}"/>'
                    f'<text x="{x + 14}" y="{y + 9}">{_a(d)}</text>')
        x += 24 + _text_width(d)
    body.append(f'<line x1="{x + 4}" y1="{y - 2}" x2="{x + 4}" y2="{y + 12}" stroke="#1d2330" stroke-width="2"/>'
                f'<text x="{x + 10}" y="{y + 9}">datasheet dense peak</text>')
    y += 24
    top = y
    for (gpu, _), members in groups.items():
        first = members[0]
        heading = f"{stack_label(first)} py{first.get('python') or '?'} · {gpu}"
        body.append(f'<text x="4" y="{y + 12}" font-weight="600">{_a(heading)}</text>')
        y += 18
        for r in members:
            d = str(r.get("dtype") or "")
            length = max(r["value"] * scale, 1)
            shown = display(r)
            label = f"{shown['value']}" + (f" {shown['spread']}" if shown["spread"] else "") + (f" · {shown['share']} of peak" if shown["share"] else "")
            label += " · throttled" if r.get("throttled") else ""
            tip = f"{heading}: {d} {label}" + (f"; peak {shown['peak']}" if shown["peak"] else "") + (f"; {shown['note']}" if shown["note"] else "")
            outline = ' stroke="#c0392b" stroke-width="1.5" stroke-dasharray="3 2"' if r.get("throttled") else ""
            body.append(f'<g class="bar" data-dtype="{_a(d)}"><title>{_a(tip)}</title>'
                        f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end">{_a(d)}</text>'
                        f'<rect x="{x0}" y="{y}" width="{length:.1f}" height="{bar}" fill="{COLORS.get(d, "#5a6272")}"{outline}/>')
            px = x0 + r["peak"] * scale if r.get("peak") else None
            if px is not None:  # the tick first, so that a label beside the bar is drawn over it
                body.append(f'<line class="peak" x1="{px:.1f}" y1="{y - 2}" x2="{px:.1f}" y2="{y + bar + 2}" stroke="#1d2330" stroke-width="2"/>')
            if _text_width(label) + 8 < length:
                body.append(f'<text x="{x0 + length - 4:.1f}" y="{y + 12}" text-anchor="end" fill="#fff">{_a(label)}</text>')
            else:  # beside the bar, on a white halo where it crosses the peak tick; just past a tick it would touch
                lx = x0 + length + 4
                lx = px + 5 if px is not None and lx - 3 <= px < lx + 6 else lx
                body.append(f'<text x="{lx:.1f}" y="{y + 12}" stroke="#fff" stroke-width="3" paint-order="stroke">{_a(label)}</text>')
            body.append("</g>")
            y += bar + gap
        y += 8
    # the axis: grid lines behind the bars (drawn first), ticks and the unit below
    grid = []
    for t in _ticks(end, step):
        gx = x0 + t * scale
        grid.append(f'<line x1="{gx:.1f}" y1="{top}" x2="{gx:.1f}" y2="{y}" stroke="#e3e6ec"/>'
                    f'<text x="{gx:.1f}" y="{y + 14}" text-anchor="middle" fill="#5a6272">{_a(_tick_label(t, step))}</text>')
    grid.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{y + 30}" text-anchor="middle" fill="#5a6272">{_a(unit)}</text>')
    return _svg(width, y + 38, f"{TITLES['matmul']} per data type ({unit})", grid + body, standalone)


def trend_chart(rows: list[dict], measurement: str = "matmul", dtype: str | None = "bf16", width: int = 760,
                standalone: bool = False) -> Markup:
    """One measurement across framework versions: x the versions (per framework, sorted by packaging's
    Version), y the value; one series per GPU x framework, a line through the median of each version and a
    point for every figure (its stack in the tooltip); each GPU's datasheet peak dashed where known.
    `dtype` selects among matmul and train figures; measurements without a data type ignore it.
    Empty markup when nothing matches. `standalone`: with the SVG namespace, to save as a .svg file."""
    def wanted(r):
        if r.get("measurement") != measurement or r.get("value") is None:
            return False
        return not r.get("dtype") or dtype is None or r.get("dtype") == dtype
    rows = [r for r in sorted_rows(rows) if wanted(r)]
    if not rows:
        return Markup("")
    unit = rows[0].get("unit") or ""
    better = rows[0].get("better") or "higher"
    categories = sorted({(str(r.get("framework") or ""), str(r.get("version") or "")) for r in rows},
                        key=lambda c: (c[0], _version_key(c[1])))
    series: dict[tuple, list[dict]] = {}
    for r in rows:
        series.setdefault((str(r.get("gpu") or ""), str(r.get("framework") or "")), []).append(r)
    peaks: dict[float, list[str]] = {}
    for r in rows:
        if r.get("peak"):
            names = peaks.setdefault(float(r["peak"]), [])
            if str(r.get("gpu")) not in names:
                names.append(str(r.get("gpu")))
    end, step = _nice(max([r["value"] for r in rows] + list(peaks)))
    labels = [f"{fw} {v}" for fw, v in categories]
    left, right, top = 64, 24, 30
    plot_h = 220
    bottom_labels = max(_text_width(l) for l in labels) * 0.64 + 16  # rotated 40 degrees
    x0, x1 = left, width - right
    slot = (x1 - x0) / len(categories)
    y_axis = top + plot_h

    def px(i):
        return x0 + slot * (i + 0.5)

    def py(v):
        return y_axis - v / end * plot_h

    name = f"{TITLES.get(measurement, measurement)}" + (f" ({dtype})" if dtype and any(r.get("dtype") for r in rows) else "")
    body = [f'<text x="{left}" y="16" font-weight="600">{_a(name)} by framework version, {_a(unit)}, {_a(better)} is better</text>']
    for t in _ticks(end, step):
        body.append(f'<line x1="{x0}" y1="{py(t):.1f}" x2="{x1}" y2="{py(t):.1f}" stroke="#e3e6ec"/>'
                    f'<text x="{x0 - 6}" y="{py(t) + 4:.1f}" text-anchor="end" fill="#5a6272">{_a(_tick_label(t, step))}</text>')
    body.append(f'<line x1="{x0}" y1="{y_axis}" x2="{x1}" y2="{y_axis}" stroke="#5a6272"/>')
    for i, label in enumerate(labels):
        body.append(f'<text x="{px(i):.1f}" y="{y_axis + 14}" text-anchor="end" transform="rotate(-40 {px(i):.1f} {y_axis + 14})">{_a(label)}</text>')
    for peak, names in sorted(peaks.items()):
        body.append(f'<g class="peak"><title>{_a("datasheet dense peak: " + ", ".join(names))}</title>'
                    f'<line x1="{x0}" y1="{py(peak):.1f}" x2="{x1}" y2="{py(peak):.1f}" stroke="#1d2330" stroke-dasharray="6 4"/>'
                    f'<text x="{x1}" y="{py(peak) - 4:.1f}" text-anchor="end" fill="#1d2330">{_a(f"peak {number(peak)}: " + ", ".join(names))}</text></g>')
    legend_y = y_axis + bottom_labels + 12
    for n, ((gpu, framework), members) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        by_category: dict[int, list[dict]] = {}
        for r in members:
            by_category.setdefault(categories.index((str(r.get("framework") or ""), str(r.get("version") or ""))), []).append(r)
        line = [(px(i), py(statistics.median(r["value"] for r in rs))) for i, rs in sorted(by_category.items())]
        group = [f'<g class="series" data-gpu="{_a(gpu)}" data-framework="{_a(framework)}">']
        if len(line) > 1:
            group.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{" ".join(f"{x:.1f},{y:.1f}" for x, y in line)}"/>')
        for i, rs in by_category.items():
            for r in rs:
                shown = display(r)
                tip = (f"{stack_label(r)} py{r.get('python') or '?'} on {gpu}: {shown['value']}"
                       + (f" {shown['spread']}" if shown["spread"] else "") + (f" ({shown['share']} of peak)" if shown["share"] else "")
                       + (" throttled" if r.get("throttled") else ""))
                hollow = ' fill="#fff" stroke-width="2"' if r.get("throttled") else f' fill="{color}"'
                group.append(f'<circle cx="{px(i):.1f}" cy="{py(r["value"]):.1f}" r="4" stroke="{color}"{hollow}><title>{_a(tip)}</title></circle>')
        group.append("</g>")
        body += group
        ly = legend_y + n * 16
        body.append(f'<rect x="{left}" y="{ly - 9:.1f}" width="12" height="4" fill="{color}"/>'
                    f'<text x="{left + 18}" y="{ly:.1f}">{_a(f"{framework} on {gpu}")}</text>')
    height = legend_y + len(series) * 16 + 4
    return _svg(width, height, f"{name} by framework version ({unit})", body, standalone)


def trend_versions(rows: list[dict], measurement: str = "matmul", dtype: str | None = "bf16") -> int:
    """The most framework versions any GPU x framework series of trend_chart spans (a trend needs two)."""
    seen: dict[tuple, set] = {}
    for r in rows:
        if r.get("measurement") == measurement and r.get("value") is not None and (not r.get("dtype") or dtype is None or r.get("dtype") == dtype):
            seen.setdefault((r.get("gpu"), r.get("framework")), set()).add(r.get("version"))
    return max([0, *(len(v) for v in seen.values())])


def bench_summary(rows: list[dict]) -> list[dict]:
    """The HTML report's table: every figure as display text (the terminal table's columns), sorted the
    same way; the template escapes it."""
    return [{**display(r), "throttled_flag": bool(r.get("throttled")), "measurement_key": r.get("measurement")} for r in sorted_rows(rows)]


def trend_dtype(rows: list[dict]) -> str | None:
    """The data type the report's trend chart shows: bf16 where measured, else the first of DTYPES measured."""
    measured = {r.get("dtype") for r in rows if r.get("measurement") == "matmul"}
    return next((d for d in ["bf16", *DTYPES] if d in measured), None)
