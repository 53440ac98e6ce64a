"""`results --format prometheus`: a sweep as a node exporter textfile-collector file, read back with
prometheus_client's parser: every sample parses, label values round-trip (a GPU name with quotes,
backslash and newline included), PASS is 1 and a failure 0 while untested and pending cells have no
sample, bench figures and share of peak are there, no sample carries a timestamp, and the file ends
with a newline. The stored H200 bench sweep is exported the way the CLI does it."""

import copy
import random
import re
import shutil

import pytest

from conftest import REPO, run_cli
from gpucompat.analysis import classify, untested
from gpucompat.bench import present
from gpucompat.discover.local import NO_GPU
from gpucompat.model import UNTESTED_CAUSES, Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.report.prometheus import FAMILIES, to_prometheus
from gpucompat.report.rows import display_row

parser = pytest.importorskip("prometheus_client.parser", reason="prometheus-client is a test dependency")

H200 = "NVIDIA H200"
EVIL = 'NVIDIA "H200" \\ lab\nrack 7'  # quotes, a backslash and a newline in a GPU name a cluster reported
SWEEP = {"id": 7, "name": "quarterly h200", "kind": "sweep", "status": "done", "created_at": 1767225600.25, "finished_at": 1767229200.5}
CELL_KEYS = ("framework", "version", "variant", "python", "env", "gpu", "cc", "driver")
NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
SAMPLE = re.compile(rf"^[a-zA-Z_:][a-zA-Z0-9_:]*(?:\{{{LABEL}(?:,{LABEL})*\}})? (?:[-+]?[0-9.e+-]+|NaN|[+-]Inf)$")


def stored(cell, framework="torch", version="2.11.0+cu130", code="PASS", stage="bench", gpu=H200, observed=True, **changes) -> dict:
    """A row as Store.result_rows returns it."""
    row = {"cell_id": cell, "sweep_id": 7, "created_at": SWEEP["created_at"], "framework": framework, "version": version,
           "variant": "cu130", "python": "3.12", "env": "uv", "cuda_runtime": "13.0", "cudnn": "9.13", "gpu": gpu, "cc": "9.0",
           "driver": "580.159.04", "code": code, "stage": stage, "summary": "", "warnings": [], "evidence": {}, "duration_s": 41.0,
           "observed": observed if code else None, "probe_version": None, "probe_cuda_runtime": None, "probe_cudnn": None,
           "probe_python": None, "predicted": "uncertain", "predicted_code": None, "predicted_reasons": []}
    row.update(changes)
    return row


def figure(cell, measurement="matmul", dtype="bf16", value=678.6, unit="TFLOP/s", spread=3.2, gpu=H200, throttle=(), **changes) -> dict:
    """A row as Store.bench_rows returns it."""
    clocks = {"before": {"sm_mhz": 1980, "throttle": []}, "after": {"sm_mhz": 1755, "throttle": list(throttle)}}
    row = {"cell": cell, "sweep": 7, "framework": "torch", "version": "2.11.0+cu130", "variant": "cu130", "python": "3.12", "env": "uv",
           "gpu": gpu, "cc": "9.0", "driver": "580.159.04", "probe_version": None, "probe_python": None, "measurement": measurement,
           "dtype": dtype, "value": value, "unit": unit, "better": "higher", "spread": spread, "repetitions": 10,
           "data": {"clocks": clocks, "note": ""}}
    row.update(changes)
    return row


def sweep_rows() -> list[dict]:
    return [
        stored(1),  # torch 2.11 on the H200: passes
        stored(2, version="2.4.1+cu118", code="ARCH_UNSUPPORTED", stage="compute", variant="cu118"),
        stored(3, framework="jax", version="0.4.30", code="UNTESTED", stage="install", evidence={"cause": "network"}),
        stored(4, framework="cupy", version="13.3.0", code=None, stage=None),  # still pending
        stored(5, framework="tensorflow", version="2.15.0", code="DRIVER_TOO_OLD", stage="device", observed=False),  # predicted, not run
        stored(6, gpu=EVIL),  # the same torch, on a GPU class whose name needs escaping
    ]


