"""The probe's command line: run the stages of one framework's adapter in order, each in its own try
block, rewriting result.json before and after every stage; or, with --share-child, be one of the N
processes that share the GPU.
"""

import argparse
import importlib
import json
import logging
import os
import signal
import time
import warnings

from .bench import Unsupported
from .clean_env import supervise
from .cuda_start import Starter, env_libraries, limits
from .gpustate import Watch
from .ladder import RungFailed, StageFailed
from .records import _HOOKS, LOG, PROBE_VERSION, STAGES, RecordLog, _error, loaded_libraries, system_facts, write
from .sharing import SHARE_WINDOW_S

# framework -> "module:class", imported only for the framework a job tests (a job never needs the other four)
ADAPTERS = {"torch": "adapter_torch:Torch", "tensorflow": "adapter_tensorflow:TensorFlow", "jax": "adapter_jax:Jax",
            "cupy": "adapter_cupy:CuPy", "cuda-runtime": "adapter_cuda_runtime:CudaRuntime"}


def new_adapter(framework):
    found = ADAPTERS[framework]
    if isinstance(found, str):
        module, name = found.split(":")
        found = getattr(importlib.import_module("." + module, __package__), name)
    return found()


def share_child(framework, spec, result_path):
    """One of N processes sharing the GPU (--share-child): ready, wait, run, report."""
    adapter = new_adapter(framework)
    report = {"pid": os.getpid(), "started_at": time.time()}
    try:
        handle = adapter.import_({})
        adapter.device(handle, {})
        run, sync, work, unit = adapter.workload(handle, spec["measurement"], spec["dtype"], spec["size"])
        began = time.perf_counter()
        while time.perf_counter() - began < 1.0:  # warm-up: kernels chosen, clocks up
            run()
            sync()
        with open(os.path.join(spec["barrier"], "ready-%d" % os.getpid()), "w"):
            pass
        go = os.path.join(spec["barrier"], "go")
        deadline = time.time() + 300
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.005)
        runs, began = 0, time.perf_counter()
        while time.perf_counter() - began < SHARE_WINDOW_S:
            for _ in range(4):
                run()
            sync()
            runs += 4
        elapsed = time.perf_counter() - began
        report.update(value=work * runs / elapsed, unit=unit, runs=runs, seconds=elapsed)
    except Unsupported as exc:
        report["unsupported"] = str(exc)
    except Exception as exc:
        report["error"] = _error(exc)
    write(result_path, report)
    return 0 if "value" in report else 1


