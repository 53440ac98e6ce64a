"""`gpucompat report --site DIR` shows only real GPU classes and stacks (issue 34, item 7): a sweep run where no GPU was
visible stores its cells on a stand-in target ("no GPU visible", discover/local.py), and a `current`-env stack whose
framework is not installed stores only cells that could not be tested. Neither is a GPU class column or a stack row:
the cells that could not be tested are counted apart on every page, by cause with its sentence, and an invalid verdict
reached before any GPU (an unresolvable stack) is still shown as invalid.

Each store is a real SQLite store written through Store, as a sweep writes it (analysis.classify for the resolve
failures, analysis.untested for the cells that found no GPU), and the site is written by the real command.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from conftest import run_cli
from gpucompat.analysis import classify, untested
from gpucompat.discover.local import NO_GPU
from gpucompat.model import UNTESTED_CAUSES, Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.store import Store

SCRIPT = "<script>alert(1)</script>"
LOCAL_LINK = re.compile(r'(?:src|href)="(?!(?:stack|gpu)-[A-Za-z0-9._-]+\.html(?:#[A-Za-z0-9._-]+)?"|index\.html"|#)')
H100 = Target("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", count=1)
A100 = Target("NVIDIA A100-SXM4-80GB", "8.0", "535.104.05", count=4)
A40 = Target("NVIDIA A40", "8.6", "550.54.15", count=2)  # a declared class whose every job was given no GPU
UNRESOLVABLE = ("  × No solution found when resolving dependencies:\n  ╰─▶ Because there is no version of torch==9.9.9 and you "
                "require torch==9.9.9, we can conclude that your requirements are unsatisfiable.")


def _predict(resolved, target):
    return {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}


def _stacks() -> dict[str, ResolvedStack]:
    return {
        "cuda 12.4": ResolvedStack(Stack("cuda-runtime", "12.4", "cu12", "3.12", "uv"), True, cuda_runtime="12.4"),
        "cuda 12.6": ResolvedStack(Stack("cuda-runtime", "12.6", "cu12", "3.12", "uv"), True, cuda_runtime="12.6"),
        "torch current": ResolvedStack(Stack("torch", "installed", "installed", "current", "current"), False,
                                       error="no torch in /usr/bin/python3", cause="not-installed"),
        "torch 9.9.9": ResolvedStack(Stack("torch", "9.9.9", "cu121", "3.12", "uv"), False, error=UNRESOLVABLE),
        "torch 2.5.1": ResolvedStack(Stack("torch", "2.5.1", "cu121", "3.12", "uv"), True, cuda_runtime="12.1"),
        "tensorflow": ResolvedStack(Stack("tensorflow", "2.17.0", "and-cuda", "3.12", "uv"), True, cuda_runtime="12.3"),
    }


def _no_gpu_sweep(url: str) -> None:
    """A sweep on a machine without a GPU: the stand-in target; the CUDA runtimes found no GPU (no-gpu), torch is not
    installed in the interpreter (not-installed), and torch 9.9.9 does not exist (ENV_UNRESOLVABLE, a verdict)."""
    store = Store(url)
    stacks = _stacks()
    resolved = [stacks[name] for name in ("cuda 12.4", "cuda 12.6", "torch current", "torch 9.9.9")]
    sweep = store.create_sweep("quick", "sweep", "", None, {}, [NO_GPU], resolved, _predict)
    for cell in store.cells_of(sweep):
        if cell.resolved.ok:
            outcome = untested("device", "no-gpu", "the NVIDIA driver is not loaded: no /dev/nvidiactl", {})
            store.record_result(cell.id, outcome, Observation({}, duration_s=0.4))
        else:
            store.record_result(cell.id, classify(cell.resolved, None), None)
    store.finish_sweep(sweep, "done")
    store.close()


def _gpu_sweep(url: str) -> None:
    """A sweep on real GPU classes: the CUDA runtime passed on both, torch 2.5.1 passed on the H100 and could not be
    tested on the A100 (the network failed: a could-not-test mark inside the grid), torch not installed here either, a
    tensorflow cell whose cause came from a hostile bundle, and an A40 whose jobs were all given no GPU."""
    store = Store(url)
    stacks = _stacks()
    resolved = [stacks[name] for name in ("cuda 12.4", "torch 2.5.1", "torch current", "tensorflow")]
    sweep = store.create_sweep("gpus", "sweep", "", None, {}, [H100, A100, A40], resolved, _predict)
    for cell in store.cells_of(sweep):
        name, framework = cell.target.name, cell.resolved.stack.framework
        if not cell.resolved.ok:
            outcome = classify(cell.resolved, None)
        elif name == A40.name:
            outcome = untested("device", "no-gpu", "CUDA_VISIBLE_DEVICES is empty in the job", {})
        elif framework == "tensorflow":
            outcome = Outcome("UNTESTED", "install", f"could not test: {SCRIPT}", {"cause": SCRIPT}, cause=None)
        elif framework == "torch" and name == A100.name:
            outcome = untested("install", "network", "connection reset fetching torch-2.5.1", {"install_log": "reset"})
        else:
            outcome = Outcome("PASS", "compute", "ran matmul on the GPU")
        store.record_result(cell.id, outcome, Observation({}, duration_s=2.0))
    store.finish_sweep(sweep, "done")
    store.close()


def _site(tmp_path: Path, *sweeps) -> tuple[str, Path, dict[str, str]]:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    for sweep in sweeps:
        sweep(url)
    proc = run_cli("report", "--db", url, "--site", str(tmp_path / "site"), check=0)
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "site").glob("*.html")}
    for name, text in pages.items():
        assert SCRIPT not in text and not LOCAL_LINK.search(text) and "default-src 'none'" in text, name
    return proc.stderr, tmp_path / "site", pages


def _between(text: str, start: str, end: str) -> str:
    at = text.index(start)
    return text[at:text.index(end, at)]


def _apart(page: str) -> str:
    return page[page.index('id="could-not-test"'):]


def _causes(page: str) -> dict[str, int]:
    """The could-not-test section's count of each cause."""
    return {cause: int(n) for n, cause in re.findall(r'<li class="cause"><b>(\d+)</b> <code>([^<]*)</code>', _apart(page))}


