"""`gpucompat doctor`: this machine and interpreter, now."""

from __future__ import annotations

import typer

from .common import guarded, out, print_json


def doctor(json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")):
    """This machine and interpreter: driver, GPUs, CUDA_VISIBLE_DEVICES, installed frameworks, and what works."""
    from ..doctor import doctor as run_doctor

    result = run_doctor()
    if json_out:
        print_json(result)
        return
    from ..report.terminal import doctor_tables

    for item in doctor_tables(result):
        out.print(item)


def register(app: typer.Typer) -> None:
    app.command("doctor")(guarded(doctor))
