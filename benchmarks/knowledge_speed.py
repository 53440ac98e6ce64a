"""Speed of the offline commands: `explain` in each of its forms (target: median <= 150 ms for a cold process, the FAIL
with its nearest yes included), measured round by round beside `gpucompat --version` (wall, and the CPU time of the process),
and `inspect` of a large library (target: <= 5 s for libtorch_cuda.so), each beside a
baseline measured in the same run.

    python benchmarks/knowledge_speed.py [--runs 10] [--library PATH] [--overlay DIR] [--pool] [--json OUT]

--overlay DIR (what `gpucompat knowledge update` wrote, e.g. docs/evidence/knowledge-update/overlay): explain of a
release only the overlay describes, with and without it, the two runs alternating so both see the same machine.

--forms-before SRC: explain's forms also with the gpucompat of an older tree's src/ (a `git archive` of it), round by round
in the same run; each ratio is to the --version of its own tree.

--pool: `explain --pool` and `advise --pool` (issue 39 section 7 targets: a 5-class plan within 1 s, 1,000 classes within
10 s) on examples/plans/site.toml and on a generated plan of --pool-classes classes (default 1,000): 20 GPU models on 5
drivers, so 100 distinct (GPU, driver) classes, each declared again under its own gres as a site's partitions are; and,
with --pool-distinct, a plan whose classes are all distinct (every GPU model on as many drivers as it takes). Each a cold
process with an empty store, beside the plain explain of the same run; --pool-before SRC times the same pool commands
with an older tree's gpucompat (a `git archive` of its src/) in the same run.
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


# A cold process as an installed gpucompat starts it: pip writes bytecode at install, so the children
# may use and write __pycache__ even where the shell sets PYTHONDONTWRITEBYTECODE (this machine does).
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


POOL_GPUS = [("Tesla V100-SXM2-32GB", "7.0"), ("NVIDIA A100-SXM4-80GB", "8.0"), ("NVIDIA H100 80GB HBM3", "9.0"), ("NVIDIA H200", "9.0"),
             ("NVIDIA L40S", "8.9"), ("NVIDIA GeForce RTX 2080 Ti", "7.5"), ("NVIDIA B200", "10.0"), ("Tesla T4", "7.5"), ("NVIDIA A10", "8.6"),
             ("NVIDIA GeForce GTX 1080", "6.1"), ("Tesla P100-PCIE-16GB", "6.0"), ("NVIDIA GeForce RTX 4090", "8.9"),
             ("NVIDIA GeForce RTX 3090", "8.6"), ("Tesla K80", "3.7"), ("NVIDIA A40", "8.6"), ("NVIDIA GeForce RTX 5090", "12.0"),
             ("NVIDIA L4", "8.9"), ("NVIDIA A30", "8.0"), ("Quadro RTX 6000", "7.5"), ("NVIDIA RTX A6000", "8.6")]
POOL_DRIVERS = ["470.82.01", "535.104.05", "550.54.15", "570.86.10", "580.65.06"]


def pool_plan(classes: int, distinct: bool = False) -> str:
    """A Slurm plan of `classes` [[targets]]: the models of POOL_GPUS on POOL_DRIVERS (100 distinct classes, each repeated
    under its own gres), or, `distinct`, each class its own (GPU, driver): the models on the drivers the knowledge names."""
    drivers = POOL_DRIVERS
    if distinct:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
        from gpucompat.knowledge import tables

        drivers = [d for d in tables.named_drivers() if int(d.split(".")[0]) >= 450]
    out = ['name = "site"', 'executor = "slurm"']
    for n in range(classes):
        name, _cc = POOL_GPUS[n % len(POOL_GPUS)]
        driver = drivers[(n // len(POOL_GPUS)) % len(drivers)]
        out += ["[[targets]]", f'name = "{name}"', f'driver = "{driver}"', f'gres = "g{n:05d}"']
    out += ["[[stacks]]", 'framework = "torch"', 'versions = ["2.4.1"]']
    return "\n".join(out) + "\n"


def timed(command: list[str], runs: int, env: dict | None = None) -> list[float]:
    env = env or CHILD_ENV
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=env)  # writes the bytecode
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False, env=env)
        times.append(time.perf_counter() - began)
        if proc.returncode not in (0, 1, 3) or b"internal error" in proc.stderr or b"Traceback" in proc.stderr:
            raise SystemExit(f"{' '.join(command)} exited {proc.returncode}: {proc.stderr.decode()[-400:]}")
    return times


def side_by_side(commands: dict[str, list[str]], runs: int, envs: dict[str, dict] | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """Each command once in turn, `runs` rounds (the first writes the bytecode and is not counted), so that a load that
    comes and goes on a shared machine weighs on every command alike: per command, (wall times, CPU times of the child)."""
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in commands}
    for round_ in range(runs + 1):
        for name, command in commands.items():
            began = time.perf_counter()
            child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=(envs or {}).get(name, CHILD_ENV))
            _pid, _status, usage = os.wait4(child.pid, 0)
            if round_:
                times[name][0].append(time.perf_counter() - began)
                times[name][1].append(usage.ru_utime + usage.ru_stime)
    return times


def alternating(command: list[str], overlays: list[str], runs: int) -> list[list[float]]:
    """The same command under each GPUCOMPAT_KNOWLEDGE in turn, `runs` rounds: one list of times per overlay."""
    times: list[list[float]] = [[] for _ in overlays]
    for round_ in range(runs + 1):
        for slot, folder in enumerate(overlays):
            began = time.perf_counter()
            subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env={**CHILD_ENV, "GPUCOMPAT_KNOWLEDGE": folder})
            if round_:  # the first round writes the bytecode
                times[slot].append(time.perf_counter() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--library")
    parser.add_argument("--cuobjdump", default=shutil.which("cuobjdump"))
    parser.add_argument("--overlay")
    parser.add_argument("--pool", action="store_true")
    parser.add_argument("--pool-classes", type=int, default=1000)
    parser.add_argument("--pool-distinct", action="store_true")
    parser.add_argument("--pool-before", metavar="SRC", help="also time the pool commands with gpucompat from SRC (an older tree's src/)")
    parser.add_argument("--forms-before", metavar="SRC", help="also time explain's forms with gpucompat from SRC (an older tree's src/)")
    parser.add_argument("--json")
    args = parser.parse_args()
    rows = []
    # explain's forms, each beside `gpucompat --version` (the same interpreter, Typer and command table, no question)
    forms = {
        "python -c pass (interpreter start)": [sys.executable, "-c", "pass"],
        "gpucompat --version (the baseline)": [sys.executable, "-m", "gpucompat", "--version"],
        "gpucompat explain torch==2.4.1 --cc 8.0 --json": [sys.executable, "-m", "gpucompat", "explain", "torch==2.4.1", "--cc", "8.0", "--driver", "535.104.05", "--json"],
        "gpucompat explain (human output)": [sys.executable, "-m", "gpucompat", "explain", "torch==2.4.1", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "570.86.10"],
        # the long tail: a name only pci.ids knows, and a Python window from PyPI's file lists (the two largest tables)
        "gpucompat explain (pci.ids name, --python)": [sys.executable, "-m", "gpucompat", "explain", "tensorflow[and-cuda]==2.15.0", "--gpu",
                                                       "NVIDIA GeForce RTX 3070 Laptop GPU", "--driver", "550.54.14", "--python", "3.11", "--json"],
        # the README's own example (issue 40 section 8): a FAIL with its nearest yes, some 120 candidate stacks judged
        "gpucompat explain torch==2.6.0 on an RTX 5090 (FAIL, nearest yes)": [
            sys.executable, "-m", "gpucompat", "explain", "torch==2.6.0", "--gpu", "NVIDIA GeForce RTX 5090", "--driver", "575.64.05", "--python", "3.12"],
    }
    envs = {}
    if args.forms_before:  # the same forms with an older tree's gpucompat, round by round in the same run
        before = {**CHILD_ENV, "PYTHONPATH": str(Path(args.forms_before).resolve())}
        for name in [n for n in forms if n.startswith("gpucompat")]:
            forms[f"{name}, before"], envs[f"{name}, before"] = forms[name], before
    for name, (wall, cpu) in side_by_side(forms, args.runs, envs).items():
        rows.append({"variant": name, "median_s": round(statistics.median(wall), 3), "min_s": round(min(wall), 3),
                     "cpu_median_s": round(statistics.median(cpu), 3), "runs": len(wall)})
    variants: dict[str, list[str]] = {}
    if args.library:
        size = Path(args.library).stat().st_size
        variants[f"gpucompat inspect {Path(args.library).name} ({size / 2**30:.2f} GiB)"] = [sys.executable, "-m", "gpucompat", "inspect", args.library, "--json"]
        if args.cuobjdump:
            variants[f"cuobjdump --list-elf {Path(args.library).name}"] = [args.cuobjdump, "--list-elf", args.library]
    if args.overlay:
        empty = str(Path(tempfile.mkdtemp()) / "no-overlay")  # nothing learned: the packaged tables alone
        for spec in ("torch==2.15.0", "torch==2.4.1"):  # a release only the overlay describes; one the packaged tables do
            explain = [sys.executable, "-m", "gpucompat", "explain", spec, "--gpu", "H100", "--driver", "580.95.05", "--json"]
            sides = {f"gpucompat explain {spec} --gpu H100 --json, packaged tables only": empty,
                     f"gpucompat explain {spec} --gpu H100 --json, with the overlay": str(Path(args.overlay).resolve())}
            for values, name in zip(alternating(explain, list(sides.values()), args.runs), sides):
                rows.append({"variant": name, "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3), "runs": len(values)})
    if args.pool:
        folder = Path(tempfile.mkdtemp())
        plans = {"site.toml (5 classes)": str(Path(__file__).resolve().parent.parent / "examples" / "plans" / "site.toml")}
        generated = folder / f"pool{args.pool_classes}.toml"
        generated.write_text(pool_plan(args.pool_classes))
        plans[f"{args.pool_classes} classes, 100 distinct"] = str(generated)
        if args.pool_distinct:
            distinct = folder / f"pool{args.pool_classes}-distinct.toml"
            distinct.write_text(pool_plan(args.pool_classes, distinct=True))
            plans[f"{args.pool_classes} classes, all distinct"] = str(distinct)
        store = ["--db", f"sqlite:///{folder / 'empty.db'}"]
        for label, plan in plans.items():
            variants[f"gpucompat explain torch==2.4.1 --pool ({label}) --json"] = [
                sys.executable, "-m", "gpucompat", "explain", "torch==2.4.1", "--pool", plan, *store, "--json"]
            variants[f"gpucompat advise torch --pool ({label}) --json"] = [
                sys.executable, "-m", "gpucompat", "advise", "torch", "--pool", plan, *store, "--json"]
    envs = {name: CHILD_ENV for name in variants}
    if args.pool and args.pool_before:  # the same commands with the older tree's gpucompat, in the same run
        before = {**CHILD_ENV, "PYTHONPATH": str(Path(args.pool_before).resolve())}
        for name in [n for n in variants if "--pool" in n]:
            variants[f"{name}, before ({args.pool_before})"] = variants[name]
            envs[f"{name}, before ({args.pool_before})"] = before
    for name, command in variants.items():
        slow = "inspect" in name or "cuobjdump" in name or "classes," in name
        values = timed(command, args.runs if not slow else min(args.runs, 3 if "before" not in name else 1), envs[name])
        rows.append({"variant": name, "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3), "runs": len(values)})
    width = max(len(r["variant"]) for r in rows)
    baselines = {r["variant"].endswith(", before"): r for r in rows if r["variant"].startswith("gpucompat --version")}
    for r in rows:
        # the measure: times as long as --version (of the same tree)
        r["x_version"] = round(r["median_s"] / baselines[r["variant"].endswith(", before")]["median_s"], 2)
        cpu = f"  cpu {r['cpu_median_s']:6.3f} s" if "cpu_median_s" in r else ""
        print(f"{r['variant']:<{width}}  median {r['median_s']:7.3f} s  min {r['min_s']:7.3f} s{cpu}  {r['x_version']:5.2f} x --version  ({r['runs']} runs)")
    if args.json:
        Path(args.json).write_text(json.dumps({"python": sys.version, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