def bench_rows() -> list[dict]:
    return [
        figure(1),
        figure(1, dtype="fp16", value=647.3, spread=None),
        figure(1, measurement="copy", dtype="", value=4260.0, unit="GB/s", spread=12.5, throttle=("sw_power_cap", "hw_thermal")),
        figure(1, measurement="launch", dtype="", value=21.7, unit="us", spread=1.1),
        figure(6, gpu=EVIL, value=670.0),
    ]


def export(rows=None, figures=None, sweep=None) -> str:
    return to_prometheus(sweep or SWEEP, [display_row(r, printable=False) for r in (sweep_rows() if rows is None else rows)],
                         [present(r) for r in (bench_rows() if figures is None else figures)])


def families(text: str) -> dict:
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def samples(text: str, name: str) -> list:
    return [s for f in parser.text_string_to_metric_families(text) for s in f.samples if s.name == name]


def cell(sample) -> tuple:
    return tuple(sample.labels[k] for k in CELL_KEYS)


def test_every_line_is_well_formed_and_every_sample_parses():
    text = export()
    assert text.endswith("\n") and not text.endswith("\n\n"), "the textfile collector needs a final newline"
    lines = text.splitlines()
    parsed = families(text)
    assert set(parsed) == set(FAMILIES)
    declared = 0
    for line in lines:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            declared += 1
            assert NAME.match(line.split(" ")[2])
            continue
        assert SAMPLE.match(line), f"not a valid sample line: {line!r}"
    assert declared == 2 * len(FAMILIES)
    for name, family in parsed.items():
        assert name.startswith("gpucompat_") and NAME.match(name)
        assert family.type == "gauge" and family.documentation == FAMILIES[name]
        for sample in family.samples:
            assert sample.timestamp is None, "the textfile collector skips a file with client-side timestamps"
            assert all(NAME.match(k) and not k.startswith("__") for k in sample.labels)
    assert sum(len(f.samples) for f in parsed.values()) == len(lines) - declared


def test_label_values_round_trip_through_escaping():
    text = export()
    assert 'gpu="NVIDIA \\"H200\\" \\\\ lab\\nrack 7"' in text
    assert "rack 7" not in [line for line in text.splitlines() if not line.startswith("#")][0]
    up = {cell(s): s.value for s in samples(text, "gpucompat_cell_up")}
    assert up[("torch", "2.11.0+cu130", "cu130", "3.12", "uv", EVIL, "9.0", "580.159.04")] == 1.0
    values = {s.labels["gpu"]: s.value for s in samples(text, "gpucompat_bench_value") if s.labels["dtype"] == "bf16"}
    assert values == {H200: 678.6, EVIL: 670.0}


def test_pass_is_up_a_failure_is_down_untested_and_pending_are_no_fact():
    text = export()
    up = {(s.labels["framework"], s.labels["version"], s.labels["gpu"]): s.value for s in samples(text, "gpucompat_cell_up")}
    assert up == {("torch", "2.11.0+cu130", H200): 1.0, ("torch", "2.4.1+cu118", H200): 0.0, ("torch", "2.11.0+cu130", EVIL): 1.0}
    codes = {(s.labels["framework"], s.labels["version"]): (s.labels["code"], s.labels["stage"], s.labels["observed"])
             for s in samples(text, "gpucompat_cell_code") if s.labels["gpu"] == H200}
    assert codes == {("torch", "2.11.0+cu130"): ("PASS", "bench", "true"),
                     ("torch", "2.4.1+cu118"): ("ARCH_UNSUPPORTED", "compute", "true"),
                     ("tensorflow", "2.15.0"): ("DRIVER_TOO_OLD", "device", "false")}  # predicted: a code, but not down
    assert all(s.value == 1.0 for s in samples(text, "gpucompat_cell_code"))
    untested = samples(text, "gpucompat_cell_untested")
    assert [(s.labels["framework"], s.labels["cause"], s.value) for s in untested] == [("jax", "network", 1.0)]
    everywhere = [s for f in parser.text_string_to_metric_families(text) for s in f.samples]
    assert not any(s.labels.get("framework") == "cupy" for s in everywhere), "a pending cell is in no family"
    assert not any(s.labels.get("framework") == "jax" for s in everywhere if s.name != "gpucompat_cell_untested")


