"""`gpucompat advise`: the newest stacks that work for a GPU and driver, or for every class of a site (`--pool`),
with install commands or an environment.yml (`--format conda`); for a site, the paragraph its documentation carries
(`--pool ... --format md|html`)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from ..errors import UserError
from .common import guarded, out, print_json
from .options import DbOption, KernelModuleOption


def advise(
    name: Optional[str] = typer.Argument(None, metavar="FRAMEWORK", help="torch, tensorflow, jax, cupy or cuda-runtime (or pytorch, tf...)."),
    framework: Optional[str] = typer.Option(None, help="The same as FRAMEWORK."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it (default: this machine's)."),
    cc: Optional[str] = typer.Option(None, help="Compute capability, e.g. 8.0."),
    driver: Optional[str] = typer.Option(None, help="NVIDIA driver version, e.g. 535.104.05 (default: this machine's)."),
    kernel_module: Optional[str] = KernelModuleOption,
    python: Optional[str] = typer.Option(None, help="Python version X.Y."),
    pool: Optional[str] = typer.Option(None, "--pool", help="Advise for every GPU class of a site: slurm, htcondor, kubernetes (discovered "
                                       "as a sweep does) or a plan file's targets: the fewest install lines that give each class its newest "
                                       "release, on the plan's Pythons, and per class."),
    db: Optional[str] = DbOption,
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    explain_left_out: bool = typer.Option(False, "--explain", help="Also list the candidates left out, each with why."),
    fmt: str = typer.Option("table", "--format", help="table (pip commands); conda: an environment.yml for the first stack advised; "
                                                    "with --pool, md or html: the site's paragraph to paste into its documentation."),
):
    """The newest stacks that work for a GPU and driver, observed first, predicted second, with install commands."""
    from ..answers.advise import advise_for
    from ..answers.asked import read_advice
    from ..report.rows import display_row
    from ..store import Store

    if fmt not in ("table", "conda", "md", "html"):
        raise UserError(f"--format {fmt[:20]!r}: write table, conda, or (with --pool) md or html.")
    if bool(name) == bool(framework) and name != framework:
        raise UserError("give the framework once: advise torch, or advise --framework torch.")
    if pool is not None:
        return advise_pool(name or framework, pool, gpu, cc, driver, python, db, json_out, fmt, kernel_module)
    if fmt in ("md", "html"):
        raise UserError(f"--format {fmt} writes a site's paragraph: give it with --pool.")
    asked = read_advice(name or framework, gpu, cc, driver, python, kernel_module)  # read once; the store is asked only after
    result = advise_for(asked, [display_row(r) for r in Store(db, readonly=True).result_rows(None, framework=asked.framework)])
    if fmt == "conda":
        advise_conda(result, result["target"].get("python") or python)  # the Python the advice was judged for
        return
    if json_out:
        print_json(result)
        return
    from ..report.answers import advise_view

    for item in advise_view(result, explain_left_out):
        out.print(item, crop=False)  # install commands are never cut: in the table when they fit, else whole lines below it


def advise_conda(result: dict, python: str | None) -> None:
    """advise --format conda: the first stack advised (observed before predicted) as an environment.yml on stdout."""
    from ..envs.conda import advised_environment

    items = result["observed"] + result["predicted"]
    if not items:
        raise UserError(f"nothing to advise, so no environment file: {result.get('empty') or 'see --explain.'}")
    item, t = items[0], result["target"]
    comment = (f"gpucompat advise: {result['framework']} {item['version']} [{item['variant']}] for {t['gpu'] or 'CC ' + t['cc']}, "
               f"driver {t['driver']} ({item['source']})\nconda-forge may not carry every PyPI release: solve it before use "
               "(a sweep with env = \"conda\" does).")
    sys.stdout.write(advised_environment(result["framework"], item["version"], item["variant"], python or item.get("python"),
                                         item.get("cuda_runtime"), comment))


def advise_pool(name: str | None, pool: str, gpu: str | None, cc: str | None, driver: str | None, python: str | None,
                db: str | None, json_out: bool, fmt: str, kernel_module: str | None = None) -> None:
    """advise --pool: the pool's classes read once as explain --pool reads them, then the store, then the answer on
    --python or each Python the plan lists."""
    from ..answers.advise_pool import advise_pool as answer
    from ..answers.asked import NEWEST, read_pool, read_python
    from ..answers.questions import framework_name
    from ..report.rows import display_row
    from ..store import Store

    if gpu or cc:
        raise UserError("--pool advises for the pool's own GPU classes: give it without --gpu or --cc.")
    if fmt == "conda":
        raise UserError("--format conda writes one environment for one GPU: give it without --pool.")
    framework, _variant, notes = framework_name(name)
    python, python_from, python_notes = read_python(python, elsewhere=True)
    site = read_pool(pool, driver, python, kernel_module)
    if python_from == NEWEST and site.plan_pythons:
        python_from = "the plan"
        python_notes = [f"Python {', '.join(site.plan_pythons)}: the Pythons {Path(pool).name} lists, each answered "
                        "(give --python X.Y for another)"]
    rows = [display_row(r) for r in Store(db, readonly=True).result_rows(None, framework=framework)]
    result = answer(framework, site, python_from, tuple(notes + python_notes), rows)
    if json_out:
        print_json(result)
        return
    if fmt in ("md", "html"):
        from ..report.answers import advise_pool_paragraph

        sys.stdout.write(advise_pool_paragraph(result, fmt))
        return
    from ..report.answers import advise_pool_view

    for item in advise_pool_view(result):
        out.print(item, crop=False)


def register(app: typer.Typer) -> None:
    app.command("advise")(guarded(advise))
