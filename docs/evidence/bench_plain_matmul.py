"""A plain bf16 matrix product in torch, written apart from gpucompat (it imports nothing of it): the
comparison figure for `gpucompat check torch --bench`'s bf16 matmul, and the second process that
computes beside it. Used by run-gpu-bench-conditions.sh.

    python3 bench_plain_matmul.py measure [N]            -> one JSON object: median TFLOP/s of 10 timed batches
    python3 bench_plain_matmul.py load READY_FILE [N]    -> bf16 products back to back until killed;
                                                            READY_FILE is written once they run
"""

import json
import sys
import time

import torch


def operands(n):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    return a, b, torch.empty(n, n, device="cuda", dtype=torch.bfloat16)


def measure(n=8192, repetitions=10, batch=20):
    """As the probe times it: 0.3 s of warm-up, then CUDA events around each batch of back-to-back products."""
    a, b, out = operands(n)
    began = time.perf_counter()
    while time.perf_counter() - began < 0.3:
        torch.matmul(a, b, out=out)
        torch.cuda.synchronize()
    seconds = []
    for _ in range(repetitions):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            torch.matmul(a, b, out=out)
        end.record()
        end.synchronize()
        seconds.append(start.elapsed_time(end) / 1000.0 / batch)
    tflops = sorted(2.0 * n ** 3 / s / 1e12 for s in seconds)
    return {"what": "torch.matmul bf16 %dx%dx%d, plain loop" % (n, n, n), "torch": torch.__version__, "gpu": torch.cuda.get_device_name(0),
            "median_tflops": tflops[len(tflops) // 2], "min_tflops": tflops[0], "max_tflops": tflops[-1], "repetitions": repetitions}


def load(ready, n=8192):
    a, b, out = operands(n)
    torch.matmul(a, b, out=out)
    torch.cuda.synchronize()
    with open(ready, "w") as handle:
        handle.write("computing\n")
    while True:
        for _ in range(20):
            torch.matmul(a, b, out=out)
        torch.cuda.synchronize()


if __name__ == "__main__":
    if sys.argv[1] == "measure":
        print(json.dumps(measure(int(sys.argv[2]) if len(sys.argv) > 2 else 8192)))
    else:
        load(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 8192)