def test_bench_figures_spread_share_of_peak_and_throttling():
    text = export()
    mine = {"framework": "torch", "version": "2.11.0+cu130", "variant": "cu130", "python": "3.12", "env": "uv", "gpu": H200,
            "cc": "9.0", "driver": "580.159.04", "measurement": "matmul", "dtype": "bf16", "unit": "TFLOP/s", "processes": "1"}
    value = [s for s in samples(text, "gpucompat_bench_value") if s.labels == mine]
    assert [s.value for s in value] == [678.6]
    share = {(s.labels["gpu"], s.labels["measurement"], s.labels["dtype"]): s.value for s in samples(text, "gpucompat_bench_share_of_peak")}
    assert share[(H200, "matmul", "bf16")] == pytest.approx(678.6 / 989.5)  # the H200's dense bf16 peak
    assert share[(H200, "matmul", "fp16")] == pytest.approx(647.3 / 989.5)
    assert share[(H200, "copy", "")] == pytest.approx(4260.0 / 4800.0)  # HBM3e bandwidth
    assert (H200, "launch", "") not in share, "no peak, no share"
    assert all(gpu != EVIL for gpu, _, _ in share), "an unknown GPU has no datasheet peak"
    spread = {(s.labels["measurement"], s.labels["dtype"]) for s in samples(text, "gpucompat_bench_spread") if s.labels["gpu"] == H200}
    assert spread == {("matmul", "bf16"), ("copy", ""), ("launch", "")}, "a figure without an IQR has no spread sample"
    throttled = {(s.labels["gpu"], s.labels["measurement"], s.labels["dtype"]): s.value for s in samples(text, "gpucompat_bench_throttled")}
    assert throttled[(H200, "copy", "")] == 1.0 and throttled[(H200, "matmul", "bf16")] == 0.0
    assert len(throttled) == len(bench_rows())


def test_sweep_info_and_timestamps():
    text = export()
    info = samples(text, "gpucompat_sweep_info")
    assert [(s.labels, s.value) for s in info] == [({"sweep": "7", "name": "quarterly h200", "status": "done"}, 1.0)]
    assert [s.value for s in samples(text, "gpucompat_sweep_finished_timestamp_seconds")] == [1767229200.5]
    assert [s.value for s in samples(text, "gpucompat_sweep_created_timestamp_seconds")] == [1767225600.25]
    running = export(sweep={**SWEEP, "status": "running", "finished_at": None, "name": 'night "run"\n2'})
    assert samples(running, "gpucompat_sweep_finished_timestamp_seconds") == []
    assert "# TYPE gpucompat_sweep_finished_timestamp_seconds gauge" in running
    assert samples(running, "gpucompat_sweep_info")[0].labels["name"] == 'night "run"\n2'


def test_families_without_samples_keep_help_and_type():
    text = export(rows=[], figures=[])
    for name in FAMILIES:
        assert f"# HELP {name} " in text and f"# TYPE {name} gauge" in text
    assert [n for n, f in families(text).items() if f.samples] == ["gpucompat_sweep_info", "gpucompat_sweep_created_timestamp_seconds",
                                                                    "gpucompat_sweep_finished_timestamp_seconds", "gpucompat_sweep_untested_cells"]
    # the count of cells that could not be tested: 0 for every cause gpucompat knows, so an alert on one has a series
    assert {s.labels["cause"]: s.value for s in samples(text, "gpucompat_sweep_untested_cells")} == dict.fromkeys(UNTESTED_CAUSES, 0.0)
    assert text.endswith("\n")


def test_output_is_deterministic_whatever_the_row_order():
    first = export()
    for seed in range(5):
        rows, figures = sweep_rows(), bench_rows()
        random.Random(seed).shuffle(rows)
        random.Random(seed).shuffle(figures)
        assert export(rows, figures) == first
    for name in ("gpucompat_cell_up", "gpucompat_cell_code", "gpucompat_bench_value"):
        order = [tuple(s.labels.values()) for s in samples(first, name)]
        assert order == sorted(order), f"{name}: samples sorted by their label values (before escaping)"


