"""What every command shares: exit codes, the consoles, and `guarded`, which turns every error into one sentence.

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

import typer

from ..errors import UserError
from .console import LazyConsole, escape, out_width, print_json

__all__ = ["EXIT_BROKEN", "EXIT_INTERNAL", "EXIT_INTERRUPTED", "EXIT_UNTESTED", "EXIT_USAGE", "err", "escape",
           "guarded", "interrupted_says", "out", "print_json", "say"]

out = LazyConsole(width=out_width)
err = LazyConsole(stderr=True)

EXIT_BROKEN, EXIT_USAGE, EXIT_INTERNAL, EXIT_UNTESTED, EXIT_INTERRUPTED = 1, 2, 3, 4, 130


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


def say(text: str) -> None:
    """One line on stdout as it is: no Rich, no markup (the share commands' sentences)."""
    sys.stdout.write(text + "\n")


@contextlib.contextmanager
def interrupted_says(sentence: str):
    """Ctrl-C inside: this sentence (what is stored and how to go on), exit 130."""
    try:
        yield
    except KeyboardInterrupt:
        err.print(escape(sentence), highlight=False, soft_wrap=True)
        raise typer.Exit(EXIT_INTERRUPTED) from None
