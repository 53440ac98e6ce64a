"""JAX's rules: the jax[cudaNN] extra of a release (jax_builds.csv: the plugin's minimum compute capability and driver,
its kernels), whether the extra existed then (pip ignores an unknown one and installs jax for the CPU), whether the
build's XLA can generate code for the GPU at all (xla_targets.csv), and the ptxas XLA compiles with as it runs."""

from __future__ import annotations

from packaging.version import Version

from .. import pins, tables, xla_targets
from ..arch import _arch, arch_rule, sass_covers
from ..compilers import knows, ptxas_pin
from ..reasons import FAIL, PASS, UNCERTAIN, Prediction, Reason
from ..rules import driver_rule, minimum_rule, predict_stack, semicolon_list
from ..tables import version

JUDGES_PRERELEASES = False
PINS_RULE = "jaxlib and plugin from the release's pins"
LISTS_EVERY_BUILD = True  # the rows span every release that had each extra


def rules(release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None, cuda_runtime: str | None = None,
          arch: tuple | None = None) -> tuple[list[Reason], dict]:
    if variant == "cpu":
        return [Reason("CPU build", FAIL, "jax without a CUDA extra runs on the CPU only", "https://docs.jax.dev/en/latest/installation.html", "NO_DEVICE", "device")], {}
    pinned = pins.jax_pins(release, variant)  # the release's own metadata: jax 0.4.37[cuda12] pins jaxlib==0.4.36
    if pinned is not None and pinned.moved and not getattr(pins.jax_pins(pinned.judged_by, variant), "moved", False):
        # judged by the jaxlib and plugin its pins resolve to, not a same-number guess (one step: pins never chain)
        reasons, resolved = rules(pinned.judged_by, variant, cc, driver, python, cuda_runtime, arch)
        return [Reason(PINS_RULE, PASS, pinned.sentence(), pinned.source), *reasons], {**resolved, **pinned.facts()}
    declared = pins.jax_extras(release)
    if declared is not None and variant.startswith("cuda") and variant.replace("-", "_") not in declared[0]:
        return [Reason("variant exists", FAIL, f"jax {release}'s metadata declares no [{variant}] extra (its CUDA extras: "
                       f"{', '.join(declared[0]) or 'none'}); pip ignores an unknown extra and installs jax for the CPU only",
                       declared[1], "NO_DEVICE", "device")], {}
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
    sass, ptx, source = (arch if arch is not None else (semicolon_list(build["sass"]), semicolon_list(build["ptx"]), build["source"]))
    reasons = minimum_rule(f"jax[{variant}]", cc, driver, build["min_cc"], build["min_driver"], build["source"])
    if cuda_runtime:
        reasons.append(driver_rule(cuda_runtime, driver))
    elif driver is None:
        reasons.append(Reason(f"jax[{variant}] minimum driver", UNCERTAIN, "the driver version is not known, so driver support cannot be judged", ""))
    elif not any(r.rule.endswith("minimum driver") for r in reasons):
        reasons.append(Reason(f"jax[{variant}] minimum driver", PASS, f"driver {driver} >= {build['min_driver']}", build["source"]))
    reasons.append(arch_rule(cc, sass, ptx, source, cuda_runtime, driver))
    targets = xla_rule(release, variant, cc)
    if targets is not None:
        reasons.append(targets)
    compiler = ptxas_rule(release, variant, cc, sass)
    if compiler is not None:
        reasons.append(compiler)
    return reasons, {"cuda_runtime": cuda_runtime or f"{build['cuda_major']}.x", "sass": sass, "ptx": ptx, **(pinned.facts() if pinned else {})}



# the issue threads where a JAX whose XLA does not target the GPU failed on it (tools/facts/accuracy_cases_other.csv)
XLA_OBSERVED = ("https://github.com/cantinilab/stories/issues/5 (jax 0.4.26 on an RTX 5070 Ti Laptop GPU: \"Program with .target "
                "'sm_90a' cannot be compiled to future architecture\", 0.9.1 works) ; https://github.com/3587jjh/HuRo/pull/3 "
                "(jax 0.4.30 on a compute-12.0 card, the same message; 0.6.2 works)")
XLA_RULE = "XLA's own targets"


