"""Drivers as a fix: the oldest driver newer than the asked one under which a stack is predicted to run (nearest yes,
and an empty advise's sentence)."""

from __future__ import annotations

from packaging.version import Version

from ..knowledge import tables
from ..knowledge.rules import PASS, predict_stack

MINOR_COMPAT = "minor-version compatibility"


def oldest_driver(framework: str, release: str, variant: str, cc: str | None, driver: str, python: str | None,
                  gpu: str | None = None, kernel_module: str | None = None) -> dict | None:
    """The oldest driver newer than `driver` under which the stack is predicted to pass, and the oldest that runs it
    without CUDA minor-version compatibility (None: no driver makes it pass, as far as the knowledge says)."""
    have = tables.version(driver)
    first = clean = None
    for candidate in tables.named_drivers():  # every driver the knowledge names as a minimum, oldest first
        if have is not None and Version(candidate) <= have:
            continue
        p = predict_stack(framework, release, variant, cc, candidate, python, gpu=gpu, kernel_module=kernel_module)
        if p.verdict != PASS:
            continue
        first = first or (candidate, p)
        if not any(MINOR_COMPAT in w for w in p.warnings):
            clean = (candidate, p)
            break
    if first is None:
        return None
    return {"kind": "driver", "label": "a newer driver", "driver": first[0], "warnings": first[1].warnings,
            "clean_driver": clean[0] if clean and clean[0] != first[0] else None, "install": None}
