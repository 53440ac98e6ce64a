"""`gpucompat report`: one self-contained HTML report of a sweep, or (`--site DIR`) the static multi-page site."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UserError
from .common import err, escape, guarded
from .options import DbOption, PlanOption, SourceOption, SweepRefOption
from .printing import bench_rows, mig_reference


def report(
    sweep_ref: Optional[str] = SweepRefOption,
    plan: Optional[str] = PlanOption,
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="Where to write the HTML file."),
    db: Optional[str] = DbOption,
    # a directory, not options.SiteOption (this site's name in a bundle)
    site: Optional[Path] = typer.Option(None, "--site", help="Instead: a static multi-page site in this directory, every stack's newest results."),
    source: Optional[str] = SourceOption,
    pool: Optional[str] = typer.Option(None, "--pool", help="With --site: this site's GPU classes, a plan file's [[targets]] (PLAN.toml) "
                                       "or slurm|htcondor|kubernetes discovery (default: the plan every local sweep shares, else "
                                       "the classes they ran on); results imported on other GPUs are no class here."),
):
    """One self-contained HTML report of a sweep: surprises first, a matrix per framework, evidence a click away."""
    from ..report.html import render
    from ..store import Store
    from ..sweep_refs import chosen

    if pool is not None and site is None:
        raise UserError("--pool names the site's GPU classes for --site DIR; give it with --site.")
    if site is not None and (sweep_ref is not None or plan is not None):
        raise UserError("--site DIR publishes every stack's newest results; --sweep and --plan choose the one sweep of an HTML report: give one or the other.")
    store = Store(db, readonly=True)
    if site is not None:
        return write_site(store, site, source, pool)
    sweep_id = chosen(store, sweep_ref, plan, source)
    from ..bench import with_shown_version

    rows = bench_rows(store, sweep_id)
    html = render(store.sweep(sweep_id), store.result_rows(sweep_id), rows,
                  [with_shown_version(series) for series in store.telemetry(sweep_id)], mig_reference(store, sweep_id, rows),
                  [with_shown_version(p) for p in store.profiles(sweep_id)])
    try:
        output.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {str(output)!r}: {exc.strerror}.") from None
    err.print(f"wrote {escape(str(output))} (sweep {sweep_id})")


def write_site(store, directory: Path, source: str | None, pool: str | None = None) -> None:
    """report --site DIR [--pool PLAN]: every page of the static site, from the newest results of the store (of one source,
    if given), on this site's GPU classes (report/site_pool.py)."""
    from ..report.site import publish

    result = publish(store, directory, "GPU software compatibility", source, pool)
    sys.stderr.write(f"wrote {result['pages']} pages under {result['directory']}: {result['stacks']} stacks on {result['gpu_classes']} "
                     f"GPU classes ({result['cells']} newest results) in {result['seconds']} s\n")


def register(app: typer.Typer) -> None:
    app.command("report")(guarded(report))
