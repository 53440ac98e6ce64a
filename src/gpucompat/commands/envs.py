"""`gpucompat envs` and `envs prune`: the environments kept for sweeps, listed and pruned (env_cache.py)."""

from __future__ import annotations

import typer

from .common import guarded, out, print_json


def register(app: typer.Typer) -> None:
    envs_app = typer.Typer(help="The environments kept for sweeps ($GPUCOMPAT_CACHE/envs): list them, or prune them.")

    @envs_app.callback(invoke_without_command=True)
    @guarded
    def envs(ctx: typer.Context, json_out: bool = typer.Option(False, "--json", help="Print one JSON object.")):
        """Each environment with its size, the bytes it shares through hard links, the last sweep that used it and its stack."""
        if ctx.invoked_subcommand:
            return
        from ..env_cache import summary
        from ..report.terminal import envs_table

        result = summary()
        if json_out:
            print_json(result)
            return
        for item in envs_table(result):
            out.print(item, highlight=False)

    @envs_app.command("prune")
    @guarded
    def prune(
        keep: int = typer.Option(..., "--keep", min=0, help="Keep what the latest N sweeps of each plan use."),
        dry_run: bool = typer.Option(False, "--dry-run", help="Say what would be removed; remove nothing."),
        json_out: bool = typer.Option(False, "--json", help="Print one JSON object."),
    ):
        """Remove the environments that none of the latest N sweeps of any plan used; one a job holds (its lock) is skipped and named."""
        from ..env_cache import prune as prune_envs
        from ..report.terminal import prune_lines

        result = prune_envs(keep, dry_run)
        if json_out:
            print_json(result)
            return
        for line in prune_lines(result):
            out.print(line, highlight=False, soft_wrap=True)

    app.add_typer(envs_app, name="envs")