def xla_rule(release: str, variant: str, cc: str | None) -> Reason | None:
    """JAX compiles its kernels with XLA, whose LLVM knows a fixed list of targets (xla_targets.csv, read from the
    plugin's xla_cuda_plugin.so). For a GPU it does not know, XLA falls back to the most recent target below it
    (openxla/xla GetSmName). From Hopper on that target's code is arch-specific (sm_90a, sm_101a): it runs on that
    architecture only, and no ptxas or nvJitLink compiles it for a later one, so FAIL ARCH_UNSUPPORTED at compute,
    naming XLA's newest target and the first release that targets the GPU. A plain fallback (before Hopper) is PTX
    that ptxas compiles forward, and a family-specific one (sm_100f) runs on its family: a pass with a warning. None
    where XLA targets the GPU, the GPU is older than every target, or the table does not hold the release."""
    want = version(release.split("+")[0])
    if not cc or want is None or variant == "cpu":
        return None
    name = xla_targets.package(variant, str(want))
    row = xla_targets.targets_of(name, str(want))
    if row is None:
        return None
    major, minor = (int(p) for p in cc.split("."))
    sm, plain = major * 10 + minor, xla_targets.plain_targets(row)
    if sm in plain or not plain or sm < plain[0]:
        return None
    fallback = max(p for p in plain if p <= sm)
    targets = row["targets"].split(";")
    shown = "jaxlib" if name == "jaxlib" else name.replace("-pjrt", "-plugin")
    said = f"XLA in {shown} {row['release']} targets up to {row['newest_sm']}, not sm_{sm}: it falls back to sm_{fallback}"
    source = f"knowledge/data/xla_targets.csv ({row['read']}: {row['source']})"
    first = xla_targets.first_targeting(name, sm)
    needs = (f"a GPU of compute capability {cc} needs jax {first['release']} or newer (the first release whose XLA targets sm_{sm})"
             if first else f"no jax release the tables hold targets sm_{sm}")
    if f"sm_{fallback}f" in targets and fallback // 10 == major:
        return Reason(XLA_RULE, PASS, f"{said}f, the family-specific target, which runs on every GPU of its family", source,
                      warning=f"XLA compiles sm_{fallback}f code on this GPU, without instructions newer than sm_{fallback}; {needs}")
    if f"sm_{fallback}a" in targets:
        return Reason(XLA_RULE, FAIL, f"{said}, whose code is arch-specific (sm_{fallback}a) and does not carry over to a later GPU "
                      f"(\"ptxas fatal : Program with .target 'sm_{fallback}a' cannot be compiled to future architecture\"), whatever "
                      f"ptxas or nvJitLink; {needs}", f"{source} ; {XLA_OBSERVED}", "ARCH_UNSUPPORTED", "compute")
    return Reason(XLA_RULE, PASS, f"{said}, a plain target whose PTX ptxas compiles for sm_{sm}", source,
                  warning=f"XLA compiles sm_{fallback} code on this GPU, without its newer instructions; {needs}")


def ptxas_rule(release: str, variant: str, cc: str | None, sass: list[str] | None) -> Reason | None:
    """XLA compiles JAX's kernels as it runs, with the PTX compiler pip brings beside the plugin: nvJitLink (the
    nvidia-nvjitlink wheel) where it loads, else the ptxas of the nvidia-cuda-nvcc wheel (docs/evidence/jax-ptxas-h100:
    on an H100, JAX 0.11.2 ran with CUDA 11.7's ptxas in every place XLA looks). Both resolve to the same CUDA release,
    whose targets were measured from ptxas: that compiler must know the GPU's architecture, whatever the driver could
    JIT (arch-specific sm_XYa PTX never carries over). None where it has nothing to add (the plugin's SASS covers the
    GPU and even the lowest release allowed knows it)."""
    found = ptxas_pin("jax", variant, release) if cc else None
    if found is None:
        return None
    pin, package, floor, lowest, given = found
    major, minor = (int(p) for p in cc.split("."))
    oldest = min((p[1], p[2]) for p in (_arch(s) for s in given["sm"].split(";")) if p)
    if (major, minor) < oldest:  # older than every target: the build's own minimum says so first
        return None
    covered = sass_covers(sass, major, minor)
    name, sm = "run-time compiler (XLA)", f"sm_{major}{minor}"
    said = (f"XLA compiles jax's kernels for {sm} as it runs, with the PTX compiler pip brings: nvJitLink where it loads, else the "
            f"ptxas of {package} (jax-{variant}-plugin {release} requires {pin['requirement']}), both of one CUDA release")
    source = f"{pin['source']} ; {given['source']}" + (f" ; {lowest['source']}" if lowest is not given else "") + \
        " ; docs/evidence/jax-ptxas-h100/README.md"
    if knows(lowest, major, minor):
        return None if covered else Reason(name, PASS, f"{said}: ptxas {floor} and later know {sm}", source)
    if knows(given, major, minor):
        return Reason(name, PASS, f"{said}: pip installs {pin['resolves_to']}, whose ptxas knows {sm}; ptxas {floor}, the oldest "
                      f"it allows, does not", source, warning=f"an environment that keeps {package} older than the first "
                      f"release that knows {sm} fails to compile (ptxas {floor} does not know it)")
    newest = max((p for p in (_arch(s) for s in given["sm"].split(";")) if p), key=lambda p: (p[1], p[2]))
    return Reason(name, FAIL, f"{said}: pip installs {pin['resolves_to']}, and CUDA {pin['resolves_to']}'s compiler does not know {sm} "
                  f"(its targets end at sm_{newest[1]}{newest[2]}); the driver's PTX JIT does not stand in for it",
                  source, "ARCH_UNSUPPORTED", "compute")



def wheel_package(variant: str) -> str | None:
    return "jaxlib"


def suggest(release: str, cc: str | None, driver: str | None, prediction: Prediction) -> str | None:
    """Where the GPU or the driver is the trouble: the same release with the CUDA extra that runs here."""
    if prediction.code in ("ARCH_UNSUPPORTED", "DRIVER_TOO_OLD"):
        for variant in ("cuda13", "cuda12"):
            if predict_stack("jax", release, variant, cc, driver).verdict == PASS:
                return f"pip install 'jax[{variant}]=={release}'"
    return None
