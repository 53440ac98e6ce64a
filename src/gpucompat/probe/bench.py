"""The bench harness: a Bench records one figure per (measurement, dtype) with NVML's view before
and after it; the timing helpers every framework's bench uses (bench_torch, bench_jax, bench_cupy,
bench_cuda_runtime).
"""

import time

from .nvml import Nvml
from .records import LOG, _checkpoint, _error

# ---------------------------------------------------------------------------
# The bench rung: how fast a working stack runs (run only when asked, after compute passed).
# Every figure goes to record["facts"]["figures"] as
#   {"measurement": "matmul", "dtype": "bf16", "value": 781.2, "unit": "TFLOP/s", "better": "higher",
#    "spread": 3.1, "repetitions": 10, "samples": [...], "size": "8192x8192x8192", "note": "...",
#    "clocks": {"before": {...}, "after": {...}}}      (NVML snapshots, see Nvml.snapshot)
# or, where the framework or GPU cannot do it, {"measurement", "dtype", "unsupported": "why"},
# or, where it broke, {"measurement", "dtype", "error": {...}}. A figure that broke does not
# fail the stage: the verdict is about compatibility, the bench only adds figures.
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
    """This framework or GPU cannot make this figure: recorded with the reason, not as an error."""


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
        before = self.nvml.snapshot()
        began = time.perf_counter()
        try:
            samples, extra = body()
            low, median, high = _quartiles(samples)
            figure.update(value=median, unit=unit, better=better, spread=high - low if len(samples) > 1 else None,
                          repetitions=len(samples), samples=[round(s, 6) for s in samples], **extra)
        except Unsupported as exc:
            figure["unsupported"] = str(exc)
        except Exception as exc:  # the evidence is the point; the stage itself goes on
            figure["error"] = _error(exc)
        figure["duration_s"] = round(time.perf_counter() - began, 3)
        figure["clocks"] = {"before": before, "after": self.nvml.snapshot()}
        LOG.info("bench %s %s: %s in %.3f s", measurement, dtype or "-", "%.4g %s" % (figure["value"], unit) if "value" in figure
                 else figure.get("unsupported") or (figure.get("error") or {}).get("type"), figure["duration_s"])
        _checkpoint()
        return figure


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
        raise Unsupported("the training loop did not run")
    return [first["seconds"]], {"note": what}


def _raise(exc):
    def body():
        raise exc
    return body
