"""The figures of docs/reliability.md: fuzzed inputs, injection payloads, kill points and
concurrent stores, each counted the way an adversarial tester counts them.

    python tools/reliability.py     # about 6 minutes on 2 cores; the table goes into docs/reliability.md

It reuses the generators of tests/test_properties.py (Hypothesis) and the kill harness of
tests/test_crash_safety.py, with larger counts than CI runs.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from hypothesis import HealthCheck, given, settings  # noqa: E402

import test_properties as props  # noqa: E402
from gpucompat.errors import UserError  # noqa: E402
from gpucompat.model import Target  # noqa: E402
from gpucompat.plan import check_path, parse_plan  # noqa: E402

PLANS, CLI_VALUES = 1000, 2800


def fuzz_plans() -> dict:
    counts = {"tried": 0, "one sentence": 0, "accepted": 0, "exit 3": 0, "accepted invalid": 0}

    @settings(max_examples=PLANS, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(props.plans())
    def one(plan):
        counts["tried"] += 1
        try:
            spec = parse_plan(props.toml_table(plan), "fuzz.toml")
        except UserError:
            counts["one sentence"] += 1
            return
        except Exception:  # noqa: BLE001 - what the CLI would report as exit 3
            counts["exit 3"] += 1
            return
        counts["accepted"] += 1
        try:
            props.spec_invariants(spec)
        except AssertionError:
            counts["accepted invalid"] += 1

    one()
    return counts


def fuzz_cli() -> dict:
    from typer.testing import CliRunner

    from gpucompat.cli import app

    counts = {"tried": 0, "exit 0/1": 0, "exit 2": 0, "exit 3 or other": 0}
    env = {"GPUCOMPAT_DB": f"sqlite:///{props.SANDBOX / 'cli.db'}", "XDG_DATA_HOME": str(props.SANDBOX / "data")}

    @settings(max_examples=CLI_VALUES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(props.cli_arguments)
    def one(args):
        counts["tried"] += 1
        code = CliRunner().invoke(app, [a.replace("\x00", "") for a in args], env=env).exit_code
        counts["exit 0/1" if code in (0, 1) else "exit 2" if code == 2 else "exit 3 or other"] += 1

    one()
    return counts


FIELDS = ["name", "target name", "gres", "features", "partition", "account", "namespace", "image", "--out"]


def plan_with(field: str, value: str, executor: str) -> tuple[dict, str]:
    plan: dict = {"name": "inject", "executor": executor,
                  "stacks": [{"framework": "cuda-runtime", "env": "current"}],
                  "targets": [{"name": "NVIDIA A100-SXM4-80GB", "cc": "8.0"}]}
    directory = "out"
    if field == "name":
        plan["name"] = value
    elif field == "target name":
        plan["targets"][0]["name"] = value
    elif field in ("gres", "features"):
        plan["targets"][0][field] = value if field == "gres" else [value]
    elif field in ("partition", "account"):
        plan["slurm"] = {field: value}
    elif field in ("namespace", "image"):
        plan["kubernetes"] = {"image": "nvcr.io/nvidia/pytorch:25.01-py3", field: value}
    else:
        directory = value
    return plan, directory


def _write_and_run(counts: dict, spec, executor: str, workdir: Path, cells) -> None:
    """Render one executor's files, check them, run them, and count what went wrong."""
    try:
        files = props.render(spec, executor, check_path(workdir, "--out"), cells)
    except UserError:
        counts["refused (one sentence)"] += 1
        return
    counts["written"] += 1
    try:
        props.check_files(files, cells)
    except Exception:  # noqa: BLE001
        counts["broken files"] += 1
    props.run_scripts(files)
    if props.SENTINEL.exists():
        counts["executed"] += 1
        props.SENTINEL.unlink()


def injections() -> dict:
    counts = {"tried": 0, "refused (one sentence)": 0, "written": 0, "executed": 0, "broken files": 0}
    base = Path(tempfile.mkdtemp(prefix="gpucompat-inject-"))
    executors = ["local", "slurm", "htcondor", "kubernetes"]
    for number, (payload, field, executor) in enumerate(itertools.product(props.PAYLOADS, FIELDS, executors)):
        counts["tried"] += 1
        plan, directory = plan_with(field, payload, executor)
        if executor == "local":
            plan.pop("targets")
        try:
            spec = parse_plan(props.toml_table(plan), "inject.toml")
        except UserError:
            counts["refused (one sentence)"] += 1
            continue
        _write_and_run(counts, spec, executor, base / str(number) / directory.replace("/", "_"), props.cells_for(spec))
    # the renderers alone, for names that never pass through a plan (scheduler output, stored sweeps)
    spec = parse_plan('[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    for number, (payload, executor) in enumerate(itertools.product(props.PAYLOADS, executors)):
        counts["tried"] += 1
        cells = props.cells_for(replace(spec, targets=(Target(payload, "8.0"),)))
        _write_and_run(counts, spec, executor, base / f"renderer-{number}", cells)
    return counts


def kill_points() -> str:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-s", "tests/test_crash_safety.py", "-k", "kill_at"],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "GPUCOMPAT_KILL_EVERY_POINT": "1"})
    line = next((x for x in proc.stdout.splitlines() if "kill points tried" in x), proc.stdout[-500:])
    return line.strip() + ("" if proc.returncode == 0 else " (the test FAILED)")


def concurrency(rounds: int = 15, openers: int = 4) -> dict:
    """`openers` processes opening one new database at the same moment, `rounds` times."""
    failures = 0
    base = Path(tempfile.mkdtemp(prefix="gpucompat-open-"))
    for round_number in range(rounds):
        url = f"sqlite:///{base / f'r{round_number}.db'}"
        start = time.time() + 1.0
        code = ("import time, sys\nfrom gpucompat.store import Store\n"
                f"time.sleep(max(0, {start} - time.time()))\nStore({url!r}).list_sweeps()\n")
        procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(openers)]
        failures += sum(proc.wait() != 0 for proc in procs)
    return {"openers x rounds": f"{openers} x {rounds}", "failures": failures}


def table(title: str, counts: dict) -> str:
    return f"| {title} | " + " | ".join(f"{key}: {value}" for key, value in counts.items()) + " |"


if __name__ == "__main__":
    began = time.time()
    print("| what | figures |\n|---|---|")
    print(table("fuzzed plans", fuzz_plans()))
    print(table("fuzzed command-line values", fuzz_cli()))
    print(table("injection payloads x fields x executors", injections()))
    print(f"| kill points | {kill_points()} |")
    print(table("concurrent openers of a new SQLite store", concurrency()))
    print(f"\n(run in {time.time() - began:.0f} s)")
