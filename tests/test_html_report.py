"""The HTML report: escaped, self-contained, and working in a real headless Chromium."""

import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from gpucompat.model import Observation, Outcome, ResolvedStack, Stack, Target
from gpucompat.report.html import render
from gpucompat.store import Store

H200_DB = REPO / "docs" / "evidence" / "knowledge-h200" / "knowledge.db"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def test_every_captured_text_is_escaped(tmp_path):
    store = Store(f"sqlite:///{tmp_path / 'x.db'}")
    stack = Stack("torch", "2.4.1", "default", "3.11", "uv")
    sweep = store.create_sweep("<b>night</b>", "sweep", "", None, {}, [Target("<img src=x onerror=alert(1)>", "8.0", "535.104.05", count=1)],
                               [ResolvedStack(stack, True)], lambda r, t: {"verdict": "uncertain", "code": None, "stage": None, "warnings": [], "reasons": []})
    cell = store.cells_of(sweep)[0]
    store.record_result(cell.id, Outcome("COMPUTE_ERROR", "compute", "RuntimeError: <script>alert(1)</script>",
                                         {"stderr_tail": "</pre><script>x()</script>"}), Observation({}))
    html = render(store.sweep(sweep), store.result_rows(sweep))
    assert "<script>" not in html and "<img src=x" not in html and "<b>night</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;b&gt;night&lt;/b&gt;" in html
    assert "http://" not in html and "https://" not in html  # nothing to fetch when viewing it


def test_report_command_writes_the_file(tmp_path):
    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    out = tmp_path / "report.html"
    run_cli("report", "--db", f"sqlite:///{db}", "-o", str(out), check=0)
    html = out.read_text()
    assert html.count('class="matrix"') == 5 and "11.8-13.5" in html
    bad = run_cli("report", "--db", f"sqlite:///{db}", "-o", str(tmp_path / "no" / "such" / "dir" / "r.html"))
    assert bad.returncode == 2 and "cannot write" in bad.stderr


@pytest.mark.skipif(not CHROMIUM, reason="no chromium on PATH (.ci/run installs Debian's chromium)")
def test_matrix_renders_and_evidence_opens_in_headless_chromium(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api", reason="playwright is part of the test extra")
    db = tmp_path / "h200.db"
    shutil.copyfile(H200_DB, db)
    out = tmp_path / "report.html"
    run_cli("report", "--db", f"sqlite:///{db}", "-o", str(out), check=0)
    requests = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"])
        page = browser.new_page()
        page.on("request", lambda request: requests.append(request.url))
        page.goto(out.as_uri())
        assert page.locator("table.matrix").count() == 5
        torch_cell = page.locator('table.matrix[data-framework="torch"] td.cell').first
        assert torch_cell.locator("summary").inner_text().strip() == "PASS"
        evidence = torch_cell.locator("dl.evidence")
        assert not evidence.is_visible()
        torch_cell.locator("summary").click()
        assert evidence.is_visible() and "2.11.0+cu130" in evidence.inner_text()
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        browser.close()
    assert Path(tmp_path / "report.png").stat().st_size > 10_000
    assert all(url.startswith("file://") for url in requests), requests