def test_one_series_per_cell_the_later_cell_wins():
    """Two rows with the same labels (a resumed cell stored twice) would be a duplicate series, and the
    collector would skip the whole file; the later cell is kept."""
    rows = [stored(1, code="TIMEOUT", stage="compute"), stored(9)]
    figures = [figure(1, value=12.0), figure(9, value=678.6)]
    text = export(rows, figures)
    assert [s.value for s in samples(text, "gpucompat_cell_up")] == [1.0]
    assert [s.labels["code"] for s in samples(text, "gpucompat_cell_code")] == ["PASS"]
    assert [s.value for s in samples(text, "gpucompat_bench_value")] == [678.6]
    swapped = export(list(reversed(rows)), list(reversed(figures)))
    assert swapped == text
    series = [line.rsplit(" ", 1)[0] for line in text.splitlines() if not line.startswith("#")]
    assert len(series) == len(set(series))


def test_odd_values_still_parse():
    figures = [figure(1, value=float("inf"), spread=float("nan")), figure(1, dtype="fp8", value=1e-05, spread=0.0)]
    text = export([stored(1)], figures)
    values = {s.labels["dtype"]: s.value for s in samples(text, "gpucompat_bench_value")}
    assert values["bf16"] == float("inf") and values["fp8"] == 1e-05
    spread = {s.labels["dtype"]: s.value for s in samples(text, "gpucompat_bench_spread")}
    assert spread["bf16"] != spread["bf16"] and spread["fp8"] == 0.0  # NaN, and a zero IQR is a sample
    lone = copy.deepcopy(stored(1, gpu="NVIDIA \udcff H200"))  # a name read with surrogateescape: not UTF-8
    text = export([lone], [])
    text.encode("utf-8")
    assert [s.labels["gpu"] for s in samples(text, "gpucompat_cell_up")] == ["NVIDIA ? H200"]


def test_the_stored_h200_bench_sweep_as_the_cli_exports_it(tmp_path):
    from gpucompat.store import Store

    db = tmp_path / "bench.db"
    shutil.copyfile(REPO / "docs" / "evidence" / "bench-h200" / "bench.db", db)
    store = Store(f"sqlite:///{db}")
    sweep = store.latest_sweep_id()
    result_rows, stored_figures = store.result_rows(sweep), store.bench_rows(sweep)
    text = to_prometheus(store.sweep(sweep), [display_row(r, printable=False) for r in result_rows], [present(r) for r in stored_figures])
    assert text.endswith("\n")
    for line in text.splitlines():
        assert line.startswith("# ") or SAMPLE.match(line), line
    up = samples(text, "gpucompat_cell_up")
    assert len(up) == len(result_rows) and all(s.value == 1.0 for s in up)
    assert len(samples(text, "gpucompat_bench_value")) == len(stored_figures)
    share = {(s.labels["framework"], s.labels["dtype"]): s.value for s in samples(text, "gpucompat_bench_share_of_peak")
             if s.labels["measurement"] == "matmul"}
    assert 0.6 < share[("torch", "bf16")] < 0.75  # 676 of the H200's 989.5 dense bf16 TFLOP/s
    assert {s.labels["gpu"] for s in up} == {H200}


# --- a sweep on a machine without a GPU (issue 34 item 2) ---
# Real SQLite stores written through Store, as a sweep writes them (analysis.classify for the resolve failures,
# analysis.untested for the jobs that found no GPU), exported by the real command.

NO_WHEELS = ("error: No solution found when resolving dependencies\n  cause: Because torch==2.4.1 has no wheels with a matching "
             "Python ABI tag (e.g., `cp313`) and you require torch==2.4.1, we can conclude that your requirements are unsatisfiable.")
A40 = Target("NVIDIA A40", "8.6", "550.54.15", count=2)
H100 = Target("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", count=1)


def _predict(resolved, target):
    return {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}


def _cuda(version: str) -> ResolvedStack:
    return ResolvedStack(Stack("cuda-runtime", version, "default", "3.11", "uv"), True, cuda_runtime=version)


def _exported(tmp_path, targets, resolved, outcome) -> str:
    from gpucompat.store import Store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    sweep = store.create_sweep("quick", "sweep", "", None, {}, targets, resolved, _predict)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, classify(cell.resolved, None) if not cell.resolved.ok else outcome(cell), Observation({}))
    store.finish_sweep(sweep, "done")
    store.close()
    text = run_cli("results", "--db", url, "--format", "prometheus", check=0).stdout
    for line in text.splitlines():
        assert line.startswith("# ") or SAMPLE.match(line), line
    families(text)  # parses
    return text