def _sentence(cause: str) -> str:
    return str(escape(UNTESTED_CAUSES[cause]))


def _stack_file(index: str, label: str) -> str:
    return re.search(r'<a href="(stack-[^"]+)">' + re.escape(str(escape(label))) + "</a>", index).group(1)


def test_a_site_of_a_sweep_without_a_gpu_has_no_gpu_class_and_no_untested_stack(tmp_path):
    said, site, pages = _site(tmp_path, _no_gpu_sweep)
    assert "1 stacks on 0 GPU classes (4 newest results)" in said, said
    index = pages["index.html"]
    # no "no GPU visible" column or page: no matrix at all, and a sentence that says why
    assert not any(name.startswith("gpu-") for name in pages) and 'id="matrix"' not in index
    assert "No GPU class has a result here" in index and "no GPU visible" not in index[:index.index('id="could-not-test"')]
    # no stack row (nor page) for torch as it is not installed, nor for the CUDA runtimes that found no GPU
    stacks = _between(index, 'id="stacks"', "</table>")
    assert "not installed" not in stacks and "cuda-runtime" not in stacks
    assert sorted(n for n in pages if n.startswith("stack-")) == [_stack_file(index, "torch 9.9.9 [cu121] py3.12 uv")]
    # the cells that could not be tested, counted apart by cause, each with its sentence
    apart = _apart(index)
    assert "<b>3</b> cells of this site could not be tested" in apart
    assert _causes(index) == {"no-gpu": 2, "not-installed": 1}
    assert _sentence("no-gpu") in apart and _sentence("not-installed") in apart
    assert "torch not installed [-] py? current on no GPU visible (no GPU class)" in apart  # no probe ran: no Python read
    # the unresolvable stack is still invalid: counted so, and shown as invalid on its page
    counts = _between(index, '<p class="counts">', "</p>")
    assert '<b>1</b> invalid' in counts and '<b>0</b> valid' in counts and "<b>3</b> could not be tested" in counts
    assert re.search(r'<td class="num">0</td><td class="num">1</td><td class="num">0</td>', stacks)
    page = pages[_stack_file(index, "torch 9.9.9 [cu121] py3.12 uv")]
    before = _between(page, "<h2>Before any GPU</h2>", "</table>")
    assert '<tr class="invalid" data-status="invalid">' in before and "ENV_UNRESOLVABLE at resolve" in before
    assert "no version of torch==9.9.9" in before and "Every cell of this stack was tested." in page


