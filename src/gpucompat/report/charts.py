"""The bench figures' hand-drawn SVG charts: matrix-product throughput per data type, one measurement
across framework versions, one GPU shared by N processes, data-parallel training over N GPUs, and
NVML's telemetry while a cell's bench ran.

Everything here is a pure function of the rows (bench.py's vocabulary: labels, order, numbers). The
charts are inline SVG strings (no JavaScript, no network, readable in any browser and as XML); every
text that comes from data is escaped.
"""

from __future__ import annotations

import math
import statistics

from markupsafe import Markup, escape

from .bench import DTYPES, LABELS, MEASUREMENTS, MODELS, TITLES, _change, _numbers, _order, _processes, _scaling_points, _scaling_series
from .bench import _stack_key, _trim, _version_key, display, is_shared, number, sorted_rows, stack_label

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


def _x_axis(x0: float, x1: float, top: float, bottom: float, end: float, step: float, scale: float, caption: str,
            suffix: str = "") -> list[str]:
    """A horizontal bar chart's axis: grid lines behind the bars (drawn first), tick labels, and the caption below."""
    grid = []
    for t in _ticks(end, step):
        gx = x0 + t * scale
        grid.append(f'<line x1="{gx:.1f}" y1="{top}" x2="{gx:.1f}" y2="{bottom}" stroke="#e3e6ec"/>'
                    f'<text x="{gx:.1f}" y="{bottom + 14}" text-anchor="middle" fill="#5a6272">{_a(_tick_label(t, step))}{suffix}</text>')
    grid.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{bottom + 30}" text-anchor="middle" fill="#5a6272">{_a(caption)}</text>')
    return grid


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
            label += " · contended" if r.get("contended") else ""  # another process computed beside it: not the stack's speed
            label += " · throttled" if r.get("throttled") else ""
            tip = f"{heading}: {d} {label}" + (f"; peak {shown['peak']}" if shown["peak"] else "") + (f"; {shown['note']}" if shown["note"] else "")
            outline = ' stroke="#c0392b" stroke-width="1.5" stroke-dasharray="3 2"' if r.get("throttled") or r.get("contended") else ""
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
    grid = _x_axis(x0, x1, top, y, end, step, scale, unit)
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
                       + (" contended" if r.get("contended") else "") + (" throttled" if r.get("throttled") else ""))
                hollow = ' fill="#fff" stroke-width="2"' if r.get("throttled") or r.get("contended") else f' fill="{color}"'
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


def trend_dtype(rows: list[dict]) -> str | None:
    """The data type the report's trend chart shows: bf16 where measured, else the first of DTYPES measured."""
    measured = {r.get("dtype") for r in rows if r.get("measurement") == "matmul"}
    return next((d for d in ["bf16", *DTYPES] if d in measured), None)


# ---- sharing one GPU, scaling over GPUs, telemetry -----------------------------------------------------

def _per_process_text(row: dict) -> str:
    """Each process's figure: '2 × 309' when they are within 2 % of each other, '312 + 306' for a few, else
    '8 × 77.1 (70.2–80.3)'; the sum alone where the row has no per-process figures."""
    values = _numbers(row.get("per_process"))
    if not values:
        return _trim(number(row["value"]))
    mean = statistics.fmean(values)
    if max(values) - min(values) <= 0.02 * abs(mean):
        return f"{len(values)} × {_trim(number(mean))}"
    if len(values) <= 4:
        return " + ".join(_trim(number(v)) for v in values)
    return f"{len(values)} × {_trim(number(mean))} ({_trim(number(min(values)))}–{_trim(number(max(values)))})"


def _share_groups(rows: list[dict]) -> dict[tuple, dict[int, dict]]:
    """Sharing figures by stack x GPU x workload, then by process count (the first figure for a count)."""
    groups: dict[tuple, dict[int, dict]] = {}
    for r in sorted_rows(rows):
        if is_shared(r) and r.get("value") is not None:
            key = (str(r.get("gpu") or ""), _stack_key(r), str(r.get("python") or ""), str(r.get("measurement")), str(r.get("dtype") or ""))
            groups.setdefault(key, {}).setdefault(_processes(r), r)
    return groups


