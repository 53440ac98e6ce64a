"""Environment providers: turn a resolved stack into an interpreter to run the probe with.

Each provider module has `install_script(resolved, env_dir, requirements, wheelhouse, offline,
uv, same_machine)` (the text of install.sh, or None when nothing is installed),
`requirements_text(resolved)` and `interpreter(resolved, env_dir)` (the Python that runs the
probe). Every executor writes its jobs' install.sh with the same function, so a job builds
exactly the resolved environment wherever it runs.
"""

from types import ModuleType

from . import conda, container, current, uv

PROVIDERS: dict[str, ModuleType] = {"uv": uv, "current": current, "conda": conda, "container": container}


def provider(name: str) -> ModuleType:
    return PROVIDERS[name]


def job_files(resolved) -> dict[str, str]:
    """Files a provider writes into each job directory beside the probe (conda: environment.yml and its lock)."""
    files = getattr(PROVIDERS.get(resolved.stack.env), "job_files", None)
    return files(resolved) if files else {}
