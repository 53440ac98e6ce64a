"""CuPy's rules: which cupy-cudaXXx package publishes a release (cupy_packages.csv), its driver, and what compiles its
kernels as it runs: NVRTC, from the system's CUDA toolkit or, with [ctk], from pip; its precompiled kernels
(cupy_archs.csv) where the GPU is newer than the build."""

from __future__ import annotations

from packaging.version import Version

from .. import tables
from ..arch import _arch, sass_runs, toolkit_window_rule
from ..compilers import compiler_pin, compiler_targets, knows
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
    nvrtc = nvrtc_rule(release, variant, ctk, cc, cuda) if cuda else None
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


def precompiled_kernels(release: str, variant: str) -> dict | None:
    """The wheel's precompiled kernels (knowledge/data/cupy_archs.csv): the newest series row not newer than the release."""
    major, want = variant[len("cuda"):].rstrip("x")[:2], version(release.split("+")[0])
    rows = [r for r in tables.table("cupy_archs") if r["cuda_major"] == major and want is not None and Version(r["series"]) <= want]
    return max(rows, key=lambda r: Version(r["series"]), default=None)


def nvrtc_rule(release: str, variant: str, ctk: bool, cc: str | None, cuda: str) -> Reason | None:
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
        return Reason(name, UNCERTAIN, f"{said}, whose NVRTC does not know {sm}: CuPy then builds PTX of NVRTC's newest target "
                      "for the driver to JIT, and its precompiled kernels may not run", source)
    if window.verdict != UNCERTAIN or not window.warning:  # the build's CUDA can target this GPU (or nothing can): as before
        return None
    precompiled = precompiled_kernels(release, variant)
    covered = precompiled and any(p and sass_runs(p, major, minor) for p in (_arch(s) for s in precompiled["sass"].split(";")))
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