def sharing_label(row: dict, alone: float | None = None) -> str:
    """The text beside a sharing bar: '663 TFLOP/s alone', or '2 × 309 = 618 TFLOP/s, −6.8 %' (the sum of the
    N processes and its change against the figure alone: the row's loss, else computed from `alone`)."""
    unit = row.get("unit") or ""
    n = _processes(row)
    if n == 1:
        return f"{_trim(number(row['value']))} {unit} alone".replace("  ", " ")
    loss = row.get("loss")
    if not isinstance(loss, (int, float)) and alone:
        loss = (alone - row["value"]) / alone
    total = f"{_trim(number(row['value']))} {unit}".rstrip()
    text = f"{_per_process_text(row)} = {total}" if _numbers(row.get("per_process")) else total
    return text + (f", {_change(loss)}" if isinstance(loss, (int, float)) else "")


def sharing_chart(rows: list[dict], width: int = 760, standalone: bool = False) -> Markup:
    """One GPU shared by N processes at once (time-slicing): for each stack x GPU x workload (shared_matmul per
    data type, shared_train) a bar per process count N, its length the sum of the N processes' throughput as a
    share of the figure alone (N = 1, the dashed line), each process's figure a segment of the bar; beside it
    the figures and the change against alone ('2 × 309 = 618 TFLOP/s, −6.8 %'). Empty markup without sharing
    figures. `standalone`: with the SVG namespace, to save as a .svg file."""
    groups = _share_groups(rows)
    if not groups:
        return Markup("")
    plans = []
    for key, by_n in groups.items():
        alone_row = by_n.get(1)
        alone = alone_row["value"] if alone_row and alone_row["value"] else None
        reference = alone or max(r["value"] for r in by_n.values()) or 1.0
        plans.append((key, alone, reference, [(n, by_n[n], sharing_label(by_n[n], alone)) for n in sorted(by_n)]))
    label_w = max(_text_width(label) for *_, bars in plans for _, _, label in bars) + 12
    x0 = 96
    width = max(width, x0 + 240 + label_w)
    x1 = width - label_w - 8
    end, step = _nice(max([1.0, *(r["value"] / reference for _, _, reference, bars in plans for _, r, _ in bars)]) * 100)
    scale = (x1 - x0) / end  # pixels per percent of the reference
    bar, gap = 16, 4
    body, y = [], 8
    body.append(f'<rect x="{x0}" y="{y}" width="10" height="10" fill="{PALETTE[0]}"/><rect x="{x0 + 10}" y="{y}" width="10" height="10" '
                f'fill="{PALETTE[0]}" fill-opacity="0.6"/><text x="{x0 + 26}" y="{y + 9}">one segment per process</text>'
                f'<line x1="{x0 + 190}" y1="{y - 2}" x2="{x0 + 190}" y2="{y + 12}" stroke="#1d2330" stroke-width="1.5" stroke-dasharray="3 2"/>'
                f'<text x="{x0 + 196}" y="{y + 9}">the figure alone (N = 1)</text>')
    y += 24
    top = y
    for (gpu, _, python, measurement, dtype), alone, reference, bars in plans:
        first = bars[0][1]
        heading = f"{LABELS.get(measurement, measurement)}{' ' + dtype if dtype else ''} · {stack_label(first)} py{python or '?'} · {gpu}"
        if not alone:
            heading += " (no figure alone: bars against the largest)"
        body.append(f'<text x="4" y="{y + 12}" font-weight="600">{_a(heading)}</text>')
        y += 18
        group_top = y
        color = COLORS.get(dtype, PALETTE[0]) if measurement == "shared_matmul" else PALETTE[2]
        for n, r, label in bars:
            unit = r.get("unit") or ""
            parts = _numbers(r.get("per_process")) or [r["value"]]
            total_parts = sum(parts) or 1.0
            tip = f"{heading}: {n} process{'es' if n > 1 else ''} at once, {label}" + (" · throttled" if r.get("throttled") else "")
            name = "alone" if n == 1 else f"{n} processes"
            body.append(f'<g class="share" data-processes="{n}"><title>{_a(tip)}</title>'
                        f'<text x="{x0 - 6}" y="{y + 12}" text-anchor="end">{_a(name)}</text>')
            x = float(x0)
            length = r["value"] / reference * 100 * scale
            for i, part in enumerate(parts):  # each process's share of the bar, scaled so that the segments add up to the sum
                w = max(length * part / total_parts, 0.5)
                opacity = "" if i % 2 == 0 else ' fill-opacity="0.6"'
                body.append(f'<rect class="process" x="{x:.1f}" y="{y}" width="{w:.1f}" height="{bar}" fill="{color}"{opacity} '
                            f'stroke="#fff" stroke-width="{1 if len(parts) > 1 else 0}"><title>{_a(f"process {i + 1} of {n}: {number(part)} {unit}".rstrip())}</title></rect>')
                x += w
            if r.get("throttled"):
                body.append(f'<rect x="{x0}" y="{y}" width="{max(length, 1):.1f}" height="{bar}" fill="none" stroke="#c0392b" stroke-width="1.5" stroke-dasharray="3 2"/>')
            body.append(f'<text class="label" x="{x1 + 8:.1f}" y="{y + 12}">{_a(label + (" · throttled" if r.get("throttled") else ""))}</text></g>')
            y += bar + gap
        if alone:
            ax = x0 + 100 * scale
            tip = f"alone: {number(alone)} {first.get('unit') or ''}".rstrip()
            body.append(f'<line class="alone" x1="{ax:.1f}" y1="{group_top - 3}" x2="{ax:.1f}" y2="{y - gap + 3}" stroke="#1d2330" '
                        f'stroke-width="1.5" stroke-dasharray="3 2"><title>{_a(tip)}</title></line>')
        y += 8
    grid = _x_axis(x0, x1, top, y, end, step, scale, "sum over the processes, % of the figure alone", suffix=" %")
    return _svg(width, y + 38, "Sharing one GPU: N processes at once against one alone", grid + body, standalone)


