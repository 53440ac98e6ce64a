"""`gpucompat check`: single stacks on this machine, resolved, installed, probed and judged."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from .common import EXIT_BROKEN, EXIT_UNTESTED, err, guarded
from .options import DbOption, WideOption
from .printing import run_and_report


def check(
    specs: List[str] = typer.Argument(..., help="Stacks: torch==2.4.1, torch==2.7.0+cu128, jax[cuda12]==0.4.30, cuda-runtime==12.4 ..."),
    python: Optional[str] = typer.Option(None, help="Python version for the environment (default: this interpreter's)."),
    env: str = typer.Option("uv", help="uv (build an environment) or current (test this interpreter as it is)."),
    wheelhouse: Optional[Path] = typer.Option(None, help="Install from this directory of wheels only (no index)."),
    offline: bool = typer.Option(False, "--offline", help="Use only cached version lists and uv's cache."),
    bench: bool = typer.Option(False, "--bench", help="After a stack passes, measure how fast it runs (the bench rung, defaults)."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
    wide: bool = WideOption,
):
    """Test single stacks on this machine: resolve, install, probe, verdict. Exit 1 if any is broken, 4 if one could not be tested."""
    from ..plan import check_plan_text, check_wheelhouse, parse_plan

    if wheelhouse is not None:
        check_wheelhouse(wheelhouse)
    text = check_plan_text(specs, python, env)
    spec = parse_plan(text, "check")
    if env == "current" and len(spec.stacks) == 1:
        from ..executors.early import start_on_this_gpu
        from ..model import BenchSpec

        start_on_this_gpu(spec.stacks[0].framework, spec.timeouts, BenchSpec() if bench else None)  # before the store: executors/early.py
    from .. import sweep as pipeline
    from ..report.terminal import RichProgress
    from ..store import Store

    options = pipeline.RunOptions(wheelhouse=str(wheelhouse.resolve()) if wheelhouse else None, offline=offline, bench=bench)
    spec = pipeline.with_options(spec, options)
    stacks = pipeline.plan_stacks(spec, options)
    store = Store(db)
    with RichProgress(err.real()) as progress:
        sweep_id = pipeline.start(store, spec, text, None, options, progress, kind="check", stacks=stacks)
    rows = run_and_report(store, sweep_id, json_out, wide=wide)
    codes = {row["code"] for row in rows}
    if codes - {"PASS", "UNTESTED"}:
        raise typer.Exit(EXIT_BROKEN)
    if "UNTESTED" in codes:
        raise typer.Exit(EXIT_UNTESTED)


def register(app: typer.Typer) -> None:
    app.command("check")(guarded(check))
