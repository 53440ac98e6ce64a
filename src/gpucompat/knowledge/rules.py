"""Prediction: small pure rules over the knowledge tables, each citing the fact it used.

A rule returns pass, fail (with code and stage) or uncertain, one human sentence and
its source. `predict` runs the rules that apply to a stack in ladder order: the first
failure is the verdict; otherwise any uncertainty makes the whole uncertain — never a
guess; otherwise pass, with the warnings the passing rules raised.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from packaging.version import Version

from . import tables
from .tables import minor_series, version

PASS, FAIL, UNCERTAIN = "pass", "fail", "uncertain"


@dataclass(frozen=True)
class Reason:
    rule: str
    verdict: str
    text: str
    source: str
    code: str | None = None
    stage: str | None = None
    warning: str | None = None


@dataclass
class Prediction:
    verdict: str
    code: str | None
    stage: str | None
    warnings: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    resolved: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict, "code": self.code, "stage": self.stage, "warnings": self.warnings,
            "reasons": [{k: v for k, v in asdict(r).items() if k in ("rule", "verdict", "text", "source")} for r in self.reasons],
            "resolved": self.resolved,
        }


# -- rules -----------------------------------------------------------------------------------

def driver_rule(cuda_runtime: str | None, driver: str | None) -> Reason:
    """A runtime newer in major than the driver supports fails; same major and newer minor
    passes only under minor-version compatibility (driver >= the branch floor)."""
    name = "driver vs CUDA runtime"
    if not cuda_runtime or not driver:
        missing = "the CUDA runtime" if not cuda_runtime else "the driver version"
        return Reason(name, UNCERTAIN, f"{missing} is not known, so driver support cannot be judged", "")
    runtime, have = version(minor_series(cuda_runtime)), tables.driver_cuda(driver)
    if runtime is None:
        return Reason(name, UNCERTAIN, f"{cuda_runtime!r} is not a CUDA version", "")
    if have is None:
        return Reason(name, UNCERTAIN, f"driver {driver} is older than every CUDA release in the knowledge tables", "")
    supported, newest = Version(have["cuda"]), tables.newest_cuda()
    # A CUDA major the tables do not hold (0, 6, 14, ...) is judged only where the driver's own
    # reach is known and lies a major below it; any other verdict would be a guess.
    if not tables.cuda_known(str(runtime)) and not (runtime.major > supported.major and supported < Version(newest["cuda"])):
        oldest = min(tables.table("cuda_drivers"), key=lambda r: Version(r["cuda"]))
        return Reason(name, UNCERTAIN, f"the knowledge tables have no data for CUDA {runtime} (they hold CUDA {oldest['cuda']} to {newest['cuda']})",
                      "knowledge/data/cuda_drivers.csv")
    if runtime <= supported:
        return Reason(name, PASS, f"driver {driver} supports CUDA {supported}, enough for runtime {runtime}", have["source"])
    needed = tables.cuda_row(str(runtime))
    need_text = f" (CUDA {runtime} wants driver >= {needed['toolkit_driver_min']})" if needed else ""
    if runtime.major > supported.major:
        return Reason(name, FAIL, f"CUDA runtime {runtime} is a newer major than driver {driver} supports (CUDA {supported}){need_text}",
                      (needed or have)["source"], "DRIVER_TOO_OLD", "device")
    floor = tables.compat_floor(runtime.major)
    if floor and version(driver) >= version(floor["compat_driver_min"]):
        warning = (f"runs under CUDA minor-version compatibility: runtime {runtime} on a driver that supports CUDA {supported}; "
                   f"PTX newer than the driver cannot be JIT-compiled")
        # NVIDIA documents the floor for the whole major family, so a minor newer than the tables is covered too
        unlisted = "" if needed else f"; CUDA {runtime} is newer than the tables, and that floor holds for every CUDA {runtime.major}.x"
        return Reason(name, PASS, f"driver {driver} >= {floor['compat_driver_min']}, the minor-version compatibility floor of CUDA {runtime.major}.x{need_text}{unlisted}",
                      floor["source"], warning=warning)
    return Reason(name, FAIL, f"CUDA runtime {runtime} is newer than driver {driver} supports (CUDA {supported}), and CUDA {runtime.major}.x has no minor-version compatibility floor it meets",
                  (needed or have)["source"], "DRIVER_TOO_OLD", "device")


_ARCH = re.compile(r"(sm|compute)_([0-9]+)([0-9])([af]?)", re.ASCII)  # fullmatch: ASCII digits, no trailing newline


def _arch(text: str) -> tuple[str, int, int, str] | None:
    found = _ARCH.fullmatch(text.strip())
    return (found.group(1), int(found.group(2)), int(found.group(3)), found.group(4)) if found else None


def arch_rule(cc: str, sass: list[str] | None, ptx: list[str] | None, source: str, build_cuda: str | None = None,
              driver: str | None = None) -> Reason:
    """SASS sm_XY runs on devices of major X and minor >= Y (sm_XYa only on X.Y); else PTX
    compute_XY with XY <= the device's CC is JIT-compiled, which needs a driver at least as
    new as the CUDA that made the PTX; else ARCH_UNSUPPORTED."""
    name = "architecture"
    if sass is None and ptx is None:
        return Reason(name, UNCERTAIN, "the build's architecture list is not known", "")
    major, minor = (int(p) for p in cc.split("."))
    listed = ", ".join([*(sass or []), *(ptx or [])]) or "nothing"
    for item in sass or []:
        parsed = _arch(item)
        if parsed and parsed[1] == major and (parsed[2] == minor if parsed[3] else parsed[2] <= minor):
            return Reason(name, PASS, f"the build has SASS {item}, which runs on compute capability {cc}", source)
    jit = [item for item in ptx or [] if (p := _arch(item)) and (p[1], p[2]) <= (major, minor)]
    if jit:
        have = tables.driver_cuda(driver) if driver else None
        if build_cuda and have and version(minor_series(build_cuda)) > Version(have["cuda"]):
            return Reason(name, FAIL, f"no SASS for sm_{major}{minor}; its PTX {jit[-1]} was made by CUDA {build_cuda}, newer than driver {driver} can JIT-compile (CUDA {have['cuda']})",
                          source, "PTX_TOOLCHAIN_TOO_NEW", "compute")
        return Reason(name, PASS, f"no SASS for sm_{major}{minor}, but PTX {jit[-1]} is JIT-compiled for it", source,
                      warning=f"runs by PTX JIT from {jit[-1]} (no SASS for sm_{major}{minor}): slow first start")
    return Reason(name, FAIL, f"the build has {listed}; nothing of it runs on compute capability {cc} (sm_{major}{minor})",
                  source, "ARCH_UNSUPPORTED", "compute")


def toolkit_window_rule(build_cuda: str, cc: str) -> Reason:
    """Without an arch list: a device older than the oldest target of the build's CUDA cannot have kernels."""
    name = "CUDA toolkit targets"
    row = tables.cuda_archs(build_cuda)
    if row is None:
        return Reason(name, UNCERTAIN, f"no target list for CUDA {build_cuda}", "")
    major, minor = (int(p) for p in cc.split("."))
    targets = [p for p in (_arch(s) for s in row["sm"].split(";")) if p]
    oldest = min((p[1], p[2]) for p in targets)
    if (major, minor) < oldest:
        return Reason(name, FAIL, f"CUDA {build_cuda} cannot build for sm_{major}{minor}: its oldest target is sm_{oldest[0]}{oldest[1]}",
                      row["source"], "ARCH_UNSUPPORTED", "compute")
    return Reason(name, UNCERTAIN, f"CUDA {build_cuda} can build for sm_{major}{minor}, but whether this build did is not known", row["source"])