def test_real_gpu_classes_beside_a_sweep_without_a_gpu(tmp_path):
    said, site, pages = _site(tmp_path, _no_gpu_sweep, _gpu_sweep)
    assert "3 stacks on 2 GPU classes" in said, said
    index = pages["index.html"]
    matrix = _between(index, 'id="matrix"', "</table>")
    # only the real classes: not the stand-in, not the A40 whose every cell found no GPU
    assert re.findall(r'<th class="gpu"><a href="gpu-[^"]+">([^<]+)</a>', matrix) == [H100.name, A100.name]
    assert sum(name.startswith("gpu-") for name in pages) == 2 and "no GPU visible" not in matrix and "A40" not in matrix
    assert '<tr data-framework="tensorflow">' not in matrix  # its only stack could not be tested anywhere
    # the stacks: each with a verdict somewhere; never torch as not installed, the CUDA 12.6 that met no GPU, tensorflow
    stacks = _between(index, 'id="stacks"', "</table>")
    labels = re.findall(r'<a href="stack-[^"]+">([^<]+)</a>', stacks)
    assert labels == ["cuda-runtime 12.4 [cu12] py3.12 uv", "torch 9.9.9 [cu121] py3.12 uv", "torch 2.5.1 [cu121] py3.12 uv"]
    # counted apart, by cause: no GPU (2 on the stand-in, 3 on the A40), not installed (on the stand-in and on each of
    # the three classes), the network (torch on the A100), and the hostile bundle's cause (tensorflow on the H100 and the A100)
    assert _causes(index) == {"no-gpu": 5, "not-installed": 4, "network": 1, SCRIPT.replace("<", "&lt;").replace(">", "&gt;"): 2}
    assert "<b>12</b> cells of this site could not be tested" in index and _sentence("network") in index
    assert "a cause this gpucompat does not know" in index and "&lt;script&gt;alert(1)&lt;/script&gt;" in index
    counts = _between(index, '<p class="counts">', "</p>")
    assert "<b>3</b> valid" in counts and "<b>1</b> invalid" in counts and "<b>12</b> could not be tested" in counts
    # torch on the A100: the could-not-test mark inside the grid, never valid nor invalid
    torch = _between(matrix, '<tr data-framework="torch">', "</tr>")
    assert re.findall(r'<td class="count (\w+)"><a [^>]*>(\d+) / (\d+) / (\d+)</a>', torch) == [("valid", "1", "0", "0"),
                                                                                               ("untested", "0", "0", "1")]
    page = pages[_stack_file(index, "torch 2.5.1 [cu121] py3.12 uv")]
    verdicts = _between(page, '<table class="verdicts">', "</table>")
    assert verdicts.count('data-status="valid"') == 1 and verdicts.count('data-status="untested"') == 1
    assert "could not test (network) at install" in verdicts and 'data-status="invalid"' not in verdicts
    assert "<b>2</b> cells of this stack could not be tested" in page and _causes(page) == {"network": 1, "no-gpu": 1}
    assert "NVIDIA A40 (CC 8.6) (no GPU class)" in _apart(page)  # named apart, never a class: its page does not exist
    # the A100's page: the torch row marked, and its cells of stacks that are no row (not installed, tensorflow) counted apart
    a100 = next(text for name, text in pages.items() if name.startswith("gpu-NVIDIA-A100"))
    assert '<tr class="untested">' in a100 and "not installed" not in _between(a100, "<h2", 'id="could-not-test"')
    assert _causes(a100) == {"network": 1, "not-installed": 1, "&lt;script&gt;alert(1)&lt;/script&gt;": 1}
    # the CUDA runtime's page: valid on both classes, and its cells that found no GPU (the stand-in, the A40) apart
    cuda = pages[_stack_file(index, "cuda-runtime 12.4 [cu12] py3.12 uv")]
    verdicts = _between(cuda, '<table class="verdicts">', "</table>")
    assert verdicts.count('data-status="valid"') == 2 and "no GPU visible" not in verdicts and "A40" not in verdicts
    assert _causes(cuda) == {"no-gpu": 2} and "no GPU visible (no GPU class)" in _apart(cuda)
    assert "<h2>Before any GPU</h2>" not in cuda


