"""The command line: parse, call, print. No logic lives here.

Exit codes: 0 done (for `check`: the stack works); 1 `check` found a stack broken (`diff`: one
newly broke); 2 a usage or input error (one sentence on stderr); 3 an internal error of gpucompat;
4 some cells could not be tested (network, index, wheelhouse, disk, scheduler...: `--resume` retries
them); 130 interrupted (a sweep can be finished with --resume).
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import traceback
from pathlib import Path
from typing import List, Optional

import typer

from .cli_advise import advise_conda, advise_pool
from .cli_console import LazyConsole, QuietPipe, escape, out_width
from .cli_console import print_json as _print_json
from .cli_envs import register as register_envs
from .cli_knowledge import register as register_knowledge
from .cli_share import SOURCE_HELP, chosen_sweep, register, resumable, write_site
from .errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Which ML stacks work on which GPUs and drivers, and why not.")


out = LazyConsole(width=out_width)
err = LazyConsole(stderr=True)

EXIT_BROKEN, EXIT_USAGE, EXIT_INTERNAL, EXIT_UNTESTED, EXIT_INTERRUPTED = 1, 2, 3, 4, 130
DB_HELP = "Database URL (default: sqlite under $XDG_DATA_HOME/gpucompat, or $GPUCOMPAT_DB)."
FORMATS = ("table", "csv", "json", "md", "junit", "prometheus")


def guarded(command):
    """One clear sentence instead of a traceback; exit codes as documented above."""
    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserError as exc:
            err.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
            raise typer.Exit(EXIT_USAGE) from None
        except KeyboardInterrupt:
            err.print("interrupted; what finished is stored (`gpucompat results --list` shows it)")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except typer.Exit:
            raise
        except Exception as exc:  # noqa: BLE001
            if os.environ.get("GPUCOMPAT_DEBUG"):
                traceback.print_exc()
            err.print(f"[red]internal error:[/] {escape(repr(exc))} — this is a gpucompat bug; rerun with GPUCOMPAT_DEBUG=1 for details", soft_wrap=True)
            raise typer.Exit(EXIT_INTERNAL) from None
    return wrapper


register(app, guarded)  # export --bundle, import (cli_share.py)
register_envs(app, guarded, out)  # envs, envs prune (cli_envs.py)
register_knowledge(app, guarded, out, err)  # knowledge update (cli_knowledge.py)


@contextlib.contextmanager
def _interrupted_says(sentence: str):
    """Ctrl-C inside: this sentence (what is stored and how to go on), exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print(escape(sentence), highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def _run_and_report(store, sweep_id: int, json_out: bool, fmt: str = "table", wide: bool = False) -> list[dict]:
    from . import sweep as pipeline
    from .report.terminal import RichProgress

    with RichProgress(err.real()) as progress:
        pipeline.run(store, sweep_id, progress)
    rows = _print_results(store, sweep_id, "json" if json_out else fmt, wide=wide, closing=True)
    if not json_out and fmt == "table" and store.sweep(sweep_id)["kind"] == "sweep":  # after the closing line; `check` stays quick
        from .env_cache import summary, summary_line

        cache = summary(listing=False)
        if cache["totals"]["environments"]:
            out.print(escape(summary_line(cache)), highlight=False)
    return rows


# A sweep's closing tables list each cell up to this many, else group them as `results` does: 2,040 cells
# in one Rich table took 30 MiB at the end of a sweep that ran in 62 MiB (benchmarks/slurm_scale.py).
CLOSING_CELLS = 500


def _print_results(store, sweep_id: int, fmt: str, per_cell: bool = True, wide: bool = False, closing: bool = False) -> list[dict]:
    """closing: a sweep's own tables at its end, grouped past CLOSING_CELLS cells."""
    from .report import export
    from .report.rows import split, troubled_gpus
    from .report.terminal import results_tables, untested_table

    if fmt not in FORMATS:
        raise UserError(f"unknown format {fmt!r}; expected one of: {', '.join(FORMATS)}.")
    sweep = store.sweep(sweep_id)
    verdicts = split(store.result_rows(sweep_id))
    if fmt == "prometheus":
        from .report.prometheus import to_prometheus
        from .report.rows import display_row

        # written as is: the collector reads the file byte for byte, and it ends with its one newline
        sys.stdout.write(to_prometheus(sweep, [display_row(r, printable=False) for r in store.result_rows(sweep_id)], _bench_rows(store, sweep_id)))
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
            from .report.bench import closing_note

            bench_note = closing_note(_bench_rows(store, sweep_id))
            parts += [bench_note] if bench_note else []
        out.print(f"sweep {sweep_id} ({escape(sweep['name'])}, {sweep['status']}): {', '.join(parts)}{retry}; database {escape(store.shown)}")
        if grouped:
            out.print(f"grouped past {CLOSING_CELLS} cells: `gpucompat results --sweep {sweep_id} --cells` lists each of the {shown}")
        for cause, gpus in troubled_gpus(verdicts.untested).items():
            what = "busy (other processes held them)" if cause == "gpu-busy" else "faulty (drain and check them)"
            out.print(f"GPUs {what}: {escape('; '.join(gpus))}")
    return verdicts.valid + verdicts.invalid + verdicts.untested


@app.command()
@guarded
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
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
    wide: bool = typer.Option(False, "--wide", help="Show every column of the tables, however wide (default: fit the terminal, dropping low-value columns first)."),
):
    """Run a sweep: every stack of the plan on every target, each cell to a verdict."""
    from . import sweep as pipeline
    from .plan import check_path, check_wheelhouse, load_plan
    from .report.terminal import RichProgress
    from .store import Store

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
            with _interrupted_says(f"interrupted; a dry run stores nothing, and the files under {out_dir} are incomplete"):
                with RichProgress(err.real()) as progress:
                    files = pipeline.dry_run(spec, text, options, out_dir, progress, force)
            for path in files:
                out.print(escape(str(path)), highlight=False)
            err.print(f"dry run: {len(files)} files under {escape(str(out_dir))}; nothing was submitted or stored")
            return
        stacks = pipeline.plan_stacks(spec, options)
        store = Store(db)  # only now: every value is checked before a store is created or migrated
        with _interrupted_says("interrupted before the sweep was stored; nothing was stored"), RichProgress(err.real()) as progress:
            sweep_id = pipeline.start(store, spec, text, str(plan), options, progress, stacks=stacks)
        lock = pipeline.SweepLock(store, sweep_id)
        err.print(f"sweep {sweep_id}: {len(store.cells_of(sweep_id))} cells")
    with lock, _interrupted_says(f"interrupted; the finished cells of sweep {sweep_id} are stored, and "
                                 f"`gpucompat sweep --resume {sweep_id}` completes it"):
        rows = _run_and_report(store, sweep_id, json_out, wide=wide)
    from .model import EXPECTED_CAUSES

    if any(row["code"] == "UNTESTED" and row.get("cause") not in EXPECTED_CAUSES for row in rows):
        raise typer.Exit(EXIT_UNTESTED)


