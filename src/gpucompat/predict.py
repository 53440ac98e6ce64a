"""`predict(cell)`: what the knowledge expects of one cell of a sweep, before any job runs.

The one entry point the pipeline calls; `rules.predict_stack` judges a stack given as plain
values (explain, advise, doctor). A cell adds what the submit side learned: its resolution
(which CUDA runtime uv picked, or that it picked nothing), the Python, and for the current
environment the installed build itself.
"""

from __future__ import annotations

from . import analysis
from .envs import current as current_env
from .knowledge import fatbin, tables
from .knowledge.rules import FAIL, UNCERTAIN, Prediction, Reason, combine, predict_stack
from .model import Cell


def predict(cell: Cell) -> Prediction:
    stack, resolved = cell.stack, cell.resolved
    if not resolved.ok and resolved.cause:  # it could not be tried (the index did not answer, nothing installed): no verdict
        return combine([Reason("resolution", UNCERTAIN, analysis.classify(resolved, None).summary, "")], {})
    if not resolved.ok:
        reason = Reason("resolution", FAIL, analysis.classify(resolved, None).summary, "uv pip compile on the submit side",
                        "ENV_UNRESOLVABLE", "resolve")
        return combine([reason], {})
    version, variant = stack.version, stack.variant
    if stack.env == "container":  # the image's framework, CUDA and NVIDIA_REQUIRE_CUDA are learned by its probe
        return combine([Reason("image", UNCERTAIN, f"what the image {stack.image} holds is learned only when it runs",
                               "envs.container")], {})
    if stack.env == "current":
        found = current_env.installed(stack.framework)
        if found is None:
            return combine([Reason("installed", FAIL, f"{stack.framework} is not installed in {stack.python}", "importlib.metadata",
                                   "IMPORT_FAILED", "import")], {})
        version, variant = found
    python = stack.python if stack.python[:1].isdigit() else None
    driver = cell.target.driver
    if driver is None and cell.target.cuda_driver:
        # HTCondor advertises the CUDA version a driver supports, not its number: judge by the
        # oldest driver that supports that CUDA, a lower bound of the real one
        driver = (tables.cuda_row(cell.target.cuda_driver) or {}).get("toolkit_driver_min")
    prediction = predict_stack(stack.framework, version, variant, cell.target.cc, driver, python, resolved.cuda_runtime, gpu=cell.target.name,
                               kernel_module=cell.target.kernel_module)
    if stack.env == "current" and any(r.rule == "architecture" and r.verdict == UNCERTAIN for r in prediction.reasons):
        # the tables do not know this build: read its kernels from the installed binaries
        archs = fatbin.installed_archs(stack.framework)
        if archs:
            prediction = predict_stack(stack.framework, version, variant, cell.target.cc, driver, python,
                                       resolved.cuda_runtime, arch=archs, gpu=cell.target.name, kernel_module=cell.target.kernel_module)
    return prediction
