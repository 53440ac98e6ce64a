"""Issue 39 item 1 on the GPU machine: faults of the job's environment that no rule of gpucompat names, each
as `gpucompat check FRAMEWORK --env current --json` in a shell carrying it, beside a plain program written
apart from gpucompat (the framework's own first GPU call) run in the same shell with the fault and without it.
Then a passing check with the clean re-run on and off (what a passing cell pays), and a check while another
process holds the GPU's memory. Run by docs/evidence/run-gpu-clean-rerun.sh; prints one JSON document.

The faults change the job's environment only (a variable, a module path); nothing changes the card's settings.
"""

import json
import os
import subprocess
import sys
import tempfile
import time

PY = sys.executable
PLAIN = {  # each framework's own first GPU call, written apart from gpucompat
    "torch": "import torch; x = torch.randn(256, 256, device='cuda'); print('torch', float((x @ x).sum()))",
    "cupy": "import cupy; x = cupy.random.standard_normal((256, 256)); y = cupy.sin(x) * x; print('cupy', float((x @ y).sum()))",
    "jax": "import jax, jax.numpy as jnp; x = jnp.ones((256, 256)); print('jax', jax.devices()[0].platform, float((x @ x).sum()))",
}
SHADOW = tempfile.mkdtemp(prefix="old-module-")  # a module system's leftover numpy, first on PYTHONPATH
os.makedirs(os.path.join(SHADOW, "numpy"))
with open(os.path.join(SHADOW, "numpy", "__init__.py"), "w") as handle:
    handle.write("raise ImportError('this numpy was built for Python 2.7 (an old site module)')\n")
FAULTS = [  # (framework, the variables a user's shell carries, why it breaks the framework)
    ("torch", {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:maybe"}, "a caching-allocator setting torch refuses"),
    ("jax", {"XLA_FLAGS": "--xla_gpu_no_such_flag=true"}, "an XLA flag this XLA does not know"),
    ("cupy", {"CUPY_CACHE_DIR": "/proc/gpucompat-no-kernel-cache"}, "a kernel cache CuPy cannot write"),
    ("cupy", {"PYTHONPATH": SHADOW}, "an old module's numpy first on PYTHONPATH"),
]


def run(command, env, timeout=600):
    began = time.monotonic()
    try:
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
        code, out, err = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired:
        code, out, err = "timeout", "", ""
    return {"exit": code, "seconds": round(time.monotonic() - began, 2), "stdout_tail": out[-600:], "stderr_tail": err[-600:]}


def check(framework, env):
    done = run(["gpucompat", "check", framework, "--env", "current", "--json"], env)
    try:
        row = json.loads(done["stdout_tail"] if len(done["stdout_tail"]) < 600 else done.pop("stdout_tail") or "")
    except ValueError:
        row = None
    return done, row


def check_rows(framework, env):
    began = time.monotonic()
    proc = subprocess.run(["gpucompat", "check", framework, "--env", "current", "--json"], env=env, capture_output=True, text=True, timeout=900)
    found = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    rows = [r for key in ("valid", "invalid", "untested") for r in found.get(key) or []]
    keep = ("framework", "code", "cause", "stage", "reason", "warnings")
    return {"exit": proc.returncode, "seconds": round(time.monotonic() - began, 2),
            "rows": [{k: r.get(k) for k in keep} for r in rows], "stderr_tail": proc.stderr[-400:]}


def main():
    base = dict(os.environ)
    out = {"faults": [], "passing": [], "busy": None}

    def save():  # after each step: a run cut short keeps what it had
        with open(sys.argv[1], "w") as handle:
            json.dump(out, handle, indent=1)

    for framework, fault, why in FAULTS:
        env = {**base, **fault}
        entry = {"framework": framework, "fault": fault, "why": why,
                 "plain_with_fault": run([PY, "-c", PLAIN[framework]], env, 300),
                 "plain_without": run([PY, "-c", PLAIN[framework]], base, 300),
                 "check": check_rows(framework, env)}
        out["faults"].append(entry)
        save()
        print(framework, fault, entry["check"]["rows"][:1], file=sys.stderr, flush=True)
    for framework in ("torch", "jax", "cupy"):  # a passing cell pays nothing for the re-run: on and off, two each
        times = {"on": [], "off": []}
        for _ in range(2):
            for mode in ("off", "on"):
                env = {**base, **({"GPUCOMPAT_CLEAN_RERUN": "0"} if mode == "off" else {})}
                done = check_rows(framework, env)
                times[mode].append(done["seconds"])
        out["passing"].append({"framework": framework, "seconds": times, "last_code": done["rows"][0]["code"] if done["rows"] else None})
        print(framework, "passing", times, file=sys.stderr, flush=True)
        save()
    holder = subprocess.Popen([PY, "-c", "import torch, time\nfree, total = torch.cuda.mem_get_info()\n"
                               "x = torch.empty(int(free * 0.97), dtype=torch.uint8, device='cuda')\nprint('held', x.numel(), flush=True)\ntime.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    print("holder:", holder.stdout.readline().strip(), file=sys.stderr, flush=True)
    out["busy"] = {"what": "another process holds 97% of the GPU's memory",
                   "jax": check_rows("jax", base), "cupy": check_rows("cupy", base),
                   "plain_jax": run([PY, "-c", PLAIN["jax"]], base, 300)}
    holder.kill()
    holder.wait()
    save()


if __name__ == "__main__":
    main()
