"""Prediction: small pure rules over the knowledge tables, each citing the fact it used.

A rule returns pass, fail (with code and stage) or uncertain, one human sentence and
its source. `predict` runs the rules that apply to a stack in ladder order: the first
failure is the verdict; otherwise any uncertainty makes the whole uncertain — never a
guess; otherwise pass, with the warnings the passing rules raised.

Each framework's own rules are in knowledge/frameworks/<name>.py, reached through `frameworks.RULES`; this module holds
the rules they share (the driver against the CUDA runtime, published minimums, wheels per Python, known defects, uv's
own answer) and `predict_stack`, which puts a framework's reasons and the shared ones together.
"""

from __future__ import annotations

from dataclasses import replace
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
from .frameworks import rules_module
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
    reach, newest = version(have["cuda"]), tables.newest_cuda()  # the tables' versions, each parsed once (tables.version)
    if have.get("confidence") == "low":  # judge by the newest trusted row, and through the compatibility floor
        have = tables.driver_cuda(driver, trusted_only=True) or have
    supported = version(have["cuda"])
    # A CUDA major the tables do not hold (0, 6, 14, ...) is judged only where the driver's own
    # reach is known and lies a major below it; any other verdict would be a guess.
    if not tables.cuda_known(str(runtime)) and not (runtime.major > reach.major and reach < version(newest["cuda"])):
        oldest = min(tables.table("cuda_drivers"), key=lambda r: version(r["cuda"]))
        return Reason(name, UNCERTAIN, f"the knowledge tables have no data for CUDA {runtime} (they hold CUDA {oldest['cuda']} to {newest['cuda']})",
                      "knowledge/data/cuda_drivers.csv")
    if runtime <= supported:
        return weighed(Reason(name, PASS, f"driver {driver} supports CUDA {supported}, enough for runtime {runtime}", have["source"]), have.get("confidence"))
    needed = tables.cuda_row(str(runtime))
    needed_driver = needed["toolkit_driver_min"] if needed else None
    need_text = f" (CUDA {runtime} wants driver >= {needed_driver})" if needed else ""
    if runtime.major > supported.major:
        return weighed(Reason(name, FAIL, f"CUDA runtime {runtime} is a newer major than driver {driver} supports (CUDA {supported}){need_text}",
                              (needed or have)["source"], "DRIVER_TOO_OLD", "device", needs_driver=needed_driver), have.get("confidence"))
    floor = tables.compat_floor(runtime.major)
    if floor and version(driver) >= version(floor["compat_driver_min"]):
        warning = (f"runs under CUDA minor-version compatibility: runtime {runtime} on a driver that supports CUDA {supported}; "
                   f"PTX newer than the driver cannot be JIT-compiled")
        # NVIDIA documents the floor for the whole major family, so a minor without a row of its own is covered too;
        # the answer says that the minor's own minimum is not known rather than passing it off as the floor (issue 40.7)
        unlisted = "" if needed else (f"; NVIDIA's notes for CUDA {runtime} give no driver minimum that could be read here, so CUDA {runtime}'s "
                                      f"own minimum is unknown and the {runtime.major}.x floor {floor['compat_driver_min']} is assumed "
                                      f"(NVIDIA documents it for every CUDA {runtime.major}.x)")
        if not needed:
            warning += f"; CUDA {runtime}'s own driver minimum is unknown (no NVIDIA release notes read here give it)"
        return Reason(name, PASS, f"driver {driver} >= {floor['compat_driver_min']}, the minor-version compatibility floor of CUDA {runtime.major}.x{need_text}{unlisted}",
                      floor["source"], warning=warning)
    return weighed(Reason(name, FAIL, f"CUDA runtime {runtime} is newer than driver {driver} supports (CUDA {supported}), and CUDA {runtime.major}.x has no minor-version compatibility floor it meets",
                          (needed or have)["source"], "DRIVER_TOO_OLD", "device", needs_driver=needed_driver), have.get("confidence"))


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
                              source, "DRIVER_TOO_OLD", "device", needs_driver=min_driver))
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

def semicolon_list(text: str) -> list[str]:
    """'sm_80;sm_90' -> ['sm_80', 'sm_90'] (a table's list column; empty where it is empty)."""
    return [item for item in (text or "").split(";") if item]


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
    pythons = semicolon_list(row["pythons"])
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
    found = rules_module(framework)
    return found.wheel_package(variant) if found else None


