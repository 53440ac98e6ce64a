"""PyTorch's rules: which build a release is (PyPI's default, or a +cuXYZ, +cpu or +rocm local version), whether the
release has that build (torch_builds.csv lists every CUDA build of a release), and whether its CUDA runtime and its
kernels (SASS, PTX) run on the GPU and driver."""

from __future__ import annotations

import re

from .. import pins, tables
from ..arch import arch_rule, toolkit_window_rule
from ..reasons import FAIL, PASS, UNCERTAIN, Prediction, Reason, weighed
from ..rules import driver_rule, predict_stack, semicolon_list
from ..tables import minor_series, version

JUDGES_PRERELEASES = True  # a nightly's own reason names the CUDA it was built for
LISTS_EVERY_BUILD = True  # a variant the tables do not list for a release they know was never built


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
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
        sass, ptx, source = semicolon_list(build["sass"]), semicolon_list(build["ptx"]), build["source"]
    else:
        sass = ptx = None
        source = ""
    resolved.update(sass=sass, ptx=ptx)
    if sass is None and ptx is None and cuda:
        reasons.append(toolkit_window_rule(cuda, cc))
    else:
        reasons.append(weighed(arch_rule(cc, sass, ptx, source, cuda, driver), build.get("confidence") if build and arch is None else None))
        if build and arch is None:  # another public report of the same build: combine() weighs them against each other
            reasons += [arch_rule(cc, semicolon_list(other["sass"]), semicolon_list(other["ptx"]), other["source"], cuda, driver)
                        for other in tables.table("torch_builds")
                        if other is not build and other["release"] == build["release"] and other["variant"] == variant
                        and other["source"] != build["source"]]
    triton = pins.torch_triton(release)  # torch.compile's GPU kernels come from the triton torch's metadata pins
    if triton is not None:
        resolved["triton"] = triton["triton"]
        too_old = triton_rule(triton, cc)
        reasons += [too_old] if too_old else []
    return reasons, resolved


def triton_rule(triton: dict, cc: str | None) -> Reason | None:
    """torch.compile generates its GPU kernels with triton, which needs compute capability 7.0: on an older GPU eager
    torch runs and torch.compile stops (GPUTooOldForTriton). A warning on a pass, never the verdict; None from 7.0 on."""
    if cc is None or version(cc) is None or version(cc) >= version("7.0"):
        return None
    said = (f"torch {triton['release']} pins {triton['requirement']}, torch.compile's GPU compiler, which supports compute capability "
            f">= 7.0; this GPU has {cc}")
    return Reason("torch.compile's compiler (triton)", PASS, said, f"{triton['source']} ; {pins.TORCH_TRITON} ; {pins.TRITON_TOO_OLD}",
                  warning=f"{said}: eager torch runs, torch.compile fails ('too old to be supported by the triton GPU compiler')")



def wheel_package(variant: str) -> str | None:
    return "torch"


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    """The newest build of the same release series (else of the newest release) predicted to pass here."""
    rows = sorted(tables.table("torch_builds"), key=lambda r: (r["release"] != minor_series(release), [-int(p) for p in r["release"].split(".")]))
    for row in rows:
        if predict_stack("torch", f"{row['release']}+{row['variant']}", row["variant"], cc, driver).verdict == PASS:
            return f"pip install 'torch=={row['release']}.*' --index-url https://download.pytorch.org/whl/{row['variant']}"
    return None
