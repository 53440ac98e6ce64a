"""Environment providers: turn a resolved stack into an interpreter to run the probe with.

Each provider module has `install_commands(resolved, env_dir, wheelhouse, offline)`
(argument lists, run in order; empty when nothing is installed) and
`interpreter(resolved, env_dir)` (the Python that runs the probe).
"""

from types import ModuleType

from . import current, uv

PROVIDERS: dict[str, ModuleType] = {"uv": uv, "current": current}


def provider(name: str) -> ModuleType:
    return PROVIDERS[name]
