"""CuPy's rules: which cupy-cudaXXx package publishes a release (cupy_packages.csv), its driver, and what compiles its
kernels as it runs: NVRTC, from the system's CUDA toolkit or, with [ctk], from pip; its precompiled kernels
(cupy_archs.csv) where the GPU is newer than the build."""

from __future__ import annotations

from packaging.version import Version

from .. import tables
from ..arch import sass_covers, toolkit_window_rule
from ..compilers import compiler_pin, compiler_targets, knows
from ..ptx import ptx_jit_rule
from ..reasons import FAIL, PASS, UNCERTAIN, Prediction, Reason
from ..rules import driver_rule, predict_stack
from ..tables import version

JUDGES_PRERELEASES = False
LISTS_EVERY_BUILD = True  # PyPI's releases of each cupy-cudaXXx package


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
    want = version(release.split("+")[0])
    variant, ctk = (variant[:-len("[ctk]")], True) if variant.endswith("[ctk]") else (variant, False)
    packages = tables.cupy_packages(variant)
    build = next((r for r in packages if want and Version(r["first_version"]) <= want <= Version(r["last_version"])), None)
    if build is None:
        if not packages or want is None or want > tables.newest_cupy():
            newest = tables.newest_cupy()
            return [Reason("CuPy build", UNCERTAIN, f"the knowledge tables have no data for CuPy {release} as cupy-{variant} "
                           f"(they hold PyPI's cupy-cuda* packages up to CuPy {newest})", "knowledge/data/cupy_packages.csv")], {}
        published = ", ".join(span(r) for r in packages)
        return [Reason("variant exists", FAIL, f"PyPI has no cupy-{variant} {release} (cupy-{variant} was published for CuPy {published})",
                       packages[0]["source"], "ENV_UNRESOLVABLE", "resolve")], {}
    cuda = cuda_runtime or (build["cuda"].replace(".x", ".0") if build["cuda"] else None)
    # CuPy compiles its kernels at run time with NVRTC, for the device in hand: the toolkit's targets decide.
    reasons = [Reason("CuPy build", PASS, f"CuPy {build['series']} publishes cupy-{variant} ({span(build)})", build["source"]),
               driver_rule(cuda, driver)]
    system = system_toolkit_rule(release, variant, cc, build) if cuda and not ctk else None
    nvrtc = None if system is not None else nvrtc_rule(release, variant, ctk, cc, cuda, driver) if cuda else None
    if system is not None:
        reasons.append(system)
    elif nvrtc is not None:
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


def precompiled_kernels(release: str, variant: str) -> dict | None:
    """The wheel's precompiled kernels (knowledge/data/cupy_archs.csv): the newest series row not newer than the release."""
    major, want = variant[len("cuda"):].rstrip("x")[:2], version(release.split("+")[0])
    rows = [r for r in tables.table("cupy_archs") if r["cuda_major"] == major and want is not None and Version(r["series"]) <= want]
    return max(rows, key=lambda r: Version(r["series"]), default=None)


def nvrtc_rule(release: str, variant: str, ctk: bool, cc: str | None, cuda: str, driver: str | None = None) -> Reason | None:
    """CuPy compiles its own kernels as it runs, with NVRTC, for the GPU in hand: the NVRTC it gets decides a GPU newer
    than the build. With [ctk] (CuPy 14 on) pip brings it (cuda-toolkit[nvrtc]); without, it is the system's toolkit, an
    assumption. None where the old toolkit-window rule says enough (no GPU, or one the build's CUDA can target)."""
    if cc is None:
        return None
    major, minor = (int(p) for p in cc.split("."))
    sm, name = f"sm_{major}{minor}", "run-time compiler (NVRTC)"
    window = toolkit_window_rule(cuda, cc)
    pin = compiler_pin("cupy", f"{variant}[ctk]", release) if ctk else None
    if pin is not None:
        given = compiler_targets("nvrtc", pin["resolves_to"])
        if given is None:
            return None
        source = f"{pin['source']} ; {given['source']}"
        said = f"CuPy compiles its kernels at run time with NVRTC; cupy-{variant}[ctk] brings {given['package']} {pin['resolves_to']} ({pin['requirement']})"
        if knows(given, major, minor):
            return Reason(name, PASS, f"{said}, whose NVRTC compiles for {sm}", source)
        jit = ptx_jit_rule("NVRTC", pin["resolves_to"], driver, sm, only_ptx=True)
        if jit is not None and jit.verdict == FAIL:  # only PTX can run, and the driver refuses its ISA
            return jit
        return Reason(name, UNCERTAIN, f"{said}, whose NVRTC does not know {sm}: CuPy then builds PTX of NVRTC's newest target "
                      "for the driver to JIT, and its precompiled kernels may not run", source)
    if window.verdict != UNCERTAIN or not window.warning:  # the build's CUDA can target this GPU (or nothing can): as before
        return None
    precompiled = precompiled_kernels(release, variant)
    covered = precompiled and sass_covers(precompiled["sass"].split(";"), major, minor)
    if not covered:
        return None  # neither the wheel's kernels nor a known compiler: the toolkit window's uncertainty stands
    first = min((r["cuda"] for r in tables.table("cuda_archs") if sm in r["sm"].split(";")), key=Version, default=None)
    since = compiler_pin("cupy", f"{variant}[ctk]", "9999")
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



