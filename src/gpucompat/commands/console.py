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


def print_json(value) -> None:
    """One JSON object on stdout, as every command's --json prints it."""
    import json

    sys.stdout.write(json.dumps(value, indent=2, default=str) + "\n")


def escape(text: str) -> str:
    """Rich's markup escaped (Rich imported only here, at the first use)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


class QuietPipe:
    """Standard output that a closed reader (`gpucompat explain ... --json | head -c 5`) does not turn into an error:
    the first write the pipe refuses points the file descriptor at /dev/null, so the rest of the output, and the
    interpreter's flush at exit, go nowhere, and the command ends with the exit code it would have had."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._discard()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._discard()

    def _discard(self) -> None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self._stream.fileno())
        finally:
            os.close(devnull)

    def __getattr__(self, name):
        return getattr(self._stream, name)
