"""Executors: one module each, one interface (base.Executor), one registry (after ReFrame's
scheduler backends): name -> the executor class and the discovery of its pool's GPU classes.

Every executor is built the same way, `cls(settings, **options)`: the plan's timeouts and
install settings, then the plan's own table for that executor ([slurm], [htcondor], ...).
"""

from __future__ import annotations

from importlib import import_module

from ..model import EXECUTORS, SweepSpec, Target
from .base import Executor, JobSettings

__all__ = ["EXECUTORS", "BACKENDS", "discover", "executor_class", "make_executor"]

# name -> (executor "module:Class", discovery module); imported only when used
BACKENDS = {
    "local": ("gpucompat.executors.local:LocalExecutor", "gpucompat.discover.local"),
    "slurm": ("gpucompat.executors.slurm:SlurmExecutor", "gpucompat.discover.slurm"),
    "htcondor": ("gpucompat.executors.htcondor:HTCondorExecutor", "gpucompat.discover.htcondor"),
    "kubernetes": ("gpucompat.executors.kubernetes:KubernetesExecutor", "gpucompat.discover.kubernetes"),
}


def executor_class(name: str) -> type:
    module, _, cls = BACKENDS[name][0].partition(":")
    return getattr(import_module(module), cls)


def discover(name: str) -> list[Target]:
    """The GPU classes of the named executor's pool (for `local`: this machine's)."""
    return import_module(BACKENDS[name][1]).discover()


def make_executor(spec: SweepSpec, wheelhouse: str | None, offline: bool) -> Executor:
    """The plan's executor, configured from its own table only: a plan run with --executor
    another gets none of its own executor's options."""
    settings = JobSettings(spec.timeouts, wheelhouse, offline, spec.max_parallel_installs, spec.bench,
                           max_parallel_probes=spec.max_parallel_probes)
    return executor_class(spec.executor)(settings, **spec.executor_options.get(spec.executor, {}))
