"""Where a build's kernels run: SASS for an architecture, PTX the driver can JIT-compile (and how new a PTX ISA
it can read), the architectures a CUDA toolkit can target, and what NVRTC of a CUDA release can compile for.
"""

from __future__ import annotations

import re

from packaging.version import Version

from . import tables
from .reasons import FAIL, PASS, UNCERTAIN, UNKNOWN_CC, Reason
from .tables import minor_series, version

_ARCH = re.compile(r"(sm|compute)_([0-9]+)([0-9])([af]?)", re.ASCII)  # fullmatch: ASCII digits, no trailing newline


def _arch(text: str) -> tuple[str, int, int, str] | None:
    found = _ARCH.fullmatch(text.strip())
    return (found.group(1), int(found.group(2)), int(found.group(3)), found.group(4)) if found else None


def sass_runs(target: tuple, major: int, minor: int) -> bool:
    """SASS sm_XY (and family sm_XYf) runs on CC X.Z for Z >= Y; arch-specific sm_XYa on X.Y only.
    (CUDA Programming Guide, 'Binary Compatibility' and 'Feature Availability': family-specific
    targets run on later minors of the same family, arch-specific ones on that CC alone.)"""
    _kind, t_major, t_minor, suffix = target
    return t_major == major and (t_minor == minor if suffix == "a" else t_minor <= minor)


def sass_covers(targets, major: int, minor: int) -> bool:
    """Whether any of these SASS target names ('sm_80', 'sm_90a', ...) runs on CC major.minor (sass_runs)."""
    return any(t and sass_runs(t, major, minor) for t in (_arch(name) for name in targets or ()))


def ptx_jits(target: tuple, major: int, minor: int) -> bool:
    """PTX compute_XY JIT-compiles for any CC >= X.Y; compute_XYf only within family X, minor >= Y;
    compute_XYa only for X.Y (arch-specific PTX is not forward compatible)."""
    _kind, t_major, t_minor, suffix = target
    if suffix == "a":
        return (t_major, t_minor) == (major, minor)
    if suffix == "f":
        return t_major == major and t_minor <= minor
    return (t_major, t_minor) <= (major, minor)


# PTX ISA version -> the CUDA toolkit that introduced it (PTX ISA manual, "Release Notes", and its
# table of PTX ISA versions per CUDA release): what a library's PTX needs of the driver to be JIT-compiled.
PTX_ISA_SOURCE = "https://docs.nvidia.com/cuda/parallel-thread-execution/#release-notes"
PTX_ISA_CUDA = {**{f"7.{m}": f"11.{m}" for m in range(9)}, "8.0": "12.0", "8.1": "12.1", "8.2": "12.2", "8.3": "12.3",
                "8.4": "12.4", "8.5": "12.5", "8.7": "12.8", "8.8": "12.9", "9.0": "13.0", "9.1": "13.1"}


def ptx_cuda(isa_versions: list[str]) -> str | None:
    """The CUDA that made the newest of these PTX ISA versions; None where the table does not say."""
    known = [PTX_ISA_CUDA[v] for v in isa_versions if v in PTX_ISA_CUDA]
    return max(known, key=lambda v: tuple(int(p) for p in v.split("."))) if known else None


ARCH_SOURCE = "https://docs.nvidia.com/cuda/cuda-c-programming-guide/ (Binary Compatibility; Feature Availability: arch- and family-specific targets)"