def test_a_no_device_stored_where_no_gpu_was_visible_is_counted_apart(tmp_path):
    """A store from before the cause no-gpu: a device-stage failure on the stand-in target says nothing of the stack."""
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    torch = ResolvedStack(Stack("torch", "2.5.1", "cu121", "3.12", "uv"), True, cuda_runtime="12.1")
    sweep = store.create_sweep("old", "sweep", "", None, {}, [H100, NO_GPU], [torch], _predict)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, Outcome("PASS", "compute", "ran matmul") if cell.target.cc else
                            Outcome("NO_DEVICE", "device", "CUDA sees no GPU in this process"), Observation({}))
    store.close()
    run_cli("report", "--db", url, "--site", str(tmp_path / "site"), check=0)
    index = (tmp_path / "site" / "index.html").read_text(encoding="utf-8")
    counts = _between(index, '<p class="counts">', "</p>")
    assert "<b>1</b> valid" in counts and "<b>0</b> invalid" in counts and "<b>1</b> could not be tested" in counts
    assert _causes(index) == {"no-gpu": 1} and "stored as NO_DEVICE at device" in _apart(index)
    assert len(list((tmp_path / "site").glob("gpu-*.html"))) == 1


@pytest.mark.parametrize("only", ["no GPU", "not installed"])
def test_a_store_of_nothing_but_cells_that_could_not_be_tested(tmp_path, only):
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    stacks = _stacks()
    resolved = [stacks["cuda 12.4"]] if only == "no GPU" else [stacks["torch current"]]
    sweep = store.create_sweep("quick", "sweep", "", None, {}, [NO_GPU] if only == "no GPU" else [H100], resolved, _predict)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, untested("device", "no-gpu", "no driver", {}) if cell.resolved.ok else
                            classify(cell.resolved, None), None)
    store.close()
    proc = run_cli("report", "--db", url, "--site", str(tmp_path / "site"), check=0)
    assert "0 stacks on 0 GPU classes (1 newest results)" in proc.stderr, proc.stderr
    pages = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "site").glob("*.html")}
    assert list(pages) == ["index.html"]
    index = pages["index.html"]
    assert "No GPU class has a result here" in index and "No stack has a verdict here yet" in index and 'id="filter"' not in index
    assert "<b>1</b> cell of this site could not be tested" in index
    assert _causes(index) == ({"no-gpu": 1} if only == "no GPU" else {"not-installed": 1})
    # the H100 is a GPU class nothing ran on (issue 39 section 2): listed apart as not tested, never as none
    assert ("no GPU visible (no GPU class)" if only == "no GPU" else "NVIDIA H100 80GB HBM3 (CC 9.0) (not tested: nothing ran on it)") in _apart(index)
    if only == "not installed":
        assert "NVIDIA H100 80GB HBM3 (CC 9.0): not tested: no job ran on it: 1 cell not-installed" in index


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="no chromium on PATH (.ci/run installs Debian's chromium)")
def test_a_site_of_nothing_tested_runs_its_script_without_an_error_in_chromium(tmp_path):
    """The index without a list of stacks has no filter box: its small script does nothing, and throws nothing."""
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is part of the test extra")
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(url)
    sweep = store.create_sweep("quick", "sweep", "", None, {}, [NO_GPU], [_stacks()["cuda 12.4"]], _predict)
    for cell in store.cells_of(sweep):
        store.record_result(cell.id, untested("device", "no-gpu", "no driver", {}), None)
    store.close()
    run_cli("report", "--db", url, "--site", str(tmp_path / "site"), check=0)
    errors, requests = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or shutil.which("chromium-browser"), args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"])
        page = browser.new_page()
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: requests.append(request.url))
        page.goto((tmp_path / "site" / "index.html").as_uri())
        assert page.locator("table.matrix").count() == 0 and page.locator("#stacks").count() == 0
        cause = page.locator("#could-not-test li.cause")
        assert cause.count() == 1 and "no-gpu" in cause.inner_text() and UNTESTED_CAUSES["no-gpu"] in cause.inner_text()
        browser.close()
    assert not errors and all(url.startswith("file://") for url in requests), (errors, requests)


L40S = Target("NVIDIA L40S", "8.9", "550.54.15", declared=True, gres="l40s")  # a gres type no node has: the scheduler places nothing
V100 = Target("NVIDIA V100", "7.0", "535.104.05", declared=True, gres="v100")  # a store from before not-scheduled: NO_MATCH stored
GRES_REFUSED = "sbatch --test-only --gres=gpu:l40s:1: sbatch: error: Invalid generic resource (gres) specification"
PROBE_DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  575.57.08  Sat May 24 00:00:00 UTC 2025"


def _predict_pass(resolved, target):
    return {"verdict": "pass", "code": None, "stage": None, "warnings": [], "reasons": []}


