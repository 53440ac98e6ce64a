"""`gpucompat sweep`: a plan's every stack on every target, each cell to a verdict; `--resume`, `--dry-run`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from ..errors import UserError
from .common import EXIT_UNTESTED, err, escape, guarded, interrupted_says, print_json, say
from .options import DbOption, WideOption
from .printing import run_and_report


def sweep(
    plan: Optional[Path] = typer.Argument(None, help="Plan file (TOML); see examples/plans/."),
    resume: Optional[int] = typer.Option(None, "--resume", help="Finish sweep ID: run only the cells without a verdict."),
    wheelhouse: Optional[Path] = typer.Option(None, help="Install from this directory of wheels only (no index)."),
    offline: bool = typer.Option(False, "--offline", help="Use only cached version lists and uv's cache."),
    workdir: Optional[Path] = typer.Option(None, help="Where job directories go (default: beside the database)."),
    skip_predicted_failures: bool = typer.Option(False, "--skip-predicted-failures", help="Run no job for cells the knowledge predicts to fail; they are stored as predicted, not observed."),
    bench: bool = typer.Option(False, "--bench", help="After a cell passes, measure how fast it runs (the bench rung; a plan's [bench] table chooses what)."),
    share: Optional[int] = typer.Option(None, "--share", min=2, max=16, help="With the bench: also N processes sharing one GPU at once, against one alone."),
    executor: Optional[str] = typer.Option(None, help="Override the plan's executor (local, slurm, htcondor, kubernetes)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Write every file a real run would submit into --out, submit nothing."),
    out_dir: Optional[Path] = typer.Option(None, "--out", help="Directory for --dry-run: new or empty."),
    force: bool = typer.Option(False, "--force", help="With --dry-run: write into an --out directory that already holds files."),
    list_files: bool = typer.Option(False, "--list-files", help="With --dry-run: also print the path of every file written, one a line (in --json: its files)."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print the results (with --dry-run: its summary) as JSON on stdout."),
    wide: bool = WideOption,
):
    """Run a sweep: every stack of the plan on every target, each cell to a verdict."""
    from .. import sweep as pipeline
    from ..plan import check_path, check_wheelhouse, load_plan
    from ..report.terminal import RichProgress
    from ..store import Store

    if list_files and not dry_run:
        raise UserError("--list-files lists the files a dry run writes; add --dry-run --out DIR.")
    if resume is not None:
        if plan is not None:
            raise UserError("give either a plan file or --resume ID, not both.")
        if workdir is not None:
            check_path(workdir, "--workdir")
        store = Store(db)
        resumable(store, resume)  # a clear error if there is no such sweep, or it was imported from another site
        sweep_id = resume
        lock = pipeline.SweepLock(store, sweep_id)  # before anything else: another gpucompat may be running it
        if workdir is not None:
            pipeline.resume_in(store, sweep_id, workdir)
    else:
        if plan is None:
            raise UserError("give a plan file (e.g. examples/plans/quick.toml) or --resume ID.")
        for path, what in ((wheelhouse, "--wheelhouse"), (workdir, "--workdir"), (out_dir, "--out")):
            if path is not None:
                check_path(path, what)
                if path is not wheelhouse:
                    pipeline.check_directory(path, what)
        if wheelhouse is not None:
            check_wheelhouse(wheelhouse)
        spec, text = load_plan(plan)
        options = pipeline.RunOptions(
            wheelhouse=str(wheelhouse.resolve()) if wheelhouse else None, offline=offline,
            workdir=str(workdir.resolve()) if workdir else None, skip_predicted_failures=skip_predicted_failures,
            executor=executor, bench=bench, share=share,
        )
        spec = pipeline.with_options(spec, options)
        if dry_run:
            if out_dir is None:
                raise UserError("--dry-run needs --out DIR for the files a real run would submit.")
            with interrupted_says(f"interrupted; a dry run stores nothing, and the files under {out_dir} are incomplete"):
                with RichProgress(err.real()) as progress:
                    summary = pipeline.dry_run(spec, text, options, out_dir, progress, force)
            if json_out:
                print_json({**summary.as_dict(), "files": summary.files if list_files else None, "file_count": len(summary.files)})
                return
            for line in summary.lines():  # a few lines, on stderr with the progress; stdout holds only the paths asked for
                err.print(escape(line), highlight=False, soft_wrap=True)
            for path in summary.files if list_files else ():
                say(path)
            return
        stacks = pipeline.plan_stacks(spec, options)
        store = Store(db)  # only now: every value is checked before a store is created or migrated
        with interrupted_says("interrupted before the sweep was stored; nothing was stored"), RichProgress(err.real()) as progress:
            sweep_id = pipeline.start(store, spec, text, str(plan), options, progress, stacks=stacks)
        lock = pipeline.SweepLock(store, sweep_id)
        err.print(f"sweep {sweep_id}: {len(store.cells_of(sweep_id))} cells")
    with lock, interrupted_says(f"interrupted; the finished cells of sweep {sweep_id} are stored, and "
                                f"`gpucompat sweep --resume {sweep_id}` completes it"):
        rows = run_and_report(store, sweep_id, json_out, wide=wide)
    from ..model import EXPECTED_CAUSES

    if any(row["code"] == "UNTESTED" and row.get("cause") not in EXPECTED_CAUSES for row in rows):
        raise typer.Exit(EXIT_UNTESTED)


def resumable(store, sweep_id: int) -> None:
    """sweep --resume: only a sweep run here; an imported one ran on another site's GPUs, and is read, never run, here."""
    source = store.sweep(sweep_id).get("source_id")  # a clear error if there is no such sweep
    if source is not None:
        site = next((s["source"] for s in store.list_sweeps("imported") if s["id"] == sweep_id), "another site")
        raise UserError(f"sweep {sweep_id} was imported from {site!r}: its cells ran on that site's GPUs, so it is read here, never resumed; "
                        "run a sweep of your own with its plan.")


def register(app: typer.Typer) -> None:
    app.command("sweep")(guarded(sweep))
