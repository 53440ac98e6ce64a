"""Environment providers: turn a resolved stack into an interpreter to run the probe with.

Each provider module has `install_script(resolved, env_dir, requirements, wheelhouse, offline,
uv, same_machine)` (the text of install.sh, or None when nothing is installed),
`requirements_text(resolved)` and `interpreter(resolved, env_dir)` (the Python that runs the
probe). Every executor writes its jobs' install.sh with the same function, so a job builds
exactly the resolved environment wherever it runs.
"""

import importlib
from types import ModuleType

PROVIDERS = ("uv", "current", "conda", "container")  # model.ENV_PROVIDERS; each a module here, imported at its first use


def provider(name: str) -> ModuleType:
    """The provider module of an env name (imported here, so that `explain`, which needs one of its names, loads none)."""
    if name not in PROVIDERS:
        raise KeyError(name)
    return importlib.import_module(f"{__name__}.{name}")


def job_files(resolved) -> dict[str, str]:
    """Files a provider writes into each job directory beside the probe (conda: environment.yml and its lock)."""
    files = getattr(provider(resolved.stack.env), "job_files", None) if resolved.stack.env in PROVIDERS else None
    return files(resolved) if files else {}