def run(framework, result_path, stages=STAGES, stage_timeouts=None, bench_config=None):
    """stage_timeouts: {stage: seconds}. A batch job has no parent watching it, so the probe
    arms SIGALRM itself; its default action ends the process even inside a hung C call, and
    result.json already names the stage that was running. bench_config: the bench stage's
    measurements, dtypes, size and repetitions (BENCH_DEFAULTS fills what it leaves out)."""
    stage_timeouts = stage_timeouts or {}
    adapter = new_adapter(framework)
    adapter.bench_config, adapter.import_seconds = bench_config, 0.0
    result = {
        "probe_version": PROBE_VERSION,
        "framework": framework,
        "started_at": time.time(),
        "current_stage": "system",
        "stage_started_at": time.time(),
        "stages": {},
        "loaded_libraries": [],
        "cuda_start": None,
        "finished": False,
        "log": [],
    }
    handler = RecordLog(result["log"])
    LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)

    def save():  # every write also says what is mapped now, so a crash leaves the last view
        result["loaded_libraries"] = loaded_libraries()
        write(result_path, result)

    _HOOKS["checkpoint"] = save
    watch = starter = None
    try:
        save()
        # cuInit without the framework, beside its import: may CUDA start here at all? GPUCOMPAT_CUDA_START=0
        # leaves it out: benchmarks/check_latency.py measures what it costs.
        if "device" in stages and os.environ.get("GPUCOMPAT_CUDA_START") != "0":
            starter = Starter(result).begin()
        # NVML starts beside the framework's import; its first snapshot precedes the device stage.
        # GPUCOMPAT_GPU_STATE=0 leaves it out: benchmarks/check_latency.py measures what it costs.
        if "device" in stages and os.environ.get("GPUCOMPAT_GPU_STATE") != "0":
            result["gpu_state"] = {}
            watch = Watch(result["gpu_state"]).begin()
        result["system"] = system_facts()
        handle = None
        for stage in stages:
            if stage == "device" and watch is not None:  # the GPU as it was before this job asked it for anything
                watch.ready()
            if stage == "device" and starter is not None:
                starter.join(stage_timeouts.get("device", 120))
            result["current_stage"] = stage
            result["stage_started_at"] = time.time()
            record = {"ok": False, "running": True, "facts": {}}
            result["stages"][stage] = record
            save()
            began = time.perf_counter()
            if stage in stage_timeouts and hasattr(signal, "SIGALRM"):
                signal.signal(signal.SIGALRM, signal.SIG_DFL)
                signal.alarm(max(1, int(stage_timeouts[stage])))
            LOG.info("stage %s started", stage)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    if stage == "import":
                        handle = adapter.import_(record["facts"])
                    else:
                        getattr(adapter, stage)(handle, record["facts"])
                    record["ok"] = True
                except RungFailed as exc:
                    record.update(exc.outcome)
                except StageFailed as exc:
                    record["reason"] = str(exc)
                except BaseException as exc:  # noqa: B902 - the evidence is the point
                    record["error"] = _error(exc)
                    if isinstance(exc, KeyboardInterrupt):
                        raise
            if hasattr(signal, "SIGALRM"):
                signal.alarm(0)
            del record["running"]
            record["duration_s"] = round(time.perf_counter() - began, 4)
            LOG.info("stage %s %s after %.3f s", stage, "passed" if record["ok"] else "failed", record["duration_s"])
            if stage == "import":  # the bench's time to the first training step starts at the import
                adapter.import_seconds = record["duration_s"]
            if caught:
                record["warnings"] = [str(w.message)[:2000] for w in caught][:20]
            if not record["ok"]:  # what the classification weighs before it blames the stack (cuda_start.py)
                result["diagnosis"] = {"env_libraries": env_libraries(), "limits": limits()}
            save()
            if not record["ok"]:
                break
        result["current_stage"] = "done"
        result["finished"] = True
        result["finished_at"] = time.time()
        save()
    finally:
        if watch is not None:  # after the last stage, and after a failure or a timeout's KeyboardInterrupt too
            watch.end()
            save()
        _HOOKS["checkpoint"] = None
        LOG.removeHandler(handler)
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description="gpucompat probe")
    parser.add_argument("--framework", required=True, choices=sorted(ADAPTERS))
    parser.add_argument("--result", required=True, help="path of the JSON result, rewritten after every stage")
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--stage-timeouts", default="", help="e.g. import=300,device=120,compute=300 (seconds)")
    parser.add_argument("--bench", default=None, help="run the bench stage after compute; JSON: "
                        "{\"measurements\": [...], \"dtypes\": [...], \"size\": 8192, \"repetitions\": 10, \"share\": [1, 2, 4]}")
    parser.add_argument("--share-child", default=None, help=argparse.SUPPRESS)  # one of N processes sharing the GPU
    parser.add_argument("--clean-run", action="store_true", help=argparse.SUPPRESS)  # clean_env's re-run: no recheck of its own
    args = parser.parse_args(argv)
    if args.share_child:
        return share_child(args.framework, json.loads(args.share_child), args.result)
    stages = tuple(s for s in args.stages.split(",") if s)
    timeouts = dict((k, float(v)) for k, v in (item.split("=", 1) for item in args.stage_timeouts.split(",") if item))
    bench_config = json.loads(args.bench) if args.bench else None
    if bench_config is not None and "bench" not in stages:
        stages += ("bench",)

    def stages_run():
        result = run(args.framework, args.result, stages, timeouts, bench_config)
        last = list(result["stages"].values())[-1] if result["stages"] else {}
        return 0 if last.get("ok") else 1

    if args.clean_run or not hasattr(os, "fork") or os.environ.get("GPUCOMPAT_CLEAN_RERUN") == "0":
        return stages_run()
    return supervise(args.framework, args.result, stages, timeouts, stages_run)
