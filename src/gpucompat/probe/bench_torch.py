"""The bench of a torch stack: matrix products per dtype, copies, transfers, launch latency, the
seed's CNN training loop (with its profiling window), and the workload torch shares a GPU with.
"""

import time

from .bench import CNN_BATCH, CNN_NOTE, CNN_STEPS, COPY_BYTES, LAUNCHES, TRANSFER_BYTES, Unsupported, _batch, _first_step, _timed
from .profiling import torch_profile_window
from .records import _checkpoint, _error


def bench_torch(torch, bench, import_seconds):
    reps, n = bench.config["repetitions"], bench.config["size"]
    cuda = torch.device("cuda")

    def events(run, count=reps):
        """Seconds per run(), CUDA events around each repetition (the device's own clock); a repetition
        is a batch of back-to-back runs lasting about REPETITION_S, as a steady workload is."""
        one = _timed(run, torch.cuda.synchronize, 1)[0]
        batch = _batch(one)
        samples = []
        for _ in range(count):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(batch):
                run()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) / 1000.0 / batch)
        return samples

    dtypes = {"fp64": torch.float64, "fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}

    def matmul(name):
        def body():
            size = n // 2 if name == "fp64" else n  # fp64 runs at 1/2 to 1/64 of fp32: a smaller product keeps it short
            tf32 = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = name == "tf32"
            try:
                if name == "fp8":
                    major, minor = torch.cuda.get_device_capability()
                    if (major, minor) < (8, 9):
                        raise Unsupported("this GPU (compute capability %d.%d) has no fp8 tensor cores: fp8 matrix products need 8.9+"
                                          % (major, minor), kind="gpu")
                    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
                        raise Unsupported("this torch has no torch._scaled_mm or float8_e4m3fn for fp8 matrix products")
                    a = torch.randn(size, size, device=cuda).to(torch.float8_e4m3fn)
                    b = torch.randn(size, size, device=cuda).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
                    scale = torch.tensor(1.0, device=cuda)
                    run = lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)  # noqa: E731
                    note = "torch._scaled_mm, e4m3 inputs, bf16 output"
                else:
                    a, b = torch.randn(size, size, device=cuda, dtype=dtypes[name]), torch.randn(size, size, device=cuda, dtype=dtypes[name])
                    out = torch.empty(size, size, device=cuda, dtype=dtypes[name])
                    run = lambda: torch.matmul(a, b, out=out)  # noqa: E731
                    note = "torch.matmul, allow_tf32=%s" % (name == "tf32")
                seconds = events(run)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = tf32
                torch.cuda.empty_cache()
            return [2.0 * size ** 3 / s / 1e12 for s in seconds], {"size": "%dx%dx%d" % (size, size, size), "note": note}
        return body

    bench.matmuls(matmul)

    def copy():
        src = torch.empty(COPY_BYTES // 4, dtype=torch.float32, device=cuda)
        dst = torch.empty_like(src)
        seconds = events(lambda: dst.copy_(src))
        return [2.0 * COPY_BYTES / s / 1e9 for s in seconds], {"size": "%d MiB" % (COPY_BYTES >> 20), "note": "dst.copy_(src): bytes read + written"}

    def transfer(direction):
        def body():
            host = torch.empty(TRANSFER_BYTES, dtype=torch.uint8, pin_memory=True)
            device = torch.empty(TRANSFER_BYTES, dtype=torch.uint8, device=cuda)
            run = (lambda: device.copy_(host, non_blocking=True)) if direction == "h2d" else (lambda: host.copy_(device, non_blocking=True))
            return [TRANSFER_BYTES / s / 1e9 for s in events(run)], {"size": "%d MiB" % (TRANSFER_BYTES >> 20), "note": "pinned host memory"}
        return body

    def launch():
        x = torch.zeros(1, device=cuda)
        seconds = _timed(lambda: x.add_(1.0), torch.cuda.synchronize, LAUNCHES)
        return [s * 1e6 for s in seconds], {"note": "x.add_(1) on one element, then torch.cuda.synchronize(): launch and round trip"}

    bench.memory_and_launch(copy, transfer, launch)
    if bench.wants("train"):
        first = {}

        def train():
            began = time.perf_counter()
            nn = torch.nn
            model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(),
                                  nn.Linear(128, 10)).to(cuda)
            optimizer = torch.optim.SGD(model.parameters(), lr=0.2)
            loss_fn = nn.CrossEntropyLoss()
            x = torch.rand(CNN_BATCH, 1, 28, 28, device=cuda)
            y = torch.randint(0, 10, (CNN_BATCH,), device=cuda)

            def step():
                optimizer.zero_grad(set_to_none=True)
                loss_fn(model(x), y).backward()
                optimizer.step()

            step()
            torch.cuda.synchronize()
            first["seconds"] = import_seconds + time.perf_counter() - began
            first["step"] = step

            def steps():
                for _ in range(CNN_STEPS):
                    step()
            return [CNN_BATCH * CNN_STEPS / s for s in events(steps, max(3, reps // 2))], {"note": CNN_NOTE}

        bench.measure("train", "fp32", "images/s", train)
        window = bench.config.get("profile")
        if window and "step" in first:
            try:
                bench.facts["profile"] = torch_profile_window(torch, first["step"], int(window["start"]), int(window["steps"]))
            except Exception as exc:  # a profiler that cannot run is a fact, not a failure
                bench.facts["profile"] = {"error": _error(exc)}
            _checkpoint()
        bench.measure("first_step", "", "s", lambda: _first_step(first, "import torch, build the model, one training step"), better="lower")


def torch_workload(torch, measurement, dtype, size):
    """(run, sync, work per run, unit) for one process's share of the GPU."""
    cuda = torch.device("cuda")
    if measurement == "matmul":
        torch.backends.cuda.matmul.allow_tf32 = False
        kind = {"bf16": torch.bfloat16, "fp32": torch.float32}[dtype]
        a, b = torch.randn(size, size, device=cuda, dtype=kind), torch.randn(size, size, device=cuda, dtype=kind)
        out = torch.empty(size, size, device=cuda, dtype=kind)
        return (lambda: torch.matmul(a, b, out=out)), torch.cuda.synchronize, 2.0 * size ** 3 / 1e12, "TFLOP/s"
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Flatten(), nn.Linear(32 * 26 * 26, 128), nn.ReLU(), nn.Linear(128, 10)).to(cuda)
    optimizer, loss_fn = torch.optim.SGD(model.parameters(), lr=0.2), nn.CrossEntropyLoss()
    x, y = torch.rand(CNN_BATCH, 1, 28, 28, device=cuda), torch.randint(0, 10, (CNN_BATCH,), device=cuda)

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(x), y).backward()
        optimizer.step()
    return step, torch.cuda.synchronize, float(CNN_BATCH), "images/s"
