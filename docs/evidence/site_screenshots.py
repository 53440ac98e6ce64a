"""The README's pictures of `report --site` (docs/site-index.png, docs/site-gpu.png, docs/site-stack.png) and the
published pages under docs/evidence/clean-rerun-h200/site/, from real sweeps, as a facilitator publishes them:

- this site ("lent-node"): the lent H200's sweep of docs/evidence/site-plan-clean-rerun.toml, run by
  run-gpu-clean-rerun.sh in a shell whose XLA_FLAGS breaks JAX, its plan declaring an NVIDIA L40S no node has
  (docs/evidence/clean-rerun-h200/site.db);
- a sister site "siteb", whose key this site trusts: the H200 sweep of examples/plans/gpu-node.toml
  (docs/evidence/gpu-node-h200/gpu-node.db), exported signed and imported verified: supporting evidence on the H200;
- a third site "sitec", whose key this site does not trust: the H100 sweep of docs/evidence/env-faults-h100/site.db,
  imported --untrusted: an H100 is no class here, so it is listed as observed elsewhere, unverified.

Each site has its own key and store in a temporary directory; the commands are the ones a facilitator types.

    python docs/evidence/site_screenshots.py
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

REPO = Path(__file__).resolve().parents[2]
EVIDENCE = REPO / "docs" / "evidence"
HERE = EVIDENCE / "clean-rerun-h200"
PLAN = HERE / "site-plan.toml"  # the plan as it ran on the lent machine (GPU name and driver filled in)


def gpucompat(*args, site_dir, store, **kw):
    env = {**os.environ, "XDG_CONFIG_HOME": str(site_dir / "config"), "GPUCOMPAT_DB": f"sqlite:///{store}",
           "GPUCOMPAT_CACHE": str(site_dir / "cache")}
    print("$", "gpucompat", *args, flush=True)
    return subprocess.run([sys.executable, "-m", "gpucompat", *args], env=env, check=True, **kw)


def sister(work, name, source_store):
    """A sister site: its own store (a copy of the evidence) and key; returns its bundle and public key."""
    site_dir = work / name
    site_dir.mkdir()
    store = site_dir / "site.db"
    shutil.copyfile(source_store, store)
    gpucompat("key", site_dir=site_dir, store=store, stdout=subprocess.DEVNULL)
    bundle = site_dir / f"{name}.gpucompat.gz"
    gpucompat("export", "--bundle", str(bundle), "--site", name, site_dir=site_dir, store=store)
    return bundle, next((site_dir / "config" / "gpucompat").glob("*.pub*"))


def main():
    work = Path(tempfile.mkdtemp(prefix="gpucompat-site-"))
    here_dir = work / "lent-node"
    here_dir.mkdir()
    store = here_dir / "site.db"
    shutil.copyfile(HERE / "site.db", store)  # the evidence stays as it came back
    siteb, siteb_key = sister(work, "siteb", EVIDENCE / "gpu-node-h200" / "gpu-node.db")
    sitec, _ = sister(work, "sitec", EVIDENCE / "env-faults-h100" / "site.db")
    gpucompat("trust", "add", "siteb", str(siteb_key), site_dir=here_dir, store=store)
    gpucompat("import", str(siteb), site_dir=here_dir, store=store)
    gpucompat("import", str(sitec), "--untrusted", site_dir=here_dir, store=store)
    site = HERE / "site"
    shutil.rmtree(site, ignore_errors=True)
    gpucompat("report", "--site", str(site), "--pool", str(PLAN), site_dir=here_dir, store=store)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium"), args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto((site / "index.html").as_uri())
        page.screenshot(path=str(REPO / "docs" / "site-index.png"), full_page=True)
        page.goto(sorted(site.glob("gpu-*.html"))[0].as_uri())
        page.screenshot(path=str(REPO / "docs" / "site-gpu.png"), full_page=True)
        page.goto(sorted(site.glob("stack-torch*.html"))[0].as_uri())
        page.screenshot(path=str(REPO / "docs" / "site-stack.png"), full_page=True)
        browser.close()
    print(f"site: {site}; pictures in docs/")


if __name__ == "__main__":
    main()