def minimum_rule(what: str, cc: str, driver: str | None, min_cc: str, min_driver: str, source: str) -> list[Reason]:
    """A framework's own published minimums (compute capability, driver)."""
    reasons = []
    if version(cc) < version(min_cc):
        reasons.append(Reason(f"{what} minimum compute capability", FAIL, f"{what} needs compute capability >= {min_cc}; this GPU has {cc}",
                              source, "ARCH_UNSUPPORTED", "compute"))
    if driver and version(driver) < version(min_driver):
        reasons.append(Reason(f"{what} minimum driver", FAIL, f"{what} needs driver >= {min_driver}; this one is {driver}",
                              source, "DRIVER_TOO_OLD", "device"))
    return reasons


def python_rule(what: str, python: str, supported: str, source: str) -> Reason:
    """'3.9-3.12' or '2.7, 3.5-3.7' against one Python X.Y."""
    want = version(python)
    for part in supported.split(","):
        bounds = [version(p.strip()) for p in part.split("-")]
        low, high = bounds[0], bounds[-1]
        if low and high and low <= want <= high:
            return Reason("wheel for this Python", PASS, f"{what} publishes wheels for Python {supported}", source)
    return Reason("wheel for this Python", FAIL, f"{what} has wheels for Python {supported}, not {python}", source, "ENV_UNRESOLVABLE", "resolve")