def wheel_pythons(framework: str, release: str, variant: str) -> list[str]:
    """The Pythons PyPI has Linux x86_64 wheels of this release for, as the tables list them ('3.11'; free-threaded
    builds such as '3.14t' left out); none where the tables do not know."""
    package = wheel_package(framework, variant)
    row, _newest = tables.python_wheels(package, release) if package else (None, None)
    return [p for p in (row["pythons"].split(";") if row and row["pythons"] else []) if p[-1:].isdigit()]


def beyond_last_driver(reason: Reason, cc: str | None, gpu: str | None, cuda: str | None = None) -> Reason:
    """A driver too old for the build is the user's to change only where a newer driver drives the GPU: where the driver the
    build needs is of a branch past the GPU's last (a Kepler GPU ends at R470, CUDA 11.4), no driver upgrade helps, and the
    headline is the fact that blocks: this GPU cannot run the build (ARCH_UNSUPPORTED, issue 40 section 6)."""
    needed = reason.needs_driver if reason.code == "DRIVER_TOO_OLD" else None
    bounds = tables.driver_branches(cc, gpu) if needed else None
    last = bounds and bounds["last"]
    if not last or int(needed.split(".")[0]) <= int(last["branch"]):
        return reason
    newest = f"{last['branch']}.999.99"  # the last branch's newest release, whatever its number
    if cuda and reason.rule == "driver vs CUDA runtime" and driver_rule(cuda, newest).verdict == PASS:
        return reason  # minor-version compatibility lets the last branch run it: a driver upgrade does help
    reach = tables.driver_cuda(newest)
    names = f"{bounds['architecture']} GPUs" + (f" such as {gpu}" if gpu else "")
    return replace(reason, code="ARCH_UNSUPPORTED", text=f"{reason.text}; no driver for {names} goes past R{last['branch']}"
                   + (f" (CUDA {reach['cuda']})" if reach else "") + ", so no driver upgrade runs this build",
                   source=f"{reason.source} ; {last['source']}")


def predict_stack(framework: str, release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None,
            cuda_runtime: str | None = None, arch: tuple | None = None, gpu: str | None = None,
            kernel_module: str | None = None) -> Prediction:
    """Expected outcome of one stack on one GPU class. `cuda_runtime` (from resolution or the
    probe) and `arch` (sass, ptx, source: from inspecting the installed build) override the tables;
    `gpu` (the name as reported) lets a product whose driver branches differ from its architecture's be judged;
    `kernel_module` ('open' | 'proprietary' | None: assumed, and said) is the driver's flavour, which decides what it drives."""
    cc = cc or None  # unknown: the rules that need it say so; the others (driver, Python, variant) still judge
    found = rules_module(framework)  # knowledge/frameworks/<name>.py
    if found is not None:
        reasons, resolved = found.rules(release, variant, cc, driver, python, cuda_runtime, arch)
    else:
        reasons, resolved = [Reason("framework", UNCERTAIN, f"no rules for {framework!r}", "")], {}
    reasons = [beyond_last_driver(r, cc, gpu, resolved.get("cuda_runtime")) for r in reasons]
    drives = driver_drives_rule(cc, gpu, driver, kernel_module)
    if drives is not None:  # a GPU the driver does not drive is not there, whatever else fails: that comes first
        reasons.insert(0 if drives.verdict != PASS else len(reasons), drives)
    plain = version(release.split("+")[0])
    if not (found and found.JUDGES_PRERELEASES) and plain is not None and plain.is_prerelease:  # torch's rules say so themselves
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
        wheel = wheel_rule(package, resolved.get(package) or release, python)  # a release whose pins resolve to another number
        documented = [r for r in reasons if r.rule == "wheel for this Python"]  # TensorFlow's tested Pythons
        if wheel.verdict != UNCERTAIN or not documented:  # PyPI's file list outranks a document; without it the document stands
            reasons = [r for r in reasons if r.rule != "wheel for this Python"] + [wheel]
    return combine(reasons, resolved)


def never_built(framework: str, version: str, variant: str) -> str | None:
    """The knowledge's sentence when this variant was never built for this version, else None
    (also None where the tables do not know the version: that is for the resolver to find out)."""
    found = rules_module(framework)
    if found is not None and found.LISTS_EVERY_BUILD and variant != "cpu":
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
    found = rules_module(framework)
    fix = found.suggest(release, cc, driver, prediction) if found else None  # the framework's own: another build that runs
    if fix is not None:
        return fix
    if prediction.code == "DRIVER_TOO_OLD":
        failing = next((r for r in prediction.reasons if r.code == "DRIVER_TOO_OLD"), None)
        return f"upgrade the NVIDIA driver ({failing.text})" if failing else "upgrade the NVIDIA driver"
    return None
