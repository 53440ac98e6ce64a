"""`gpucompat diff`: what changed between two sweeps, cells and bench figures."""

from __future__ import annotations

from typing import Optional

import typer

from .common import EXIT_BROKEN, escape, guarded, out, print_json
from .options import SWEEP_REF_HELP, DbOption, PlanOption
from .printing import bench_rows


def diff(
    before: str = typer.Argument(..., help=SWEEP_REF_HELP),
    after: str = typer.Argument(..., help=SWEEP_REF_HELP),
    plan: Optional[str] = PlanOption,
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    fail_on_slowdown: bool = typer.Option(False, "--fail-on-slowdown", help="Also exit 1 when a bench figure got slower beyond noise "
                                          "(never for a pair measured while another process computed, or where nobody can say)."),
):
    """Cells newly broken, newly working, changed, added and removed between two sweeps, and bench figures that
    moved beyond noise. Exit 1 if any cell newly broke (or, with --fail-on-slowdown, a figure got slower).

    `diff site@latest~1 site@latest` compares the plan site's last two sweeps, whatever other plans ran into the store
    since; a bare latest or latest~N means --plan's plan, else the one the other argument names, else the newest sweep's;
    a plan without that many sweeps is exit 2."""
    from ..analysis import diff as compute_diff
    from ..report.rows import display_row
    from ..store import Store
    from ..sweep_refs import resolve_all

    store = Store(db, readonly=True)
    a, b = resolve_all(store, [before, after], plan)
    changes = compute_diff([display_row(r) for r in store.result_rows(a)], [display_row(r) for r in store.result_rows(b)])
    from ..report.bench import compare, compare_table, counted_slowdowns

    bench_a, bench_b = bench_rows(store, a), bench_rows(store, b)
    performance = compare(bench_a, bench_b)
    counted, doubtful = counted_slowdowns(performance)  # contended pairs are not compared; unknown ones are not counted
    if json_out:
        print_json({"before": a, "after": b, **changes, "performance": performance})
    else:
        from ..report.terminal import diff_tables

        for item in diff_tables(changes, a, b):
            out.print(item)
        if bench_a or bench_b:
            out.print(compare_table(performance, a, b), crop=False)
        if fail_on_slowdown and doubtful:
            named = "; ".join(f"{e['key']['measurement']} {e['key']['dtype']}".strip() + f" ({e['contention_unknown']})" for e in doubtful[:5])
            out.print(escape(f"--fail-on-slowdown: {len(doubtful)} slower figure{'s' if len(doubtful) != 1 else ''} not counted, since "
                             f"nobody can say whether another process computed on the GPU meanwhile: {named}"
                             + ("; ..." if len(doubtful) > 5 else "")), highlight=False, soft_wrap=True)
    if changes["newly_broken"] or (fail_on_slowdown and counted):
        raise typer.Exit(EXIT_BROKEN)


def register(app: typer.Typer) -> None:
    app.command("diff")(guarded(diff))
