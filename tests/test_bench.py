"""The bench rung without a GPU: the probe's stage and figures (a stand-in adapter inside the real
probe), the plan's switch, the job scripts, the verdict, the store and the CLI. The real adapters
ran on an H100 and an H200: docs/evidence/bench-h100/ and docs/evidence/bench-h200/."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from conftest import run_cli, stand_in_framework
from gpucompat.analysis import classify
from gpucompat.bench import figures, present, throttled
from gpucompat.errors import UserError
from gpucompat.model import BenchSpec, Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.plan import parse_plan
from gpucompat.probe import bench as probe_bench
from gpucompat.probe import main as probe_main
from gpucompat.probe import nvml as probe_nvml
from gpucompat.probe import profiling, records
from gpucompat.store import Store



class Stand_in:
    """An adapter whose every stage passes and whose bench makes figures on the CPU."""

    def import_(self, facts):
        facts["version"] = "1.0"
        return "handle"

    def device(self, handle, facts):
        facts["devices"] = [{"name": "NVIDIA H200", "cc": "9.0"}]

    def compute(self, handle, facts):
        facts["op"] = "nothing"

    def bench(self, handle, facts):
        bench = probe_bench.Bench(facts, self.bench_config)
        bench.measure("matmul", "bf16", "TFLOP/s", lambda: ([780.0, 790.0, 785.0, 800.0], {"size": "8192x8192x8192"}))
        bench.measure("matmul", "fp8", "TFLOP/s", probe_bench._raise(probe_bench.Unsupported("no fp8 here")))
        bench.measure("copy", "", "GB/s", lambda: ([4200.0 + i for i in range(10)], {}))
        bench.measure("launch", "", "us", lambda: 1 / 0, better="lower")


@pytest.fixture
def stand_in(monkeypatch):
    monkeypatch.setitem(probe_main.ADAPTERS, "stand-in", Stand_in)


def probe_result(tmp_path, config=None):
    path = tmp_path / "result.json"
    probe_main.run("stand-in", str(path), records.STAGES + ("bench",), {}, config)
    return json.loads(path.read_text())


def test_the_bench_stage_records_figures_the_unsupported_and_the_broken(tmp_path, stand_in):
    result = probe_result(tmp_path, {"repetitions": 4})
    bench = result["stages"]["bench"]
    assert bench["ok"] is True and result["finished"]
    made = {(f["measurement"], f["dtype"]): f for f in bench["facts"]["figures"]}
    bf16 = made[("matmul", "bf16")]
    assert (bf16["value"], bf16["repetitions"], bf16["unit"], bf16["better"]) == (787.5, 4, "TFLOP/s", "higher")
    assert bf16["spread"] == pytest.approx(792.5 - 783.75)  # the interquartile range (linear interpolation)
    assert made[("matmul", "fp8")]["unsupported"] == "no fp8 here"
    assert made[("launch", "")]["error"]["type"] == "ZeroDivisionError"
    assert set(bf16["clocks"]) == {"before", "after"}  # NVML's view, or why there is none (no driver here)
    assert bench["facts"]["config"]["repetitions"] == 4 and bench["facts"]["config"]["size"] == 8192  # defaults fill the rest


def test_a_broken_figure_or_a_bench_that_ran_out_of_time_never_fails_the_cell(tmp_path, stand_in):
    result = probe_result(tmp_path)
    resolved = ResolvedStack(Stack("torch", "installed", "installed", "current", "current"), ok=True)
    outcome = classify(resolved, Observation(facts=result, returncode=0))
    assert (outcome.code, outcome.stage) == ("PASS", "bench") and "2 bench figures" in outcome.summary
    result["finished"], result["current_stage"] = False, "bench"
    killed = classify(resolved, Observation(facts=result, returncode=None, timed_out_stage="bench"))
    assert killed.code == "PASS" and any("ran past its timeout" in w for w in killed.warnings)
    result["stages"]["bench"] = {"ok": False, "error": {"type": "RuntimeError", "message": "CUDA out of memory"}}
    result["finished"] = True
    broken = classify(resolved, Observation(facts=result, returncode=0))
    assert broken.code == "PASS" and any("out of memory" in w for w in broken.warnings)


def test_nvml_absent_is_said_not_raised(monkeypatch):
    monkeypatch.setattr(probe_nvml.ctypes, "CDLL", lambda name: (_ for _ in ()).throw(OSError(f"{name}: cannot open")))
    nvml = probe_nvml.Nvml()
    assert nvml.snapshot() == {"error": "libnvidia-ml.so.1: cannot open"}
    # the card's own power cap under a large product is its normal ceiling, not throttling; a cap set lower is
    assert not throttled({"before": {"throttle": ["gpu_idle"]}, "after": {"throttle": ["sw_power_cap"]}})
    assert throttled({"after": {"throttle": ["sw_power_cap"]}}, {"enforced_power_limit_w": 400.0, "default_power_limit_w": 700.0})
    assert throttled({"before": {"throttle": []}, "after": {"throttle": ["hw_thermal"]}})
    assert not throttled({"before": {"throttle": ["gpu_idle", "applications_clocks"]}, "after": {"error": "x"}},
                         {"applications_sm_mhz": 1755, "default_applications_sm_mhz": 1755})


def test_the_probe_takes_the_bench_from_its_command_line(tmp_path, stand_in):
    path = tmp_path / "r.json"
    assert probe_main.main(["--framework", "stand-in", "--result", str(path), "--bench", '{"size": 1024}']) == 0
    data = json.loads(path.read_text())
    assert list(data["stages"]) == ["import", "device", "compute", "bench"]
    assert data["stages"]["bench"]["facts"]["config"]["size"] == 1024
    assert probe_main.main(["--framework", "stand-in", "--result", str(path)]) == 0
    assert "bench" not in json.loads(path.read_text())["stages"]  # off unless asked


PLAN = '[[stacks]]\nframework = "cuda-runtime"\nversions = ["12.4"]\n'


def test_the_plan_switches_the_bench_on_and_checks_its_table():
    assert parse_plan(PLAN).bench is None
    assert parse_plan("bench = true\n" + PLAN).bench == BenchSpec()  # a top-level key: before the first table
    spec = parse_plan(PLAN + '[bench]\nmeasurements = ["matmul", "copy"]\ndtypes = ["bf16"]\nsize = 4096\nrepetitions = 5\ntimeout = "2m"\n')
    assert spec.bench == BenchSpec(("matmul", "copy"), ("bf16",), 4096, 5) and spec.timeouts.bench == 120
    for bad, sentence in (('[bench]\nmeasurements = ["speed"]\n', "measurements must be a list of some of"),
                          ("[bench]\nsize = 10\n", "size must be a whole number from 256"),
                          ("[bench]\nwarmup = 3\n", "warmup"),
                          ('[bench.x]\n', "x"),
                          ('[timeouts]\nbench = "1m"\n[bench]\ntimeout = "2m"\n', "given twice")):
        with pytest.raises(UserError, match=sentence.replace("[", r"\[")):
            parse_plan(PLAN + bad)
    with pytest.raises(UserError, match="bench must be true, false, or a"):
        parse_plan('bench = "yes"\n' + PLAN)


def test_every_job_script_passes_the_bench_quoted(tmp_path, monkeypatch):
    stand_in_framework(tmp_path, monkeypatch, "torch")  # found here, so its cell gets a job script
    plan = tmp_path / "plan.toml"
    plan.write_text('executor = "slurm"\n[[targets]]\nname = "H100"\ncc = "9.0"\n[[stacks]]\nframework = "torch"\nenv = "current"\n'
                    '[bench]\ndtypes = ["bf16"]\ntimeout = "7m"\n')
    run_cli("sweep", str(plan), "--dry-run", "--out", str(tmp_path / "out"), "--db", f"sqlite:///{tmp_path / 'd.db'}", check=0)
    script = next((tmp_path / "out").rglob("run.sh")).read_text()
    assert "--stage-timeouts import=300,device=120,compute=300,bench=420" in script
    assert """--bench '{"measurements":["matmul","copy","transfer","launch","train"],"dtypes":["bf16"],"size":8192,"repetitions":10}'""" in script


# the probe's per-process record of a GPU to itself: without one, nobody can say whether another process computed,
# and --fail-on-slowdown does not count the figure (issue 34 item 6)
ALONE = {"processes": [{"pid": 4242, "name": "python3", "own": True, "samples": 4, "sm_pct_mean": 99.0, "sm_pct_max": 99,
                        "mem_pct_mean": 30.0, "mem_pct_max": 30, "used_mib": 1698}], "samples": 4, "own_seen": True, "error": None}


def _bench_sweep(store, bf16: float, launch_us: float) -> int:
    """A stored sweep of one torch cell on an H200 whose probe made two figures."""
    stack = Stack("torch", "2.11.0", "cu130", "3.12", "uv")
    sweep = store.create_sweep("bench", "sweep", "", None, {}, [Target("NVIDIA H200", "9.0", "580.159.04", count=1)],
                               [ResolvedStack(stack, True, cuda_runtime="13.0")],
                               lambda r, t: {"verdict": "pass", "code": None, "stage": None, "warnings": [], "reasons": []})
    facts = {"stages": {"bench": {"ok": True, "facts": {"figures": [
        {"measurement": "matmul", "dtype": "bf16", "value": bf16, "unit": "TFLOP/s", "better": "higher", "spread": 2.0,
         "repetitions": 10, "clocks": {"before": {"throttle": []}, "after": {"throttle": ["sw_power_cap"]}}, "contention": ALONE},
        {"measurement": "launch", "dtype": "", "value": launch_us, "unit": "us", "better": "lower", "spread": 0.2, "repetitions": 200,
         "contention": ALONE},
        {"measurement": "matmul", "dtype": "fp8", "unsupported": "no"},
    ]}}}}
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome("PASS", "bench", "ran"), Observation(facts=facts))
    return sweep


def test_figures_are_stored_beside_the_verdict_with_their_share_of_peak(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'b.db'}")
    sweep = _bench_sweep(store, 781.0, 15.0)
    rows = [present(r) for r in store.bench_rows(sweep)]
    assert [(r["measurement"], r["dtype"]) for r in rows] == [("matmul", "bf16"), ("launch", "")]
    bf16 = rows[0]
    assert bf16["peak"] == 989.5 and bf16["share"] == pytest.approx(781 / 989.5) and bf16["throttled"] is False
    assert bf16["condition"] == "at power limit" and bf16["contended"] is False
    assert rows[1]["peak"] is None and rows[1]["better"] == "lower"
    assert figures({"stages": {"bench": {"facts": {"figures": [{"measurement": "copy", "value": float("nan")}]}}}}) == []


def test_results_bench_and_diff_fail_on_slowdown_through_the_cli(tmp_path):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    store = Store(url)
    _bench_sweep(store, 781.0, 15.0)
    _bench_sweep(store, 600.0, 15.1)  # bf16 23 % slower; launch within noise
    data = json.loads(run_cli("results", "--bench", "--format", "json", "--db", url, check=0).stdout)
    assert {(r["measurement"], r["dtype"], r["value"]) for r in data} == {("matmul", "bf16", 600.0), ("launch", "", 15.1), ("matmul", "fp8", None)}
    assert next(r for r in data if r["value"] is None)["missing_reason"] == "no"  # listed with its reason, never just absent
    assert "matmul" in run_cli("results", "--bench", "--format", "csv", "--db", url, check=0).stdout.splitlines()[1]
    table = run_cli("results", "--bench", "--db", url, check=0, env={"COLUMNS": "160"}).stdout
    assert "TFLOP/s" in table and "61 %" in table  # 600 of 989.5
    assert "table, csv or json" in run_cli("results", "--bench", "--format", "junit", "--db", url, check=2).stderr
    diff = json.loads(run_cli("diff", "latest~1", "latest", "--json", "--db", url, check=0).stdout)
    assert [c["key"]["measurement"] for c in diff["performance"]["slower"]] == ["matmul"]
    run_cli("diff", "latest~1", "latest", "--db", url, "--fail-on-slowdown", check=1)
    assert "slower" in run_cli("diff", "latest~1", "latest", "--db", url, check=0, env={"COLUMNS": "160"}).stdout
    report = tmp_path / "r.html"
    run_cli("report", "-o", str(report), "--db", url, check=0)
    assert "<svg" in report.read_text()


def test_a_store_of_the_previous_schema_gains_the_bench_table(tmp_path):
    old = Path(__file__).resolve().parent.parent / "docs" / "evidence" / "verdicts-h100" / "verdicts.db"
    copy = tmp_path / "v3.db"
    copy.write_bytes(old.read_bytes())
    assert Store(f"sqlite:///{copy}", readonly=True).bench_rows(None) == []  # read through an upgraded copy in memory
    assert Store(f"sqlite:///{copy}").bench_rows(None) == []  # a writer migrates it


def test_the_profiling_window_wraps_only_its_steps_and_keeps_a_bounded_trace(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch", reason="the profiler window needs torch (a CPU build is enough here)")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)  # no GPU here: the steps run on the CPU
    monkeypatch.setenv("TEARDOWN_CUPTI", "unset below")  # so that the test's end restores its absence
    monkeypatch.delenv("TEARDOWN_CUPTI")
    model = torch.nn.Linear(64, 64)
    calls = []

    def step():
        calls.append(1)
        model(torch.rand(32, 64)).sum().backward()

    window = profiling.torch_profile_window(torch, step, start=10, count=3)
    assert len(calls) == 2 * (10 + 3 + 200)  # a control run, then the window's steps and the steps around it, never more
    assert (window["start"], window["steps"]) == (10, 3)
    assert window["trace"] and Path(window["trace"]).name == "profile-trace.json.gz" and Path(window["trace"]).exists()
    assert 0 < window["trace_bytes"] <= profiling.PROFILE_TRACE_MAX
    assert window["step_s_before"] > 0 and window["step_s_after"] > 0 and window["step_s_control"] > 0
    assert window["overhead_outside"] == pytest.approx(window["step_s_after"] / window["step_s_control"] - 1)
    assert window["top_kernels"] == [] or abs(sum(k["share"] for k in window["top_kernels"]) - 1) < 0.5
    assert window["cupti_teardown"] == "1"  # CUPTI is let go after the window (pytorch/pytorch#144455)
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")  # unless the user chose otherwise
    early = profiling.torch_profile_window(torch, step, start=2, count=1)
    assert early["cupti_teardown"] == "0" and early["step_s_before"] > 0  # a window from step 2 still has a step before it


def test_the_plan_reads_sharing_scaling_and_profiling():
    spec = parse_plan(PLAN + "[bench]\nshare = [4, 1, 2]\nscale = [1, 2]\nprofile = {start = 20, steps = 5}\n")
    assert (spec.bench.share, spec.bench.scale, spec.bench.profile) == ((1, 2, 4), (1, 2), (20, 5))
    assert spec.bench.probe_config()["profile"] == {"start": 20, "steps": 5}
    for bad in ("share = [0]", "scale = [1, 64]", "profile = {start = 1}", "profile = {start = 1, steps = 0}"):
        with pytest.raises(UserError, match=r"\[bench\] (share|scale|profile)"):
            parse_plan(PLAN + f"[bench]\n{bad}\n")


def test_the_job_logs_with_pid_thread_and_time_into_its_result(tmp_path, stand_in):
    result = probe_result(tmp_path)
    log = result["log"]
    assert {"t", "pid", "thread", "host", "level", "message"} <= set(log[0])
    assert log[0]["pid"] == os.getpid() and log[0]["thread"] == "MainThread"
    messages = [r["message"] for r in log]
    assert "stage import started" in messages and any(m.startswith("bench matmul bf16: 787.5 TFLOP/s") for m in messages)
    assert any(m.startswith("stage bench passed after") for m in messages)


def test_the_top_device_kernels_of_a_recorded_jax_profiler_trace():
    """The Perfetto trace jax.profiler wrote on an H200 (docs/evidence/profile-frameworks-h200x2, sweep 2,
    cell 4): only the /device:GPU processes count, and the sum is what that run stored."""
    trace = Path(__file__).resolve().parent / "data" / "jax-profile-trace-h200.json.gz"
    durations = profiling.perfetto_device_time(str(trace))
    top, total = profiling._top(durations)
    assert total == 979.7  # device_us_total of result 3 in profile-windows.json
    assert top[0]["kernel"] == "gemm_fusion_dot" and 0.1 < top[0]["share"] < 0.2
    assert not any(name.startswith("$") for name in durations)  # the host's Python frames are left out
    assert all(calls >= 1 for _, calls in durations.values()) and len(top) == 10
