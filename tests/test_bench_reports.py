"""Bench figures shown and compared: compare()'s noise threshold, CSV/JSON round trips, hand-drawn SVG
that is well-formed XML and escapes what it draws, the HTML report's Benchmarks section, and the
terminal table at 80 and 200 columns."""

import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET

import pytest
from rich.console import Console

from gpucompat.report.bench import bench_csv, bench_json, bench_summary, bench_table, compare, compare_table, scaling_table
from gpucompat.report.charts import downsample, scaling_chart, sharing_chart, telemetry_chart, throughput_chart, trend_chart
from gpucompat.report.html import render

PEAKS = {"NVIDIA H200": {"fp64": 67, "fp32": 67, "tf32": 494.5, "fp16": 989.5, "bf16": 989.5, "fp8": 1979},
         "NVIDIA A100-SXM4-80GB": {"fp64": 19.5, "fp32": 19.5, "tf32": 156, "fp16": 312, "bf16": 312, "fp8": None}}
MATMUL = {"NVIDIA H200": {"fp64": 51.2, "fp32": 48.9, "tf32": 378.0, "fp16": 760.4, "bf16": 781.2, "fp8": 1302.7},
          "NVIDIA A100-SXM4-80GB": {"fp64": 18.1, "fp32": 18.9, "tf32": 138.2, "fp16": 262.0, "bf16": 268.4}}
OTHER = {  # measurement: (dtype, value, unit, better, spread)
    "copy": ("", 3980.4, "GB/s", "higher", 21.0),
    "h2d": ("", 53.1, "GB/s", "higher", 0.4),
    "d2h": ("", 54.7, "GB/s", "higher", 0.3),
    "launch": ("", 4.3, "us", "lower", 0.1),
    "train": ("fp32", 8123.0, "images/s", "higher", 95.0),
    "first_step": ("", 2.84, "s", "lower", None),
}
CLOCKS = {"before": {"sm_mhz": 1980, "mem_mhz": 2619, "power_w": 120.5, "power_limit_w": 700.0, "temp_c": 31, "throttle": []},
          "after": {"sm_mhz": 1755, "mem_mhz": 2619, "power_w": 688.2, "power_limit_w": 700.0, "temp_c": 58, "throttle": []}}


def figure(measurement="matmul", dtype="bf16", value=781.2, spread=4.1, **changes) -> dict:
    """A bench row as store.bench_rows returns it (the H200 torch bf16 matmul unless told)."""
    row = {"cell": 12, "sweep": 3, "framework": "torch", "version": "2.11.0+cu130", "variant": "installed", "python": "3.12", "env": "current",
           "gpu": "NVIDIA H200", "cc": "9.0", "driver": "580.159.04", "measurement": measurement, "dtype": dtype, "value": value,
           "unit": "TFLOP/s", "better": "higher", "spread": spread, "repetitions": 10, "peak": None, "share": None, "throttled": False,
           "clocks": json.loads(json.dumps(CLOCKS)), "note": ""}
    row.update(changes)
    if row["measurement"] == "matmul" and "peak" not in changes:
        row["peak"] = PEAKS.get(row["gpu"], {}).get(row["dtype"])
    if row["peak"] and row["value"] is not None and "share" not in changes:
        row["share"] = round(row["value"] / row["peak"], 4)
    return row


def sweep_figures(sweep=3, version="2.11.0+cu130", gpus=("NVIDIA H200",), scale=1.0, cell=10) -> list[dict]:
    rows = []
    for n, gpu in enumerate(gpus):
        cc = "9.0" if "H200" in gpu else "8.0"
        for dtype, value in MATMUL[gpu].items():
            note = "fp8 via torch._scaled_mm" if dtype == "fp8" else ""
            rows.append(figure("matmul", dtype, value * scale, value * 0.005, sweep=sweep, version=version, gpu=gpu, cc=cc, cell=cell + n, note=note))
        for measurement, (dtype, value, unit, better, spread) in OTHER.items():
            rows.append(figure(measurement, dtype, value, spread, unit=unit, better=better, sweep=sweep, version=version, gpu=gpu, cc=cc,
                               cell=cell + n))
    return rows


