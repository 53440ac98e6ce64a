"""The bench harness: a Bench records one figure per (measurement, dtype) with NVML's view before
and after it and the other processes that computed on the GPU meanwhile; the timing helpers every
framework's bench uses (bench_torch, bench_jax, bench_cupy, bench_cuda_runtime).
"""

import time

from .gpustate import Reader, processes
from .nvml import Nvml
from .records import LOG, _checkpoint, _error

# ---------------------------------------------------------------------------
# The bench rung: how fast a working stack runs (run only when asked, after compute passed).
# Every figure goes to record["facts"]["figures"] as
#   {"measurement": "matmul", "dtype": "bf16", "value": 781.2, "unit": "TFLOP/s", "better": "higher",
#    "spread": 3.1, "repetitions": 10, "samples": [...], "size": "8192x8192x8192", "note": "...",
#    "clocks": {"before": {...}, "after": {...}},      (NVML snapshots, see Nvml.snapshot)
#    "contention": {"processes": [...], ...}}          (every process NVML saw computing in the window widened by
#                                                       a second each side, and those holding the GPU, see Contention)
# or, where the framework or GPU cannot do it, {"measurement", "dtype", "unsupported": "why",
# "unsupported_kind": "gpu" (the GPU lacks it) | "framework" (this framework has no such operation) |
# "environment" (a library or GPU count the job lacks) | "depends" (a figure it needed was not made)},
# or, where it broke, {"measurement", "dtype", "error": {...}, "memory": {"total_mib", "used_mib"}},
# or, where it was not tried, {"measurement", "dtype", "skipped": "why"}. A figure that broke does
# not fail the stage: the verdict is about compatibility, the bench only adds figures.
# facts["limits"]: the power limit and application clock as set, beside the card's defaults (Nvml.limits).
# ---------------------------------------------------------------------------

BENCH_DEFAULTS = {"measurements": ["matmul", "copy", "transfer", "launch", "train"],
                  "dtypes": ["fp64", "fp32", "tf32", "fp16", "bf16", "fp8"], "size": 8192, "repetitions": 10}
WARMUP_S = 0.3  # long enough for the clocks to rise from idle before the timed repetitions
COPY_BYTES = 1 << 30
TRANSFER_BYTES = 1 << 28
LAUNCHES = 200
CNN_BATCH, CNN_STEPS = 64, 50  # the cloud-Slurm seed's per-worker batch; steps per timed repetition
CNN_NOTE = "Conv2D(32, 3x3) -> Dense 128 -> Dense 10, SGD lr 0.2, batch 64 of 28x28 synthetic images (the cloud-Slurm seed's model)"


class Unsupported(Exception):
    """This framework or GPU cannot make this figure: recorded with the reason, not as an error.
    kind: "gpu" (the GPU lacks the data type), "framework" (no such operation in this framework),
    "environment" (the job lacks a library, GPUs or nodes), "depends" (a figure it needs was not made)."""

    def __init__(self, message, kind="framework"):
        Exception.__init__(self, message)
        self.kind = kind


def _quartiles(samples):
    ordered = sorted(samples)
    def at(q):
        position = q * (len(ordered) - 1)
        low = int(position)
        high = min(low + 1, len(ordered) - 1)
        return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
    return at(0.25), at(0.5), at(0.75)


class Bench:
    """Runs measurements and records their figures; one per (measurement, dtype)."""

    def __init__(self, facts, config):
        self.config = dict(BENCH_DEFAULTS, **(config or {}))
        self.facts = facts
        self.nvml = Nvml()
        facts.update(config=self.config, figures=[])
        if self.nvml.error:
            facts["nvml_error"] = self.nvml.error
        else:
            facts["limits"] = self.nvml.limits()

    def wants(self, measurement):
        return measurement in self.config["measurements"]

    def matmuls(self, body_for):
        """A matrix-product figure per data type the configuration asks for; body_for(dtype) makes each."""
        if self.wants("matmul"):
            for name in self.config["dtypes"]:
                self.measure("matmul", name, "TFLOP/s", body_for(name))

    def memory_and_launch(self, copy, transfer, launch):
        """The device copy, both pinned transfers and the launch latency, each where the configuration asks for it."""
        if self.wants("copy"):
            self.measure("copy", "", "GB/s", copy)
        if self.wants("transfer"):
            self.measure("h2d", "", "GB/s", transfer("h2d"))
            self.measure("d2h", "", "GB/s", transfer("d2h"))
        if self.wants("launch"):
            self.measure("launch", "", "us", launch, better="lower")

    def measure(self, measurement, dtype, unit, body, better="higher"):
        """body() -> (samples in `unit`, {"size": ..., "note": ...}); raises Unsupported where it cannot."""
        figure = {"measurement": measurement, "dtype": dtype}
        self.facts["figures"].append(figure)
        contention = self.nvml.contention
        if contention is not None:
            contention.begin(self._running())  # reads NVML only; a failing call is kept as its error code, never raised
        before = self.nvml.snapshot()
        began = time.perf_counter()
        try:
            samples, extra = body()
            low, median, high = _quartiles(samples)
            figure.update(value=median, unit=unit, better=better, spread=high - low if len(samples) > 1 else None,
                          repetitions=len(samples), samples=[round(s, 6) for s in samples], **extra)
        except Unsupported as exc:
            figure.update(unsupported=str(exc), unsupported_kind=exc.kind)
        except Exception as exc:  # the evidence is the point; the stage itself goes on
            figure["error"] = _error(exc)
            figure["memory"] = self.nvml.memory()  # an out-of-memory error is told apart from the others' share
        figure["duration_s"] = round(time.perf_counter() - began, 3)
        figure["clocks"] = {"before": before, "after": self.nvml.snapshot()}
        if contention is not None:
            try:
                figure["contention"] = contention.end(self._running(), settle="value" in figure)
            except Exception as exc:  # the figure stands without it
                figure["contention"] = {"processes": [], "samples": 0, "own_seen": None, "error": "%s: %s" % (type(exc).__name__, exc)}
        LOG.info("bench %s %s: %s in %.3f s", measurement, dtype or "-", "%.4g %s" % (figure["value"], unit) if "value" in figure
                 else figure.get("unsupported") or (figure.get("error") or {}).get("type"), figure["duration_s"])
        _checkpoint()
        return figure

    def skip(self, measurement, dtype, why, **extra):
        """A figure not tried (one before it failed): listed with why, never just absent."""
        figure = dict(measurement=measurement, dtype=dtype, skipped=why, **extra)
        self.facts["figures"].append(figure)
        return figure

    def _running(self):
        """{pid: MiB} of the compute processes on the GPU now (NVML's list); {} where NVML cannot say."""
        try:
            found = processes(Reader(self.nvml), set()) or []
        except Exception:  # the figure stands without it
            return {}
        return dict((p["pid"], p["used_mib"]) for p in found)


REPETITION_S = 0.05


def _batch(one_s):
    """How many runs of one_s seconds make one repetition of about REPETITION_S (1 to 50)."""
    return max(1, min(50, int(REPETITION_S / max(one_s, 1e-6))))


def _timed(run, sync, reps, warmup_s=WARMUP_S):
    """Seconds per repetition of run(), timed by the wall clock around a synchronising call."""
    began = time.perf_counter()
    run()
    sync()
    while time.perf_counter() - began < warmup_s:
        run()
        sync()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        sync()
        samples.append(time.perf_counter() - start)
    return samples


def _first_step(first, what):
    if "seconds" not in first:
        raise Unsupported("the training loop did not run", kind="depends")
    return [first["seconds"]], {"note": what}


def _raise(exc):
    def body():
        raise exc
    return body
