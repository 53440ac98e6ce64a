"""Property-based hardening (Hypothesis): generated plans, names, specs and paths go through
the real plan parser and every executor's renderer; every script must pass `bash -n` and run
without executing anything it was handed, every submit description must parse with
htcondor2, every manifest must validate with kubernetes-validate, and no input may end in
anything but a result or one sentence (never exit 3). Bounded to a few minutes on 2 cores."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpucompat.errors import UserError
from gpucompat.executors import make_executor
from gpucompat.model import Cell, ResolvedStack, Stack, SweepSpec, Target
from gpucompat.plan import MAX_TIMEOUT_S, PYTHON_VERSION, check_path, parse_plan

htcondor2 = pytest.importorskip("htcondor2", reason="the HTCondor bindings are part of the test extra")
kubernetes_validate = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is part of the test extra")

SANDBOX = Path(tempfile.mkdtemp(prefix="gpucompat-fuzz-"))
SENTINEL = SANDBOX / "INJECTED"
# Shell, Rich, ClassAd, YAML and path metacharacters, each carrying a command that would
# leave the sentinel file behind if any generated file ever ran it.
PAYLOADS = [
    f"\ntouch {SENTINEL}\n", f"$(touch {SENTINEL})", f"`touch {SENTINEL}`", f"'; touch {SENTINEL}; '",
    f'"; touch {SENTINEL}; "', f"\r\ntouch {SENTINEL}", f"\u2028touch {SENTINEL}", f"\x0btouch {SENTINEL}",
    "[/bold]", "[red]x[/]", "a b", "-rf", "../..", "%A", "\\", "$HOME", "*", "#", "{x}", "\x00", "é", "\ufeff",
    "queue 100", "\nqueue\n", "]]", '"""', "a/b", "A" * 300, "1" * 400,
]
fuzz_text = st.one_of(
    st.sampled_from(PAYLOADS),
    st.text(max_size=30),
    st.builds(lambda a, p, b: a + p + b, st.text(max_size=8), st.sampled_from(PAYLOADS), st.text(max_size=8)),
)
plain = st.from_regex(r"\A[a-z0-9][a-z0-9.-]{0,14}\Z")
numbers = st.one_of(st.integers(min_value=-10, max_value=10**20), st.floats(allow_nan=True, allow_infinity=True), fuzz_text,
                    st.sampled_from(["0.2s", "90", "10m", "2h", "1d", "31d", "1e308"]))
