"""The command line: the app, `--version`, and every command registered from its own module (`commands/<verb>.py`).
No logic lives here, nor below it in commands/: parse, call, print. Exit codes: commands/common.py."""

from __future__ import annotations

import sys

import typer

from .commands import (
    advise, check, diff, discover, doctor, envs, explain, export, history, import_, inspect, key, knowledge, report, results, sweep, trust,
)
from .commands.console import QuietPipe

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Which ML stacks work on which GPUs and drivers, and why not.")

# the order `gpucompat --help` lists them in (the command groups, trust, envs and knowledge, come after the commands)
COMMANDS = (export, import_, key, trust, envs, knowledge, sweep, check, results, explain, doctor, inspect, diff, history, advise, report, discover)
for module in COMMANDS:
    module.register(app)


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
    import inspect as source

    return "\n\n".join(" ".join(paragraph.split()) for paragraph in source.cleandoc(doc).split("\n\n"))


def _unwrap_help(typer_app: typer.Typer) -> None:
    for registered in typer_app.registered_commands:
        if registered.callback is not None and not registered.help:
            registered.callback.__doc__ = _unwrapped(registered.callback.__doc__)
    for group in typer_app.registered_groups:
        if group.typer_instance is not None:
            _unwrap_help(group.typer_instance)


def main() -> None:
    _unwrap_help(app)
    if not isinstance(sys.stdout, QuietPipe):
        sys.stdout = QuietPipe(sys.stdout)  # a reader that closes the pipe early ends the output, not the command
    app()