def render_text(item, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(item, crop=False)
    return console.export_text()


# ---- compare() ----------------------------------------------------------------------------------------

def test_a_change_under_ten_percent_with_small_spreads_is_no_change():
    result = compare([figure(value=781.2, spread=2.0)], [figure(value=781.2 * 0.91, spread=2.0, sweep=4)])
    assert result["slower"] == [] and result["faster"] == [] and len(result["unchanged"]) == 1
    assert round(result["unchanged"][0]["change"], 3) == -0.09


def test_fifteen_percent_is_slower_or_faster():
    slower = compare([figure(value=781.2)], [figure(value=781.2 * 0.85, sweep=4)])
    assert [e["key"]["dtype"] for e in slower["slower"]] == ["bf16"] and slower["faster"] == []
    entry = slower["slower"][0]
    assert round(entry["change"], 3) == -0.15 and entry["before"] == 781.2 and entry["unit"] == "TFLOP/s"
    assert entry["spread_before"] == 4.1 and entry["key"] == {"framework": "torch", "version": "2.11.0+cu130", "variant": "installed",
                                                             "python": "3.12", "gpu": "NVIDIA H200", "measurement": "matmul", "dtype": "bf16",
                                                             "processes": 1}
    faster = compare([figure(value=781.2)], [figure(value=781.2 * 1.15, sweep=4)])
    assert len(faster["faster"]) == 1 and round(faster["faster"][0]["change"], 3) == 0.15 and faster["slower"] == []


def test_a_change_inside_the_spreads_is_no_change():
    # 20 % lower, but the repetitions spread 90 and 80 TFLOP/s: 156 < 170 is noise
    result = compare([figure(value=781.2, spread=90.0)], [figure(value=625.0, spread=80.0, sweep=4)])
    assert result["slower"] == [] and len(result["unchanged"]) == 1
    # the same move with tight spreads is a slowdown
    assert len(compare([figure(value=781.2, spread=9.0)], [figure(value=625.0, spread=8.0, sweep=4)])["slower"]) == 1


def test_launch_latency_going_up_is_slower_and_down_is_faster():
    up = compare([figure("launch", "", 4.3, 0.1, unit="us", better="lower")], [figure("launch", "", 6.1, 0.1, unit="us", better="lower", sweep=4)])
    assert len(up["slower"]) == 1 and up["faster"] == []
    assert round(up["slower"][0]["change"], 3) == round(-(6.1 - 4.3) / 4.3, 3)  # negative: slower
    down = compare([figure("launch", "", 6.1, 0.1, unit="us", better="lower")], [figure("launch", "", 4.0, 0.1, unit="us", better="lower", sweep=4)])
    assert len(down["faster"]) == 1 and down["faster"][0]["change"] > 0
    # launch latency drifts up to 25 % between two runs of one cell (docs/evidence/bench-h100): 20 % is noise
    drift = compare([figure("launch", "", 14.0, 0.1, unit="us", better="lower")], [figure("launch", "", 16.8, 0.1, unit="us", better="lower", sweep=4)])
    assert drift["slower"] == [] and len(drift["unchanged"]) == 1


def test_figures_in_one_sweep_only_are_not_compared():
    before = sweep_figures(3)
    after = [r for r in sweep_figures(4) if r["measurement"] != "first_step"]
    after += [figure(version="2.12.0+cu130", sweep=4)]  # a new version: nothing to compare it with
    result = compare(before, after)
    reasons = {(e["key"]["version"], e["key"]["measurement"]): e["reason"] for e in result["not_compared"]}
    assert reasons == {("2.11.0+cu130", "first_step"): "only in the earlier sweep", ("2.12.0+cu130", "matmul"): "only in the later sweep"}
    assert result["slower"] == [] and result["faster"] == [] and len(result["unchanged"]) == len(before) - 1


def test_a_whole_sweep_slower_sorted_worst_first():
    before, after = sweep_figures(3), sweep_figures(4, scale=0.8)
    after[0]["value"] *= 0.5  # fp64 now 60 % slower
    result = compare(before, after)
    assert len(result["slower"]) == len(MATMUL["NVIDIA H200"]) and result["slower"][0]["key"]["dtype"] == "fp64"
    assert [round(e["change"], 2) for e in result["slower"]][:2] == [-0.6, -0.2]
    text = render_text(compare_table(result, 3, 4), 100)
    assert "60 % slower" in text and "Sweep 3" in text and "6 slower" in text
    assert render_text(compare_table(result, 3, 4), 80)  # and fits a narrow terminal without error


def test_compare_is_pure():
    before, after = sweep_figures(3), sweep_figures(4, scale=0.5)
    copies = json.dumps([before, after], sort_keys=True)
    compare(before, after)
    assert json.dumps([before, after], sort_keys=True) == copies


# ---- exports ----------------------------------------------------------------------------------------

def test_csv_round_trip():
    rows = sweep_figures(3, gpus=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"))
    rows[0]["throttled"] = True
    rows[0]["clocks"]["after"]["throttle"] = ["sw_power_cap", "hw_slowdown"]
    text = bench_csv(rows)
    back = list(csv.DictReader(io.StringIO(text)))
    assert len(back) == len(rows)
    by_key = {(r["gpu"], r["measurement"], r["dtype"]): r for r in back}
    for row in rows:
        line = by_key[(row["gpu"], row["measurement"], row["dtype"])]
        assert float(line["value"]) == row["value"] and line["unit"] == row["unit"] and line["better"] == row["better"]
        assert (float(line["spread"]) if line["spread"] else None) == row["spread"]
        assert (float(line["peak"]) if line["peak"] else None) == row["peak"]
        assert int(line["sm_mhz_before"]) == 1980 and int(line["sm_mhz_after"]) == 1755
        assert float(line["power_w_after"]) == 688.2 and int(line["temp_c_after"]) == 58
    line = by_key[(rows[0]["gpu"], "matmul", rows[0]["dtype"])]
    assert line["throttled"] == "True" and line["throttle_after"] == "sw_power_cap | hw_slowdown"
    # sorted: A100 before H200, matmul by data type, then the other measurements in order
    h200 = [(r["measurement"], r["dtype"]) for r in back if r["gpu"] == "NVIDIA H200"]
    assert h200 == [("matmul", d) for d in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")] + [
        ("copy", ""), ("h2d", ""), ("d2h", ""), ("launch", ""), ("train", "fp32"), ("first_step", "")]
    assert back[0]["gpu"] == "NVIDIA A100-SXM4-80GB"


def test_json_round_trip():
    rows = sweep_figures(3, gpus=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"))
    back = json.loads(bench_json(rows))
    key = lambda r: (r["gpu"], r["measurement"], r["dtype"])
    assert sorted(back, key=key) == sorted(rows, key=key)
    assert back[0]["clocks"]["before"]["sm_mhz"] == 1980


# ---- SVG charts -------------------------------------------------------------------------------------

EVIL = "<script>alert(1)</script>"


def test_throughput_chart_is_xml_with_bars_values_and_peaks():
    rows = sweep_figures(3, gpus=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"))
    svg = throughput_chart(rows, standalone=True)  # a .svg file: in the SVG namespace
    root = ET.fromstring(str(svg))
    ns = "{http://www.w3.org/2000/svg}"
    assert root.tag == f"{ns}svg" and ET.fromstring(str(throughput_chart(rows))).tag == "svg"  # inline in HTML: no namespace needed
    bars = root.findall(f".//{ns}g[@class='bar']")
    assert len(bars) == 11  # six data types on the H200, five on the A100 (no fp8)
    texts = [t.text or "" for t in root.iter(f"{ns}text")]
    assert any("781.2 TFLOP/s" in t and "79 %" in t for t in texts)
    assert len(root.findall(f".//{ns}line[@class='peak']")) == 11  # every bar here has a datasheet peak
    rows[0]["peak"] = rows[0]["share"] = None  # a GPU the peak table does not know: a bar without a tick
    assert len(ET.fromstring(str(throughput_chart(rows))).findall(".//line[@class='peak']")) == 10
    assert throughput_chart([r for r in rows if r["measurement"] != "matmul"]) == ""


def test_trend_chart_orders_versions_by_packaging_version():
    rows = []
    for n, version in enumerate(["2.10.0+cu130", "2.9.1+cu128", "2.11.0+cu130"]):
        rows += [r for r in sweep_figures(3, version=version, gpus=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"), scale=1 + n / 10, cell=10 * n)]
    svg = trend_chart(rows, "matmul", "bf16")
    root = ET.fromstring(str(svg))
    ns = ""
    labels = [t.text for t in root.iter(f"{ns}text") if t.text and t.text.startswith("torch ")]
    assert labels == ["torch 2.9.1+cu128", "torch 2.10.0+cu130", "torch 2.11.0+cu130", "torch on NVIDIA A100-SXM4-80GB", "torch on NVIDIA H200"]
    series = root.findall(f".//{ns}g[@class='series']")
    assert len(series) == 2 and all(len(s.findall(f"{ns}circle")) == 3 for s in series)
    assert all(s.find(f"{ns}polyline") is not None for s in series)
    # launch latency: no data type, lower is better
    launch = ET.fromstring(str(trend_chart(rows, "launch")))
    assert "lower is better" in "".join(t.text or "" for t in launch.iter(f"{ns}text"))
    assert trend_chart(rows, "matmul", "int4") == ""


def test_charts_escape_a_malicious_stack_name():
    rows = [figure(framework=EVIL, version=EVIL, gpu='H200" onload="alert(1)', note=EVIL),
            figure(framework=EVIL, version="2.12.0", gpu='H200" onload="alert(1)')]
    for svg in (throughput_chart(rows), trend_chart(rows)):
        root = ET.fromstring(str(svg))  # well-formed: nothing from the data became markup
        assert "<script" not in str(svg) and "&lt;script&gt;" in str(svg)
        assert not [e for e in root.iter() if "onload" in e.attrib or e.tag.endswith("script")]
    assert all(EVIL in line["stack"] for line in bench_summary(rows))  # raw text: the template escapes it


def shared(n, per_process, measurement="shared_matmul", dtype="bf16", alone=663.0, unit="TFLOP/s", **changes) -> dict:
    """A sharing figure: N processes at once on one GPU, the value their sum, the loss against `alone`."""
    total = sum(per_process)
    return figure(measurement, dtype, total, None, unit=unit, repetitions=1, processes=n, per_process=list(per_process),
                  loss=None if n == 1 else (alone - total) / alone, **changes)


def scaled(n, value, one=12000.0, measurement="scaling_cnn", **changes) -> dict:
    """A scaling figure: data-parallel training on N GPUs, speed-up and efficiency against `one` (None on one GPU)."""
    return figure(measurement, "fp32", value, None, unit="images/s", repetitions=1, processes=n,
                  epoch_seconds=[60000 / value + 0.5, 60000 / value - 0.5], final_loss=0.04321, accuracy=0.9812,
                  speedup=None if n == 1 else value / one, efficiency=None if n == 1 else value / one / n, **changes)


SHARED = [shared(1, [663.0]), shared(2, [309.0, 309.0]), shared(4, [154.5] * 4)]
SCALED = [scaled(1, 12000.0), scaled(2, 21000.0)]
COLUMNS = ["t_s", "util_pct", "memory_used_mib", "power_w", "sm_mhz", "temp_c"]


def telemetry_series(count=3000, **changes) -> dict:
    samples = [[round((i + 1) * 0.1, 3), None if 1000 <= i < 1100 else 98 if (i // 300) % 2 else 2, 1234 + i,
                650.2 if (i // 300) % 2 else 120.0, 1440 + i % 7, 31 + i // 100] for i in range(count)]
    return {"cell": 3, "framework": "torch", "version": "2.11.0+cu130", "gpu": "NVIDIA H200", "columns": COLUMNS, "samples": samples, **changes}


def test_sharing_chart_prints_each_share_the_sum_and_the_loss():
    root = ET.fromstring(str(sharing_chart(SHARED + sweep_figures(3))))  # the plain figures are not drawn here
    bars = root.findall(".//g[@class='share']")
    assert [b.get("data-processes") for b in bars] == ["1", "2", "4"]
    assert [len(b.findall("rect[@class='process']")) for b in bars] == [1, 2, 4]  # one segment per process
    labels = [t.text for t in root.iter("text") if t.get("class") == "label"]
    assert labels == ["663 TFLOP/s alone", "2 × 309 = 618 TFLOP/s, −6.8 %", "4 × 154.5 = 618 TFLOP/s, −6.8 %"]
    assert len(root.findall(".//line[@class='alone']")) == 1  # the figure alone, dashed, across the group
    # the 2-process bar (618 of 663) ends short of the line at 100 %, its two segments equal
    alone_x = float(root.find(".//line[@class='alone']").get("x1"))
    segments = bars[1].findall("rect[@class='process']")
    end = float(segments[-1].get("x")) + float(segments[-1].get("width"))
    start = float(segments[0].get("x"))
    assert segments[0].get("width") == segments[1].get("width") and abs((end - start) / (alone_x - start) - 618 / 663) < 0.01
    # without a stored loss it is computed from the figure alone; uneven processes are listed one by one
    rows = [shared(1, [663.0]), {**shared(2, [320.0, 298.0]), "loss": None}]
    labels = [t.text for t in ET.fromstring(str(sharing_chart(rows))).iter("text") if t.get("class") == "label"]
    assert labels[1] == "320 + 298 = 618 TFLOP/s, −6.8 %"
    # a gain is a plus; CNN training in images/s is its own group
    rows = [shared(1, [8000.0], "shared_train", "fp32", 8000.0, "images/s"), shared(2, [4300.0, 3860.0], "shared_train", "fp32", 8000.0, "images/s")]
    labels = [t.text for t in ET.fromstring(str(sharing_chart(SHARED + rows))).iter("text") if t.get("class") == "label"]
    assert labels[-2:] == ["8000 images/s alone", "4300 + 3860 = 8160 images/s, +2.0 %"]
    assert sharing_chart(sweep_figures(3)) == "" and sharing_chart([]) == ""


def test_scaling_chart_has_the_ideal_line_and_the_efficiency():
    svg = scaling_chart(SCALED + sweep_figures(3), standalone=True)
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.fromstring(str(svg))
    series = root.findall(f".//{ns}g[@class='series']")
    assert len(series) == 1 and len(series[0].findall(f"{ns}circle")) == 2 and series[0].find(f"{ns}polyline") is not None
    ideal = series[0].find(f"{ns}line[@class='ideal']")
    assert ideal is not None and ideal.get("stroke-dasharray")
    # the ideal ends at 2 x 12000 = 24000, above the measured 21000 at the same x
    circles = series[0].findall(f"{ns}circle")
    assert ideal.get("x2") == circles[1].get("cx") and float(ideal.get("y2")) < float(circles[1].get("cy"))
    assert ideal.get("y1") == circles[0].get("cy")
    assert [t.text for t in root.iter(f"{ns}text") if t.get("class") == "efficiency"] == ["12000", "87.5 %"]
    # a second model is a panel of its own; the speed-up view draws N x 1.0 as the ideal
    rows = SCALED + [scaled(1, 900.0, 900.0, "scaling_large"), scaled(2, 1760.0, 900.0, "scaling_large")]
    root = ET.fromstring(str(scaling_chart(rows, speedup=True)))
    assert len(root.findall(".//line[@class='ideal']")) == 2
    assert [t.text for t in root.iter("text") if t.get("class") == "efficiency"] == ["1×", "87.5 %", "1×", "97.8 %"]
    # efficiency computed from the 1-GPU figure where the row has none
    root = ET.fromstring(str(scaling_chart([scaled(1, 12000.0), {**scaled(2, 21000.0), "efficiency": None, "speedup": None}])))
    assert "87.5 %" in [t.text for t in root.iter("text")]
    assert scaling_chart(sweep_figures(3)) == ""


def test_scaling_table_is_the_seeds_table():
    lines = scaling_table(SCALED + sweep_figures(3))
    assert [(l["gpus"], l["images_per_second"], l["speedup"], l["efficiency"]) for l in lines] == [
        (1, "12000 images/s", "1.00×", "100.0 %"), (2, "21000 images/s", "1.75×", "87.5 %")]
    assert lines[0]["epoch_time"] == "5.00 s" and lines[1]["epoch_time"] == "2.86 s"  # the mean of epoch_seconds
    assert lines[1]["final_loss"] == "0.04321" and lines[1]["accuracy"] == "98.1 %" and lines[1]["model"] == "CNN"
    assert scaling_table(sweep_figures(3)) == []


def test_telemetry_chart_small_multiples_downsampled():
    svg = telemetry_chart(telemetry_series())
    root = ET.fromstring(str(svg))
    paths = root.findall(".//path[@class='telemetry']")
    assert [p.get("data-column") for p in paths] == ["util_pct", "power_w", "sm_mhz", "temp_c"]
    for p in paths:  # 3000 samples: at most about 600 points a line
        assert len(re.findall(r"[ML]", p.get("d"))) <= 600
    util = paths[0].get("d")
    assert util.count("M") == 2  # NVML gave no utilisation for 10 s: a gap in the line
    assert [p.get("data-column") for p in ET.fromstring(str(telemetry_chart(telemetry_series(), memory=True))).findall(".//path")][-1] == "memory_used_mib"
    # a spike survives the downsampling
    points = [(i * 0.1, 0.0) for i in range(5000)]
    points[2345] = (234.5, 99.0)
    assert len(downsample(points, 600)) <= 600 and (234.5, 99.0) in downsample(points, 600)
    assert len(str(telemetry_chart(telemetry_series(12000), memory=True))) < 80_000  # 20 minutes at 10 Hz stays small
    assert telemetry_chart({"columns": COLUMNS, "samples": []}) == "" and telemetry_chart({}) == ""
    # a short series with None values is drawn as it is
    short = telemetry_chart(telemetry_series(5, columns=COLUMNS))
    assert ET.fromstring(str(short)).find(".//path") is not None


def test_new_charts_escape_a_malicious_stack_name():
    evil = {"framework": EVIL, "version": EVIL, "gpu": 'H200" onload="alert(1)'}
    rows = [shared(1, [663.0], **evil), shared(2, [309.0, 309.0], **evil), scaled(1, 12000.0, **evil), scaled(2, 21000.0, **evil)]
    for svg in (sharing_chart(rows), scaling_chart(rows), telemetry_chart(telemetry_series(**evil, cell=EVIL))):
        root = ET.fromstring(str(svg))
        assert "<script" not in str(svg) and "&lt;script&gt;" in str(svg)
        assert not [e for e in root.iter() if "onload" in e.attrib or e.tag.endswith("script")]
    assert all(EVIL in line["stack"] for line in scaling_table(rows))  # raw text: the template escapes it


# ---- HTML report ------------------------------------------------------------------------------------

SWEEP = {"id": 3, "name": "night", "kind": "sweep", "status": "done", "created_at": 1767225600}


def test_html_report_shows_the_charts_and_every_figure():
    rows = sweep_figures(3) + sweep_figures(3, version="2.10.0+cu130", scale=0.97, cell=20)
    rows.append(figure(framework=EVIL, gpu=EVIL, note=EVIL, version="1.0"))
    rows.append(figure("launch", "", 9.9, 0.2, unit="us", better="lower", throttled=True))
    html = render(SWEEP, [], bench_rows=rows)
    assert html.count("<svg") == 2 and html.count("</svg>") == 2
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch when viewing it
    table = html[html.index('<table id="bench"'):]
    assert table.count("<tr") == len(rows) + 1 and "781.2 TFLOP/s" in table and 'class="throttled"' in table
    assert "not part of this version" not in html
    for svg in re.findall(r"<svg.*?</svg>", html, re.DOTALL):
        ET.fromstring(svg)


def test_html_report_without_bench_figures_says_how_to_get_them():
    for bench_rows in (None, []):
        html = render(SWEEP, [], bench_rows=bench_rows)
        assert "no benchmark figures" in html and "--bench" in html and "<svg" not in html
    assert "not part of this version" not in render(SWEEP, [])


SECTIONS = ('id="sharing"', "Sharing one GPU", 'id="scaling"', "Scaling over GPUs", 'id="telemetry"', ">Telemetry<")


def test_html_report_with_sharing_scaling_and_telemetry():
    plain = sweep_figures(3)
    evil = shared(2, [300.0, 300.0], framework=EVIL)
    rows = plain + SHARED + SCALED + [evil]
    html = render(SWEEP, [], bench_rows=rows, telemetry=[telemetry_series(), telemetry_series(cell=4, gpu=EVIL)])
    for section in SECTIONS:
        assert section in html
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "http://" not in html and "https://" not in html
    svgs = re.findall(r"<svg.*?</svg>", html, re.DOTALL)
    assert len(svgs) == 5  # throughput, sharing, scaling, two telemetry
    for svg in svgs:
        ET.fromstring(svg)
    # the plain chart and table show only the plain figures
    table = html[html.index('<table id="bench"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr") == len(plain) + 1 and "GPU shared" not in table and "data-parallel" not in table
    assert ET.fromstring(svgs[0]).findall(".//g[@class='bar']").__len__() == len([r for r in plain if r["measurement"] == "matmul"])
    scaling = html[html.index('<table id="scaling-table"'):]
    scaling = scaling[:scaling.index("</table>")]
    assert scaling.count("<tr") == 3 and "87.5 %" in scaling and "1.75×" in scaling
    assert "−6.8 %" in html


def test_html_report_without_sharing_scaling_or_telemetry_has_none_of_their_sections():
    for bench_rows, telemetry in ((sweep_figures(3), None), (sweep_figures(3), []), (None, None)):
        html = render(SWEEP, [], bench_rows=bench_rows, telemetry=telemetry)
        for section in SECTIONS:
            assert section not in html
    # telemetry alone: its section, no plain table
    html = render(SWEEP, [], telemetry=[telemetry_series()])
    assert ">Telemetry<" in html and '<table id="bench"' not in html and "Sharing one GPU" not in html


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")), reason="no chromium on PATH")
def test_the_charts_draw_in_headless_chromium_without_javascript(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is part of the test extra")
    rows = sweep_figures(3) + sweep_figures(3, version="2.10.0+cu130", scale=0.97, cell=20)
    out = tmp_path / "report.html"
    out.write_text(render(SWEEP, [], bench_rows=rows), encoding="utf-8")
    requests = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or shutil.which("chromium-browser"), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"])
        page = browser.new_page(java_script_enabled=False)
        page.on("request", lambda request: requests.append(request.url))
        page.goto(out.as_uri())
        charts = page.locator("svg.chart")
        assert charts.count() == 2
        for i in range(2):
            box = charts.nth(i).bounding_box()
            assert box["width"] > 600 and box["height"] > 200
        assert page.locator("svg.chart g.bar").count() == 12 and page.locator("svg.chart g.series circle").count() == 2
        assert page.locator("table#bench tr").count() == len(rows) + 1
        browser.close()
    assert all(url.startswith("file://") for url in requests), requests


# ---- terminal ---------------------------------------------------------------------------------------

def test_terminal_table_at_80_and_200_columns():
    rows = sweep_figures(3, gpus=("NVIDIA H200", "NVIDIA A100-SXM4-80GB"))
    rows[4]["throttled"] = True
    rows[4]["clocks"]["after"]["throttle"] = ["sw_thermal"]
    rows[4]["condition"] = "thermal slowdown (software)"
    rows[5]["condition"] = "at power limit (700 W)"
    narrow, wide = render_text(bench_table(rows), 80), render_text(bench_table(rows), 200)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert max(len(line) for line in wide.splitlines()) <= 200
    for text in (narrow, wide):
        assert "781.2 TFLOP/s" in text and "79 %" in text and "kernel launch" in text and "A100" in text
        assert "thermal" in text and "slowdown" in text and "1 with a clock warning" in " ".join(text.split())
    for column in ("Python", "CC", "Type", "Of peak", "Conditions", "Note", "fp8 via torch._scaled_mm", "at power limit (700 W)"):
        assert column in wide
    # sorted: GPU, then matmul by data type before the other measurements
    cells = [[c.strip() for c in line.split("│")] for line in wide.splitlines() if "NVIDIA H200" in line]
    assert [(c[5], c[6]) for c in cells] == [("matmul", d) for d in ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")] + [
        ("device copy", ""), ("host→device", ""), ("device→host", ""), ("kernel launch", ""), ("CNN training", "fp32"), ("first step", "")]
    assert wide.index("A100") < wide.index("H200")
    # --wide keeps every column however narrow the terminal
    assert "Note" in render_text(bench_table(rows, wide=True), 80)
    assert "no benchmark figures" in render_text(bench_table([]), 80)
    assert "Processes" not in wide  # one process each: no column for it


def test_terminal_table_shows_processes_and_the_loss_or_efficiency():
    rows = sweep_figures(3) + SHARED + SCALED
    wide = render_text(bench_table(rows), 240)
    assert "Processes" in wide and "2 processes on one GPU: −6.8 % against alone" in wide
    assert "2 GPUs: speed-up 1.75×, efficiency 87.5 %" in wide
    lines = [line for line in wide.splitlines() if "GPU shared" in line]
    assert [re.search(r"│\s+(\d)\s+│", line).group(1) for line in lines] == ["1", "2", "4"]  # by process count
    narrow = render_text(bench_table(rows), 80)
    assert max(len(line) for line in narrow.splitlines()) <= 80
    assert "×4" in narrow and "Processes" in narrow  # merged into the measurement: 'matmul, GPU shared ×4'
    assert "Processes" not in render_text(bench_table(sweep_figures(3) + [SHARED[0], SCALED[0]]), 240)  # only where N > 1


def test_html_report_shows_the_profiling_windows_of_a_recorded_gpu_run():
    """The H200 run's store (docs/evidence/profile-frameworks-h200x2): torch's and JAX's windows, their step
    times, cost and top kernels, as stored; a kernel name that is markup stays text."""
    from pathlib import Path

    from gpucompat.store import Store

    db = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "profile-frameworks-h200x2" / "profile.db"
    store = Store(f"sqlite:///{db}", readonly=True)
    profiles = store.profiles(2)
    assert [(p["cell"], p["framework"]) for p in profiles] == [(3, "torch"), (4, "jax")]
    html = render(store.sweep(2), store.result_rows(2), store.bench_rows(2), profiles=profiles)
    section = html[html.index('id="profiles"'):]
    assert "gemm_fusion_dot" in section and "aten::addmm" in section
    assert "cost to the steps after it +0.6 %" in section  # torch, CUPTI torn down: result 4's overhead_outside
    assert "10 steps from step 50" in section and section.count('class="bench profile-kernels"') == 2
    evil = [{**profiles[0], "profile": {**profiles[0]["profile"], "top_kernels": [{"kernel": EVIL, "share": 1.0, "device_us": 5}]}}]
    html = render(store.sweep(2), [], [], profiles=evil)
    assert "<script" not in html.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    broken = [{**profiles[0], "profile": {"error": {"type": "RuntimeError", "message": "CUPTI_ERROR_NOT_INITIALIZED"}}}]
    assert "The profiler could not run: CUPTI_ERROR_NOT_INITIALIZED" in render(store.sweep(2), [], [], profiles=broken)