QUICK = settings(max_examples=int(os.environ.get("GPUCOMPAT_FUZZ_EXAMPLES", "150")), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def toml_value(value) -> str:
    """TOML for generated values: strings with every control character escaped."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(value), repr(value))
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    escaped = "".join(c if c not in '"\\' and ord(c) >= 0x20 and ord(c) != 0x7F else f"\\u{ord(c):04x}" for c in value)
    return f'"{escaped}"'


def toml_table(data: dict) -> str:
    lines = [f"{key} = {toml_value(value)}" for key, value in data.items() if not isinstance(value, (dict, list)) or
             (isinstance(value, list) and not (value and isinstance(value[0], dict)))]
    for key, value in data.items():
        if isinstance(value, dict):
            lines += [f"[{key}]"] + [f"{k} = {toml_value(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for item in value:
                lines += [f"[[{key}]]"] + [f"{k} = {toml_value(v)}" for k, v in item.items()]
    return "\n".join(lines) + "\n"


@st.composite
def plans(draw) -> dict:
    executor = draw(st.sampled_from(["local", "slurm", "htcondor", "kubernetes"]))
    plan: dict = {"name": draw(st.one_of(fuzz_text, plain)), "executor": executor}
    if draw(st.booleans()):
        plan["python"] = [draw(st.one_of(st.sampled_from(["3.8", "3.11", "3.15", "3.16", "3.99", "3.1\n", "3.\u0661\u0661"]), fuzz_text))]
    if draw(st.booleans()):
        plan["platform"] = draw(st.one_of(st.sampled_from(["x86_64-manylinux_2_28", "aarch64-unknown-linux-gnu", "linux", "windows"]), fuzz_text))
    plan["timeouts"] = {key: draw(numbers) for key in draw(st.lists(st.sampled_from(["install", "import", "device", "compute", "cell", "pending"]), max_size=3, unique=True))}
    if executor == "slurm":
        plan["slurm"] = {k: draw(st.one_of(plain, fuzz_text)) for k in draw(st.lists(st.sampled_from(["partition", "account"]), max_size=2, unique=True))}
    if executor == "kubernetes":
        plan["kubernetes"] = {"image": draw(st.one_of(st.just("nvcr.io/nvidia/pytorch:25.01-py3"), fuzz_text)),
                              "namespace": draw(st.one_of(plain, fuzz_text))}
    if executor != "local" or draw(st.booleans()):
        target = {"name": draw(st.one_of(fuzz_text, st.just("NVIDIA A100-SXM4-80GB"))), "cc": draw(st.one_of(st.just("8.0"), fuzz_text))}
        if executor == "slurm":
            target["gres"] = draw(st.one_of(plain, fuzz_text))
            target["features"] = [draw(st.one_of(plain, fuzz_text))]
        plan["targets"] = [target]
    plan["stacks"] = [{"framework": "cuda-runtime", "env": "current"}] if draw(st.booleans()) else [
        {"framework": "cuda-runtime", "versions": [draw(st.one_of(st.just("12.4"), fuzz_text))]}]
    return plan


def spec_invariants(spec: SweepSpec) -> None:
    """What an accepted plan guarantees to everything downstream."""
    names = [spec.name, *(t.name for t in spec.targets if isinstance(t, Target))]
    assert not any(c in name for name in names for c in "\n\r\x00\x0b\u2028"), names
    for value in (spec.timeouts.install, spec.timeouts.import_, spec.timeouts.device, spec.timeouts.compute, spec.timeouts.cell, spec.timeouts.pending):
        assert 1 <= value <= MAX_TIMEOUT_S
    assert all(PYTHON_VERSION.fullmatch(p) for s in spec.stacks for p in s.pythons if p != "current")


@QUICK
@given(plans())
def test_generated_plans_parse_to_a_spec_or_one_sentence(plan):
    try:
        spec = parse_plan(toml_table(plan), "fuzz.toml")
    except UserError as exc:
        assert "\n" not in str(exc).strip() or "TOML" in str(exc)
        return
    spec_invariants(spec)


def cells_for(spec: SweepSpec, framework_env: str = "current") -> list[Cell]:
    targets = list(spec.targets) if isinstance(spec.targets, tuple) else [Target("NVIDIA A100-SXM4-80GB", "8.0")]
    stack = Stack("cuda-runtime", "12.4", "default", "current" if framework_env == "current" else "3.11", framework_env)
    resolved = ResolvedStack(stack, True, ("nvidia-cuda-runtime-cu12==12.4.127",), "12.4")
    return [Cell(i, stack, target, resolved) for i, target in enumerate(targets, 1)]


def render(spec: SweepSpec, executor: str, workdir: Path, cells: list[Cell]) -> list[Path]:
    options = {"kubernetes": {"image": "nvcr.io/nvidia/pytorch:25.01-py3"}}.get(executor, {})
    spec = replace(spec, executor=executor, executor_options={executor: {**options, **spec.executor_options.get(executor, {})}})
    make_executor(spec, None, False).prepare(cells, workdir)
    return sorted(p for p in workdir.rglob("*") if p.is_file())


def check_files(files: list[Path], cells: list[Cell]) -> None:
    names = []
    for path in files:
        if path.suffix == ".sh":
            proc = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
            assert proc.returncode == 0, f"{path}: {proc.stderr}"
        elif path.suffix == ".sub":
            submit = htcondor2.Submit(path.read_text())
            assert "queue" not in {k.lower() for k in submit.keys()}
            assert submit["request_gpus"] == "1"
        elif path.name == "sweep.dag":
            lines = [line for line in path.read_text().splitlines() if line and not line.startswith("#")]
            assert all(line.split()[0] in ("JOB", "SCRIPT") for line in lines), lines
            assert sum(line.startswith("JOB ") for line in lines) == len(cells)
        elif path.name in ("job.json", "configmap.json") and json.loads(path.read_text()).get("apiVersion"):
            manifest = json.loads(path.read_text())
            kubernetes_validate.validate(manifest, "1.30", strict=True)
            names.append(manifest["metadata"]["name"])
    assert len(names) == len(set(names)), f"two Kubernetes objects share a name: {names}"


def run_scripts(files: list[Path]) -> None:
    """Run what a node would run (the probe itself is real; its framework is not installed)."""
    env = {**os.environ, "SLURM_ARRAY_TASK_ID": "0"}
    for path in files:
        if path.name.startswith("array-") and path.suffix == ".sh" or (path.name == "run.sh" and "array-0.sh" not in {p.name for p in files}):
            subprocess.run(["bash", str(path)], cwd=path.parent, env=env, capture_output=True, timeout=120)
        elif path.name == "job.json" and json.loads(path.read_text()).get("kind") == "Job":
            command = json.loads(path.read_text())["spec"]["template"]["spec"]["containers"][0]["command"]
            subprocess.run(command, cwd=SANDBOX, env=env, capture_output=True, timeout=120)


@settings(max_examples=int(os.environ.get("GPUCOMPAT_FUZZ_RENDER_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(plan=plans(), directory=fuzz_text, executor=st.sampled_from(["local", "slurm", "htcondor", "kubernetes"]), run=st.booleans())
@example(plan={"stacks": [{"framework": "cuda-runtime", "env": "current"}]}, directory="A" * 300, executor="local", run=False)  # was exit 3
def test_every_executor_writes_valid_files_that_execute_nothing_they_were_handed(plan, directory, executor, run):
    try:
        spec = parse_plan(toml_table(plan), "fuzz.toml")
        workdir = check_path(SANDBOX / executor / f"w{abs(hash(directory))}" / directory.replace("/", "_"), "--out")
        files = render(spec, executor, workdir, cells_for(spec))
    except UserError:
        return  # one sentence, the outcome for a value that cannot be written
    check_files(files, cells_for(spec))
    if run:
        run_scripts(files)
    assert not SENTINEL.exists(), f"an injected command ran from the {executor} files for {plan!r}"


@pytest.mark.parametrize("executor", ["local", "slurm", "htcondor", "kubernetes"])
def test_names_that_bypass_the_plan_are_still_written_as_data(executor, tmp_path):
    """The plan refuses control characters; the renderers hold even where a name comes from
    elsewhere (scheduler output, a stored sweep): the issue's own payload, run for real."""
    hostile = Target(f"A100\ntouch {SENTINEL}\n$(touch {SENTINEL})", "8.0", declared=False)
    spec = parse_plan('[[stacks]]\nframework = "cuda-runtime"\nenv = "current"\n')
    cells = cells_for(replace(spec, targets=(hostile,)))
    files = render(spec, executor, tmp_path / "work", cells)
    check_files(files, cells)
    run_scripts(files)
    assert not SENTINEL.exists()


cli_arguments = st.one_of(
    st.tuples(st.just("explain"), fuzz_text, st.just("--cc"), st.one_of(st.just("8.0"), fuzz_text), st.just("--driver"), st.one_of(st.just("580.65.06"), fuzz_text)),
    st.tuples(st.just("explain"), st.just("torch==2.4.1"), st.just("--gpu"), fuzz_text, st.just("--driver"), st.just("580.65.06"), st.just("--python"), fuzz_text),
    st.tuples(st.just("advise"), st.just("--framework"), fuzz_text, st.just("--cc"), fuzz_text, st.just("--driver"), fuzz_text),
    st.tuples(st.just("inspect"), fuzz_text.map(lambda t: f"{SANDBOX}/none/{t}" if t.strip() else t)),
    st.tuples(st.just("diff"), fuzz_text, fuzz_text),
    st.tuples(st.just("history"), fuzz_text, st.just("--cc"), fuzz_text),
    st.tuples(st.just("results"), st.just("--format"), fuzz_text),
    st.tuples(st.just("results"), st.just("--db"), fuzz_text),
    st.tuples(st.just("results"), st.just("--sweep"), st.integers(min_value=-10**30, max_value=10**30).map(str)),
)


@QUICK
@given(args=cli_arguments)
@example(args=("diff", "9" * 30, "latest"))  # found by tools/reliability.py: an id past SQLite's integers was exit 3
@example(args=("results", "--sweep", "9" * 30))
def test_command_line_values_never_end_in_an_internal_error(args):
    from typer.testing import CliRunner

    from gpucompat.cli import app

    db = SANDBOX / "cli.db"
    env = {"GPUCOMPAT_DB": f"sqlite:///{db}", "XDG_DATA_HOME": str(SANDBOX / "data"), "GPUCOMPAT_CACHE": str(SANDBOX / "cache")}
    result = CliRunner().invoke(app, [a.replace("\x00", "") for a in args], env=env)
    assert result.exit_code in (0, 1, 2), f"{args!r} -> exit {result.exit_code}: {result.output}"
    assert "Traceback" not in result.output and "gpucompat bug" not in result.output


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sweep_name=fuzz_text, gpu=fuzz_text, summary=fuzz_text)
@example(sweep_name="[/bold]", gpu="[red]x[/]", summary="[/]")  # the tester's case, always tried
def test_stored_names_with_markup_print_in_every_view(sweep_name, gpu, summary):
    """`name = "[/bold]"` crashed the output after the results were stored, and every
    `results --list` of that store after it: each view must print what was stored."""
    from typer.testing import CliRunner

    from gpucompat.cli import app
    from gpucompat.model import Observation, Outcome
    from gpucompat.store import Store

    db = Path(tempfile.mkdtemp(dir=SANDBOX)) / "markup.db"
    store = Store(f"sqlite:///{db}")
    stack = Stack("cuda-runtime", "12.4", "default", "3.11", "uv")
    resolved = ResolvedStack(stack, True, ("nvidia-cuda-runtime-cu12==12.4.127",), "12.4")
    prediction = {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": [{"rule": "r", "verdict": "uncertain", "text": summary, "source": summary}]}
    sweep_id = store.create_sweep(sweep_name, "sweep", "", None, {}, [Target(gpu, "8.0")], [resolved], lambda _r, _t: prediction)
    cell = store.cells_of(sweep_id)[0]
    store.record_result(cell.id, Outcome("NO_DEVICE", "device", summary, {"x": summary}), Observation({}))
    store.finish_sweep(sweep_id, "done")
    env = {"GPUCOMPAT_DB": f"sqlite:///{db}"}
    for args in (["results"], ["results", "--cells"], ["results", "--list"], ["results", "--format", "md"], ["diff", "latest", "latest"],
                 ["history", "cuda-runtime==12.4", "--cc", "8.0"], ["report", "-o", str(db.parent / "r.html")]):
        result = CliRunner().invoke(app, args, env=env)
        assert result.exit_code == 0, f"{args} -> {result.exit_code}: {result.output}"
