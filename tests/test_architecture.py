"""The shape docs/architecture.md promises: layers that run one way, no import circles, rooms
small enough to read, and one registry entry (with its parts) for each thing a newcomer adds."""

from __future__ import annotations

import ast
import inspect
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli

SRC = REPO / "src" / "gpucompat"
MODULE_LINES = 700  # split a module by what it does before it grows past this
PROBE_MODULE_LINES = 400


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every gpucompat module -> the gpucompat modules it imports, at any depth of its code
    (an import inside a function counts: it runs sooner or later)."""
    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.split(".")[0] == "gpucompat")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(anchor + ([node.module] if node.module else []))
                if base.split(".")[0] != "gpucompat":
                    continue
                for alias in node.names:  # `from . import x` imports the module x when there is one
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_lint_imports_keeps_every_contract_with_nothing_ignored():
    config = (REPO / "pyproject.toml").read_text()
    assert "ignore_imports" not in config
    lint = shutil.which("lint-imports") or str(Path(sys.executable).with_name("lint-imports"))
    proc = subprocess.run([lint], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"Contracts: (\d+) kept, 0 broken", proc.stdout), proc.stdout
    assert int(re.search(r"Contracts: (\d+) kept", proc.stdout).group(1)) >= 4


def test_no_module_imports_one_that_imports_it_back():
    """No cycle of any length: a depth-first walk finds no edge back into the path it is on."""
    graph = import_graph()
    state: dict[str, int] = {}
    cycles = []

    def walk(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append(path[path.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, path + [nxt])
        state[node] = 2

    for start in sorted(graph):
        if start not in state:
            walk(start, [start])
    assert not cycles, "import circles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_graph_walk_sees_a_circle_when_there_is_one(tmp_path, monkeypatch):
    """The walk above can fail: two modules that import each other are found."""
    package = tmp_path / "gpucompat"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from . import b\n")
    (package / "b.py").write_text("def f():\n    from .a import thing\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", package)
    assert import_graph() == {"gpucompat": set(), "gpucompat.a": {"gpucompat.b"}, "gpucompat.b": {"gpucompat.a"}}


def test_no_room_too_big_to_read():
    too_big = {}
    for path in SRC.rglob("*.py"):
        lines = len(path.read_text().splitlines())
        limit = PROBE_MODULE_LINES if "probe" in path.relative_to(SRC).parts[:1] else MODULE_LINES
        if lines > limit:
            too_big[str(path.relative_to(REPO))] = lines
    assert not too_big, f"split these by what they do: {too_big}"


# --- one place for each change: every registry entry has its parts -----------------------------

def test_every_executor_name_has_a_backend_with_the_whole_interface_and_a_discovery():
    from gpucompat import executors
    from gpucompat.executors.base import Executor
    from gpucompat.model import EXECUTORS

    assert tuple(executors.BACKENDS) == EXECUTORS
    interface = {name for name in vars(Executor) if not name.startswith("_") and callable(getattr(Executor, name))}
    assert interface >= {"precheck", "prepare", "submit", "attach", "poll", "collect", "cancel"}
    for name in EXECUTORS:
        cls = executors.executor_class(name)
        assert isinstance(getattr(cls, "detached", None), bool), f"executor {name!r} does not say whether it is detached"
        needed = interface if cls.detached else interface - {"attach"}  # attach(): only for a scheduler that runs on alone
        missing = sorted(method for method in needed if not callable(getattr(cls, method, None)))
        assert not missing, f"executor {name!r} lacks {missing}"
        discovery = __import__(executors.BACKENDS[name][1], fromlist=["discover"])
        assert callable(getattr(discovery, "discover", None)), f"executor {name!r} has no discovery"


def test_every_env_provider_has_its_module_with_the_provider_functions():
    from gpucompat import envs
    from gpucompat.model import ENV_PROVIDERS

    assert tuple(envs.PROVIDERS) == ENV_PROVIDERS
    for name in envs.PROVIDERS:
        module = envs.provider(name)
        for function in ("install_script", "requirements_text", "interpreter"):
            assert callable(getattr(module, function, None)), f"env provider {name!r} lacks {function}()"


def test_every_module_sits_in_a_layer_of_the_contract():
    """A module left out of the layers would be checked by nothing."""
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    layers = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]["layers"]
    named = {name.strip() for layer in layers for name in re.split(r"[|:]", layer)}
    top = {_module_name(p).split(".")[1] for p in SRC.rglob("*.py") if p.parent != SRC or p.stem not in ("__init__", "__main__")}
    assert {f"gpucompat.{m}" for m in top} <= named, sorted({f"gpucompat.{m}" for m in top} - named)


def test_every_framework_has_a_probe_adapter_and_rules_in_knowledge():
    from gpucompat.knowledge.rules import predict_stack
    from gpucompat.model import FRAMEWORKS
    from gpucompat.probe.main import ADAPTERS

    assert tuple(ADAPTERS) == FRAMEWORKS

    for framework in FRAMEWORKS:
        prediction = predict_stack(framework, "1.0", "default", "9.0", "580.65.06")
        assert not any(r.rule == "framework" for r in prediction.reasons), f"no rules for {framework}"
    # and the check can fail: a framework the rules do not know says so
    assert any(r.rule == "framework" for r in predict_stack("mxnet", "1.0", "default", "9.0", "580.65.06").reasons)


def test_every_code_and_every_untested_cause_is_explained_in_the_readme():
    from gpucompat.model import UNTESTED_CAUSES, Code

    readme = (REPO / "README.md").read_text()
    judged = readme[readme.index("## How a cell is judged"):readme.index("## Knowledge and prediction")]
    for code in Code:
        if code.value != "PASS":
            assert f"`{code.value}`" in judged, f"README's ladder does not explain {code.value}"
    for cause, sentence in UNTESTED_CAUSES.items():
        assert sentence and sentence[0].islower() and not sentence.endswith("."), cause  # read after "could not test: "
        assert f"`{cause}`" in judged, f"README's 'Could not test' does not name the cause {cause!r}"


def test_every_bench_measurement_is_made_by_the_probe_and_shown_by_the_report():
    """A plan's measurement is a key of the probe's bench defaults; every figure the probe makes
    (`measure("name", ...)`, or a family such as `"shared_" + workload`) has a label and a title."""
    from gpucompat.model import BENCH_MEASUREMENTS
    from gpucompat.report import bench as report_bench

    probe_source = "\n".join(p.read_text() for p in sorted((SRC / "probe").rglob("*.py")))
    defaults = re.search(r'"measurements": \[([^\]]*)\]', probe_source).group(1)
    assert set(re.findall(r'"([a-z]+)"', defaults)) == set(BENCH_MEASUREMENTS)
    made = set(re.findall(r'measure\(\s*"([a-z0-9_]+)"', probe_source))
    assert {"matmul", "copy", "h2d", "d2h", "launch", "train"} <= made
    for figure in made:
        family = [m for m in report_bench.MEASUREMENTS if m == figure or (figure.endswith("_") and m.startswith(figure))]
        assert family, f"the bench report has no place for the probe's {figure!r} figures"
        for measurement in family:
            assert measurement in report_bench.LABELS and measurement in report_bench.TITLES, measurement


@pytest.fixture(scope="module")
def recorded_store(tmp_path_factory):
    """A copy of a real GPU run's store (docs/evidence), so that nothing is written beside the evidence."""
    source = REPO / "docs" / "evidence" / "gpu-node-h200" / "gpu-node.db"
    if not source.exists():
        pytest.skip(f"{source} is not in this checkout")
    copy = tmp_path_factory.mktemp("store") / "gpucompat.db"
    with sqlite3.connect(source) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    return copy


def test_every_report_format_writes_something(recorded_store, tmp_path):
    from gpucompat.commands.printing import FORMATS

    for fmt in FORMATS:
        proc = run_cli("results", "--format", fmt, "--db", f"sqlite:///{recorded_store}", check=0,
                       env={"COLUMNS": "200", "XDG_DATA_HOME": str(tmp_path)})
        assert len(proc.stdout.strip()) > 100, f"--format {fmt} wrote almost nothing: {proc.stdout!r}"
