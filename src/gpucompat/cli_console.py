"""The command line's consoles: Rich, made at their first use and sized for where the output goes."""

from __future__ import annotations

import os
import sys


def out_width() -> int | None:
    """Tables fit $COLUMNS when it is set, else the terminal; piped output (a file, `less`) fits the terminal
    the command was typed in, if any (stderr), else 200 columns for logs. Machines read --format csv/json."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        if sys.stdout.isatty():
            return None  # Rich follows the terminal
        return os.get_terminal_size(sys.stderr.fileno()).columns or 200
    except (AttributeError, ValueError, OSError):
        return 200


class LazyConsole:
    """A Rich console made at its first use, so that answers printed as JSON (`explain --json`, `--format json`)
    never import Rich (40 ms of explain's start; benchmarks/answers_speed.py)."""

    def __init__(self, **options):
        self._options, self._console = options, None

    def real(self):
        """The Rich console itself, for what Rich holds on to (a progress display)."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(**{k: v() if callable(v) else v for k, v in self._options.items()})
        return self._console

    def __getattr__(self, name):
        return getattr(self.real(), name)


def escape(text: str) -> str:
    """Rich's markup escaped (Rich imported only here, at the first use)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)
