"""`gpucompat report --site DIR`: the static compatibility site, from real GPU stores (docs/evidence) joined by bundles,
with a stack and a GPU class named in HTML; escaped, offline, whole without JavaScript, and driven in a real Chromium.

The README's pictures come from a real sweep instead (docs/evidence/site_screenshots.py), never from these test payloads.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from conftest import REPO, run_cli
from gpucompat.answers.advise import install_command
from gpucompat.model import Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.store import Store

EVIDENCE = REPO / "docs" / "evidence"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(2)>"
LOCAL_LINK = re.compile(r'(?:src|href)="(?!(?:stack|gpu)-[A-Za-z0-9._-]+\.html(?:#[A-Za-z0-9._-]+)?"|index\.html"|#)')


def _predict(resolved, target):
    return {"verdict": "pass" if resolved.stack.version == "2.5.1" else "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []}


def _hostile_sweep(url: str) -> None:
    """A sweep run here whose names are HTML: a stack version with a <script>, a GPU class with an <img onerror>."""
    store = Store(url)
    stacks = [ResolvedStack(Stack("torch", "2.5.1", "cu121", "3.12", "uv"), True, cuda_runtime="12.1"),
              ResolvedStack(Stack("torch", SCRIPT, "default", "3.12", "uv"), True)]
    targets = [Target("NVIDIA H100 80GB HBM3", "9.0", "580.159.04", count=1), Target(IMG, "8.0", "535.104.05", count=1)]
    sweep = store.create_sweep("<b>night</b>", "sweep", "", None, {}, targets, stacks, _predict)
    for cell in store.cells_of(sweep):
        if cell.stack.version == "2.5.1" and cell.target.cc == "9.0":
            store.record_result(cell.id, Outcome("PASS", "compute", "ran matmul on the GPU"), Observation({}, duration_s=2.0))
        else:
            store.record_result(cell.id, Outcome("COMPUTE_ERROR", "compute", f"RuntimeError: {SCRIPT}", {"stderr_tail": f"</pre>{SCRIPT}"}),
                                Observation({}))
    store.close()


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    """A store as a site would hold one: an H200 sweep run here, an H100 bench sweep and GPU-state checks imported from
    two other sites, and the hostile sweep; and the site written from it. The GPU-state store also holds two checks run
    where no GPU was visible (stored as NO_DEVICE, before the cause no-gpu): counted apart, never a GPU class. h100-lab
    signs its bundle with its own key, which this site trusts; state-lab's bundle is unsigned, imported with --untrusted."""
    tmp = tmp_path_factory.mktemp("site")
    shutil.copyfile(EVIDENCE / "knowledge-h200" / "knowledge.db", tmp / "store.db")
    url = f"sqlite:///{tmp / 'store.db'}"
    here, h100 = {"XDG_CONFIG_HOME": str(tmp / "here")}, {"XDG_CONFIG_HOME": str(tmp / "h100-lab-config")}
    run_cli("key", env=h100, check=0)
    run_cli("trust", "add", "h100-lab", str(tmp / "h100-lab-config" / "gpucompat" / "site-key.pub"), env=here, check=0)
    for name, db, sign, trust in (("h100-lab", EVIDENCE / "bench-h100" / "bench.db", [], []),
                                  ("state-lab", EVIDENCE / "gpu-state-h100" / "gpu-state.db", ["--unsigned"], ["--untrusted"])):
        shutil.copyfile(db, tmp / f"{name}.db")
        run_cli("export", "--db", f"sqlite:///{tmp / name}.db", "--bundle", str(tmp / f"{name}.gz"), "--site", name, *sign, env=h100, check=0)
        run_cli("import", str(tmp / f"{name}.gz"), "--db", url, *trust, env=here, check=0)
    _hostile_sweep(url)
    proc = run_cli("report", "--db", url, "--site", str(tmp / "site"), check=0)
    assert re.search(r"wrote \d+ pages under .*: \d+ stacks on 3 GPU classes", proc.stderr), proc.stderr
    return url, tmp / "site"


