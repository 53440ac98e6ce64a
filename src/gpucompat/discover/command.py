"""A scheduler's command-line tool, run without a shell (condor_status, sinfo, scontrol)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from ..errors import UserError


def run_command(command: list[str], timeout: float, where: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """A scheduler's command-line tool; its absence or silence is one sentence, not a traceback.
    `where`: the kind of host it runs on ("a Slurm submit host")."""
    try:
        return subprocess.run(command, capture_output=True, encoding="utf-8", errors="replace", timeout=timeout, cwd=cwd)
    except FileNotFoundError:
        raise UserError(f"{command[0]} is not on PATH: run this on {where}.") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{shlex.join(command[:3])} did not answer within {timeout:.0f} s; is the scheduler reachable?") from None