# -- predict ---------------------------------------------------------------------------------

_STAGE_ORDER = {"resolve": 0, "install": 1, "import": 2, "device": 3, "compute": 4}


def combine(reasons: list[Reason], resolved: dict) -> Prediction:
    failures = sorted((r for r in reasons if r.verdict == FAIL), key=lambda r: _STAGE_ORDER.get(r.stage or "", 9))
    warnings = [r.warning for r in reasons if r.warning]
    if failures:
        return Prediction(FAIL, failures[0].code, failures[0].stage, warnings, reasons, resolved)
    if not reasons or any(r.verdict == UNCERTAIN for r in reasons):
        return Prediction(UNCERTAIN, None, None, warnings, reasons, resolved)
    return Prediction(PASS, None, None, warnings, reasons, resolved)


def _split(text: str) -> list[str]:
    return [item for item in (text or "").split(";") if item]


def _torch(release: str, variant: str, cc: str, driver: str | None, cuda_runtime: str | None, arch: tuple | None) -> tuple[list[Reason], dict]:
    reasons: list[Reason] = []
    local = re.search(r"\+(cu[0-9]+|cpu|rocm[0-9.]+)\Z", release, re.ASCII)
    if local:
        variant = local.group(1)
    if variant in ("default", "installed"):
        default = tables.torch_default(release)
        if default is None:
            return [Reason("PyPI default build", UNCERTAIN, f"which CUDA PyPI's torch {release} is built for is not in the knowledge tables", "")], {}
        variant = default["variant"]
        reasons.append(Reason("PyPI default build", PASS, f"PyPI's torch {minor_series(release)} is the {variant} build (CUDA {default['cuda']})", default["source"]))
    resolved: dict = {"variant": variant}
    if variant == "cpu":
        reasons.append(Reason("CPU build", FAIL, "the cpu variant of torch has no CUDA support", "https://pytorch.org/get-started/locally/", "NO_DEVICE", "device"))
        return reasons, resolved
    build = tables.torch_build(release, variant)
    siblings = [r for r in tables.table("torch_builds") if r["release"] == minor_series(release)]
    if not siblings:
        reasons.append(Reason("torch build", UNCERTAIN, f"the knowledge tables have no data for torch {minor_series(release)}", "knowledge/data/torch_builds.csv"))
    if build is None and siblings and cuda_runtime is None:
        reasons.append(Reason("variant exists", FAIL, f"PyTorch {minor_series(release)} has no {variant} build (it has {', '.join(r['variant'] for r in siblings)})",
                              siblings[0]["source"], "ENV_UNRESOLVABLE", "resolve"))
        return reasons, resolved
    cuda = cuda_runtime or (build["cuda"] if build else (f"{variant[2:-1]}.{variant[-1]}" if variant.startswith("cu") else None))
    resolved["cuda_runtime"] = cuda
    reasons.append(driver_rule(cuda, driver))
    if arch is not None:
        sass, ptx, source = arch
    elif build:
        sass, ptx, source = _split(build["sass"]), _split(build["ptx"]), build["source"]
    else:
        sass = ptx = None
        source = ""
    resolved.update(sass=sass, ptx=ptx)
    if sass is None and ptx is None and cuda:
        reasons.append(toolkit_window_rule(cuda, cc))
    else:
        reasons.append(arch_rule(cc, sass, ptx, source, cuda, driver))
    return reasons, resolved