def _unplaced_sweep(url: str) -> None:
    """A sweep of declared classes: the H100's jobs ran (the probe read driver 575.57.08, not the plan's 580.159.04), the
    L40S's never started (classified now: UNTESTED not-scheduled), the V100's stored as an older gpucompat stored it
    (NO_MATCH), and tensorflow in the interpreter stored as IMPORT_FAILED (before the cause not-installed existed)."""
    store = Store(url)
    stacks = _stacks()
    tensorflow = ResolvedStack(Stack("tensorflow", "installed", "installed", "current", "current"), True)
    sweep = store.create_sweep("declared", "sweep", "", None, {}, [H100, L40S, V100], [stacks["cuda 12.4"], tensorflow], _predict_pass)
    missing = {"type": "ModuleNotFoundError", "message": "No module named 'tensorflow'", "traceback": "import tensorflow as tf"}
    for cell in store.cells_of(sweep):
        name, framework = cell.target.name, cell.resolved.stack.framework
        facts = {}
        if name == L40S.name:
            outcome = classify(cell.resolved, Observation({}, no_match=GRES_REFUSED))
        elif name == V100.name:
            outcome = Outcome("NO_MATCH", "schedule", "no node has GPU type v100", {"scheduler": "no node has GPU type v100"})
        elif framework == "tensorflow":
            outcome = Outcome("IMPORT_FAILED", "import", "the framework does not import: ModuleNotFoundError: No module named 'tensorflow'",
                              {"stage_facts": {"ok": False, "facts": {}, "error": missing}})
            facts = {"system": {"proc_driver_version": PROBE_DRIVER}}
        else:
            outcome, facts = Outcome("PASS", "compute", "ran matmul on the GPU"), {"system": {"proc_driver_version": PROBE_DRIVER}}
        store.record_result(cell.id, outcome, Observation(facts, duration_s=1.0))
    store.finish_sweep(sweep, "done")
    store.close()


def test_a_class_the_scheduler_could_not_place_is_listed_apart_never_a_column(tmp_path):
    """Issue 39 sections 2 and 8c: a job that never started is could-not-test not-scheduled (as is NO_MATCH stored by an older
    gpucompat), never invalid and never a surprise; a class nothing ran on is listed apart with the scheduler's words, with no
    column and no page; "Drivers seen" is what a probe read; a framework an old store found not installed is not invalid."""
    said, site, pages = _site(tmp_path, _unplaced_sweep)
    assert "1 stacks on 1 GPU classes" in said, said
    index = pages["index.html"]
    matrix = _between(index, 'id="matrix"', "</table>")
    assert re.findall(r'<th class="gpu"><a href="gpu-[^"]+">([^<]+)</a>', matrix) == [H100.name]
    assert [n for n in pages if n.startswith("gpu-")] == [n for n in pages if n.startswith("gpu-NVIDIA-H100")]
    listed = _between(index, '<ul class="not-tested">', "</ul>")
    assert f"NVIDIA L40S (CC 8.9): not tested: no job of it started: {escape(GRES_REFUSED)}" in listed
    assert "NVIDIA V100 (CC 7.0): not tested: no job of it started: no node has GPU type v100" in listed
    counts = _between(index, '<p class="counts">', "</p>")
    assert "<b>1</b> valid" in counts and "<b>0</b> invalid" in counts and "<b>5</b> could not be tested" in counts
    assert _causes(index) == {"not-scheduled": 4, "not-installed": 1} and _sentence("not-scheduled") in index
    assert "NVIDIA L40S (CC 8.9) (not tested: nothing ran on it)" in _apart(index)
    assert "tensorflow" not in _between(index, 'id="stacks"', "</table>") and "IMPORT_FAILED" not in index
    h100 = next(text for name, text in pages.items() if name.startswith("gpu-NVIDIA-H100"))
    assert "Drivers seen: 575.57.08</p>" in h100 and "580.159.04" not in h100  # the plan's driver: never "seen"
    # the same store through results: not invalid, no surprise, each cell with its cause
    url = f"sqlite:///{tmp_path / 'store.db'}"
    data = json.loads(run_cli("results", "--db", url, "--json", "--cells", check=0).stdout)
    assert [r["code"] for r in data["invalid"]] == [] and data["counts"]["surprises"] == 0
    assert sorted(r["cause"] for r in data["untested"]) == ["not-installed"] + ["not-scheduled"] * 4
    assert json.loads(run_cli("results", "--db", url, "--surprises", "--json", check=0).stdout) == []
