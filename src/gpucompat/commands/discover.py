"""`gpucompat discover`: the GPU classes a pool offers, or the container runtimes on this node."""

from __future__ import annotations

import typer

from ..errors import UserError
from .common import err, escape, guarded, out, print_json


def discover(
    source: str = typer.Option("local", help="local (NVML, nvidia-smi), slurm (scontrol), htcondor (condor_status) or kubernetes (GFD labels)."),
    json_out: bool = typer.Option(False, "--json", help="Print the GPU classes as JSON."),
    runtimes: bool = typer.Option(False, "--runtimes", help="Only the container runtimes on this node (name, version, path)."),
):
    """The GPU classes a pool offers: name, compute capability, driver, count, and what selects them."""
    from dataclasses import asdict

    if runtimes:  # what env = "container" stacks can run with on this node
        from ..envs.container import runtimes_here
        from ..report.terminal import runtimes_table

        found = runtimes_here()
        print_json(found) if json_out else out.print(runtimes_table(found))
        return

    from ..executors import discover as discover_classes
    from ..model import EXECUTORS

    if source not in EXECUTORS:
        raise UserError(f"unknown source {source!r}; expected one of: {', '.join(EXECUTORS)}.")
    classes = [t for t in discover_classes(source) if t.count or source != "local"]
    if source == "local":  # a GPU in MIG mode is no class of its own: say why it is missing
        from ..discover.local import local_gpus, mig_notes

        for note in mig_notes(local_gpus()):
            err.print(escape(note))
    if json_out:
        print_json([asdict(t) for t in classes])
        return
    from rich.table import Table

    table = Table("GPU", "CC", "Driver", "CUDA", "Count", "Memory MiB", "Selects it", "Nodes", title=f"GPU classes ({source})", title_justify="left")
    for t in classes:
        selects = " ".join(filter(None, [f"--gres=gpu:{t.gres}:1" if t.gres else "", ",".join(t.features), ",".join(t.devices), ",".join(t.selector)]))
        table.add_row(escape(t.name), escape(t.cc or "?"), escape(t.driver or "?"), escape(t.cuda_driver or "?"), str(t.count), str(t.memory_mib or "?"),
                      escape(selects), escape(",".join(t.nodes)))
    out.print(table if classes else f"no GPU found by {source} discovery")
    if source == "local":
        from ..envs.container import runtimes_here
        from ..report.terminal import runtimes_table

        out.print(runtimes_table(runtimes_here()))


def register(app: typer.Typer) -> None:
    app.command("discover")(guarded(discover))
