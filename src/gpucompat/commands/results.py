"""`gpucompat results`: a stored sweep's verdicts in any format, the stored sweeps, bench figures, surprises."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import UserError
from ..model import is_verified
from .common import escape, guarded, out, print_json
from .options import DbOption, PlanOption, SourceOption, SweepRefOption, WideOption
from .printing import print_bench, print_results


def results(
    sweep_ref: Optional[str] = SweepRefOption,
    plan: Optional[str] = PlanOption,
    fmt: str = typer.Option("table", "--format", help="table, csv, json, md, junit, or prometheus (a node-exporter textfile: docs/monitoring.md)."),
    cells: bool = typer.Option(False, "--cells", help="One row per cell (GPU, driver, Python, duration) instead of lines grouped by framework, version and CC."),
    list_sweeps: bool = typer.Option(False, "--list", help="List the stored sweeps instead."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    wide: bool = WideOption,
    bench: bool = typer.Option(False, "--bench", help="The bench figures instead (table, csv or json): how fast each working stack ran."),
    source: Optional[str] = SourceOption,
    surprises: bool = typer.Option(False, "--surprises", help="Every cell of every sweep whose observation disagrees with the rules' prediction."),
):
    """The valid and invalid combinations of a stored sweep, each invalid one with its reason."""
    from rich.table import Table

    from ..store import Store
    from ..sweep_refs import chosen, sweeps_of_plan

    store = Store(db, readonly=True)
    if list_sweeps:
        if sweep_ref is not None:
            raise UserError("--list lists the stored sweeps; leave out --sweep, or --list to see that sweep.")
        sweeps = store.list_sweeps(source) if plan is None else sweeps_of_plan(store, plan, source)
        if json_out or fmt == "json":
            print_json(sweeps)
            return
        table = Table("ID", "Plan", "Kind", "Status", "Cells", "Done", "Passed", "Untested", "Source")
        for s in sweeps:
            table.add_row(str(s["id"]), escape(s["name"]), s["kind"], s["status"], str(s["cells"] or 0), str(s["done"] or 0), str(s["passed"] or 0),
                          str(s["untested"] or 0), escape(s["source"] + ("" if is_verified(s) else " (UNVERIFIED)")))
        out.print(table)
        return
    picked = sweep_ref is not None or plan is not None
    if bench:
        # by default the newest sweep or check that has figures (`check --bench` stores a check, not a sweep)
        shown = chosen(store, sweep_ref, plan, source) if picked else (store.latest_bench_sweep_id() or store.latest_sweep_id())
        print_bench(store, shown, "json" if json_out else fmt, wide, defaulted=not picked)
        return
    if surprises:  # observation against the rules, the whole store (or one sweep): what to report upstream
        from ..report.rows import display_row, is_surprise
        from ..report.terminal import surprises_view

        sweep_id = chosen(store, sweep_ref, plan, source) if picked else None  # a sweep's, where one is named; else every sweep's
        rows = [r for r in map(display_row, store.result_rows(sweep_id, source=source)) if r["observed"] and is_surprise(r)]
        return print_json(rows) if json_out or fmt == "json" else out.print(surprises_view(rows, wide), crop=False)
    sweep_id = chosen(store, sweep_ref, plan, source)
    print_results(store, sweep_id, "json" if json_out else fmt, per_cell=cells, wide=wide)


def register(app: typer.Typer) -> None:
    app.command("results")(guarded(results))
