"""Executors: one module each, one interface (base.Executor), chosen by name here."""

from __future__ import annotations

from ..model import SweepSpec
from .base import Executor


def make_executor(spec: SweepSpec, wheelhouse: str | None, offline: bool) -> Executor:
    """The plan's executor, configured from its [<executor>] table (only that one's: a plan
    run with --executor another gets none of its own executor's options)."""
    options = spec.executor_options.get(spec.executor, {})
    if spec.executor == "slurm":
        from .slurm import SlurmExecutor

        return SlurmExecutor(spec.timeouts, wheelhouse, offline, **options)
    if spec.executor == "htcondor":
        from .htcondor import HTCondorExecutor

        return HTCondorExecutor(spec.timeouts, wheelhouse, offline)
    if spec.executor == "kubernetes":
        from .kubernetes import KubernetesExecutor

        return KubernetesExecutor(spec.timeouts, **options)
    from .local import LocalExecutor

    return LocalExecutor(spec.timeouts, spec.max_parallel_installs, wheelhouse, offline)
