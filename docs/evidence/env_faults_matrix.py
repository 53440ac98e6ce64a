"""Environment faults × frameworks, as a site's admin meets them (issue 34, item 4): for each framework and
each cause, `gpucompat check FRAMEWORK --env current --json` in a shell with that fault, beside a plain
program written apart from gpucompat (the framework's own first GPU call) in the same shell. Run by
docs/evidence/run-gpu-env-faults.sh on the GPU machine; prints one JSON document.

A cause is a change to the job's environment only: a variable, a library path, a resource limit, another
process on the GPU. Nothing changes the card's settings.
"""

import glob
import json
import os
import subprocess
import sys
import time

PY = sys.executable
PLAIN = {  # each framework's own first GPU call, written apart from gpucompat
    "torch": "import torch; x = torch.randn(256, 256, device='cuda'); print('torch', float((x @ x).sum()))",
    "cupy": "import cupy; x = cupy.random.standard_normal((256, 256)); print('cupy', float((x @ x).sum()))",
    "jax": "import jax, jax.numpy as jnp; x = jnp.ones((256, 256)); print('jax', jax.devices()[0].platform, float((x @ x).sum()))",
    "cuda-runtime": ("import ctypes, glob, nvidia, os; lib = ctypes.CDLL(sorted(glob.glob(os.path.join(list(nvidia.__path__)[0], '*', 'lib', "
                     "'libcudart.so.*')))[-1]); n = ctypes.c_int(-1); print('cudaGetDeviceCount', lib.cudaGetDeviceCount(ctypes.byref(n)), n.value)"),
}


def stub_dir():
    """A directory whose libcuda.so.1 is a CUDA toolkit's stub: the real one where the machine has a toolkit,
    else the stand-in built from tests/cuda_stub/cuda_stub.c (cuInit answers CUDA_ERROR_STUB_LIBRARY as the real one does)."""
    found = sorted(glob.glob("/usr/local/cuda*/lib64/stubs/libcuda.so") + glob.glob("/usr/local/cuda*/targets/*/lib/stubs/libcuda.so")
                   + glob.glob(os.path.join(sys.prefix, "lib", "python3*", "*-packages", "nvidia", "*", "lib", "stubs", "libcuda.so")))
    where = "/tmp/module-cuda/lib64/stubs"
    os.makedirs(where, exist_ok=True)
    target = found[0] if found else os.path.abspath("build/env-faults/libcuda.so.1")
    link = os.path.join(where, "libcuda.so.1")
    if os.path.lexists(link):
        os.remove(link)
    os.symlink(target, link)
    return where, target


def holder():
    """Another process holding all but 1 GiB of the GPU's memory, as another job on a shared node does."""
    code = ("import torch, time; free, total = torch.cuda.mem_get_info(); x = torch.empty(free - (1 << 30), dtype=torch.uint8, device='cuda'); "
            "print('held', x.numel() >> 20, 'MiB', flush=True); time.sleep(600)")
    proc = subprocess.Popen([PY, "-c", code], stdout=subprocess.PIPE, text=True)
    proc.stdout.readline()
    return proc


def run(command, env, limit_kib=None):
    pre = (lambda: __import__("resource").setrlimit(__import__("resource").RLIMIT_AS, (limit_kib * 1024,) * 2)) if limit_kib else None
    began = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, preexec_fn=pre)
    return done, round(time.perf_counter() - began, 2)


def main():
    stubs, stub_target = stub_dir()
    compat = sorted(glob.glob("/usr/local/cuda*/compat/libcuda.so.*"))
    base = {k: v for k, v in os.environ.items()}
    causes = {
        "clean": ({}, None),
        "stub libcuda on LD_LIBRARY_PATH": ({"LD_LIBRARY_PATH": stubs + ":" + base.get("LD_LIBRARY_PATH", "")}, None),
        "ulimit -v 8 GiB": ({}, 8 << 20),
        "CUDA_VISIBLE_DEVICES=7 (no such GPU)": ({"CUDA_VISIBLE_DEVICES": "7"}, None),
        "CUDA_FORCE_PTX_JIT=1": ({"CUDA_FORCE_PTX_JIT": "1"}, None),
        "JAX_PLATFORMS=cpu": ({"JAX_PLATFORMS": "cpu"}, None),
    }
    if compat:
        causes["the image's compat libcuda on LD_LIBRARY_PATH"] = ({"LD_LIBRARY_PATH": os.path.dirname(compat[0])}, None)
    rows = []
    for cause, (extra, limit) in list(causes.items()) + [("another process holds the GPU's memory", ({}, None))]:
        held = holder() if cause.startswith("another process") else None
        try:
            for framework in ("torch", "cupy", "jax", "cuda-runtime"):
                env = {**base, **extra}
                check, seconds = run([PY, "-m", "gpucompat", "check", framework, "--env", "current", "--json"], env, limit)
                try:
                    data = json.loads(check.stdout)
                    cell = (data["valid"] + data["invalid"] + data["untested"])[0]
                except (ValueError, KeyError, IndexError):
                    cell = None
                plain, plain_s = run([PY, "-c", PLAIN[framework]], env, limit)
                last = (plain.stdout.strip().splitlines() or plain.stderr.strip().splitlines() or [""])[-1][:300]
                rows.append({"cause": cause, "framework": framework, "check_exit": check.returncode, "check_s": seconds,
                             "code": cell and cell.get("code"), "untested_cause": cell and cell.get("cause"),
                             "reason": cell and cell.get("reason"), "check_stdout_head": None if cell else (check.stdout + check.stderr)[-1500:],
                             "plain_exit": plain.returncode, "plain_s": plain_s, "plain_last_line": last})
                print(f"{cause:<44} {framework:<13} check exit {check.returncode} {rows[-1]['code']} {rows[-1]['untested_cause'] or ''} "
                      f"| plain exit {plain.returncode}: {last[:100]}", file=sys.stderr, flush=True)
        finally:
            if held:
                held.kill()
                held.wait()
    print(json.dumps({"stub": stub_target, "compat": compat, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
