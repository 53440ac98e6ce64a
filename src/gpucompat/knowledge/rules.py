"""Prediction: small pure rules over the knowledge tables, each citing the fact it used.

A rule returns pass, fail (with code and stage) or uncertain, one human sentence and
its source. `predict` runs the rules that apply to a stack in ladder order: the first
failure is the verdict; otherwise any uncertainty makes the whole uncertain — never a
guess; otherwise pass, with the warnings the passing rules raised.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

from packaging.version import Version

from . import installs, tables
from .arch import (  # noqa: F401 - rules' names
    _arch,
    arch_rule,
    ptx_cuda,
    runtime_targets_rule,
    sass_runs,
    toolkit_window_rule,
)
from .driving import (  # noqa: F401
    architectures_not_driven,
    branch_releases,
    drive_span,
    driver_drives_rule,
    driving_branch,
)
from .reasons import (  # noqa: F401
    DRIVES,
    FAIL,
    PASS,
    UNCERTAIN,
    UNKNOWN_CC,
    Prediction,
    Reason,
    combine,
    weighed,
)
from .tables import minor_series, version

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
    reach, newest = Version(have["cuda"]), tables.newest_cuda()
    if have.get("confidence") == "low":  # judge by the newest trusted row, and through the compatibility floor
        have = tables.driver_cuda(driver, trusted_only=True) or have
    supported = Version(have["cuda"])
    # A CUDA major the tables do not hold (0, 6, 14, ...) is judged only where the driver's own
    # reach is known and lies a major below it; any other verdict would be a guess.
    if not tables.cuda_known(str(runtime)) and not (runtime.major > reach.major and reach < Version(newest["cuda"])):
        oldest = min(tables.table("cuda_drivers"), key=lambda r: Version(r["cuda"]))
        return Reason(name, UNCERTAIN, f"the knowledge tables have no data for CUDA {runtime} (they hold CUDA {oldest['cuda']} to {newest['cuda']})",
                      "knowledge/data/cuda_drivers.csv")
    if runtime <= supported:
        return weighed(Reason(name, PASS, f"driver {driver} supports CUDA {supported}, enough for runtime {runtime}", have["source"]), have.get("confidence"))
    needed = tables.cuda_row(str(runtime))
    need_text = f" (CUDA {runtime} wants driver >= {needed['toolkit_driver_min']})" if needed else ""
    if runtime.major > supported.major:
        return weighed(Reason(name, FAIL, f"CUDA runtime {runtime} is a newer major than driver {driver} supports (CUDA {supported}){need_text}",
                              (needed or have)["source"], "DRIVER_TOO_OLD", "device"), have.get("confidence"))
    floor = tables.compat_floor(runtime.major)
    if floor and version(driver) >= version(floor["compat_driver_min"]):
        warning = (f"runs under CUDA minor-version compatibility: runtime {runtime} on a driver that supports CUDA {supported}; "
                   f"PTX newer than the driver cannot be JIT-compiled")
        # NVIDIA documents the floor for the whole major family, so a minor newer than the tables is covered too
        unlisted = "" if needed else f"; CUDA {runtime} is newer than the tables, and that floor holds for every CUDA {runtime.major}.x"
        return Reason(name, PASS, f"driver {driver} >= {floor['compat_driver_min']}, the minor-version compatibility floor of CUDA {runtime.major}.x{need_text}{unlisted}",
                      floor["source"], warning=warning)
    return weighed(Reason(name, FAIL, f"CUDA runtime {runtime} is newer than driver {driver} supports (CUDA {supported}), and CUDA {runtime.major}.x has no minor-version compatibility floor it meets",
                          (needed or have)["source"], "DRIVER_TOO_OLD", "device"), have.get("confidence"))


def minimum_rule(what: str, cc: str, driver: str | None, min_cc: str, min_driver: str, source: str) -> list[Reason]:
    """A framework's own published minimums (compute capability, driver)."""
    reasons = []
    if cc is None:
        reasons.append(Reason(f"{what} minimum compute capability", UNCERTAIN, UNKNOWN_CC, ""))
    elif version(cc) < version(min_cc):
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
    plain = version(release.split("+")[0])
    if plain is not None and plain.is_prerelease:  # nightlies and release candidates: builds of their own
        reasons += [Reason("torch build", UNCERTAIN, f"torch {release} is a nightly or pre-release build; the tables hold releases only",
                           "knowledge/data/torch_builds.csv")]
        cuda = cuda_runtime or (f"{variant[2:-1]}.{variant[-1]}" if re.fullmatch(r"cu[0-9]{3}", variant, re.ASCII) else None)
        reasons += [driver_rule(cuda, driver)] + ([toolkit_window_rule(cuda, cc)] if cuda else [])
        return reasons, {"variant": variant, "cuda_runtime": cuda}
    build = tables.torch_build(release, variant)
    siblings = [r for r in tables.table("torch_builds") if r["release"] == minor_series(release)]
    if not siblings:
        reasons.append(Reason("torch build", UNCERTAIN, f"the knowledge tables have no data for torch {minor_series(release)}", "knowledge/data/torch_builds.csv"))
    if build is None and siblings and cuda_runtime is None:
        if not re.fullmatch(r"cu[0-9]+", variant, re.ASCII):
            # the sources list a release's CUDA builds only: of ROCm, XPU and other variants they know nothing
            reasons.append(Reason("variant exists", UNCERTAIN, f"the knowledge tables hold PyTorch's CUDA builds only; whether torch "
                                  f"{minor_series(release)} has a {variant} build is not known", "knowledge/data/torch_builds.csv"))
            return reasons, resolved
        # each release's sources (RELEASE.md's matrix, the previous-versions page) list all its CUDA builds
        reasons.append(Reason("variant exists", FAIL, f"PyTorch {minor_series(release)} has no {variant} build (its CUDA builds are {', '.join(r['variant'] for r in siblings)})",
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
        reasons.append(weighed(arch_rule(cc, sass, ptx, source, cuda, driver), build.get("confidence") if build and arch is None else None))
        if build and arch is None:  # another public report of the same build: combine() weighs them against each other
            reasons += [arch_rule(cc, _split(other["sass"]), _split(other["ptx"]), other["source"], cuda, driver)
                        for other in tables.table("torch_builds")
                        if other is not build and other["release"] == build["release"] and other["variant"] == variant
                        and other["source"] != build["source"]]
    return reasons, resolved


TF_INSTALL = "https://www.tensorflow.org/install/pip (from 2.14: pip install tensorflow[and-cuda] brings CUDA; before, the system provides it)"


TF_CPU = "https://github.com/tensorflow/tensorflow/blob/master/README.md ('A smaller CPU-only package is also available: pip install tensorflow-cpu')"


def _tensorflow(release: str, variant: str, cc: str, driver: str | None, python: str | None, cuda_runtime: str | None) -> tuple[list[Reason], dict]:
    if variant == "cpu":
        return [Reason("CPU build", FAIL, "tensorflow-cpu is TensorFlow's CPU-only package", TF_CPU, "NO_DEVICE", "device")], {}
    build = tables.tensorflow_build(release)
    if build is None:
        return [Reason("TensorFlow build", UNCERTAIN, f"TensorFlow {minor_series(release)} is not in the knowledge tables", "")], {}
    cuda = cuda_runtime or build["cuda"]
    libraries = f"CUDA {build['cuda']} and cuDNN {build['cudnn']}"
    reasons = [Reason("TensorFlow build", PASS, f"TensorFlow {build['release']} was tested with {libraries}", build["source"])]
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
    sass, ptx = _split(build.get("sass", "")), _split(build.get("ptx", ""))
    if sass or ptx:  # read from the release's own Linux wheel (tools/facts/tensorflow_archs.csv)
        reasons.append(arch_rule(cc, sass, ptx, build["source"], cuda, driver))
    else:
        reasons.append(toolkit_window_rule(cuda, cc))
    compiler = _tensorflow_xla_rule(release, variant, cc, sass) if reasons[-1].verdict == PASS else None
    if compiler is not None:
        reasons.append(compiler)
    return reasons, {"cuda_runtime": cuda, "cudnn": build["cudnn"], "sass": sass or None, "ptx": ptx or None}


def _jax(release: str, variant: str, cc: str, driver: str | None, cuda_runtime: str | None, arch: tuple | None) -> tuple[list[Reason], dict]:
    if variant == "cpu":
        return [Reason("CPU build", FAIL, "jax without a CUDA extra runs on the CPU only", "https://docs.jax.dev/en/latest/installation.html", "NO_DEVICE", "device")], {}
    build = tables.jax_build(release, variant)
    rows = [r for r in tables.table("jax_builds") if r["variant"] == variant]
    want = version(release.split("+")[0])
    if build is None and rows and want is not None and not tables.past_newest("jax", release):
        first = min((Version(r["from_version"]) for r in rows))
        last = max((Version(r["to_version"]) for r in rows if r.get("to_version")), default=None)
        if want < first or (last is not None and all(r.get("to_version") for r in rows) and want > last):
            span = f"jax {first} to {last}" if last and want > last else f"jax {first} on"
            return [Reason("variant exists", FAIL, f"jax {release} has no [{variant}] extra (it existed for {span}); pip ignores an "
                           f"unknown extra and installs jax for the CPU only", rows[0]["source"], "NO_DEVICE", "device")], {}
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
    elif driver is None:
        reasons.append(Reason(f"jax[{variant}] minimum driver", UNCERTAIN, "the driver version is not known, so driver support cannot be judged", ""))
    elif not any(r.rule.endswith("minimum driver") for r in reasons):
        reasons.append(Reason(f"jax[{variant}] minimum driver", PASS, f"driver {driver} >= {build['min_driver']}", build["source"]))
    reasons.append(arch_rule(cc, sass, ptx, source, cuda_runtime, driver))
    compiler = _jax_ptxas_rule(release, variant, cc, sass)
    if compiler is not None:
        reasons.append(compiler)
    return reasons, {"cuda_runtime": cuda_runtime or f"{build['cuda_major']}.x", "sass": sass, "ptx": ptx}


def _compiler_pin(framework: str, variant: str, release: str) -> dict | None:
    """The run-time compiler a build's pip requirements bring (knowledge/data/compiler_pins.csv): the row in force."""
    want = version(release.split("+")[0])
    rows = [r for r in tables.table("compiler_pins") if r["framework"] == framework and r["variant"] == variant
            and want is not None and Version(r["from_version"]) <= want]
    return max(rows, key=lambda r: Version(r["from_version"]), default=None)


def _compiler_targets(compiler: str, release: str, package: str | None = None) -> dict | None:
    """The targets a ptxas or NVRTC release knows, measured from NVIDIA's wheel (knowledge/data/runtime_compilers.csv)."""
    return next((r for r in tables.table("runtime_compilers") if r["compiler"] == compiler and r["version"] == release
                 and (package is None or r["package"] == package)), None)


def _knows(row: dict, major: int, minor: int) -> bool:
    return f"sm_{major}{minor}" in row["sm"].split(";")


def _ptxas_pin(framework: str, variant: str, release: str) -> tuple[dict, str, str, dict, dict] | None:
    """The ptxas a build's pip requirements bring: (pin row, package, oldest version allowed, targets of that oldest,
    targets of the version pip installs today). A pin is `pkg==V` (TensorFlow) or `pkg>=V[,<W]` (JAX)."""
    pin = _compiler_pin(framework, variant, release)
    found = pin and re.fullmatch(r"\s*([A-Za-z0-9_.-]+?)\s*(?:==|>=)\s*([0-9.]+)\s*(?:,\s*<\s*[0-9.]+\s*)?", pin["requirement"])
    if not found:
        return None
    package, floor = found.groups()
    lowest, given = _compiler_targets("ptxas", floor, package), _compiler_targets("ptxas", pin["resolves_to"], package)
    return (pin, package, floor, lowest, given) if lowest and given else None


def _tensorflow_xla_rule(release: str, variant: str, cc: str | None, sass: list[str]) -> Reason | None:
    """TensorFlow's own kernels are precompiled (the architecture rule judges them); only XLA, for
    tf.function(jit_compile=True), compiles as it runs, with the ptxas that tensorflow[and-cuda] pins. Where that
    ptxas does not know the GPU, TensorFlow's XLA falls back to the driver's JIT (tensorflow#43888), so it is a
    warning on a pass, naming the compiler, never a failure. None where it has nothing to add."""
    found = _ptxas_pin("tensorflow", variant, release) if cc else None
    if found is None:
        return None
    pin, package, _floor, lowest, given = found
    major, minor = (int(p) for p in cc.split("."))
    covered = any(p and sass_runs(p, major, minor) for p in (_arch(s) for s in sass))
    if covered and _knows(lowest, major, minor):
        return None
    sm, name = f"sm_{major}{minor}", "run-time compiler (XLA ptxas)"
    said = (f"TensorFlow's XLA (tf.function(jit_compile=True)) compiles for {sm} as it runs, with the ptxas of {package} "
            f"(tensorflow[and-cuda] {release} requires {pin['requirement']}, pip installs {pin['resolves_to']})")
    source = f"{pin['source']} ; {given['source']} ; https://github.com/tensorflow/tensorflow/pull/43888"
    if _knows(given, major, minor):
        return Reason(name, PASS, f"{said}: ptxas {pin['resolves_to']} knows {sm}", source)
    return Reason(name, PASS, f"{said}: ptxas {pin['resolves_to']} does not know {sm}; TensorFlow's own kernels do not need it",
                  source, warning=f"XLA-compiled functions (jit_compile=True) fall back to the driver's PTX JIT on {sm} "
                  f"(ptxas {pin['resolves_to']} does not know it): slower first compiles, not measured here")


def _jax_ptxas_rule(release: str, variant: str, cc: str | None, sass: list[str] | None) -> Reason | None:
    """XLA compiles JAX's kernels as it runs, with the PTX compiler pip brings beside the plugin: nvJitLink (the
    nvidia-nvjitlink wheel) where it loads, else the ptxas of the nvidia-cuda-nvcc wheel (docs/evidence/jax-ptxas-h100:
    on an H100, JAX 0.11.2 ran with CUDA 11.7's ptxas in every place XLA looks). Both resolve to the same CUDA release,
    whose targets were measured from ptxas: that compiler must know the GPU's architecture, whatever the driver could
    JIT (arch-specific sm_XYa PTX never carries over). None where it has nothing to add (the plugin's SASS covers the
    GPU and even the lowest release allowed knows it)."""
    found = _ptxas_pin("jax", variant, release) if cc else None
    if found is None:
        return None
    pin, package, floor, lowest, given = found
    major, minor = (int(p) for p in cc.split("."))
    oldest = min((p[1], p[2]) for p in (_arch(s) for s in given["sm"].split(";")) if p)
    if (major, minor) < oldest:  # older than every target: the build's own minimum says so first
        return None
    covered = any(p and sass_runs(p, major, minor) for p in (_arch(s) for s in sass or []))
    name, sm = "run-time compiler (XLA)", f"sm_{major}{minor}"
    said = (f"XLA compiles jax's kernels for {sm} as it runs, with the PTX compiler pip brings: nvJitLink where it loads, else the "
            f"ptxas of {package} (jax-{variant}-plugin {release} requires {pin['requirement']}), both of one CUDA release")
    source = f"{pin['source']} ; {given['source']}" + (f" ; {lowest['source']}" if lowest is not given else "") + \
        " ; docs/evidence/jax-ptxas-h100/README.md"
    if _knows(lowest, major, minor):
        return None if covered else Reason(name, PASS, f"{said}: ptxas {floor} and later know {sm}", source)
    if _knows(given, major, minor):
        return Reason(name, PASS, f"{said}: pip installs {pin['resolves_to']}, whose ptxas knows {sm}; ptxas {floor}, the oldest "
                      f"it allows, does not", source, warning=f"an environment that keeps {package} older than the first "
                      f"release that knows {sm} fails to compile (ptxas {floor} does not know it)")
    newest = max((p for p in (_arch(s) for s in given["sm"].split(";")) if p), key=lambda p: (p[1], p[2]))
    return Reason(name, FAIL, f"{said}: pip installs {pin['resolves_to']}, and CUDA {pin['resolves_to']}'s compiler does not know {sm} "
                  f"(its targets end at sm_{newest[1]}{newest[2]}); the driver's PTX JIT does not stand in for it",
                  source, "ARCH_UNSUPPORTED", "compute")


def _cupy(release: str, variant: str, cc: str, driver: str | None, cuda_runtime: str | None) -> tuple[list[Reason], dict]:
    want = version(release.split("+")[0])
    variant, ctk = (variant[:-len("[ctk]")], True) if variant.endswith("[ctk]") else (variant, False)
    packages = tables.cupy_packages(variant)
    build = next((r for r in packages if want and Version(r["first_version"]) <= want <= Version(r["last_version"])), None)
    if build is None:
        if not packages or want is None or want > tables.newest_cupy():
            newest = tables.newest_cupy()
            return [Reason("CuPy build", UNCERTAIN, f"the knowledge tables have no data for CuPy {release} as cupy-{variant} "
                           f"(they hold PyPI's cupy-cuda* packages up to CuPy {newest})", "knowledge/data/cupy_packages.csv")], {}
        published = ", ".join(_span(r) for r in packages)
        return [Reason("variant exists", FAIL, f"PyPI has no cupy-{variant} {release} (cupy-{variant} was published for CuPy {published})",
                       packages[0]["source"], "ENV_UNRESOLVABLE", "resolve")], {}
    cuda = cuda_runtime or (build["cuda"].replace(".x", ".0") if build["cuda"] else None)
    # CuPy compiles its kernels at run time with NVRTC, for the device in hand: the toolkit's targets decide.
    reasons = [Reason("CuPy build", PASS, f"CuPy {build['series']} publishes cupy-{variant} ({_span(build)})", build["source"]),
               driver_rule(cuda, driver)]
    nvrtc = _cupy_nvrtc_rule(release, variant, ctk, cc, cuda) if cuda else None
    if nvrtc is not None:
        reasons.append(nvrtc)
    elif cuda:
        window = toolkit_window_rule(cuda, cc)
        if window.verdict == UNCERTAIN and window.source and not window.warning:
            # NVRTC builds for the device in hand at run time (cupy/cuda/compiler.py _get_arch: the device CC capped at NVRTC's newest)
            window = Reason("CUDA toolkit targets", PASS, f"NVRTC of CUDA {cuda} can compile for compute capability {cc}", window.source)
        elif window.verdict == UNCERTAIN and window.source:
            # a GPU newer than the toolkit: CuPy then compiles PTX of NVRTC's newest target for the driver to JIT, but its
            # precompiled CUB kernels have no such fallback (cupy-cuda12x on Blackwell before CUDA 12.8: CUDA_ERROR_NO_BINARY_FOR_GPU)
            window = Reason("CUDA toolkit targets", UNCERTAIN, f"compute capability {cc} is newer than every target of CUDA {cuda}: CuPy's "
                            "own kernels can run by PTX JIT, its precompiled ones may not; it depends on the CUDA libraries installed",
                            "https://github.com/cupy/cupy/issues/9106 ; https://github.com/cupy/cupy/issues/9121")
        reasons.append(window)
    return reasons, {"cuda_runtime": cuda}


def _cupy_precompiled(release: str, variant: str) -> dict | None:
    """The wheel's precompiled kernels (knowledge/data/cupy_archs.csv): the newest series row not newer than the release."""
    major, want = variant[len("cuda"):].rstrip("x")[:2], version(release.split("+")[0])
    rows = [r for r in tables.table("cupy_archs") if r["cuda_major"] == major and want is not None and Version(r["series"]) <= want]
    return max(rows, key=lambda r: Version(r["series"]), default=None)


def _cupy_nvrtc_rule(release: str, variant: str, ctk: bool, cc: str | None, cuda: str) -> Reason | None:
    """CuPy compiles its own kernels as it runs, with NVRTC, for the GPU in hand: the NVRTC it gets decides a GPU newer
    than the build. With [ctk] (CuPy 14 on) pip brings it (cuda-toolkit[nvrtc]); without, it is the system's toolkit, an
    assumption. None where the old toolkit-window rule says enough (no GPU, or one the build's CUDA can target)."""
    if cc is None:
        return None
    major, minor = (int(p) for p in cc.split("."))
    sm, name = f"sm_{major}{minor}", "run-time compiler (NVRTC)"
    window = toolkit_window_rule(cuda, cc)
    pin = _compiler_pin("cupy", f"{variant}[ctk]", release) if ctk else None
    if pin is not None:
        given = _compiler_targets("nvrtc", pin["resolves_to"])
        if given is None:
            return None
        source = f"{pin['source']} ; {given['source']}"
        said = f"CuPy compiles its kernels at run time with NVRTC; cupy-{variant}[ctk] brings {given['package']} {pin['resolves_to']} ({pin['requirement']})"
        if _knows(given, major, minor):
            return Reason(name, PASS, f"{said}, whose NVRTC compiles for {sm}", source)
        return Reason(name, UNCERTAIN, f"{said}, whose NVRTC does not know {sm}: CuPy then builds PTX of NVRTC's newest target "
                      "for the driver to JIT, and its precompiled kernels may not run", source)
    if window.verdict != UNCERTAIN or not window.warning:  # the build's CUDA can target this GPU (or nothing can): as before
        return None
    precompiled = _cupy_precompiled(release, variant)
    covered = precompiled and any(p and sass_runs(p, major, minor) for p in (_arch(s) for s in precompiled["sass"].split(";")))
    if not covered:
        return None  # neither the wheel's kernels nor a known compiler: the toolkit window's uncertainty stands
    first = min((r["cuda"] for r in tables.table("cuda_archs") if sm in r["sm"].split(";")), key=Version, default=None)
    since = _compiler_pin("cupy", f"{variant}[ctk]", "9999")
    since = since["from_version"] if since else None
    if ctk:
        missing = f"cupy-{variant} {release} has no [ctk] extra" + (f" (CuPy {since} on have it)" if since else "") + "; pip ignores it"
    else:
        missing = f"cupy-{variant} {release} brings no NVRTC" + (f" (cupy-{variant}[ctk] would)" if since and Version(since) <= version(release.split("+")[0]) else "")
    # the system's CUDA decides, and the reports say it does both ways (cupy/cupy#9106: libraries older than 12.8 fail)
    return Reason(name, UNCERTAIN, f"the wheel's precompiled kernels include SASS for {sm} (CuPy {release}); its other kernels are "
                  f"compiled at run time by NVRTC from the system's CUDA toolkit, which decides: it runs where that toolkit knows {sm}"
                  + (f" (CUDA {first} or later)" if first else "") + f", not with an older one; {missing}",
                  f"{precompiled['source']} ; knowledge/data/compiler_pins.csv ; https://github.com/cupy/cupy/issues/9106")


def _span(row: dict) -> str:
    return row["first_version"] if row["first_version"] == row["last_version"] else f"{row['first_version']}–{row['last_version']}"


def _pythons_text(pythons: list[str]) -> str:
    plain = [p for p in pythons if p[-1:].isdigit()]
    free = [p for p in pythons if p not in plain]
    contiguous = plain and all(version(b).minor == version(a).minor + 1 for a, b in zip(plain, plain[1:]) if version(a).major == version(b).major)
    text = f"{plain[0]} to {plain[-1]}" if contiguous and len(plain) > 2 else ", ".join(plain)
    return text + (f" (and free-threaded {', '.join(free)})" if free else "")


def wheel_rule(package: str, release: str, python: str) -> Reason:
    """PyPI's own file list: does this release have a Linux x86_64 wheel for this Python?"""
    name = "wheel for this Python"
    row, newest = tables.python_wheels(package, release)
    plain = release.split("+")[0]
    if newest is None:
        return Reason(name, UNCERTAIN, f"the knowledge tables hold no file list for {package}", "knowledge/data/python_wheels.csv")
    if row is None:
        where = f"it is newer than the file list in the tables (up to {newest})" if version(plain) and version(plain) > newest \
            else "it may come from another index, or not exist"
        return Reason(name, UNCERTAIN, f"PyPI's file list for {package} in the tables has no release {plain}: {where}", "knowledge/data/python_wheels.csv")
    pythons = _split(row["pythons"])
    if not pythons:
        return Reason(name, FAIL, f"PyPI has no Linux x86_64 wheel of {package} {plain}", row["source"], "ENV_UNRESOLVABLE", "resolve")
    if python in pythons:
        return Reason(name, PASS, f"{package} {plain} has Linux x86_64 wheels for Python {python}", row["source"])
    return Reason(name, FAIL, f"{package} {plain} has Linux x86_64 wheels for Python {_pythons_text(pythons)}, not {python}",
                  row["source"], "ENV_UNRESOLVABLE", "resolve")


_COMPARISONS = {"==": Version.__eq__, "!=": Version.__ne__, "<=": Version.__le__, ">=": Version.__ge__, "<": Version.__lt__, ">": Version.__gt__}


def within(value: Version, bounds: str) -> bool:
    """'>=2.16,<2.21' or '==13.0.0' (the known-defect table's ranges; pre-releases and dev builds count:
    a nightly of an affected release is affected). Plain comparisons, without packaging's specifier parser."""
    for bound in bounds.split(","):
        operator = next(op for op in ("==", "!=", "<=", ">=", "<", ">") if bound.strip().startswith(op))
        if not _COMPARISONS[operator](value, Version(bound.strip()[len(operator):])):
            return False
    return True


def defect_rules(framework: str, release: str, variant: str, cc: str | None) -> list[Reason]:
    """Known upstream defects (knowledge/data/known_defects.csv, each row sourced to the upstream
    issue) that break a release on some GPUs although the published minimums say it should run."""
    want = version(release.split("+")[0])
    reasons = []
    for row in tables.known_defects(framework):
        if want is None or not within(want, row["versions"]) or not fnmatchcase(variant, row["variants"]):
            continue
        if row["cc"] and cc is None:
            reasons.append(Reason("known defect", UNCERTAIN, f"{row['text']} (on compute capability {row['cc']}; this GPU's is not known)", row["source"]))
        elif not row["cc"] or within(Version(cc), row["cc"]):
            reasons.append(Reason("known defect", FAIL, row["text"], row["source"], row["code"], row["stage"]))
    return reasons


def wheel_package(framework: str, variant: str) -> str | None:
    """The PyPI package whose wheels decide which Pythons a stack can have."""
    return {"torch": "torch", "tensorflow": {"gpu": "tensorflow-gpu", "cpu": "tensorflow-cpu"}.get(variant, "tensorflow"), "jax": "jaxlib",
            "cupy": f"cupy-{str(variant).split('[')[0]}"}.get(framework)  # cupy-cuda12x[ctk]'s wheels are cupy-cuda12x's


def wheel_pythons(framework: str, release: str, variant: str) -> list[str]:
    """The Pythons PyPI has Linux x86_64 wheels of this release for, as the tables list them ('3.11'; free-threaded
    builds such as '3.14t' left out); none where the tables do not know."""
    package = wheel_package(framework, variant)
    row, _newest = tables.python_wheels(package, release) if package else (None, None)
    return [p for p in (row["pythons"].split(";") if row and row["pythons"] else []) if p[-1:].isdigit()]


def predict_stack(framework: str, release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None,
            cuda_runtime: str | None = None, arch: tuple | None = None, gpu: str | None = None,
            kernel_module: str | None = None) -> Prediction:
    """Expected outcome of one stack on one GPU class. `cuda_runtime` (from resolution or the
    probe) and `arch` (sass, ptx, source: from inspecting the installed build) override the tables;
    `gpu` (the name as reported) lets a product whose driver branches differ from its architecture's be judged;
    `kernel_module` ('open' | 'proprietary' | None: assumed, and said) is the driver's flavour, which decides what it drives."""
    cc = cc or None  # unknown: the rules that need it say so; the others (driver, Python, variant) still judge
    if framework == "torch":
        reasons, resolved = _torch(release, variant, cc, driver, cuda_runtime, arch)
    elif framework == "tensorflow":
        reasons, resolved = _tensorflow(release, variant, cc, driver, python, cuda_runtime)
    elif framework == "jax":
        reasons, resolved = _jax(release, variant, cc, driver, cuda_runtime, arch)
    elif framework == "cupy":
        reasons, resolved = _cupy(release, variant, cc, driver, cuda_runtime)
    elif framework == "cuda-runtime":
        cuda = cuda_runtime or release
        targets = runtime_targets_rule(cuda, cc) if version(minor_series(cuda)) is not None else None
        reasons, resolved = [driver_rule(cuda, driver), *([targets] if targets else [])], {"cuda_runtime": minor_series(cuda)}
    else:
        reasons, resolved = [Reason("framework", UNCERTAIN, f"no rules for {framework!r}", "")], {}
    drives = driver_drives_rule(cc, gpu, driver, kernel_module)
    if drives is not None:  # a GPU the driver does not drive is not there, whatever else fails: that comes first
        reasons.insert(0 if drives.verdict != PASS else len(reasons), drives)
    plain = version(release.split("+")[0])
    if framework != "torch" and plain is not None and plain.is_prerelease:  # torch says so itself, with its CUDA
        reasons.append(Reason("release", UNCERTAIN, f"{framework} {release} is a pre-release or nightly; the tables describe releases", ""))
    reasons += defect_rules(framework, release, variant, cc)
    stuck = installs.unresolvable(framework, release, variant, python)
    if stuck:  # a PASS only for what installs: uv's own answer for this build's install line
        nearest = f"; {stuck['nearest']} resolves" if stuck["nearest"] else ""
        for_python = f" for Python {python} (other Pythons resolve)" if python and stuck["resolves"] == "some" else ""
        reasons.append(Reason("installs", FAIL, f"pip cannot install {stuck['requirement']}{for_python}: uv cannot resolve it: "
                              f"{stuck['reason']}{nearest}", stuck["source"], "ENV_UNRESOLVABLE", "resolve"))
    package = wheel_package(framework, variant)
    if python and package and not any(r.rule == "variant exists" and r.verdict == FAIL for r in reasons):
        wheel = wheel_rule(package, release, python)
        documented = [r for r in reasons if r.rule == "wheel for this Python"]  # TensorFlow's tested Pythons
        if wheel.verdict != UNCERTAIN or not documented:  # PyPI's file list outranks a document; without it the document stands
            reasons = [r for r in reasons if r.rule != "wheel for this Python"] + [wheel]
    return combine(reasons, resolved)


def never_built(framework: str, version: str, variant: str) -> str | None:
    """The knowledge's sentence when this variant was never built for this version, else None
    (also None where the tables do not know the version: that is for the resolver to find out)."""
    if framework in ("torch", "cupy", "jax") and variant != "cpu":
        # whether a variant exists does not depend on the GPU: any compute capability asks the same rule
        reasons = predict_stack(framework, version, variant, "8.0", None).reasons
        return next((r.text for r in reasons if r.rule == "variant exists" and r.verdict == FAIL), None)
    return None


def suggest_fix(framework: str, release: str, cc: str, driver: str | None, prediction: Prediction, gpu: str | None = None) -> str | None:
    """One line: what to install instead (or what to change) when a stack is predicted to fail."""
    if prediction.verdict != FAIL:
        return None
    undriven = next((r for r in prediction.reasons if r.rule == DRIVES and r.verdict == FAIL), None)
    if undriven is not None:  # no stack can use a GPU its driver does not drive
        bounds = tables.driver_branches(cc, gpu)
        return f"install a driver that drives this GPU ({drive_span(bounds)}): {undriven.text}" if bounds else undriven.text
    if framework == "torch":
        rows = sorted(tables.table("torch_builds"), key=lambda r: (r["release"] != minor_series(release), [-int(p) for p in r["release"].split(".")]))
        for row in rows:
            if predict_stack("torch", f"{row['release']}+{row['variant']}", row["variant"], cc, driver).verdict == PASS:
                return f"pip install 'torch=={row['release']}.*' --index-url https://download.pytorch.org/whl/{row['variant']}"
    if framework == "jax" and prediction.code in ("ARCH_UNSUPPORTED", "DRIVER_TOO_OLD"):
        for variant in ("cuda13", "cuda12"):
            if predict_stack("jax", release, variant, cc, driver).verdict == PASS:
                return f"pip install 'jax[{variant}]=={release}'"
    if framework == "cupy":
        for variant in ("cuda13x", "cuda12x", "cuda11x"):
            if predict_stack("cupy", release, variant, cc, driver).verdict == PASS:
                return f"pip install cupy-{variant}"
    if prediction.code == "DRIVER_TOO_OLD":
        failing = next((r for r in prediction.reasons if r.code == "DRIVER_TOO_OLD"), None)
        return f"upgrade the NVIDIA driver ({failing.text})" if failing else "upgrade the NVIDIA driver"
    return None