def test_cells_where_no_gpu_was_visible_are_labelled_with_no_gpu(tmp_path):
    """The README's first command on a machine without a GPU: 1 invalid, 4 could not test, all on the stand-in target
    "no GPU visible", which is no GPU class: its cells have empty gpu, cc and driver labels in every family."""
    not_installed = ResolvedStack(Stack("torch", "installed", "installed", "current", "current"), False,
                                  error="no torch in /usr/bin/python3", cause="not-installed")
    torch_241 = ResolvedStack(Stack("torch", "2.4.1", "default", "3.13", "uv"), False, error=NO_WHEELS)
    text = _exported(tmp_path, [NO_GPU], [_cuda("11.8"), _cuda("12.4"), _cuda("13.0"), torch_241, not_installed],
                     lambda cell: untested("device", "no-gpu", "no kernel module, no libcuda.so.1", {}))
    assert "no GPU visible" not in text
    every = [s for f in parser.text_string_to_metric_families(text) for s in f.samples if "framework" in s.labels]
    assert len(every) == 6 and all((s.labels["gpu"], s.labels["cc"], s.labels["driver"]) == ("", "", "") for s in every)
    untested_cells = sorted((s.labels["framework"], s.labels["version"], s.labels["cause"]) for s in samples(text, "gpucompat_cell_untested"))
    assert untested_cells == [("cuda-runtime", "11.8", "no-gpu"), ("cuda-runtime", "12.4", "no-gpu"), ("cuda-runtime", "13.0", "no-gpu"),
                              ("torch", "not installed", "not-installed")]
    # the invalid verdict reached before any GPU is still down, on no GPU
    assert [(s.labels["version"], s.value) for s in samples(text, "gpucompat_cell_up")] == [("2.4.1", 0.0)]
    assert [(s.labels["code"], s.labels["stage"]) for s in samples(text, "gpucompat_cell_code")] == [("ENV_UNRESOLVABLE", "resolve")]
    counts = {s.labels["cause"]: s.value for s in samples(text, "gpucompat_sweep_untested_cells")}
    assert counts == {**dict.fromkeys(UNTESTED_CAUSES, 0.0), "no-gpu": 3.0, "not-installed": 1.0}


def test_a_declared_class_whose_jobs_found_no_gpu_keeps_its_name_and_an_old_no_device_is_no_gpu(tmp_path):
    """A class the plan declared keeps its name (its jobs were sent to it, and found no GPU: what an admin looks at); on
    the stand-in, a NO_DEVICE stored before the cause no-gpu existed says nothing of the stack; an unknown cause (a
    bundle's) is counted as it is, escaped."""
    odd = 'odd "cause"\\n'

    def outcome(cell):
        if cell.target.name == A40.name:
            return untested("device", "no-gpu", "CUDA_VISIBLE_DEVICES is empty in the job", {})
        if cell.target.name == NO_GPU.name:
            return Outcome("NO_DEVICE", "device", "CUDA sees no GPU in this process")
        if cell.resolved.stack.version == "12.4":
            return Outcome("UNTESTED", "install", "a bundle's cell", {"cause": odd})
        return Outcome("PASS", "compute", "ran")

    text = _exported(tmp_path, [H100, A40, NO_GPU], [_cuda("12.4"), _cuda("13.0")], outcome)
    cells = {(s.labels["version"], s.labels["gpu"]): s.labels["cause"] for s in samples(text, "gpucompat_cell_untested")}
    assert cells == {("12.4", A40.name): "no-gpu", ("13.0", A40.name): "no-gpu", ("12.4", ""): "no-gpu", ("13.0", ""): "no-gpu",
                     ("12.4", H100.name): odd}
    assert [(s.labels["version"], s.labels["gpu"], s.value) for s in samples(text, "gpucompat_cell_up")] == [("13.0", H100.name, 1.0)]
    assert "NO_DEVICE" not in text and "no GPU visible" not in text
    counts = {s.labels["cause"]: s.value for s in samples(text, "gpucompat_sweep_untested_cells")}
    assert counts["no-gpu"] == 4.0 and counts[odd] == 1.0 and sum(counts.values()) == 5.0