def arch_rule(cc: str, sass: list[str] | None, ptx: list[str] | None, source: str, build_cuda: str | None = None,
              driver: str | None = None) -> Reason:
    """SASS sm_XY runs on devices of major X and minor >= Y (sm_XYa only on X.Y); else PTX
    compute_XY with XY <= the device's CC is JIT-compiled, which needs a driver at least as
    new as the CUDA that made the PTX; else ARCH_UNSUPPORTED."""
    name = "architecture"
    if cc is None:
        return Reason(name, UNCERTAIN, UNKNOWN_CC, "")
    if sass is None and ptx is None:
        return Reason(name, UNCERTAIN, "the build's architecture list is not known", "")
    major, minor = (int(p) for p in cc.split("."))
    listed = ", ".join([*(sass or []), *(ptx or [])]) or "nothing"
    for item in sass or []:
        parsed = _arch(item)
        if parsed and sass_runs(parsed, major, minor):
            return Reason(name, PASS, f"the build has SASS {item}, which runs on compute capability {cc}", source)
    jit = [item for item in ptx or [] if (p := _arch(item)) and ptx_jits(p, major, minor)]
    if jit:
        have = tables.driver_cuda(driver) if driver else None
        if build_cuda and have and version(minor_series(build_cuda)) > Version(have["cuda"]):
            return Reason(name, FAIL, f"no SASS for sm_{major}{minor}; its PTX {jit[-1]} was made by CUDA {build_cuda}, newer than driver {driver} can JIT-compile (CUDA {have['cuda']})",
                          source, "PTX_TOOLCHAIN_TOO_NEW", "compute")
        return Reason(name, PASS, f"no SASS for sm_{major}{minor}, but PTX {jit[-1]} is JIT-compiled for it", source,
                      warning=f"runs by PTX JIT from {jit[-1]} (no SASS for sm_{major}{minor}): slow first start")
    # name the a/f targets that a plain target of the same number would have served
    suffixed = [item for item in [*(sass or []), *(ptx or [])] if (p := _arch(item)) and p[3] and (p[1], p[2]) <= (major, minor)]
    one = len(suffixed) == 1
    why = f" ({', '.join(suffixed)} {'is' if one else 'are'} arch- or family-specific and {'does' if one else 'do'} not carry over)" if suffixed else ""
    return Reason(name, FAIL, f"the build has {listed}; nothing of it runs on compute capability {cc} (sm_{major}{minor}){why}",
                  source + (f" ; {ARCH_SOURCE}" if suffixed else ""), "ARCH_UNSUPPORTED", "compute")


def toolkit_window_rule(build_cuda: str, cc: str) -> Reason:
    """Without the build's own arch list: what the toolkit that made it could target.
    A device older than every target of the toolkit cannot have kernels; one that no target's
    SASS runs on, but newer than some target, could only run PTX the build may or may not carry."""
    name = "CUDA toolkit targets"
    if cc is None:
        return Reason(name, UNCERTAIN, UNKNOWN_CC, "")
    row = tables.cuda_archs(build_cuda)
    if row is None:
        return Reason(name, UNCERTAIN, f"no target list for CUDA {build_cuda}", "")
    major, minor = (int(p) for p in cc.split("."))
    targets = [p for p in (_arch(s) for s in row["sm"].split(";")) if p]
    if any(sass_runs(t, major, minor) for t in targets):
        return Reason(name, UNCERTAIN, f"CUDA {build_cuda} can build for sm_{major}{minor}, but whether this build did is not known", row["source"])
    oldest = min((t[1], t[2]) for t in targets)
    if (major, minor) < oldest:  # PTX JIT-compiles only upward, so no target of this toolkit reaches it
        return Reason(name, FAIL, f"CUDA {build_cuda} cannot build for sm_{major}{minor}: its oldest target is sm_{oldest[0]}{oldest[1]}",
                      row["source"], "ARCH_UNSUPPORTED", "compute")
    return Reason(name, UNCERTAIN, f"CUDA {build_cuda} cannot build SASS for sm_{major}{minor}; the build runs there only by JIT "
                  f"from PTX of an older target, and whether it carries such PTX is not known", row["source"],
                  warning=f"CUDA {build_cuda} has no SASS target for sm_{major}{minor}: at best it runs by PTX JIT (slow first start)")


def runtime_targets_rule(cuda: str, cc: str | None) -> Reason | None:
    """A CUDA runtime's own kernels are NVRTC's, compiled for the device in hand (the probe's JIT rungs): where no target
    of that toolkit is as old as the device, nothing can run (CUDA 12 has no sm_35, CUDA 13 nothing below sm_75).
    None where the compute capability or the toolkit's target list is not known: the runtime's other checks still judge."""
    window = toolkit_window_rule(cuda, cc) if cc else None
    if window is None or window.verdict == FAIL:
        return window
    if not window.source:  # no target list for this toolkit
        return None
    major, minor = cc.split(".")
    if window.warning:  # a device newer than every target: NVRTC compiles PTX of its newest older target, the driver JITs it
        return Reason(window.rule, PASS, f"NVRTC of CUDA {minor_series(cuda)} has no target for sm_{major}{minor}; its PTX for an older "
                      "target is JIT-compiled by the driver", window.source, warning=window.warning)
    return Reason(window.rule, PASS, f"NVRTC of CUDA {minor_series(cuda)} can compile for compute capability {cc}", window.source)
