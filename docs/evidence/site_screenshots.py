"""The README's pictures of `report --site` (docs/site-index.png, docs/site-stack.png), from a real sweep:
the store of the lent H100's sweep (docs/evidence/env-faults-h100/site.db, made by run-gpu-env-faults.sh
with docs/evidence/site-plan-h100.toml), rendered by `gpucompat report --site` and shot in Debian's Chromium.

    python docs/evidence/site_screenshots.py
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
STORE = REPO / "docs" / "evidence" / "env-faults-h100" / "site.db"


def main():
    work = Path(tempfile.mkdtemp(prefix="gpucompat-site-"))
    store = work / "site.db"
    shutil.copyfile(STORE, store)  # report --site only reads, but the evidence stays as it came back
    site = work / "site"
    subprocess.run([sys.executable, "-m", "gpucompat", "report", "--db", f"sqlite:///{store}", "--site", str(site)], check=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((site / "index.html").as_uri())
        page.screenshot(path=str(REPO / "docs" / "site-index.png"), full_page=True)
        stack = next(sorted(site.glob("stack-torch*.html")).__iter__())
        page.goto(stack.as_uri())
        page.screenshot(path=str(REPO / "docs" / "site-stack.png"), full_page=True)
        browser.close()
    print(f"site: {site}; pictures in docs/")


if __name__ == "__main__":
    main()
