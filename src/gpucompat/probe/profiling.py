"""Profiling windows: torch.profiler or jax.profiler around a few training steps, never the whole
run, with the step times around the window, a control run without it, the top kernels and the trace.
"""

import json
import os
import time

from .bench import _quartiles

PROFILE_TRACE_MAX = 100 << 20  # a trace larger than this (compressed) is not kept


def _window_steps(step, sync, start, count, enter, leave):
    """Step times of a run with a profiling window of `count` steps from step `start`, and of the
    same run without it just before (the control). What the window costs the steps outside it is
    the median of the steps after it (past the first 10, while the profiler's buffers are flushed)
    against the control's same steps, which removes what differs between steps of one run; drift
    between the two runs (clocks, heat) is not removed, so one reading is noisy."""
    total = start + count + max(200, count)

    def run(window):
        times = []
        for index in range(total):
            if window and index == start:
                enter()
            began = time.perf_counter()
            step()
            sync()
            times.append(time.perf_counter() - began)
            if window and index == start + count - 1:
                leave()
        return times

    control, timed = run(False), run(True)
    median = lambda samples: _quartiles(samples)[1] if samples else None  # noqa: E731
    after, control_after = timed[start + count + 10:], control[start + count + 10:]
    return {"start": start, "steps": count, "step_s_before": median(timed[max(0, min(5, start - 1)):start]),
            "step_s_inside": median(timed[start:start + count]), "step_s_just_after": median(timed[start + count:start + count + 10]),
            "step_s_after": median(after), "step_s_control": median(control_after),
            "overhead_outside": median(after) / median(control_after) - 1}


def _keep_trace(path):
    """The gzipped trace stays in the job directory unless it is larger than PROFILE_TRACE_MAX."""
    size = os.path.getsize(path)
    if size > PROFILE_TRACE_MAX:
        os.unlink(path)
        return None, size
    return path, size


def _top(durations):
    """The 10 largest of {name: [device µs, calls]}, each with its share of the whole."""
    total = sum(us for us, _ in durations.values()) or 1
    top = [{"kernel": name[:300], "device_us": round(us, 1), "calls": calls, "share": us / total}
           for name, (us, calls) in sorted(durations.items(), key=lambda item: item[1][0], reverse=True)[:10]]
    return top, round(total, 1)


def torch_profile_window(torch, step, start, count):
    """torch.profiler around `count` training steps from step `start`, never the whole run: the top
    kernels with their share of device time, the trace (gzip) in the job directory, and what the
    window cost the steps outside it."""
    import gzip
    import shutil

    from torch.profiler import ProfilerActivity, profile

    # Kineto leaves CUPTI attached after the profiler exits unless TEARDOWN_CUPTI=1, and every later
    # kernel launch pays for it (pytorch/pytorch#144455). torch keeps it attached because CUDA graphs
    # crashed when CUPTI was initialised again; this window has no CUDA graphs, so it is torn down
    # here unless the user chose otherwise.
    os.environ.setdefault("TEARDOWN_CUPTI", "1")
    window = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA])
    record = _window_steps(step, torch.cuda.synchronize, start, count, window.__enter__, lambda: window.__exit__(None, None, None))
    record["cupti_teardown"] = os.environ["TEARDOWN_CUPTI"]

    def device_us(event):
        return getattr(event, "self_device_time_total", None) or getattr(event, "self_cuda_time_total", 0) or 0

    record["top_kernels"], record["device_us_total"] = _top(
        {event.key: (device_us(event), event.count) for event in window.key_averages() if device_us(event) > 0})
    trace = os.path.abspath("profile-trace.json")
    window.export_chrome_trace(trace)
    with open(trace, "rb") as source, gzip.open(trace + ".gz", "wb") as target:
        shutil.copyfileobj(source, target)
    os.unlink(trace)
    record["trace"], record["trace_bytes"] = _keep_trace(trace + ".gz")
    return record


def jax_profile_window(jax, step, sync, start, count):
    """jax.profiler around `count` training steps from step `start`: its Perfetto trace (gzipped
    Chrome-trace JSON, kept in the job directory) and the top device kernels read from it."""
    import shutil
    import tempfile

    logs = tempfile.mkdtemp(prefix="gpucompat-jax-profile-")
    try:
        record = _window_steps(step, sync, start, count, lambda: jax.profiler.start_trace(logs, create_perfetto_trace=True),
                               jax.profiler.stop_trace)
        found = [os.path.join(d, f) for d, _, files in os.walk(logs) for f in files if f == "perfetto_trace.json.gz"]
        if not found:
            raise RuntimeError("jax.profiler wrote no perfetto_trace.json.gz")
        record["top_kernels"], record["device_us_total"] = _top(perfetto_device_time(found[0]))
        trace = os.path.abspath("profile-trace.json.gz")
        shutil.move(found[0], trace)
        record["trace"], record["trace_bytes"] = _keep_trace(trace)
    finally:
        shutil.rmtree(logs, ignore_errors=True)
    return record


def perfetto_device_time(path):
    """{kernel: [device µs, calls]} from a Chrome-trace JSON (gzipped) as jax.profiler writes it:
    complete events ("ph": "X") in the processes named /device:GPU:N, which hold the streams."""
    import gzip

    with gzip.open(path, "rt") as handle:
        events = json.load(handle)
    events = events.get("traceEvents", []) if isinstance(events, dict) else events
    devices = {e.get("pid") for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
               and str((e.get("args") or {}).get("name", "")).startswith("/device:GPU")}
    durations = {}
    for event in events:
        if event.get("ph") == "X" and event.get("pid") in devices and event.get("dur"):
            entry = durations.setdefault(event.get("name", "?"), [0.0, 0])
            entry[0] += float(event["dur"])
            entry[1] += 1
    return durations