def scaling_chart(rows: list[dict], width: int = 760, speedup: bool = False, standalone: bool = False) -> Markup:
    """Data-parallel training over GPUs: a panel per model (scaling_cnn, scaling_large), x the number of GPUs,
    y images/s (or with `speedup` the speed-up over one GPU); one line per model x stack x GPU, the ideal
    linear scaling (N x the 1-GPU figure) dashed in its colour, and the efficiency printed at each point.
    Empty markup without scaling figures. `standalone`: with the SVG namespace, to save as a .svg file."""
    series = _scaling_series(rows)
    if not series:
        return Markup("")
    left, right, plot_h = 64, 24, 200
    x0, x1 = left, width - right
    body, y = [], 0
    for p, measurement in enumerate(sorted({k[0] for k in series}, key=lambda m: _order(MEASUREMENTS, m))):
        mine = {k: v for k, v in series.items() if k[0] == measurement}
        lines = []
        for key, by_n in mine.items():
            one, points = _scaling_points(by_n)
            # (GPUs, the value drawn, efficiency, images/s, speed-up)
            ys = [(n, s if speedup else v, e, v, s) for n, v, s, e in points if not speedup or s is not None]
            last = max(by_n)
            ideal = [(1, 1.0 if speedup else one), (last, float(last) if speedup else last * one)] if one and last > 1 else []
            lines.append((key, ys, ideal))
        counts = sorted({n for k in mine for n in mine[k]})
        top_n = max(counts)
        end, step = _nice(max([0.0, *(t[1] for _, ys, _ in lines for t in ys), *(v for _, _, ideal in lines for _, v in ideal)]))
        unit = "× one GPU" if speedup else (next(iter(next(iter(mine.values())).values()))[0].get("unit") or "images/s")
        y += 8
        body.append(f'<text x="{left}" y="{y + 12}" font-weight="600">{_a(TITLES.get(measurement, measurement))}: '
                    f'{_a("speed-up" if speedup else unit)} by number of GPUs, higher is better</text>')
        top = y + 30
        y_axis = top + plot_h

        def px(n, top_n=top_n):
            return (x0 + x1) / 2 if top_n == 1 else x0 + 24 + (n - 1) / (top_n - 1) * (x1 - x0 - 48)

        def py(v, end=end, y_axis=y_axis):
            return y_axis - v / end * plot_h

        for t in _ticks(end, step):
            body.append(f'<line x1="{x0}" y1="{py(t):.1f}" x2="{x1}" y2="{py(t):.1f}" stroke="#e3e6ec"/>'
                        f'<text x="{x0 - 6}" y="{py(t) + 4:.1f}" text-anchor="end" fill="#5a6272">{_a(_tick_label(t, step))}</text>')
        body.append(f'<line x1="{x0}" y1="{y_axis}" x2="{x1}" y2="{y_axis}" stroke="#5a6272"/>')
        for n in counts:
            body.append(f'<text x="{px(n):.1f}" y="{y_axis + 14}" text-anchor="middle" fill="#5a6272">{n}</text>')
        body.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{y_axis + 30}" text-anchor="middle" fill="#5a6272">GPUs (one process each)</text>')
        names = []
        for key, _, _ in lines:
            first = next(iter(mine[key].values()))[0]
            names.append(f"{MODELS.get(measurement, measurement)} · {stack_label(first)} py{key[3] or '?'} · {key[1]}")
        for i, ((_, gpu, _, python), ys, ideal) in enumerate(lines):
            color, name = PALETTE[i % len(PALETTE)], names[i]
            group = [f'<g class="series" data-gpu="{_a(gpu)}" data-model="{_a(MODELS.get(measurement, measurement))}">']
            if ideal:
                group.append(f'<line class="ideal" x1="{px(ideal[0][0]):.1f}" y1="{py(ideal[0][1]):.1f}" x2="{px(ideal[1][0]):.1f}" '
                             f'y2="{py(ideal[1][1]):.1f}" stroke="{color}" stroke-width="1.5" stroke-dasharray="6 4">'
                             f'<title>{_a(f"ideal: N × the 1-GPU figure ({name})")}</title></line>')
            if len(ys) > 1:
                group.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" '
                             f'points="{" ".join(f"{px(n):.1f},{py(v):.1f}" for n, v, *_ in ys)}"/>')
            for n, v, efficiency, images, speed in ys:
                tip = (f"{name}: {n} GPU{'s' if n > 1 else ''}, {number(images)} images/s"
                       + (f", speed-up {speed:.2f}×" if speed is not None and n > 1 else "")
                       + (f", efficiency {efficiency * 100:.1f} %" if efficiency is not None and n > 1 else ""))
                group.append(f'<circle cx="{px(n):.1f}" cy="{py(v):.1f}" r="4" fill="{color}" stroke="{color}"><title>{_a(tip)}</title></circle>')
                label = (f"{efficiency * 100:.1f} %" if efficiency is not None and n > 1 else
                         f"{_trim(number(v))}{'×' if speedup else ''}" if n == 1 else "")
                if label:  # left of the last point, so that it stays inside the chart
                    last = n == top_n and top_n > 1
                    anchor = ' text-anchor="end"' if last else ""
                    group.append(f'<text class="efficiency" x="{px(n) + (-6 if last else 6):.1f}" y="{py(v) - 7:.1f}"{anchor} fill="{color}" stroke="#fff" '
                                 f'stroke-width="3" paint-order="stroke">{_a(label)}</text>')
            group.append("</g>")
            body += group
        ly = y_axis + 50
        for i, name in enumerate(names):
            body.append(f'<rect x="{left}" y="{ly - 9:.1f}" width="12" height="4" fill="{PALETTE[i % len(PALETTE)]}"/>'
                        f'<text x="{left + 18}" y="{ly:.1f}">{_a(name)}</text>')
            ly += 16
        body.append(f'<line x1="{left}" y1="{ly - 7:.1f}" x2="{left + 12}" y2="{ly - 7:.1f}" stroke="#5a6272" stroke-width="1.5" stroke-dasharray="4 2"/>'
                    f'<text x="{left + 18}" y="{ly:.1f}">ideal: N × the 1-GPU figure; the percentages are the efficiency (speed-up / N)</text>')
        y = ly + 8 + (12 if p else 0)
    return _svg(width, y + 4, "Scaling over GPUs: data-parallel training " + ("speed-up" if speedup else "throughput"), body, standalone)


