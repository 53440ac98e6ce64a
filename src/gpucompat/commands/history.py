"""`gpucompat history`: one cell through time, every stored verdict for a stack on a GPU class."""

from __future__ import annotations

from typing import Optional

import typer

from ..errors import UserError
from .common import escape, guarded, out, print_json
from .options import DbOption


def history(
    spec: str = typer.Argument(..., help="A stack spec: torch==2.4.1, cuda-runtime==12.4, ..."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it."),
    cc: Optional[str] = typer.Option(None, help="Compute capability, e.g. 8.0."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
):
    """One cell through time: every stored verdict for a stack on a GPU class."""
    from ..knowledge import tables
    from ..plan import parse_spec
    from ..report.rows import display_row
    from ..store import Store

    framework, version, variant = parse_spec(spec)
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    want_cc = cc or (tables.gpu(gpu) or {}).get("cc")
    from ..answers.pool import observed_cells  # the query `explain --pool` shows per class

    stored = [display_row(r) for r in Store(db, readonly=True).result_rows(None)]
    rows = observed_cells(stored, framework, version, gpu, want_cc)
    if json_out:
        print_json(rows)
        return
    from ..report.terminal import history_table, no_verdict_text, untested_attempts

    if not rows:  # and the attempts that could not be tested, each with its cause, sweep and day
        asked = f"{spec} on {gpu or 'compute capability ' + cc}"
        out.print(escape(no_verdict_text(asked, untested_attempts(stored, framework, version, gpu, cc))), highlight=False, soft_wrap=True)
        return
    out.print(history_table(rows, escape(f"{spec} on {gpu or 'compute capability ' + cc}")))


def register(app: typer.Typer) -> None:
    app.command("history")(guarded(history))