@app.command()
@guarded
def check(
    specs: List[str] = typer.Argument(..., help="Stacks: torch==2.4.1, torch==2.7.0+cu128, jax[cuda12]==0.4.30, cuda-runtime==12.4 ..."),
    python: Optional[str] = typer.Option(None, help="Python version for the environment (default: this interpreter's)."),
    env: str = typer.Option("uv", help="uv (build an environment) or current (test this interpreter as it is)."),
    wheelhouse: Optional[Path] = typer.Option(None, help="Install from this directory of wheels only (no index)."),
    offline: bool = typer.Option(False, "--offline", help="Use only cached version lists and uv's cache."),
    bench: bool = typer.Option(False, "--bench", help="After a stack passes, measure how fast it runs (the bench rung, defaults)."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the results as JSON on stdout."),
    wide: bool = typer.Option(False, "--wide", help="Show every column of the tables, however wide (default: fit the terminal, dropping low-value columns first)."),
):
    """Test single stacks on this machine: resolve, install, probe, verdict. Exit 1 if any is broken, 4 if one could not be tested."""
    from .plan import check_plan_text, check_wheelhouse, parse_plan

    if wheelhouse is not None:
        check_wheelhouse(wheelhouse)
    text = check_plan_text(specs, python, env)
    spec = parse_plan(text, "check")
    if env == "current" and len(spec.stacks) == 1:
        from .executors.early import start_on_this_gpu
        from .model import BenchSpec

        start_on_this_gpu(spec.stacks[0].framework, spec.timeouts, BenchSpec() if bench else None)  # before the store: executors/early.py
    from . import sweep as pipeline
    from .report.terminal import RichProgress
    from .store import Store

    options = pipeline.RunOptions(wheelhouse=str(wheelhouse.resolve()) if wheelhouse else None, offline=offline, bench=bench)
    spec = pipeline.with_options(spec, options)
    stacks = pipeline.plan_stacks(spec, options)
    store = Store(db)
    with RichProgress(err.real()) as progress:
        sweep_id = pipeline.start(store, spec, text, None, options, progress, kind="check", stacks=stacks)
    rows = _run_and_report(store, sweep_id, json_out, wide=wide)
    codes = {row["code"] for row in rows}
    if codes - {"PASS", "UNTESTED"}:
        raise typer.Exit(EXIT_BROKEN)
    if "UNTESTED" in codes:
        raise typer.Exit(EXIT_UNTESTED)


@app.command()
@guarded
def results(
    sweep_id: Optional[int] = typer.Option(None, "--sweep", help="Sweep ID (default: the latest)."),
    fmt: str = typer.Option("table", "--format", help="table, csv, json, md, junit, or prometheus (a node-exporter textfile: docs/monitoring.md)."),
    cells: bool = typer.Option(False, "--cells", help="One row per cell (GPU, driver, Python, duration) instead of lines grouped by framework, version and CC."),
    list_sweeps: bool = typer.Option(False, "--list", help="List the stored sweeps instead."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Same as --format json."),
    wide: bool = typer.Option(False, "--wide", help="Show every column of the tables, however wide (default: fit the terminal, dropping low-value columns first)."),
    bench: bool = typer.Option(False, "--bench", help="The bench figures instead (table, csv or json): how fast each working stack ran."),
    source: Optional[str] = typer.Option(None, "--source", help=SOURCE_HELP),
    surprises: bool = typer.Option(False, "--surprises", help="Every cell of every sweep whose observation disagrees with the rules' prediction."),
):
    """The valid and invalid combinations of a stored sweep, each invalid one with its reason."""
    from rich.table import Table

    from .store import Store

    store = Store(db, readonly=True)
    if list_sweeps:
        sweeps = store.list_sweeps(source)
        if json_out or fmt == "json":
            _print_json(sweeps)
            return
        table = Table("ID", "Name", "Kind", "Status", "Cells", "Done", "Passed", "Untested", "Source")
        for s in sweeps:
            table.add_row(str(s["id"]), escape(s["name"]), s["kind"], s["status"], str(s["cells"] or 0), str(s["done"] or 0), str(s["passed"] or 0),
                          str(s["untested"] or 0), escape(s["source"] + ("" if s.get("verified", True) else " (UNVERIFIED)")))
        out.print(table)
        return
    if bench:
        # by default the newest sweep or check that has figures (`check --bench` stores a check, not a sweep)
        chosen = sweep_id if sweep_id is not None else (store.latest_bench_sweep_id() or store.latest_sweep_id())
        _print_bench(store, chosen, "json" if json_out else fmt, wide, defaulted=sweep_id is None)
        return
    if surprises:  # observation against the rules, the whole store (or one sweep): what to report upstream
        from .report.rows import display_row, is_surprise
        from .report.terminal import surprises_view

        rows = [r for r in map(display_row, store.result_rows(sweep_id, source=source)) if r["observed"] and is_surprise(r)]
        return _print_json(rows) if json_out or fmt == "json" else out.print(surprises_view(rows, wide), crop=False)
    sweep_id = chosen_sweep(store, sweep_id, source)
    _print_results(store, sweep_id, "json" if json_out else fmt, per_cell=cells, wide=wide)


def _bench_rows(store, sweep_id: int) -> list[dict]:
    from .bench import present

    # the figures made, then those the bench could not make (value None, with why): every view lists both
    return [present(row) for row in store.bench_rows(sweep_id) + store.missing_figures(sweep_id)]


def _mig_reference(store, sweep_id: int, rows: list[dict]) -> list[dict]:
    """Where a sweep has MIG instances' figures: the whole GPUs' figures of the store's other sweeps, to set them against."""
    from .bench import present
    from .discover.local import mig_name

    parents = {found.parent for r in rows if (found := mig_name(r["gpu"]))}
    return [present(r) for r in store.bench_rows(None) if r["sweep"] != sweep_id and r["gpu"] in parents] if parents else []


def _print_bench(store, sweep_id: int, fmt: str, wide: bool, defaulted: bool = False) -> None:
    from .report.bench import bench_csv, bench_json, bench_table, mig_terminal

    if fmt not in ("table", "csv", "json"):
        raise UserError(f"--bench prints as table, csv or json, not {fmt!r}.")
    rows = _bench_rows(store, sweep_id)
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
        if mig := mig_terminal(rows, _mig_reference(store, sweep_id, rows), wide):
            out.print(mig, crop=False)


@app.command()
@guarded
def explain(
    spec: Optional[List[str]] = typer.Argument(None, metavar="SPEC", help="What to ask about, as people write it: torch==2.4.1, 'torch 2.4', "
                                              "torch==2.4 (the newest 2.4.x), pytorch, tf, tensorflow-gpu, jax\\[cuda12]==0.4.30, cupy-cuda12x, "
                                              "nvidia-cuda-runtime-cu12==12.4.127, cuda-runtime==12.4 ..."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it, e.g. 'NVIDIA A100-SXM4-40GB' (default: this machine's)."),
    cc: Optional[str] = typer.Option(None, help="Compute capability instead of a name, e.g. 8.0."),
    driver: Optional[str] = typer.Option(None, help="NVIDIA driver version, e.g. 535.104.05 (default: this machine's; with --pool, for classes that do not say)."),
    python: Optional[str] = typer.Option(None, help="Python version X.Y (checked where the knowledge has wheel data)."),
    requirements: Optional[str] = typer.Option(None, "-r", "--requirements", help="Judge every GPU package of a requirements file, uv.lock, "
                                               "pylock.toml or conda environment.yml, and the set; '-' reads pip freeze output from stdin."),
    pool: Optional[str] = typer.Option(None, "--pool", help="Answer for every GPU class of a site: slurm, htcondor, kubernetes (discovered as "
                                       "a sweep does) or a plan file's targets."),
    sources: bool = typer.Option(False, "--sources", help="Print each source in full (default: short references listed at the end)."),
    exit_code: bool = typer.Option(False, "--exit-code", help="Exit 0 for pass, 1 for fail, 3 for uncertain, 5 for conditional (it needs the system's CUDA libraries; with --pool: the best class)."),
    db: Optional[str] = typer.Option(None, help=DB_HELP + " Its observed cells answer first; the rules' prediction is shown beside them."),
    source: Optional[str] = typer.Option(None, "--source", help="Only observations from local, imported, or one site's bundles."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    wide: bool = typer.Option(False, "--wide", help="Show every column of the tables, however wide."),
):
    """Predict, offline and in a fraction of a second, whether a stack (or a requirements file) works on a GPU and driver,
    or on every GPU class of a site, and why; after a no, the nearest yes."""
    from .answers.asked import read as read_question
    from .answers.explain import answer
    from .answers.observed import stored_rows

    piped = None
    if requirements == "-":
        from .answers.lockfiles import MAX_BYTES
        from .paths import read_user_stream

        piped = read_user_stream(sys.stdin.buffer, "standard input", MAX_BYTES, "pip freeze output is far smaller.")
    # the question is read once, here; only a question read without error asks the store (observation first: what it
    # saw of the asked framework), and the answer flows from it (answers/asked.py)
    asked = read_question(spec, requirements, pool, gpu, cc, driver, python, piped)
    result = answer(asked, stored_rows(db, source, asked.framework) if asked.mode != "requirements" else None)
    if json_out:
        _print_json(result)
    else:
        from .report.answers import view

        for item in view(result, sources, wide):
            out.print(item, crop=False)  # each fits the width; install commands are whole lines, never cut
    if exit_code:  # 0 pass, 1 fail, 3 uncertain (an internal error, also 3, prints "internal error:" on stderr and no answer),
        # 5 conditional: it runs on the GPU only where the system has the CUDA libraries it names
        raise typer.Exit({"pass": 0, "fail": 1, "uncertain": 3, "conditional": 5}[result["verdict"]])


@app.command()
@guarded
def doctor(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")):
    """This machine and interpreter: driver, GPUs, CUDA_VISIBLE_DEVICES, installed frameworks, and what works."""
    from .doctor import doctor as run_doctor

    result = run_doctor()
    if json_out:
        _print_json(result)
        return
    from .report.terminal import doctor_tables

    for item in doctor_tables(result):
        out.print(item)


@app.command()
@guarded
def inspect(
    target: str = typer.Argument(..., help="A .so/.o file, a directory, a wheel, or an installed distribution such as torch."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
):
    """The SASS architectures and PTX versions embedded in CUDA binaries (no cuobjdump needed)."""
    from .knowledge.fatbin import inspect as run_inspect

    result = run_inspect(target)
    if json_out:
        _print_json(result)
        return
    if result.get("skipped"):  # the rest was read: its kernels are below, and these are named so nobody takes them for none
        skipped = result["skipped"]
        named = ", ".join(f"{item['file']} ({item['why']})" for item in skipped[:10]) + (f" and {len(skipped) - 10} more" if len(skipped) > 10 else "")
        err.print(f"skipped {len(skipped)} file(s) or folder(s) that could not be read: {escape(named)}", highlight=False, soft_wrap=True)
    if not result["files"]:
        out.print(f"{escape(target)}: no CUDA fat binaries found")
        return
    out.print(f"{escape(target)}: SASS {' '.join(result['sass']) or 'none'}; PTX {' '.join(result['ptx']) or 'none'}"
              + (f" (PTX ISA {', '.join(result['ptx_isa'])})" if result["ptx_isa"] else "")
              + f"; {len(result['files'])} file(s) with kernels")
    for f in result["files"][:50]:
        out.print(f"  {escape(f['file'])}: {' '.join(f['sass'] + f['ptx'])}")


@app.command()
@guarded
def diff(
    before: str = typer.Argument(..., help="A sweep id, 'latest' or 'latest~N'."),
    after: str = typer.Argument(..., help="A sweep id, 'latest' or 'latest~N'."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    fail_on_slowdown: bool = typer.Option(False, "--fail-on-slowdown", help="Also exit 1 when a bench figure got slower beyond noise "
                                          "(never for a pair measured while another process computed, or where nobody can say)."),
):
    """Cells newly broken, newly working, changed, added and removed between two sweeps, and bench figures that
    moved beyond noise. Exit 1 if any cell newly broke (or, with --fail-on-slowdown, a figure got slower)."""
    from .analysis import diff as compute_diff
    from .report.rows import display_row
    from .store import Store

    store = Store(db, readonly=True)
    a, b = store.sweep_ref(before), store.sweep_ref(after)
    changes = compute_diff([display_row(r) for r in store.result_rows(a)], [display_row(r) for r in store.result_rows(b)])
    from .report.bench import compare, compare_table, counted_slowdowns

    bench_a, bench_b = _bench_rows(store, a), _bench_rows(store, b)
    performance = compare(bench_a, bench_b)
    counted, doubtful = counted_slowdowns(performance)  # contended pairs are not compared; unknown ones are not counted
    if json_out:
        _print_json({"before": a, "after": b, **changes, "performance": performance})
    else:
        from .report.terminal import diff_tables

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


@app.command()
@guarded
def history(
    spec: str = typer.Argument(..., help="A stack spec: torch==2.4.1, cuda-runtime==12.4, ..."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it."),
    cc: Optional[str] = typer.Option(None, help="Compute capability, e.g. 8.0."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print the rows as JSON."),
):
    """One cell through time: every stored verdict for a stack on a GPU class."""
    from .knowledge import tables
    from .plan import parse_spec
    from .report.rows import display_row
    from .store import Store

    framework, version, variant = parse_spec(spec)
    if bool(gpu) == bool(cc):
        raise UserError("give the GPU as either --gpu NAME or --cc X.Y (one of them).")
    want_cc = cc or (tables.gpu(gpu) or {}).get("cc")
    from .answers.pool import observed_cells  # the query `explain --pool` shows per class

    rows = observed_cells([display_row(r) for r in Store(db, readonly=True).result_rows(None)], framework, version, gpu, want_cc)
    if json_out:
        _print_json(rows)
        return
    from .report.terminal import history_table

    if not rows:
        out.print(f"no stored verdict for {escape(spec)} on {escape(gpu or 'compute capability ' + cc)}")
        return
    out.print(history_table(rows, escape(f"{spec} on {gpu or 'compute capability ' + cc}")))


@app.command()
@guarded
def advise(
    name: Optional[str] = typer.Argument(None, metavar="FRAMEWORK", help="torch, tensorflow, jax, cupy or cuda-runtime (or pytorch, tf...)."),
    framework: Optional[str] = typer.Option(None, help="The same as FRAMEWORK."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it (default: this machine's)."),
    cc: Optional[str] = typer.Option(None, help="Compute capability, e.g. 8.0."),
    driver: Optional[str] = typer.Option(None, help="NVIDIA driver version, e.g. 535.104.05 (default: this machine's)."),
    python: Optional[str] = typer.Option(None, help="Python version X.Y."),
    pool: Optional[str] = typer.Option(None, "--pool", help="Advise for every GPU class of a site: slurm, htcondor, kubernetes (discovered "
                                       "as a sweep does) or a plan file's targets: the newest release that runs on all, and per class."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    explain_left_out: bool = typer.Option(False, "--explain", help="Also list the candidates left out, each with why."),
    fmt: str = typer.Option("table", "--format", help="table (pip commands), or conda: an environment.yml for the first stack advised."),
):
    """The newest stacks that work for a GPU and driver, observed first, predicted second, with install commands."""
    from .answers.advise import advise_for
    from .answers.asked import read_advice
    from .report.rows import display_row
    from .store import Store

    if fmt not in ("table", "conda"):
        raise UserError(f"--format {fmt[:20]!r}: write table or conda.")
    if bool(name) == bool(framework) and name != framework:
        raise UserError("give the framework once: advise torch, or advise --framework torch.")
    if pool is not None:
        return advise_pool(name or framework, pool, gpu, cc, driver, python, db, json_out, fmt, out)
    asked = read_advice(name or framework, gpu, cc, driver, python)  # read once; the store is asked only after
    result = advise_for(asked, [display_row(r) for r in Store(db, readonly=True).result_rows(None, framework=asked.framework)])
    if fmt == "conda":
        advise_conda(result, result["target"].get("python") or python)  # the Python the advice was judged for
        return
    if json_out:
        _print_json(result)
        return
    from .report.answers import advise_view

    for item in advise_view(result, explain_left_out):
        out.print(item, crop=False)  # install commands are never cut: in the table when they fit, else whole lines below it


@app.command()
@guarded
def report(
    sweep_id: Optional[int] = typer.Option(None, "--sweep", help="Sweep ID (default: the latest)."),
    output: Path = typer.Option(Path("report.html"), "-o", "--output", help="Where to write the HTML file."),
    db: Optional[str] = typer.Option(None, help=DB_HELP),
    site: Optional[Path] = typer.Option(None, "--site", help="Instead: a static multi-page site in this directory, every stack's newest results."),
    source: Optional[str] = typer.Option(None, "--source", help=SOURCE_HELP),
):
    """One self-contained HTML report of a sweep: surprises first, a matrix per framework, evidence a click away."""
    from .report.html import render
    from .store import Store

    store = Store(db, readonly=True)
    if site is not None:
        return write_site(store, site, source)
    sweep_id = chosen_sweep(store, sweep_id, source)
    from .bench import with_shown_version

    rows = _bench_rows(store, sweep_id)
    html = render(store.sweep(sweep_id), store.result_rows(sweep_id), rows,
                  [with_shown_version(series) for series in store.telemetry(sweep_id)], _mig_reference(store, sweep_id, rows),
                  [with_shown_version(p) for p in store.profiles(sweep_id)])
    try:
        output.write_text(html, encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot write {str(output)!r}: {exc.strerror}.") from None
    err.print(f"wrote {escape(str(output))} (sweep {sweep_id})")


@app.command()
@guarded
def discover(
    source: str = typer.Option("local", help="local (NVML, nvidia-smi), slurm (scontrol), htcondor (condor_status) or kubernetes (GFD labels)."),
    json_out: bool = typer.Option(False, "--json", help="Print the GPU classes as JSON."),
    runtimes: bool = typer.Option(False, "--runtimes", help="Only the container runtimes on this node (name, version, path)."),
):
    """The GPU classes a pool offers: name, compute capability, driver, count, and what selects them."""
    from dataclasses import asdict

    if runtimes:  # what env = "container" stacks can run with on this node
        from .envs.container import runtimes_here
        from .report.terminal import runtimes_table

        found = runtimes_here()
        _print_json(found) if json_out else out.print(runtimes_table(found))
        return

    from .executors import discover as discover_classes
    from .model import EXECUTORS

    if source not in EXECUTORS:
        raise UserError(f"unknown source {source!r}; expected one of: {', '.join(EXECUTORS)}.")
    classes = [t for t in discover_classes(source) if t.count or source != "local"]
    if source == "local":  # a GPU in MIG mode is no class of its own: say why it is missing
        from .discover.local import local_gpus, mig_notes

        for note in mig_notes(local_gpus()):
            err.print(escape(note))
    if json_out:
        _print_json([asdict(t) for t in classes])
        return
    from rich.table import Table

    table = Table("GPU", "CC", "Driver", "CUDA", "Count", "Memory MiB", "Selects it", "Nodes", title=f"GPU classes ({source})", title_justify="left")
    for t in classes:
        selects = " ".join(filter(None, [f"--gres=gpu:{t.gres}:1" if t.gres else "", ",".join(t.features), ",".join(t.devices), ",".join(t.selector)]))
        table.add_row(escape(t.name), escape(t.cc or "?"), escape(t.driver or "?"), escape(t.cuda_driver or "?"), str(t.count), str(t.memory_mib or "?"),
                      escape(selects), escape(",".join(t.nodes)))
    out.print(table if classes else f"no GPU found by {source} discovery")
    if source == "local":
        from .envs.container import runtimes_here
        from .report.terminal import runtimes_table

        out.print(runtimes_table(runtimes_here()))


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("gpucompat")
    except PackageNotFoundError:  # run from a source tree that is not installed
        from . import __version__ as number
    print(f"gpucompat {number}")
    raise typer.Exit()


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
) -> None:
    pass


def _unwrapped(doc: str | None) -> str | None:
    """A docstring with each paragraph on one line: Rich keeps the source's line breaks, which then break
    help texts mid-sentence; one line a paragraph wraps where the terminal does."""
    if not doc:
        return doc
    import inspect

    return "\n\n".join(" ".join(paragraph.split()) for paragraph in inspect.cleandoc(doc).split("\n\n"))


def _unwrap_help(typer_app: typer.Typer) -> None:
    for command in typer_app.registered_commands:
        if command.callback is not None and not command.help:
            command.callback.__doc__ = _unwrapped(command.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_help(group.typer_instance)


def main() -> None:
    _unwrap_help(app)
    if not isinstance(sys.stdout, QuietPipe):
        sys.stdout = QuietPipe(sys.stdout)  # a reader that closes the pipe early ends the output, not the command
    app()
