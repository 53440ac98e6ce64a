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


def system_libraries(framework: str, version: str, variant: str | None, cc: str | None = None) -> dict | None:
    """What the system must have for this build to use the GPU, or None for a self-contained build (or one not judged).
    `cc`, where known, lets CuPy's answer name the oldest toolkit that knows the GPU."""
    if framework == "cupy":
        return _cupy_toolkit(version, variant, cc)
    if framework != "tensorflow" or variant in ("and-cuda", "cpu", None):
        return None
    build = tables.tensorflow_build(version.split("+")[0])
    if build is None or (variant == "plain" and Version(build["release"]) < Version("2.1")):
        return None  # plain tensorflow 1.x is the CPU package; the rules say so
    why = (f"tensorflow {build['release']} without the [and-cuda] extra brings no CUDA libraries" if Version(build["release"]) >= Version("2.14")
           else f"TensorFlow {build['release']} loads CUDA and cuDNN from the system (tensorflow[and-cuda] brings them from 2.14 on)")
    return {"cuda": build["cuda"], "cudnn": build["cudnn"], "source": TF_INSTALL,
            "text": f"CUDA {build['cuda']} and cuDNN {build['cudnn']} installed on the system", "why": why}


def _cupy_toolkit(version: str, variant: str | None, cc: str | None) -> dict | None:
    """cupy-cudaXXx without [ctk] brings no NVRTC: the system's CUDA toolkit compiles CuPy's kernels (issue 40.3)."""
    from ..knowledge.frameworks import cupy

    if not variant or variant.endswith("[ctk]") or not variant.startswith("cuda"):
        return None
    row = next(iter(tables.cupy_packages(variant)), None)
    if row is None or not row["cuda"]:
        return None
    toolkit = cupy.system_toolkit(version, variant, cc) if cc else None
    cuda = toolkit["text"] if toolkit else f"CUDA {row['cuda']}"
    since = cupy.compiler_pin("cupy", f"{variant}[ctk]", version)
    why = f"cupy-{variant} brings no NVRTC: CuPy compiles its kernels as it runs with the system's toolkit" + \
        (f" (cupy-{variant}[ctk] brings it from pip)" if since else "")
    return {"cuda": toolkit["first"] if toolkit else row["cuda"], "cudnn": "", "source": cupy.NO_TOOLKIT,
            "text": f"a {cuda} toolkit installed on the system", "why": why, "without": "without one CuPy cannot compile its kernels"}


def conditional_verdict(verdict: str, reasons: list[dict], needs: dict | None) -> bool:
    """Whether a verdict becomes conditional: the rules pass, or are uncertain only about the system's CUDA libraries."""
    if needs is None or verdict == FAIL:
        return False
    unsure = [r for r in reasons if r["verdict"] == UNCERTAIN]
    return verdict == PASS or (verdict == UNCERTAIN and unsure and all(r["rule"] == SYSTEM_LIBRARIES_RULE for r in unsure))


def apply(result: dict, framework: str, version: str, variant: str | None) -> dict:
    """An answer (explain's, a requirements row, a pool class) made conditional where its build needs the system's CUDA:
    `verdict` conditional, `code` NEEDS_SYSTEM_CUDA, `needs` what the system must have; its libraries' reason says so."""
    needs = system_libraries(framework, version, variant, (result.get("target") or {}).get("cc"))
    reasons = result.get("reasons") or []
    if not conditional_verdict(result["verdict"], reasons, needs):
        return result
    result.update(verdict=CONDITIONAL, code=NEEDS_SYSTEM_CUDA, stage=None, needs=needs)
    for reason in reasons:
        if reason["rule"] == SYSTEM_LIBRARIES_RULE:
            reason["verdict"] = CONDITIONAL
    return result
