"""Terminal output fits the terminal: per-cell and grouped result tables at 100 and 120 columns wrap
the reason (never cut it with "…"), drop low-value columns first, `--wide` keeps them all; `advise`
never cuts an install command; `gpucompat --version`."""

import io
import re

import pytest
from rich.console import Console

from conftest import run_cli
from gpucompat.report.terminal import CELL_STEPS, AdviseTable, results_tables

UV_ERROR = (
    "uv cannot resolve it: Because torch==2.4.1 has no wheels with a matching Python ABI tag (e.g., `cp313`) and you "
    "require torch==2.4.1, we can conclude that your requirements are unsatisfiable. hint: You require CPython 3.13 "
    "(`cp313`), but we only found wheels for `torch` (v2.4.1) with the following Python ABI tags: `cp38`, `cp39`, `cp310`"
)
assert len(UV_ERROR) >= 300
WARNING = "ran under CUDA minor-version compatibility: runtime 13.5 on a driver that supports CUDA 13.0; PTX newer than the driver cannot be JIT-compiled"
BOX = re.compile(r"[\u2500-\u257f]")  # box-drawing characters


def row(**changes) -> dict:
    """A row shaped like gpucompat.report.rows.display_row's."""
    base = {"cell": 1, "sweep": 1, "created_at": None, "framework": "torch", "version": "2.4.1", "variant": "default", "python": "3.13",
            "env": "uv", "gpu": "NVIDIA H100 80GB HBM3", "cc": "9.0", "driver": "550.54.15", "cuda_runtime": "12.1", "cudnn": "9.1.0",
            "code": "PASS", "stage": "compute", "cause": None, "reason": "ran", "warnings": [], "duration_s": 12.34, "observed": True,
            "predicted": "pass", "predicted_code": "", "predicted_reason": ""}
    return {**base, **changes}


VALID = [row(), row(framework="cuda-runtime", version="13.5", python="3.12", cuda_runtime="13.5", cudnn="", warnings=[WARNING])]
INVALID = [
    row(code="ENV_UNRESOLVABLE", stage="resolve", reason=UV_ERROR, cuda_runtime="", cudnn="", duration_s=1.2),
    row(framework="tensorflow", version="not installed", variant="installed", python="3.12.3", env="current", code="IMPORT_FAILED",
        stage="import", reason="the framework does not import: ModuleNotFoundError: No module named 'tensorflow'", observed=False),
    row(framework="cuda-runtime", version="12.9", cuda_runtime="12.9", code="DRIVER_TOO_OLD", stage="device",
        reason="runtime 12.9 is newer than driver 550.54.15 supports (CUDA 12.4)"),
    # a code this module has never heard of (another change adds some): laid out like any other
    row(framework="jax", version="0.4.30", variant="cuda12", code="SOME_NEW_CODE", stage="", reason="a cause the tables know nothing about"),
]
SURPRISES = [{**INVALID[2], "predicted": "pass",
              "predicted_reason": "driver 550.54.15 supports CUDA 12.4, enough for runtime 12.9 under minor-version compatibility"}]


def render(items, width: int) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    for item in items:
        console.print(item, crop=False)  # as the CLI prints them: nothing is cut, so whatever is too wide shows here
    return console.export_text()


def words(text: str) -> list[str]:
    return BOX.sub(" ", text).split()


def in_order(needles: list[str], haystack: list[str]) -> bool:
    it = iter(haystack)
    return all(any(w == needle for w in it) for needle in needles)


def assert_fits(text: str, width: int) -> None:
    longest = max(text.splitlines(), key=len)
    assert len(longest) <= width, f"a line of {len(longest)} columns at width {width}:\n{longest}"
    assert "…" not in text and "..." not in text


@pytest.mark.parametrize("width", [100, 120])
def test_per_cell_tables_fit_and_wrap_the_reason(width):
    text = render(results_tables(SURPRISES, VALID, INVALID, per_cell=True), width)
    assert_fits(text, width)
    tokens = words(text)
    # the long reason wraps between its words: every word is there, whole and in order
    assert in_order(UV_ERROR.split(), tokens), text
    assert in_order(WARNING.split(), tokens)
    for key in ("Framework", "Version", "GPU", "Failure", "Reason", "Notes", "torch", "tensorflow", "cuda-runtime", "2.4.1", "12.9",
                "ENV_UNRESOLVABLE", "IMPORT_FAILED", "DRIVER_TOO_OLD", "SOME_NEW_CODE", "resolve", "device", "NVIDIA", "HBM3", "9.0",
                "default", "cuda12", "installed", "predicted"):
        assert key in tokens or any(key in t for t in tokens), f"{key} missing at width {width}:\n{text}"
    assert "Duration" not in tokens and "cuDNN" not in tokens, "the lowest-value columns go first"


def test_columns_are_given_up_in_order():
    """At every width, the optional columns shown are the ones latest in the order: never Python without Env."""
    table = results_tables([], VALID, INVALID, per_cell=True)[1]
    order = [step.key for step in CELL_STEPS]
    seen = set()
    for width in range(60, 260, 5):
        columns, widths = table.layout(width)
        assert sum(widths) + table.overhead(len(columns)) <= width
        shown = {c.key for c in columns}
        gone = [k for k in order if k not in shown]
        assert gone == order[:len(gone)], f"at {width}: {gone}"
        assert {"framework", "version", "gpu", "code", "reason"} <= shown
        seen.add(len(gone))
    assert 0 in seen and len(order) in seen, "from all columns on a wide terminal to all steps taken on a narrow one"