def _tensorflow(release: str, cc: str, driver: str | None, python: str | None, cuda_runtime: str | None) -> tuple[list[Reason], dict]:
    build = tables.tensorflow_build(release)
    if build is None:
        return [Reason("TensorFlow build", UNCERTAIN, f"TensorFlow {minor_series(release)} is not in the knowledge tables", "")], {}
    cuda = cuda_runtime or build["cuda"]
    reasons = [Reason("TensorFlow build", PASS, f"TensorFlow {build['release']} was tested with CUDA {build['cuda']} and cuDNN {build['cudnn']}", build["source"])]
    if python:
        reasons.append(python_rule(f"TensorFlow {build['release']}", python, build["pythons"], build["source"]))
    reasons += [driver_rule(cuda, driver), toolkit_window_rule(cuda, cc)]
    return reasons, {"cuda_runtime": cuda, "cudnn": build["cudnn"]}


def _jax(release: str, variant: str, cc: str, driver: str | None, cuda_runtime: str | None, arch: tuple | None) -> tuple[list[Reason], dict]:
    if variant == "cpu":
        return [Reason("CPU build", FAIL, "jax without a CUDA extra runs on the CPU only", "https://docs.jax.dev/en/latest/installation.html", "NO_DEVICE", "device")], {}
    build = tables.jax_build(release, variant)
    if build is None:
        newest = tables.newest_release("jax")
        oldest = min((r["from_version"] for r in tables.table("jax_builds") if r["variant"] == variant), key=Version, default=None)
        held = f"they hold jax[{variant}] {oldest} to {newest['newest']}.x" if oldest else f"they hold no jax[{variant}]"
        reasons = [Reason("JAX build", UNCERTAIN, f"the knowledge tables have no data for jax {release} [{variant}] ({held})", newest["source"])]
        if arch is not None:  # the installed build's kernels can still show it cannot run; they cannot show it can
            reasons.append(arch_rule(cc, arch[0], arch[1], arch[2], cuda_runtime, driver))
        return reasons, {}
    sass, ptx, source = (arch if arch is not None else (_split(build["sass"]), _split(build["ptx"]), build["source"]))
    reasons = minimum_rule(f"jax[{variant}]", cc, driver, build["min_cc"], build["min_driver"], build["source"])
    if cuda_runtime:
        reasons.append(driver_rule(cuda_runtime, driver))
    elif driver and not reasons:
        reasons.append(Reason(f"jax[{variant}] minimum driver", PASS, f"driver {driver} >= {build['min_driver']}", build["source"]))
    reasons.append(arch_rule(cc, sass, ptx, source, cuda_runtime, driver))
    return reasons, {"cuda_runtime": cuda_runtime or f"{build['cuda_major']}.x", "sass": sass, "ptx": ptx}


def _cupy(release: str, variant: str, cc: str, driver: str | None, cuda_runtime: str | None) -> tuple[list[Reason], dict]:
    build = tables.cupy_build(release, variant)
    want = version(release)
    siblings = [r for r in tables.table("cupy_builds") if want and int(r["series"]) == want.major]
    if build is None and siblings:  # a series the tables hold, without this package
        published = ", ".join(f"cupy-{r['variant']}" + (f" from {r['from_version']}" if r["from_version"] else "") for r in siblings)
        return [Reason("variant exists", FAIL, f"CuPy {release} has no cupy-{variant} (CuPy {want.major} publishes {published})",
                       siblings[-1]["source"], "ENV_UNRESOLVABLE", "resolve")], {}
    if build is None:
        series = sorted({int(r["series"]) for r in tables.table("cupy_builds")})
        return [Reason("CuPy build", UNCERTAIN, f"the knowledge tables have no data for CuPy {release} as cupy-{variant} (they hold CuPy {series[0]} to {series[-1]})",
                       "knowledge/data/cupy_builds.csv")], {}
    major = re.fullmatch(r"cuda([0-9]+)x", variant, re.ASCII)
    cuda = cuda_runtime or (f"{major.group(1)}.0" if major else None)
    # CuPy compiles its kernels at run time with NVRTC, for the device in hand: the toolkit's targets decide.
    reasons = [driver_rule(cuda, driver)]
    if cuda:
        window = toolkit_window_rule(cuda, cc)
        if window.verdict == UNCERTAIN and window.source:  # the toolkit targets this device, and NVRTC builds for it at run time
            window = Reason("CUDA toolkit targets", PASS, f"NVRTC of CUDA {cuda} can compile for compute capability {cc}", window.source)
        reasons.append(window)
    reasons.append(Reason("CuPy build", PASS, f"CuPy {build['series']} publishes cupy-{variant}", build["source"]))
    return reasons, {"cuda_runtime": cuda}


