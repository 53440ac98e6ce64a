"""Sharing one GPU: the same workload in N processes at once, each the probe started again with
--share-child (its side is main.share_child).
"""

import json
import os
import sys
import time

from .bench import Bench, Unsupported
from .nvml import Telemetry
from .records import LOG, probe_file

# ---------------------------------------------------------------------------
# Sharing one GPU (time-slicing): the same workload in N processes at once. Each process is this
# probe started again with --share-child; it imports the framework, builds its workload, warms
# up, says it is ready, waits for the word to go, then runs the workload back to back for
# SHARE_WINDOW_S seconds and reports how much work it did. N = 1 is the alone figure, timed the
# same way, so a loss is (alone - sum of the N) / alone. Figures: {"measurement": "matmul",
# "dtype": "bf16", "processes": N, "value": the sum, "per_process": [...], "loss": ..., ...}.
# ---------------------------------------------------------------------------

SHARE_WINDOW_S = 5.0
SHARE_WORKLOADS = (("matmul", "bf16"), ("matmul", "fp32"), ("train", "fp32"))


def share_figures(framework, bench, counts):
    """Run every shared workload alone and in N processes at once; one figure per (workload, N)."""
    import shutil
    import subprocess
    import tempfile

    mps_pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    bench.facts["mps"] = {"pipe_directory": mps_pipe, "control_daemon": os.path.exists(os.path.join(mps_pipe, "control"))}
    counts = sorted(set([1] + [n for n in counts if 1 <= n <= 16]))
    for measurement, dtype in SHARE_WORKLOADS:
        if not (bench.wants(measurement) and (measurement != "matmul" or dtype in bench.config["dtypes"])):
            continue
        alone = None
        for n in counts:
            work = tempfile.mkdtemp(prefix="gpucompat-share-")

            def body():
                spec = {"measurement": measurement, "dtype": dtype, "size": bench.config["size"], "barrier": work}
                LOG.info("sharing one GPU: %d processes of %s %s", n, measurement, dtype)
                children = [subprocess.Popen([sys.executable, probe_file(), "--framework", framework,
                                              "--result", os.path.join(work, "child-%d.json" % i), "--share-child", json.dumps(spec)],
                                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE) for i in range(n)]
                deadline = time.time() + 600
                while time.time() < deadline and sum(name.startswith("ready-") for name in os.listdir(work)) < n:
                    if any(child.poll() is not None for child in children):
                        break
                    time.sleep(0.05)
                with open(os.path.join(work, "go"), "w"):
                    pass
                errors = [child.communicate(timeout=600)[1].decode(errors="replace")[-2000:] for child in children]
                reports = []
                for i in range(n):
                    try:
                        with open(os.path.join(work, "child-%d.json" % i)) as handle:
                            reports.append(json.load(handle))
                    except (OSError, ValueError):
                        reports.append({"error": {"type": "NoReport", "message": errors[i] or "the process left no report"}})
                unsupported = next((r["unsupported"] for r in reports if "unsupported" in r), None)
                if unsupported:
                    raise Unsupported(unsupported)
                broken = next((r for r in reports if "value" not in r), None)
                if broken:
                    raise RuntimeError("a sharing process failed: %s" % (broken.get("error") or {}).get("message", "")[:500])
                values = [r["value"] for r in reports]
                total = sum(values)
                extra = {"processes": n, "per_process": [round(v, 3) for v in values], "unit_note": reports[0]["unit"],
                         "note": "%d processes at once on one GPU (time-slicing), each for %.0f s; value is their sum" % (n, SHARE_WINDOW_S)}
                if alone:
                    extra["loss"] = (alone - total) / alone
                return [total], extra
            figure = bench.measure("shared_" + measurement, dtype, "TFLOP/s" if measurement == "matmul" else "images/s", body)
            shutil.rmtree(work, ignore_errors=True)
            figure["processes"] = n
            if "value" not in figure:  # the larger counts are not tried, and said so
                for later in counts[counts.index(n) + 1:]:
                    bench.skip("shared_" + measurement, dtype, "not tried: the %d-process figure before it was not made" % n, processes=later)
                break
            if n == 1:
                alone = figure["value"]


def bench_rung(framework, facts, config, figures, scale=None):
    """The bench rung of a framework that can share a GPU: its own figures(bench), then N processes
    sharing the GPU, then scale(bench, counts) where the plan asks for scaling, all while the
    telemetry thread samples the GPU."""
    bench = Bench(facts, config)
    with Telemetry(bench.nvml, facts):
        figures(bench)
        share_figures(framework, bench, bench.config.get("share") or [])
        if scale is not None and bench.config.get("scale"):
            scale(bench, bench.config["scale"])
