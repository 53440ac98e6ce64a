"""A stored sweep's results and bench figures as the commands print them: `sweep` and `check` at their end,
`results`, `results --bench`, and the figures `diff` and `report` set side by side."""

from __future__ import annotations

import sys

from ..errors import UserError
from .common import err, escape, out

FORMATS = ("table", "csv", "json", "md", "junit", "prometheus")

# A sweep's closing tables list each cell up to this many, else group them as `results` does: 2,040 cells
# in one Rich table took 30 MiB at the end of a sweep that ran in 62 MiB (benchmarks/slurm_scale.py).
CLOSING_CELLS = 500


def run_and_report(store, sweep_id: int, json_out: bool, fmt: str = "table", wide: bool = False) -> list[dict]:
    from .. import sweep as pipeline
    from ..report.terminal import RichProgress

    with RichProgress(err.real()) as progress:
        pipeline.run(store, sweep_id, progress)
    rows = print_results(store, sweep_id, "json" if json_out else fmt, wide=wide, closing=True)
    if not json_out and fmt == "table" and store.sweep(sweep_id)["kind"] == "sweep":  # after the closing line; `check` stays quick
        from ..env_cache import summary, summary_line

        cache = summary(listing=False)
        if cache["totals"]["environments"]:
            out.print(escape(summary_line(cache)), highlight=False)
    return rows


def print_results(store, sweep_id: int, fmt: str, per_cell: bool = True, wide: bool = False, closing: bool = False) -> list[dict]:
    """closing: a sweep's own tables at its end, grouped past CLOSING_CELLS cells."""
    from ..report import export
    from ..report.rows import split, troubled_gpus
    from ..report.terminal import results_tables, untested_table

    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}.")
    sweep = store.sweep(sweep_id)
    verdicts = split(store.result_rows(sweep_id))
    if fmt == "prometheus":
        from ..report.prometheus import to_prometheus
        from ..report.rows import display_row

        # written as is: the collector reads the file byte for byte, and it ends with its one newline
        sys.stdout.write(to_prometheus(sweep, [display_row(r, printable=False) for r in store.result_rows(sweep_id)], bench_rows(store, sweep_id)))
    elif fmt == "json":
        sys.stdout.write(export.to_json(sweep, verdicts) + "\n")
    elif fmt == "csv":
        sys.stdout.write(export.to_csv(verdicts))
    elif fmt == "md":
        sys.stdout.write(export.to_markdown(sweep, verdicts) + "\n")
    elif fmt == "junit":
        sys.stdout.write(export.to_junit(sweep, verdicts) + "\n")
    else:
        shown = len(verdicts.valid) + len(verdicts.invalid)  # the surprises are among them, and always listed
        grouped = closing and shown > CLOSING_CELLS
        for table in results_tables(verdicts.surprises, verdicts.valid, verdicts.invalid, per_cell and not grouped, wide):
            out.print(table, crop=False)  # each fits the width; with --wide it may be wider, and is not cut
        if verdicts.untested:
            out.print(untested_table(verdicts.untested, wide), crop=False)
        waiting = len(verdicts.untested) + len(verdicts.pending)
        parts = [f"{len(verdicts.surprises)} surprises", f"{len(verdicts.valid)} valid", f"{len(verdicts.invalid)} invalid"]
        parts += [f"{len(verdicts.untested)} could not be tested"] if verdicts.untested else []
        parts += [f"{len(verdicts.pending)} pending"] if verdicts.pending else []
        retry = f" (`gpucompat sweep --resume {sweep_id}` runs the {waiting} again)" if waiting else ""
        if not per_cell and not grouped and shown:
            out.print(f"grouped by framework, version and CC: `gpucompat results --sweep {sweep_id} --cells` lists each cell with its GPU, driver and Python")
        if closing:  # how many bench figures, how many contended or not made (results --bench says which and why)
            from ..report.bench import closing_note

            bench_note = closing_note(bench_rows(store, sweep_id))
            parts += [bench_note] if bench_note else []
        out.print(f"sweep {sweep_id} ({escape(sweep['name'])}, {sweep['status']}): {', '.join(parts)}{retry}; database {escape(store.shown)}")
        if grouped:
            out.print(f"grouped past {CLOSING_CELLS} cells: `gpucompat results --sweep {sweep_id} --cells` lists each of the {shown}")
        for cause, gpus in troubled_gpus(verdicts.untested).items():
            what = "busy (other processes held them)" if cause == "gpu-busy" else "faulty (drain and check them)"
            out.print(f"GPUs {what}: {escape('; '.join(gpus))}")
    return verdicts.valid + verdicts.invalid + verdicts.untested


def bench_rows(store, sweep_id: int) -> list[dict]:
    from ..bench import present

    # the figures made, then those the bench could not make (value None, with why): every view lists both
    return [present(row) for row in store.bench_rows(sweep_id) + store.missing_figures(sweep_id)]


def mig_reference(store, sweep_id: int, rows: list[dict]) -> list[dict]:
    """Where a sweep has MIG instances' figures: the whole GPUs' figures of the store's other sweeps, to set them against."""
    from ..bench import present
    from ..discover.local import mig_name

    parents = {found.parent for r in rows if (found := mig_name(r["gpu"]))}
    return [present(r) for r in store.bench_rows(None) if r["sweep"] != sweep_id and r["gpu"] in parents] if parents else []


def print_bench(store, sweep_id: int, fmt: str, wide: bool, defaulted: bool = False) -> None:
    from ..report.bench import bench_csv, bench_json, bench_table, mig_terminal

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--bench prints as table, csv or json, not {fmt!r}.")
    rows = bench_rows(store, sweep_id)
    shown = store.sweep(sweep_id)
    if not rows and fmt == "table":
        looked = f"{shown['kind']} {sweep_id} ({escape(shown['name'])})"
        out.print(f"{looked}, the newest, has no benchmark figures, and no other stored sweep or check has any: run one with --bench."
                  if defaulted else f"{looked} has no benchmark figures; leave out --sweep to see the newest that has.", soft_wrap=True)
        return
    if fmt == "table":
        err.print(f"bench figures of {shown['kind']} {sweep_id} ({escape(shown['name'])})"
                  + (", the newest with any" if defaulted else ""))
    if fmt == "json":
        sys.stdout.write(bench_json(rows) + "\n")
    elif fmt == "csv":
        sys.stdout.write(bench_csv(rows))
    else:
        out.print(bench_table(rows, wide), crop=False)
        if mig := mig_terminal(rows, mig_reference(store, sweep_id, rows), wide):
            out.print(mig, crop=False)