def test_wide_shows_every_column():
    text = render(results_tables(SURPRISES, VALID, INVALID, per_cell=True, wide=True), 100)
    tokens = words(text)
    for head in ("Python", "Env", "Driver", "CUDA", "runtime", "cuDNN", "Duration", "Stage", "Observed", "Predicted", "550.54.15", "12.3"):
        assert head in tokens, head
    assert "…" not in text
    assert in_order(UV_ERROR.split(), tokens)


@pytest.mark.parametrize("width", [100, 120])
def test_grouped_tables_fit(width):
    text = render(results_tables(SURPRISES, VALID, INVALID, per_cell=False), width)
    assert_fits(text, width)
    tokens = words(text)
    for key in ("ENV_UNRESOLVABLE", "(resolve)", "DRIVER_TOO_OLD", "SOME_NEW_CODE", "CC", "Reason", "9.0", "13.5"):
        assert key in tokens, key
    assert in_order(UV_ERROR.split(), tokens)  # the reason is in the grouped view too, wrapped, never cut


def advice(install: str) -> dict:
    item = {"source": "predicted", "version": "2.8.*", "variant": "cu129", "warnings": [WARNING], "install": install, "sweep": None, "driver": None}
    current = {**item, "source": "observed", "version": "2.11.0+cu130", "variant": "installed", "warnings": [], "install": None, "sweep": 3,
               "driver": "570.86.10"}
    return {"note": "observed: a stored sweep ran it on this GPU class; predicted: the knowledge rules expect it to work, not run",
            "observed": [current], "predicted": [item]}


@pytest.mark.parametrize("width", [60, 100, 120])
def test_advise_never_cuts_an_install_command(width):
    command = ("pip install 'torch==2.8.*' --index-url https://download.pytorch.org/whl/cu129 --extra-index-url "
               "https://pypi.org/simple")
    text = render([AdviseTable(advice(command))], width)
    assert "…" not in text
    assert any(command in line for line in text.splitlines()), f"the command is not on one line:\n{text}"
    table_lines = [line for line in text.splitlines() if command not in line]
    assert max(len(line) for line in table_lines) <= width
    if width >= 100:  # narrower, a long word may be folded (never cut)
        assert in_order(WARNING.split(), words(text))


def test_advise_keeps_a_short_command_in_the_table():
    command = "pip install 'nvidia-cuda-runtime==13.5.*'"
    text = render([AdviseTable(advice(command))], 120)
    assert_fits(text, 120)
    assert any(command in line and "│" in line for line in text.splitlines()), text


def _stored_sweep(url: str) -> None:
    from gpucompat.model import Outcome, ResolvedStack, Stack, Target
    from gpucompat.store import Store

    outcomes = {"12.4": ("PASS", "compute", "ran"), "12.9": ("DRIVER_TOO_OLD", "device", "runtime 12.9 is newer than the driver supports"),
                "11.8": ("ENV_UNRESOLVABLE", "resolve", UV_ERROR)}
    store = Store(url)
    resolved = [ResolvedStack(Stack("cuda-runtime", series, "default", "3.13", "uv"), True, cuda_runtime=series) for series in outcomes]
    sweep = store.create_sweep("wrapping", "sweep", "", None, {}, [Target("NVIDIA H100 80GB HBM3", "9.0", "550.54.15", count=1)], resolved,
                               lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome(*outcomes[cell.stack.version]), None)


def test_cli_results_fit_columns(isolated):
    url = f"sqlite:///{isolated / 'wrap.db'}"
    _stored_sweep(url)
    for cells in (["--cells"], []):
        text = run_cli("results", "--db", url, *cells, env={"COLUMNS": "100"}, check=0).stdout
        assert_fits(text, 100)
        assert "ENV_UNRESOLVABLE" in text and "DRIVER_TOO_OLD" in text
        if cells:
            assert in_order(UV_ERROR.split(), words(text)), text
    wide = run_cli("results", "--db", url, "--cells", "--wide", env={"COLUMNS": "100"}, check=0).stdout
    assert {"Driver", "Duration", "Env", "550.54.15"} <= set(words(wide)) and "…" not in wide
    piped = run_cli("results", "--db", url, "--cells", env={"COLUMNS": ""}, check=0).stdout  # no terminal, no $COLUMNS: a log
    assert "…" not in piped and max(len(line) for line in piped.splitlines()) <= 200


def test_version():
    proc = run_cli("--version", check=0)
    assert re.fullmatch(r"gpucompat \d+\.\d+\.\d+\S*\n", proc.stdout), proc.stdout
    from importlib.metadata import PackageNotFoundError, version

    try:
        expected = version("gpucompat")
    except PackageNotFoundError:  # a source tree on PYTHONPATH, not installed
        from gpucompat import __version__ as expected
    assert proc.stdout.split()[1] == expected