SYSTEM_LIBRARIES_RULE = "CUDA libraries"  # the rule answers/conditions.py makes conditional, as TensorFlow's
NO_TOOLKIT = ("https://pypi.org/project/cupy-cuda12x/12.2.0/ ('You need to install CUDA Toolkit 12.x to use these packages') ; "
              "https://anaconda.org/scientific-python-nightly-wheels/cupy-cuda13x ('Alternatively, you can install this package together "
              "with all needed CUDA components from PyPI by passing the [ctk] tag') ; knowledge/data/compiler_pins.csv")


def system_toolkit(release: str, variant: str, cc: str | None) -> dict | None:
    """The system CUDA toolkit a cupy-cudaXXx build without [ctk] needs on this GPU: {'major', 'first', 'text'} where a toolkit
    of the build's CUDA knows the GPU (`first`: the oldest that does, never older than the build's own CUDA); None where none
    does (then only PTX of an older target can run, which the toolkit-window rules judge) or the GPU is not known."""
    row = next((r for r in tables.cupy_packages(variant)), None)
    if row is None or cc is None or not row["cuda"]:
        return None
    major, minor = (int(p) for p in cc.split("."))
    sm, floor = f"sm_{major}{minor}", Version(row["cuda"].replace(".x", ".0"))
    fixed = not row["cuda"].endswith(".x")  # cupy-cuda110 and the like: one toolkit minor
    # a toolkit "knows" the GPU where one of its SASS targets runs there (sm_80 on an 8.6), as the toolkit-window rule reads it
    knowing = sorted((Version(r["cuda"]) for r in tables.table("cuda_archs")
                      if sass_covers(r["sm"].split(";"), major, minor)
                      and Version(r["cuda"]).major == floor.major and Version(r["cuda"]) >= floor
                      and (not fixed or Version(r["cuda"]) == floor)))
    if not knowing:
        return None
    first = knowing[0]
    if first > floor:  # a GPU newer than the build's CUDA: its precompiled kernels must cover it too (cupy/cupy#9106)
        precompiled = precompiled_kernels(release, variant)
        if not (precompiled and sass_covers(precompiled["sass"].split(";"), major, minor)):
            return None
    if fixed:
        text = f"CUDA {floor}"
    elif first > floor:
        text = f"CUDA {floor.major}.x, {first} or later (the first whose NVRTC knows {sm})"
    else:
        text = f"CUDA {floor.major}.x (any release of it knows {sm})"
    return {"major": floor.major, "first": str(first), "text": text, "sm": sm, "newer": first > floor}


def system_toolkit_rule(release: str, variant: str, cc: str | None, build: dict) -> Reason | None:
    """cupy-cudaXXx brings no NVRTC: CuPy compiles its kernels as it runs with the system's CUDA toolkit, so a build without
    [ctk] runs only where the system has one its GPU needs. Any toolkit of the build's CUDA: a pass naming it, with its
    warning; only a newer minor (sm_120 needs 12.8): uncertain on that alone. Either is conditional in the answer, naming
    the toolkit (answers/conditions.py), as plain TensorFlow is. None where no toolkit of the build's CUDA knows the GPU."""
    toolkit = system_toolkit(release, variant, cc)
    if toolkit is None:
        return None
    since = compiler_pin("cupy", f"{variant}[ctk]", release)
    extra = f"; cupy-{variant}[ctk] brings it from pip" if since else ""
    said = (f"cupy-{variant} {release} brings no NVRTC: CuPy compiles its kernels as it runs with the system's CUDA toolkit, which "
            f"must be {toolkit['text']}{extra}")
    source = f"{build['source']} ; {NO_TOOLKIT}" + (" ; https://github.com/cupy/cupy/issues/9106" if toolkit["newer"] else "")
    if toolkit["newer"]:  # only some minors of the build's CUDA will do: which one the system has is not known (cupy/cupy#9106)
        return Reason(SYSTEM_LIBRARIES_RULE, UNCERTAIN, f"{said}; an older one fails", source)
    return Reason(SYSTEM_LIBRARIES_RULE, PASS, said, source, warning=f"cupy-{variant} needs a {toolkit['text'].split(' (')[0]} toolkit "
                  "on the system; without one CuPy cannot compile its kernels")


def span(row: dict) -> str:
    return row["first_version"] if row["first_version"] == row["last_version"] else f"{row['first_version']}–{row['last_version']}"



def wheel_package(variant: str) -> str | None:
    return f"cupy-{str(variant).split('[')[0]}"  # cupy-cuda12x[ctk]'s wheels are cupy-cuda12x's


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    """The package of another CUDA major that runs here."""
    for variant in ("cuda13x", "cuda12x", "cuda11x"):
        if predict_stack("cupy", release, variant, cc, driver).verdict == PASS:
            return f"pip install cupy-{variant}"
    return None
