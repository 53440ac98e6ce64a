"""TensorFlow's rules: the CUDA and cuDNN each release was tested with (tensorflow_builds.csv), where those libraries
come from (the system before 2.14; tensorflow[and-cuda] from 2.14 on), its Pythons, its kernels, and the ptxas XLA
compiles with as it runs."""

from __future__ import annotations

from packaging.version import Version

from .. import pins, tables
from ..arch import arch_rule, sass_covers, toolkit_window_rule
from ..compilers import knows, ptxas_pin
from ..reasons import FAIL, PASS, UNCERTAIN, Prediction, Reason
from ..rules import driver_rule, python_rule, semicolon_list
from ..tables import minor_series

JUDGES_PRERELEASES = False
LISTS_EVERY_BUILD = False  # the tables hold one row per release series, not its packages' builds

TF_INSTALL = "https://www.tensorflow.org/install/pip (from 2.14: pip install tensorflow[and-cuda] brings CUDA; before, the system provides it)"


TF_CPU = "https://github.com/tensorflow/tensorflow/blob/master/README.md ('A smaller CPU-only package is also available: pip install tensorflow-cpu')"


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
    if variant == "cpu":
        return [Reason("CPU build", FAIL, "tensorflow-cpu is TensorFlow's CPU-only package", TF_CPU, "NO_DEVICE", "device")], {}
    build = tables.tensorflow_build(release)
    if build is None:
        return [Reason("TensorFlow build", UNCERTAIN, f"TensorFlow {minor_series(release)} is not in the knowledge tables", "")], {}
    cuda = cuda_runtime or build["cuda"]
    libraries = f"CUDA {build['cuda']} and cuDNN {build['cudnn']}"
    reasons = [Reason("TensorFlow build", PASS, f"TensorFlow {build['release']} was tested with {libraries}", build["source"])]
    brought = pins.tensorflow_cuda(release) if variant == "and-cuda" else []  # the extra's own nvidia-* pins decide its CUDA
    runtime = next((r for r in brought if r["package"].startswith("nvidia-cuda-runtime") and r["resolves_to"]), None)
    if runtime is not None:
        cudnn = next((r for r in brought if r["package"].startswith("nvidia-cudnn") and r["resolves_to"]), None)
        cuda = cuda_runtime or minor_series(runtime["resolves_to"])
        said = f"{runtime['requirement']} (resolves to {runtime['resolves_to']})" + (
            f" and {cudnn['requirement']} (resolves to {cudnn['resolves_to']})" if cudnn else "")
        reasons.append(Reason("CUDA libraries", PASS, f"tensorflow[and-cuda] {runtime['release']} requires {said}: CUDA "
                              f"{minor_series(runtime['resolves_to'])}", f"{runtime['source']} ; {pins.TENSORFLOW_CUDA}"))
    if Version(build["release"]) >= Version("2.14") and variant != "and-cuda":
        # plain `tensorflow` from 2.14 on brings no CUDA libraries: the GPU works only if the system has the right ones
        reasons.append(Reason("CUDA libraries", UNCERTAIN, f"plain tensorflow {build['release']} brings no CUDA libraries; it uses the GPU only "
                              f"where the system provides {libraries} (tensorflow[and-cuda] brings them)", TF_INSTALL))
    elif Version(build["release"]) < Version("2.14"):
        reasons.append(Reason("CUDA libraries", PASS, f"TensorFlow {build['release']} loads {libraries} from the system", TF_INSTALL,
                              warning=f"TensorFlow {build['release']} needs {libraries} installed on the system; without them it runs on the CPU"))
    if python:
        reasons.append(python_rule(f"TensorFlow {build['release']}", python, build["pythons"], build["source"]))
    reasons.append(driver_rule(cuda, driver))
    sass, ptx = semicolon_list(build.get("sass", "")), semicolon_list(build.get("ptx", ""))
    if sass or ptx:  # read from the release's own Linux wheel (tools/facts/tensorflow_archs.csv)
        reasons.append(arch_rule(cc, sass, ptx, build["source"], cuda, driver))
    else:
        reasons.append(toolkit_window_rule(cuda, cc))
    compiler = xla_rule(release, variant, cc, sass) if reasons[-1].verdict == PASS else None
    if compiler is not None:
        reasons.append(compiler)
    return reasons, {"cuda_runtime": cuda, "cudnn": build["cudnn"], **({"cuda_wheels": {r["package"]: r["resolves_to"] for r in brought}} if brought else {}), "sass": sass or None, "ptx": ptx or None}


def xla_rule(release: str, variant: str, cc: str | None, sass: list[str]) -> Reason | None:
    """TensorFlow's own kernels are precompiled (the architecture rule judges them); only XLA, for
    tf.function(jit_compile=True), compiles as it runs, with the ptxas that tensorflow[and-cuda] pins. Where that
    ptxas does not know the GPU, TensorFlow's XLA falls back to the driver's JIT (tensorflow#43888), so it is a
    warning on a pass, naming the compiler, never a failure. None where it has nothing to add."""
    found = ptxas_pin("tensorflow", variant, release) if cc else None
    if found is None:
        return None
    pin, package, _floor, lowest, given = found
    major, minor = (int(p) for p in cc.split("."))
    covered = sass_covers(sass, major, minor)
    if covered and knows(lowest, major, minor):
        return None
    sm, name = f"sm_{major}{minor}", "run-time compiler (XLA ptxas)"
    said = (f"TensorFlow's XLA (tf.function(jit_compile=True)) compiles for {sm} as it runs, with the ptxas of {package} "
            f"(tensorflow[and-cuda] {release} requires {pin['requirement']}, pip installs {pin['resolves_to']})")
    source = f"{pin['source']} ; {given['source']} ; https://github.com/tensorflow/tensorflow/pull/43888"
    if knows(given, major, minor):
        return Reason(name, PASS, f"{said}: ptxas {pin['resolves_to']} knows {sm}", source)
    return Reason(name, PASS, f"{said}: ptxas {pin['resolves_to']} does not know {sm}; TensorFlow's own kernels do not need it",
                  source, warning=f"XLA-compiled functions (jit_compile=True) fall back to the driver's PTX JIT on {sm} "
                  f"(ptxas {pin['resolves_to']} does not know it): slower first compiles, not measured here")



def wheel_package(variant: str) -> str | None:
    return {"gpu": "tensorflow-gpu", "cpu": "tensorflow-cpu"}.get(variant, "tensorflow")


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    return None
