"""A build that uses the GPU only where the system provides CUDA's libraries is never a plain yes.

TensorFlow's GPU builds before `tensorflow[and-cuda]` (tensorflow-gpu, and plain `tensorflow` from 2.1
to 2.13) load CUDA and cuDNN from the system, and so does plain `tensorflow` from 2.14 on, which the
extra would have brought them for; without them TensorFlow runs on the CPU and says so only in a log
line. Such a build's answer is `conditional` with the code NEEDS_SYSTEM_CUDA, naming the CUDA and cuDNN
the release was tested with (tensorflow_builds.csv): distinct from pass in the text, the JSON and
`--exit-code` (5). `tensorflow[and-cuda]` brings them, so it is self-contained, and advise ranks it first.
"""

from __future__ import annotations

from packaging.version import Version

from ..knowledge import tables
from ..knowledge.frameworks.tensorflow import TF_INSTALL
from ..knowledge.rules import FAIL, PASS, UNCERTAIN

CONDITIONAL = "conditional"
NEEDS_SYSTEM_CUDA = "NEEDS_SYSTEM_CUDA"
SYSTEM_LIBRARIES_RULE = "CUDA libraries"  # the TensorFlow rule (knowledge/frameworks/tensorflow.py) that says where its libraries come from


def system_libraries(framework: str, version: str, variant: str | None) -> dict | None:
    """What the system must have for this build to use the GPU, or None for a self-contained build (or one not judged)."""
    if framework != "tensorflow" or variant in ("and-cuda", "cpu", None):
        return None
    build = tables.tensorflow_build(version.split("+")[0])
    if build is None or (variant == "plain" and Version(build["release"]) < Version("2.1")):
        return None  # plain tensorflow 1.x is the CPU package; the rules say so
    why = (f"tensorflow {build['release']} without the [and-cuda] extra brings no CUDA libraries" if Version(build["release"]) >= Version("2.14")
           else f"TensorFlow {build['release']} loads CUDA and cuDNN from the system (tensorflow[and-cuda] brings them from 2.14 on)")
    return {"cuda": build["cuda"], "cudnn": build["cudnn"], "source": TF_INSTALL,
            "text": f"CUDA {build['cuda']} and cuDNN {build['cudnn']} installed on the system", "why": why}


def conditional_verdict(verdict: str, reasons: list[dict], needs: dict | None) -> bool:
    """Whether a verdict becomes conditional: the rules pass, or are uncertain only about the system's CUDA libraries."""
    if needs is None or verdict == FAIL:
        return False
    unsure = [r for r in reasons if r["verdict"] == UNCERTAIN]
    return verdict == PASS or (verdict == UNCERTAIN and unsure and all(r["rule"] == SYSTEM_LIBRARIES_RULE for r in unsure))


def apply(result: dict, framework: str, version: str, variant: str | None) -> dict:
    """An answer (explain's, a requirements row, a pool class) made conditional where its build needs the system's CUDA:
    `verdict` conditional, `code` NEEDS_SYSTEM_CUDA, `needs` what the system must have; its libraries' reason says so."""
    needs = system_libraries(framework, version, variant)
    reasons = result.get("reasons") or []
    if not conditional_verdict(result["verdict"], reasons, needs):
        return result
    result.update(verdict=CONDITIONAL, code=NEEDS_SYSTEM_CUDA, stage=None, needs=needs)
    for reason in reasons:
        if reason["rule"] == SYSTEM_LIBRARIES_RULE:
            reason["verdict"] = CONDITIONAL
    return result
