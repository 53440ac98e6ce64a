"""`gpucompat explain`: whether a stack, a requirements file or a pool's classes work on a GPU and driver, and why.

Its start is measured (benchmarks/answers_speed.py, docs/performance.md): nothing here imports Rich or the store
unless the answer needs them.
"""

from __future__ import annotations

import sys
from typing import List, Optional

import typer

from .common import guarded, out, print_json
from .options import KernelModuleOption, db_option


def explain(
    spec: Optional[List[str]] = typer.Argument(None, metavar="SPEC", help="What to ask about, as people write it: torch==2.4.1, 'torch 2.4', "
                                              "torch==2.4 (the newest 2.4.x), pytorch, tf, tensorflow-gpu, jax\\[cuda12]==0.4.30, cupy-cuda12x, "
                                              "nvidia-cuda-runtime-cu12==12.4.127, cuda-runtime==12.4 ..."),
    gpu: Optional[str] = typer.Option(None, help="GPU name as the driver reports it, e.g. 'NVIDIA A100-SXM4-40GB' (default: this machine's)."),
    cc: Optional[str] = typer.Option(None, help="Compute capability instead of a name, e.g. 8.0."),
    driver: Optional[str] = typer.Option(None, help="NVIDIA driver version, e.g. 535.104.05 (default: this machine's; with --pool, for classes that do not say)."),
    kernel_module: Optional[str] = KernelModuleOption,
    python: Optional[str] = typer.Option(None, help="Python version X.Y (checked where the knowledge has wheel data)."),
    requirements: Optional[str] = typer.Option(None, "-r", "--requirements", help="Judge every GPU package of a requirements file, uv.lock, "
                                               "pylock.toml or conda environment.yml, and the set; '-' reads pip freeze output from stdin."),
    pool: Optional[str] = typer.Option(None, "--pool", help="Answer for every GPU class of a site: slurm, htcondor, kubernetes (discovered as "
                                       "a sweep does) or a plan file's targets."),
    sources: bool = typer.Option(False, "--sources", help="Print each source in full (default: short references listed at the end)."),
    exit_code: bool = typer.Option(False, "--exit-code", help="Exit 0 for pass, 1 for fail, 3 for uncertain, 5 for conditional (it needs the system's CUDA libraries; with --pool: the best class)."),
    db: Optional[str] = db_option(" Its observed cells answer first; the rules' prediction is shown beside them."),
    source: Optional[str] = typer.Option(None, "--source", help="Only observations from local, imported, or one site's bundles."),
    json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    wide: bool = typer.Option(False, "--wide", help="Show every column of the tables, however wide."),
):
    """Predict, offline and in a fraction of a second, whether a stack (or a requirements file) works on a GPU and driver,
    or on every GPU class of a site, and why; after a no, the nearest yes."""
    from ..answers.asked import read as read_question
    from ..answers.explain import answer
    from ..answers.observed import stored_rows

    piped = None
    if requirements == "-":
        from ..answers.lockfiles import MAX_BYTES
        from ..paths import read_user_stream

        piped = read_user_stream(sys.stdin.buffer, "standard input", MAX_BYTES, "pip freeze output is far smaller.")
    # the question is read once, here; only a question read without error asks the store (observation first: what it
    # saw of the asked framework), and the answer flows from it (answers/asked.py)
    asked = read_question(spec, requirements, pool, gpu, cc, driver, python, piped, kernel_module)
    result = answer(asked, stored_rows(db, source, asked.framework) if asked.mode != "requirements" else None)
    if json_out:
        print_json(result)
    else:
        from ..report.answers import view

        for item in view(result, sources, wide):
            out.print(item, crop=False)  # each fits the width; install commands are whole lines, never cut
    if exit_code:  # 0 pass, 1 fail, 3 uncertain (an internal error, also 3, prints "internal error:" on stderr and no answer),
        # 5 conditional: it runs on the GPU only where the system has the CUDA libraries it names
        raise typer.Exit({"pass": 0, "fail": 1, "uncertain": 3, "conditional": 5}[result["verdict"]])


def register(app: typer.Typer) -> None:
    app.command("explain")(guarded(explain))
