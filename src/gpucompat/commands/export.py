"""`gpucompat export --bundle`: a store's sweeps as one signed file that travels to other sites (bundle.py)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .common import guarded, print_json, say
from .options import DbOption, SiteOption


def export(
    bundle: Path = typer.Option(..., "--bundle", help="The bundle to write: one gzip-compressed file (e.g. mysite-2026q4.gpucompat.gz)."),
    sweep_ids: Optional[List[int]] = typer.Option(None, "--sweep", help="A sweep to export; repeat it for more (default: every sweep run here)."),
    site: Optional[str] = SiteOption,
    keep_hosts: bool = typer.Option(False, "--keep-hosts", help="Keep host and user names, paths and environment values (default: redacted)."),
    unsigned: bool = typer.Option(False, "--unsigned", help="Write it without a signature, on purpose (other sites import it only with "
                                  "--untrusted, marked unverified); by default it is signed with the key `gpucompat key` made."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """Write sweeps into one file that travels, signed with this site's key: cells, verdicts, evidence, probe facts, bench figures and provenance."""
    from ..bundle import export as write_bundle
    from ..store import Store

    result = write_bundle(Store(db, readonly=True), bundle, sweep_ids, site, keep_hosts, unsigned)
    if json_out:
        print_json(result)
        return
    redacted = "host and user names, paths and environment values redacted" if result["redacted"] else "kept as they are (--keep-hosts)"
    signed = f"signed by the key {result['signed_by']}" if result["signed_by"] else "unsigned (--unsigned)"
    say(f"wrote {result['path']}: {result['sweeps']} sweep(s), {result['cells']} cells from the site {result['site']!r} ({redacted}); "
        f"{result['bytes']:,} bytes, sha256 {result['sha256']}, {signed}")


def register(app: typer.Typer) -> None:
    app.command("export")(guarded(export))
