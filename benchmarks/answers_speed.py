"""Speed of `explain`'s three forms, each a cold process as a user runs it (targets: explain's median
<= 150 ms; a 300-line requirements file <= 1 s; a pool of 50 GPU classes <= 1 s), beside the
interpreter's own start measured in the same run, and the in-process time of each answer.

    python benchmarks/answers_speed.py [--runs 15] [--json OUT]

The requirements file and the plan of 50 classes are written to a temporary directory; the pool
reads the observed cells of the recorded H200 store (docs/evidence/gpu-node-h200/gpu-node.db).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
H200_DB = REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db"
# A cold process as an installed gpucompat starts it: pip writes bytecode at install, so the children
# may use and write __pycache__ even where the shell sets PYTHONDONTWRITEBYTECODE.
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
GPU_PINS = [
    "torch==2.4.1", "nvidia-cuda-runtime-cu12==12.1.105", "nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.1.3.1",
    "nvidia-nccl-cu12==2.20.5", "nvidia-cufft-cu12==11.0.2.54", "nvidia-curand-cu12==10.3.2.106", "nvidia-cusolver-cu12==11.4.5.107",
    "nvidia-cusparse-cu12==12.1.0.106", "nvidia-nvtx-cu12==12.1.105", "nvidia-cuda-nvrtc-cu12==12.1.105",
    "nvidia-cuda-cupti-cu12==12.1.105", "nvidia-nvjitlink-cu12==12.9.86", "jax==0.4.30", "jaxlib==0.4.30",
    "jax-cuda12-plugin==0.4.30", "jax-cuda12-pjrt==0.4.30", "cupy-cuda12x==13.3.0",
]
CLASSES = [("Tesla V100-SXM2-32GB", "7.0", "470.82.01"), ("NVIDIA A100-SXM4-80GB", "8.0", "535.104.05"),
           ("NVIDIA H100 80GB HBM3", "9.0", "550.54.15"), ("NVIDIA H200", "9.0", "580.159.04"), ("NVIDIA L40S", "8.9", "545.23.08")]


def requirements_file(lines: int) -> str:
    """A pip freeze of a real-sized project: the GPU pins, then plain packages (with hashes on some, as pip-compile writes)."""
    out = [f"# {lines}-line requirements file written by benchmarks/answers_speed.py", *GPU_PINS]
    for n in range(lines - len(out)):
        out.append(f"package-{n:03d}=={n % 7}.{n % 13}.{n % 5}" + (f" --hash=sha256:{n:064x}" if n % 3 == 0 else ""))
    return "\n".join(out) + "\n"


def plan_file(classes: int) -> str:
    out = ['name = "site"', 'executor = "slurm"']
    for n in range(classes):
        name, cc, driver = CLASSES[n % len(CLASSES)]
        out += ["[[targets]]", f'name = "{name}"', f'cc = "{cc}"', f'driver = "{driver}"', f'gres = "gpu{n:02d}"']
    out += ["[[stacks]]", 'framework = "cuda-runtime"', 'versions = ["12.4"]']
    return "\n".join(out) + "\n"


def timed(command: list[str], runs: int) -> list[float]:
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV)  # writes the bytecode
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=CHILD_ENV)
        times.append(time.perf_counter() - began)
        if proc.returncode not in (0, 1, 3):
            raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return times


def in_process(args: list[str], runs: int) -> float:
    """The answer alone, after the imports: the median of `answers.explain.ask` (the first call loads the tables)."""
    sys.path.insert(0, str(REPO / "src"))
    from gpucompat.answers.explain import ask

    pool = args[args.index("--pool") + 1] if "--pool" in args else None
    requirements = args[args.index("-r") + 1] if "-r" in args else None
    gpu = args[args.index("--gpu") + 1] if "--gpu" in args else None
    cc = args[args.index("--cc") + 1] if "--cc" in args else None
    driver = args[args.index("--driver") + 1] if "--driver" in args else None
    spec = [a for a in args[1:] if not a.startswith("-")][:1] if args[1:2] and not args[1].startswith("-") else None
    rows = [] if pool else None
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        ask(spec, requirements, pool, gpu, cc, driver, None, None, rows)
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="answers-speed-"))
    (tmp / "requirements.txt").write_text(requirements_file(300))
    (tmp / "plan50.toml").write_text(plan_file(50))
    shutil.copyfile(H200_DB, tmp / "h200.db")
    gpucompat = [sys.executable, "-m", "gpucompat"]
    variants = {
        "python -c pass (interpreter start)": ([sys.executable, "-c", "pass"], None, None),
        "explain torch==2.4.1 --cc 8.0 --json (pass)": (gpucompat + ["explain", "torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--json"], 0.15, None),
        "explain jax==0.4.30 --gpu 'H100 PCIe' (GPU build assumed, pass)": (
            gpucompat + ["explain", "jax==0.4.30", "--gpu", "H100 PCIe", "--driver", "535.104.05"], 0.15, None),
        "explain torch==2.4 --gpu V100 --driver 470 (fail, with the nearest yes)": (
            gpucompat + ["explain", "torch==2.4", "--gpu", "V100", "--driver", "470"], 0.15, None),
        "explain -r requirements.txt (300 lines)": (
            gpucompat + ["explain", "-r", str(tmp / "requirements.txt"), "--gpu", "H100 PCIe", "--driver", "535.104.05"], 1.0, None),
        "explain cuda-runtime==12.4 --pool plan50.toml (50 classes, H200 store)": (
            gpucompat + ["explain", "cuda-runtime==12.4", "--pool", str(tmp / "plan50.toml"), "--db", f"sqlite:///{tmp / 'h200.db'}"], 1.0, None),
    }
    rows = []
    env_columns = {"COLUMNS": "100"}
    CHILD_ENV.update(env_columns)
    for name, (command, target, _) in variants.items():
        values = timed(command, args.runs)
        inner = in_process(command[3:], 5) if command[1:3] == ["-m", "gpucompat"] else None
        rows.append({"variant": name, "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3),
                     "in_process_s": round(inner, 4) if inner is not None else None, "target_s": target, "runs": len(values)})
    width = max(len(r["variant"]) for r in rows)
    for r in rows:
        inner = f"  answer {r['in_process_s'] * 1000:6.1f} ms" if r["in_process_s"] is not None else ""
        target = f"  target <= {r['target_s']:.2f} s: {'met' if r['median_s'] <= r['target_s'] else 'NOT met'}" if r["target_s"] else ""
        print(f"{r['variant']:<{width}}  median {r['median_s']:6.3f} s  min {r['min_s']:6.3f} s{inner}{target}")
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "cpus": os.cpu_count(), "rows": rows}, indent=2))
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