TELEMETRY_PANELS = [("util_pct", "GPU utilisation", "%"), ("power_w", "Power", "W"), ("sm_mhz", "SM clock", "MHz"),
                    ("temp_c", "Temperature", "°C"), ("memory_used_mib", "Memory used", "MiB")]


def downsample(points: list[tuple[float, float | None]], limit: int = 600) -> list[tuple[float, float | None]]:
    """At most about `limit` (time, value) points of a time series in time order: per bucket of consecutive samples
    its lowest and highest point (so a spike survives), a bucket with no value kept as one (time, None) gap."""
    if len(points) <= limit:
        return list(points)
    buckets = max(1, limit // 2)
    size = len(points) / buckets
    out: list[tuple[float, float | None]] = []
    for b in range(buckets):
        chunk = points[int(b * size):int((b + 1) * size)]
        valid = [p for p in chunk if p[1] is not None]
        if not valid:
            if chunk:
                out.append((chunk[0][0], None))
            continue
        low, high = min(valid, key=lambda p: p[1]), max(valid, key=lambda p: p[1])
        out += sorted({low, high}, key=lambda p: p[0])
    return out


def telemetry_chart(series: dict, width: int = 760, memory: bool = False, limit: int = 600, standalone: bool = False) -> Markup:
    """NVML's samples while one cell's bench ran (store.telemetry: {"cell", "framework", "version", "gpu",
    "columns", "samples"}) as small multiples against time: GPU utilisation %, power W, SM clock MHz,
    temperature °C, and with `memory` the memory used in MiB; each line downsampled to at most about `limit`
    points (the lowest and highest of each stretch), a gap where NVML gave no value. Empty markup without
    samples. `standalone`: with the SVG namespace, to save as a .svg file."""
    columns = [str(c) for c in series.get("columns") or []]
    if "t_s" not in columns:
        return Markup("")
    t_index = columns.index("t_s")

    def cell(sample, i):
        value = sample[i] if isinstance(sample, (list, tuple)) and i < len(sample) else None
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) else None

    samples = [s for s in series.get("samples") or [] if cell(s, t_index) is not None]
    if not samples:
        return Markup("")
    panels = [p for p in TELEMETRY_PANELS if p[0] in columns and (memory or p[0] != "memory_used_mib")]
    times = [cell(s, t_index) for s in samples]
    t_start, t_end = min(0.0, min(times)), max(times)
    t_axis, t_step = _nice(t_end - t_start)
    left, right, panel_h, gap = 64, 24, 60, 34
    x0, x1 = left, width - right

    def px(t):
        return x0 + (t - t_start) / t_axis * (x1 - x0)

    heading = (f"cell {series.get('cell', '?')} · {series.get('framework') or ''} {series.get('version') or ''} · {series.get('gpu') or ''}"
               f" · {len(samples)} samples over {_trim(number(t_end - t_start))} s")
    body = [f'<text x="4" y="14" font-weight="600">{_a(heading)}</text>']
    y = 24
    for k, (column, name, unit) in enumerate(panels):
        i = columns.index(column)
        points = [(cell(s, t_index), cell(s, i)) for s in samples]
        values = [v for _, v in points if v is not None]
        shown = downsample(points, limit)
        top = y + 18
        bottom = top + panel_h
        if values:
            summary = (f"min {_trim(number(min(values)))}, median {_trim(number(statistics.median(values)))}, "
                       f"max {_trim(number(max(values)))} {unit}")
        else:
            summary = "no value sampled"
        body.append(f'<text x="{left}" y="{y + 12}"><tspan font-weight="600">{_a(f"{name} ({unit})")}</tspan>'
                    f'<tspan fill="#5a6272">{_a("  " + summary)}</tspan></text>')
        end, step = (100.0, 50.0) if column == "util_pct" and (not values or max(values) <= 100) else _nice(max(values or [1.0]))

        def py(v, end=end, bottom=bottom):
            return bottom - v / end * panel_h

        for t in _ticks(end, step):
            body.append(f'<line x1="{x0}" y1="{py(t):.1f}" x2="{x1}" y2="{py(t):.1f}" stroke="#e3e6ec"/>')
        for t in (0.0, end):
            body.append(f'<text x="{x0 - 6}" y="{py(t) + 4:.1f}" text-anchor="end" fill="#5a6272">{_a(_tick_label(t, step))}</text>')
        path, pen = [], False
        for t, v in shown:
            if v is None:
                pen = False
                continue
            path.append(f"{'L' if pen else 'M'}{px(t):.1f} {py(v):.1f}")
            pen = True
        if path:
            body.append(f'<path class="telemetry" data-column="{_a(column)}" d="{" ".join(path)}" fill="none" '
                        f'stroke="{PALETTE[k % len(PALETTE)]}" stroke-width="1.5"><title>{_a(f"{name}: {summary}")}</title></path>')
        body.append(f'<line x1="{x0}" y1="{bottom}" x2="{x1}" y2="{bottom}" stroke="#5a6272"/>')
        y = bottom + gap - 18
    axis = y + 18 - gap  # the last panel's bottom
    for t in _ticks(t_axis, t_step):
        body.append(f'<text x="{px(t_start + t):.1f}" y="{axis + 14}" text-anchor="middle" fill="#5a6272">{_a(_tick_label(t_start + t, t_step))}</text>')
    body.append(f'<text x="{(x0 + x1) / 2:.0f}" y="{axis + 30}" text-anchor="middle" fill="#5a6272">seconds since the bench began</text>')
    return _svg(width, axis + 38, f"GPU telemetry of cell {series.get('cell', '?')} while its bench ran", body, standalone)
