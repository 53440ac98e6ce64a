"""The executor interface (after ReFrame's scheduler registry and submitit's executors)."""

from __future__ import annotations

import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..errors import UserError
from ..model import Cell, Observation

# Job states an executor reports from poll().
WAITING, INSTALLING, RUNNING, DONE = "waiting", "installing", "running", "done"


@dataclass
class JobDir:
    cell: Cell
    path: Path
    env_dir: Path
    interpreter: str

    @property
    def id(self) -> int:
        return self.cell.id


class Executor(Protocol):
    name: str

    def precheck(self, cells: list[Cell]) -> dict[int, str | None]:
        """Cell id -> why no node can run it (None: some node can)."""

    def prepare(self, cells: list[Cell], workdir: Path) -> list[JobDir]:
        """Render every file a job needs into its own directory."""

    def submit(self, jobs: list[JobDir]) -> None: ...

    def poll(self) -> dict[int, str]: ...

    def collect(self, job: JobDir) -> Observation: ...

    def cancel(self, jobs: list[JobDir]) -> None: ...


def run_command(command: list[str], timeout: float, where: str) -> subprocess.CompletedProcess:
    """A scheduler's command-line tool; its absence or silence is one sentence, not a traceback.
    `where`: the kind of host it runs on ("a Slurm submit host")."""
    try:
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise UserError(f"{command[0]} is not on PATH: run this on {where}.") from None
    except subprocess.TimeoutExpired:
        raise UserError(f"{shlex.join(command[:3])} did not answer within {timeout:.0f} s; is the scheduler reachable?") from None