def predict(framework: str, release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None,
            cuda_runtime: str | None = None, arch: tuple | None = None) -> Prediction:
    """Expected outcome of one stack on one GPU class. `cuda_runtime` (from resolution or the
    probe) and `arch` (sass, ptx, source: from inspecting the installed build) override the tables."""
    if not cc:
        return combine([Reason("target", UNCERTAIN, "the GPU's compute capability is not known", "")], {})
    if framework == "torch":
        reasons, resolved = _torch(release, variant, cc, driver, cuda_runtime, arch)
    elif framework == "tensorflow":
        reasons, resolved = _tensorflow(release, cc, driver, python, cuda_runtime)
    elif framework == "jax":
        reasons, resolved = _jax(release, variant, cc, driver, cuda_runtime, arch)
    elif framework == "cupy":
        reasons, resolved = _cupy(release, variant, cc, driver, cuda_runtime)
    elif framework == "cuda-runtime":
        cuda = cuda_runtime or release
        reasons, resolved = [driver_rule(cuda, driver)], {"cuda_runtime": minor_series(cuda)}
    else:
        reasons, resolved = [Reason("framework", UNCERTAIN, f"no rules for {framework!r}", "")], {}
    return combine(reasons, resolved)


def never_built(framework: str, version: str, variant: str) -> str | None:
    """The knowledge's sentence when this variant was never built for this version, else None
    (also None where the tables do not know the version: that is for the resolver to find out)."""
    if framework == "jax" and variant != "cpu":
        rows = [r for r in tables.table("jax_builds") if r["variant"] == variant]
        newest = tables.newest_release("jax")
        known = newest is None or tables.version(tables.minor_series(version)) <= tables.version(newest["newest"])
        oldest = min((tables.version(r["from_version"]) for r in rows), default=None)
        if known and (oldest is None or tables.version(version) < oldest):
            return f"jax[{variant}] was first published with jax {oldest}" if oldest else f"the knowledge holds no jax[{variant}] release"
        return None
    if framework in ("torch", "cupy"):
        # whether a variant exists does not depend on the GPU: any compute capability asks the same rule
        reasons = predict(framework, version, variant, "8.0", None).reasons
        return next((r.text for r in reasons if r.rule == "variant exists" and r.verdict == FAIL), None)
    return None


def suggest_fix(framework: str, release: str, cc: str, driver: str | None, prediction: Prediction) -> str | None:
    """One line: what to install instead (or what to change) when a stack is predicted to fail."""
    if prediction.verdict != FAIL:
        return None
    if framework == "torch":
        rows = sorted(tables.table("torch_builds"), key=lambda r: (r["release"] != minor_series(release), [-int(p) for p in r["release"].split(".")]))
        for row in rows:
            if predict("torch", f"{row['release']}+{row['variant']}", row["variant"], cc, driver).verdict == PASS:
                return f"pip install 'torch=={row['release']}.*' --index-url https://download.pytorch.org/whl/{row['variant']}"
    if framework == "jax" and prediction.code in ("ARCH_UNSUPPORTED", "DRIVER_TOO_OLD"):
        for variant in ("cuda13", "cuda12"):
            if predict("jax", release, variant, cc, driver).verdict == PASS:
                return f"pip install 'jax[{variant}]=={release}'"
    if framework == "cupy":
        for variant in ("cuda13x", "cuda12x", "cuda11x"):
            if predict("cupy", release, variant, cc, driver).verdict == PASS:
                return f"pip install cupy-{variant}"
    if prediction.code == "DRIVER_TOO_OLD":
        failing = next((r for r in prediction.reasons if r.code == "DRIVER_TOO_OLD"), None)
        return f"upgrade the NVIDIA driver ({failing.text})" if failing else "upgrade the NVIDIA driver"
    return None