def _pages(site: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")}


def _stack_page(site: Path, label: str) -> str:
    index = (site / "index.html").read_text(encoding="utf-8")
    return re.search(r'<a href="(stack-[^"]+)">' + re.escape(str(escape(label))) + "</a>", index).group(1)


def test_every_value_is_escaped_and_nothing_is_fetched(published):
    _url, site = published
    pages = _pages(site)
    assert "index.html" in pages and sum(n.startswith("stack-") for n in pages) >= 8 and sum(n.startswith("gpu-") for n in pages) == 3
    for name, text in pages.items():
        assert SCRIPT not in text and "<img src=x" not in text and "<b>night" not in text, name
        assert not LOCAL_LINK.search(text), (name, LOCAL_LINK.search(text).group(0))  # only the site's own pages are linked
        assert "default-src 'none'" in text  # the browser fetches nothing, whatever a value holds
    hostile = pages[_stack_page(site, f"torch {SCRIPT} [default] py3.12 uv")]
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in hostile and "&lt;img src=x onerror=alert(2)&gt;" in hostile
    assert pages["index.html"].count("<script>") == 1  # the filter's own, and nothing stored
    assert "from the source" not in pages["index.html"]  # no --source: a bench figure's own source never names the site's


def test_the_index_matrix_counts_the_newest_result_of_each_stack(published):
    _url, site = published
    index = (site / "index.html").read_text(encoding="utf-8")
    matrix = index[index.index('id="matrix"'):index.index("</table>", index.index('id="matrix"'))]
    torch = re.search(r'<tr data-framework="torch">(.*?)</tr>', matrix, re.S).group(1)
    # torch on the H100: the bench sweeps' stack passed, the hostile sweep's 2.5.1 passed, its <script> one failed
    counts = re.findall(r'<td class="count (\w+)">(?:<a [^>]*>(\d+) / (\d+) / (\d+)</a>|–)', torch)
    assert ("mixed", "2", "1", "0") in counts and any(c[0] == "invalid" for c in counts)
    for framework in ("cuda-runtime", "cupy", "jax", "torch"):
        assert f'<tr data-framework="{framework}">' in matrix
    # the H200 store's tensorflow, stored IMPORT_FAILED before the cause not-installed existed (No module named 'tensorflow'
    # in the interpreter as it is): could not test, never invalid, and no row (issue 39 item 8c)
    assert '<tr data-framework="tensorflow">' not in matrix and "IMPORT_FAILED" not in index
    assert "tensorflow not installed [-] py3.12.3 current on <a" in index[index.index('id="could-not-test"'):]
    # the checks run where no GPU was visible: no column, counted apart as could not test (no GPU to find)
    assert "no GPU visible" not in matrix and not any("no-GPU-visible" in name for name in _pages(site))
    apart = index[index.index('id="could-not-test"'):]
    assert re.search(r"<b>\d+</b> cells of this site could not be tested", apart) and "<code>no-gpu</code>" in apart
    assert "stored as NO_DEVICE at device" in apart


def test_a_stack_page_says_how_to_use_it_here_with_its_evidence_and_bench_figures(published):
    _url, site = published
    page = (site / _stack_page(site, "torch 2.5.1 [cu121] py3.12 uv")).read_text(encoding="utf-8")
    assert f"<code class=\"command\">{escape(install_command('torch', '2.5.1', 'cu121'))}</code>" in page
    assert "--index-url https://download.pytorch.org/whl/cu121" in page  # the variant's index, as `advise` writes it
    bench = sorted(n for n, text in _pages(site).items() if n.startswith("stack-") and "<h2>Bench figures</h2>" in text)
    assert len(bench) == 5, "the H100 bench sweep's figures are on its five stacks' pages"
    text = (site / next(n for n in bench if n.startswith("stack-torch"))).read_text(encoding="utf-8")
    # its figures and its verdict are h100-lab's (signed, trusted): state-lab's newer check was imported unverified, and an
    # unverified row never replaces a verified one, however new (as explain ranks observations)
    assert "<td>matmul</td>" in text and "TFLOP/s" in text and "(h100-lab)" in text


def test_each_page_names_its_sources_and_marks_what_is_unverified(published):
    """state-lab's bundle was unsigned, imported with --untrusted: the index names it UNVERIFIED among the sources, and its
    H100 checks, newer than h100-lab's signed sweep of the same stacks, never replace those (an unverified row never
    outranks a verified one, however new, as explain ranks observations); each GPU class's and stack's page names its
    sources; h100-lab's (signed, trusted) and this site's own say nothing."""
    _url, site = published
    pages = _pages(site)
    fingerprint = re.search(r"h100-lab \(verified: key ([0-9a-f-]{19})\)", pages["index.html"]).group(1)
    assert "state-lab (UNVERIFIED: unsigned)" in pages["index.html"] and "local (run here)" in pages["index.html"]
    h100 = next(text for name, text in pages.items() if name.startswith("gpu-NVIDIA-H100"))
    sources = re.search(r'<p class="meta sources">(.*?)</p>', h100).group(1)
    assert f"h100-lab (verified: key {fingerprint})" in sources and "state-lab" not in sources
    rows = re.findall(r'<tr class="([a-z ]+)"[^>]*>(.*?)</tr>', h100, re.S)
    assert rows and not any("unverified" in css or "(state-lab)" in row for css, row in rows)
    assert any("(h100-lab)" in row and "UNVERIFIED" not in row for _css, row in rows)
    for name, text in pages.items():  # every stack page names its sources; only state-lab's rows would be marked
        if name.startswith("stack-"):
            assert '<p class="meta sources">Sources: ' in text, name
            assert ("state-lab" in text) == ("UNVERIFIED" in text), name


def test_the_source_filter_and_a_second_run(published, tmp_path):
    url, _site = published
    only = tmp_path / "only"
    run_cli("report", "--db", url, "--site", str(only), "--source", "h100-lab", check=0)
    pages = _pages(only)
    assert all("h100-lab" in text for name, text in pages.items() if name.startswith("stack-"))
    assert "from the source h100-lab only" in pages["index.html"]
    assert not any(SCRIPT in text or "&lt;script&gt;alert" in text for text in pages.values())
    run_cli("report", "--db", url, "--site", str(only), check=0)  # the site's own directory: its pages replaced
    assert len(_pages(only)) > len(pages) and (only / ".gpucompat-site").is_file()
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    proc = run_cli("report", "--db", url, "--site", str(other))
    assert proc.returncode == 2 and "holds files gpucompat did not write" in proc.stderr and (other / "notes.txt").read_text() == "mine"
    assert run_cli("report", "--db", url, "--site", str(tmp_path / "x"), "--source", "nowhere").returncode == 2


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on PATH (.ci/run installs Debian's chromium)")
def test_the_site_in_headless_chromium(published, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is part of the test extra")
    _url, site = published
    shots = tmp_path  # never into docs/: its pictures come from a real sweep (docs/evidence/site_screenshots.py)
    requests, dialogs = [], []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.on("request", lambda request: requests.append(request.url))
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto((site / "index.html").as_uri())
        assert page.locator("table.matrix tr[data-framework]").count() == 4  # tensorflow not installed: no row
        assert page.locator("table.matrix th.gpu").count() == 3
        assert IMG in page.locator("table.matrix").inner_text()  # the GPU class's name, as text
        page.screenshot(path=str(shots / "site-index.png"), full_page=True)
        # the filter: a small script; the words narrow the list
        box = page.locator("#filter")
        assert box.is_visible()
        box.fill("script")
        visible = page.locator("#stacks tr[data-framework]:visible")
        assert visible.count() == 1 and SCRIPT in visible.inner_text()
        visible.locator("a").click()
        assert page.locator("h1.stack-name").inner_text() == f"torch {SCRIPT} [default] py3.12 uv"  # shown as text, never run
        assert SCRIPT in page.locator("table.verdicts").inner_text()
        # a failure's evidence is a click away
        evidence = page.locator("table.verdicts details:has(pre)").first
        assert not evidence.locator("pre").is_visible()
        evidence.locator("summary").click()
        assert evidence.locator("pre").is_visible()
        # a stack that works: how to install it, its bench figures
        bench_page = next(n for n in sorted(os.listdir(site)) if n.startswith("stack-torch") and "Bench figures" in (site / n).read_text())
        page.goto((site / bench_page).as_uri())
        assert page.locator("table.bench tr").count() > 1 and page.locator("ul.use li").count() >= 1
        page.screenshot(path=str(shots / "site-stack.png"), full_page=True)
        # without JavaScript: every stack listed, no filter box
        context = browser.new_context(java_script_enabled=False)
        plain = context.new_page()
        plain.goto((site / "index.html").as_uri())
        assert not plain.locator("#filter").is_visible()
        assert plain.locator("#stacks tr[data-framework]:visible").count() == len([n for n in os.listdir(site) if n.startswith("stack-")])
        browser.close()
    assert not dialogs and all(url.startswith("file://") for url in requests), (dialogs, requests)
    assert (shots / "site-index.png").stat().st_size > 10_000 and (shots / "site-stack.png").stat().st_size > 10_000


SITE_PLAN = """
name = "site-a"
executor = "slurm"
[[targets]]
name = "NVIDIA H100 80GB HBM3"
cc = "9.0"
gres = "h100"
[[targets]]
name = "NVIDIA L40S"
cc = "8.9"
gres = "l40s"
[[stacks]]
framework = "cuda-runtime"
versions = ["12.4"]
"""
PROBE_DRIVER = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.65.06  Sat May 24 00:00:00 UTC 2025"


def _site_a_sweep(url: str, plan_text: str) -> None:
    """A sweep of SITE_PLAN as this site runs it: CUDA 12.4 passed on the H100 (its probe read driver 580.65.06), the L40S's
    job never started (a gres type no node has)."""
    from gpucompat.analysis import classify

    store = Store(url)
    resolved = [ResolvedStack(Stack("cuda-runtime", "12.4", "cu12", "3.12", "uv"), True, cuda_runtime="12.4")]
    targets = [Target("NVIDIA H100 80GB HBM3", "9.0", None, count=1, declared=True, gres="h100"),
               Target("NVIDIA L40S", "8.9", None, count=1, declared=True, gres="l40s")]
    sweep = store.create_sweep("site-a", "sweep", plan_text, "site-a.toml", {}, targets, resolved, _predict)
    for cell in store.cells_of(sweep):
        if cell.target.gres == "h100":
            store.record_result(cell.id, Outcome("PASS", "compute", "ran a kernel"),
                                Observation({"system": {"proc_driver_version": PROBE_DRIVER}}, duration_s=1.0))
        else:
            said = "sbatch --test-only --gres=gpu:l40s:1: sbatch: error: Invalid generic resource (gres) specification"
            store.record_result(cell.id, classify(cell.resolved, Observation({}, no_match=said)), Observation({}))
    store.finish_sweep(sweep, "done")
    store.close()


@pytest.fixture(scope="module")
def site_a(tmp_path_factory):
    """Site A: two sweeps of one plan (an H100 and an L40S, Slurm), and three bundles imported: siteb's H200 store (signed,
    trusted), h100-lab's H100 bench store (signed, trusted) and state-lab's H100 checks (unsigned, --untrusted); then relay's
    bundle, which carries h100-lab's two sweeps again under relay's own key (trusted here)."""
    tmp = tmp_path_factory.mktemp("site-a")
    url = f"sqlite:///{tmp / 'store.db'}"
    plan = tmp / "site-a.toml"
    plan.write_text(SITE_PLAN)
    for _ in range(2):
        _site_a_sweep(url, SITE_PLAN)
    here = {"XDG_CONFIG_HOME": str(tmp / "here")}
    for name, db, trusted in (("siteb", EVIDENCE / "knowledge-h200" / "knowledge.db", True),
                              ("h100-lab", EVIDENCE / "bench-h100" / "bench.db", True),
                              ("state-lab", EVIDENCE / "gpu-state-h100" / "gpu-state.db", False)):
        theirs = {"XDG_CONFIG_HOME": str(tmp / f"{name}-config")}
        shutil.copyfile(db, tmp / f"{name}.db")
        if trusted:
            run_cli("key", env=theirs, check=0)
            run_cli("trust", "add", name, str(tmp / f"{name}-config" / "gpucompat" / "site-key.pub"), env=here, check=0)
        run_cli("export", "--db", f"sqlite:///{tmp / name}.db", "--bundle", str(tmp / f"{name}.gz"), "--site", name,
                *([] if trusted else ["--unsigned"]), env=theirs, check=0)
        run_cli("import", str(tmp / f"{name}.gz"), "--db", url, *([] if trusted else ["--untrusted"]), env=here, check=0)
    # relay imported h100-lab's bundle and exports its two sweeps again, signed with relay's key: one sweep is one sweep
    relay = {"XDG_CONFIG_HOME": str(tmp / "relay-config")}
    run_cli("key", env=relay, check=0)
    run_cli("trust", "add", "h100-lab", str(tmp / "h100-lab-config" / "gpucompat" / "site-key.pub"), env=relay, check=0)
    run_cli("import", str(tmp / "h100-lab.gz"), "--db", f"sqlite:///{tmp / 'relay.db'}", env=relay, check=0)
    run_cli("export", "--db", f"sqlite:///{tmp / 'relay.db'}", "--bundle", str(tmp / "relay.gz"), "--site", "relay", "--sweep", "1",
            "--sweep", "2", env=relay, check=0)
    run_cli("trust", "add", "relay", str(tmp / "relay-config" / "gpucompat" / "site-key.pub"), env=here, check=0)
    run_cli("import", str(tmp / "relay.gz"), "--db", url, env=here, check=0)
    return url, plan, tmp


def _between(text: str, start: str, end: str) -> str:
    at = text.index(start)
    return text[at:text.index(end, at)]


def _publish(url: str, directory: Path, pool: str | None = None) -> dict[str, str]:
    proc = run_cli("report", "--db", url, "--site", str(directory), *(["--pool", pool] if pool else []), check=0)
    assert "1 GPU classes" in proc.stderr, proc.stderr
    return _pages(directory)


@pytest.mark.parametrize("pool", [None, "plan"])
def test_this_sites_site_has_only_its_own_classes(site_a, tmp_path, pool):
    """Issue 39 section 3: the plan both local sweeps share (or --pool PLAN) makes the classes; siteb's H200 rows make no
    column or page of their own (listed as observed elsewhere), h100-lab's and state-lab's H100 rows are supporting evidence
    on this site's H100, the index counts those that are unverified, and every class page has its install lines."""
    url, plan, _tmp = site_a
    pages = _publish(url, tmp_path / "site", str(plan) if pool else None)
    index = pages["index.html"]
    matrix = _between(index, 'id="matrix"', "</table>")
    assert re.findall(r'<th class="gpu"><a href="gpu-[^"]+">([^<]+)</a>', matrix) == ["NVIDIA H100 80GB HBM3"]
    assert [n for n in pages if n.startswith("gpu-")] == [n for n in pages if n.startswith("gpu-NVIDIA-H100")]
    assert "the [[targets]] of" in index
    # siteb's H200: no column, no page, never "how to use" anywhere; listed as observed elsewhere
    elsewhere = _between(index, '<ul class="elsewhere">', "</ul>")
    assert re.search(r"NVIDIA H200 \(CC 9\.0\), driver 580\.159\.04, observed at siteb: \d+ cells", elsewhere), elsewhere
    for name, text in pages.items():
        if name != "index.html":
            assert "NVIDIA H200" not in text, name
    # the L40S nothing ran on: listed apart with the scheduler's words
    assert "NVIDIA L40S (CC 8.9): not tested: no job of it started: sbatch --test-only --gres=gpu:l40s:1" in index
    # the H100's page: supporting evidence from the other sites, named, verified or not; its install lines and request
    h100 = next(text for name, text in pages.items() if name.startswith("gpu-NVIDIA-H100"))
    supporting = _between(h100, '<ul class="supporting">', "</ul>")
    # h100-lab's two sweeps, brought again by relay: each once, naming both sites that vouched for it
    vouched = re.findall(r"observed at h100-lab on NVIDIA H100 80GB HBM3, driver 580\.159\.04, verified \(sweep \d+, (\d+) cells\); "
                         r"vouched for by h100-lab \(verified\), relay \(unverified\)</li>", supporting)
    assert vouched == ["5", "5"] and "observed at relay" not in supporting, supporting
    total = int(re.search(r"<b>(\d+)</b> cells? observed at other sites", index).group(1))
    assert total == sum(map(int, re.findall(r"\(sweep \d+, (\d+) cells?\)", supporting))) == 19  # each sweep counted once
    assert re.search(r'observed at state-lab on NVIDIA H100 80GB HBM3, driver 580\.159\.04, <b class="unverified-mark">UNVERIFIED</b>',
                     supporting)
    unverified = int(re.search(r'<span class="unverified-mark"><b>(\d+)</b> unverified</span>', index).group(1))
    marked = re.findall(r'<b class="unverified-mark">UNVERIFIED</b> \(sweep \d+, (\d+) cells?\)', supporting)
    assert unverified == sum(map(int, marked)) > 0  # every cell of state-lab's lines, and only those
    assert 'Select this class with: <code class="command">sbatch --gres=gpu:h100:1</code>' in h100
    install = _between(h100, '<ul class="install">', "</ul>")
    assert "cuda-runtime: " in install and "pip install" in install
    assert "Drivers seen: 580.159.04, 580.65.06</p>" in h100  # what the probes read, here and at the other sites
    for name, text in pages.items():  # every value escaped: the plan's origin sentence, the scheduler's words
        assert "<script" not in text.replace('<script>\n/* optional', ""), name
    if pool:
        refused = run_cli("report", "--db", url, "--pool", str(plan))
        assert refused.returncode == 2 and "give it with --site" in refused.stderr
