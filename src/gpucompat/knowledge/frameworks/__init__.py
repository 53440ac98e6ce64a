"""Each framework's rules, one module per framework (as the probe's adapters are, `probe/main.ADAPTERS`), imported only
for the framework a question asks about. `rules.predict_stack` dispatches through `RULES`; the rules every framework
shares (the driver against the CUDA runtime, published minimums, wheels per Python, known defects) stay in `rules.py`.

A module holds:
    rules(release, variant, cc, driver, python=None, cuda_runtime=None, arch=None) -> (reasons, resolved)
    wheel_package(variant)          the PyPI package whose wheels decide the Pythons, or None
    suggest(release, cc, driver, prediction)   one install line that runs here instead, or None
    JUDGES_PRERELEASES              its rules say themselves that a nightly is not in the tables
    LISTS_EVERY_BUILD               its tables list every build of a release they know: one not listed was never built
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

# framework -> "module:function", imported only for the framework a question asks about
RULES = {"torch": "torch:rules", "tensorflow": "tensorflow:rules", "jax": "jax:rules", "cupy": "cupy:rules",
         "cuda-runtime": "cuda_runtime:rules"}


@cache
def rules_module(framework: str) -> ModuleType | None:
    """The module of a framework's rules; None for a framework that has none."""
    found = RULES.get(framework)
    return importlib.import_module("." + found.split(":")[0], __name__) if found else None
