"""Prediction: small pure rules over the knowledge tables, each citing the fact it used.

A rule returns pass, fail (with code and stage) or uncertain, one human sentence and
its source. `predict` runs the rules that apply to a stack in ladder order: the first
failure is the verdict; otherwise any uncertainty makes the whole uncertain — never a
guess; otherwise pass, with the warnings the passing rules raised.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from fnmatch import fnmatchcase

from packaging.version import Version

from . import gpus, installs, tables
from .tables import minor_series, version

PASS, FAIL, UNCERTAIN = "pass", "fail", "uncertain"
UNKNOWN_CC = "the GPU's compute capability is not known"


@dataclass(frozen=True)
class Reason:
    rule: str
    verdict: str
    text: str
    source: str
    code: str | None = None
    stage: str | None = None
    warning: str | None = None
    confidence: str = "high"  # of the table row the reason rests on: high, medium (low rows never decide)


def weighed(reason: Reason, confidence: str | None) -> Reason:
    """A reason resting on a table row of that confidence: a low-confidence row decides nothing."""
    confidence = confidence or "high"
    if confidence == "low" and reason.verdict != UNCERTAIN:
        return replace(reason, verdict=UNCERTAIN, code=None, stage=None, confidence="low",
                       text=f"{reason.text} — but that rests on a low-confidence source, so it is not a verdict")
    return replace(reason, confidence=confidence)


@dataclass
class Prediction:
    verdict: str
    code: str | None
    stage: str | None
    warnings: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    resolved: dict = field(default_factory=dict)
    confidence: str = "high"  # the weakest row among the reasons that decided the verdict

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict, "code": self.code, "stage": self.stage, "confidence": self.confidence, "warnings": self.warnings,
            "reasons": [{k: v for k, v in asdict(r).items() if k in ("rule", "verdict", "text", "source", "confidence")} for r in self.reasons],
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


DRIVES = "driver drives the GPU"


def driver_branch(driver: str | None) -> int | None:
    """'550.54.15' -> 550 (the branch, R550); None for what is not a driver version."""
    head = (driver or "").split(".")[0]
    return int(head) if head.isdigit() and len(head) == 3 else None


def architectures_not_driven(driver: str | None) -> list[str]:
    """The architectures a driver's branch does not drive, each with the bound it is past ('Kepler (last R470)',
    'Blackwell (from R570)'), from the architecture rows of gpu_driver_branches.csv: why a loaded driver lists no GPU."""
    branch = driver_branch(driver)
    found: dict[str, str] = {}
    for row in tables.table("gpu_driver_branches") if branch is not None else ():
        if row["gpu"] or not row["branch"] or row["architecture"] in found:
            continue
        bound = int(row["branch"])
        if row["bound"] == "last" and branch > bound:
            found[row["architecture"]] = f"{row['architecture']} (last R{bound})"
        elif row["bound"] == "first" and branch < bound:
            found[row["architecture"]] = f"{row['architecture']} (from R{bound})"
    return list(found.values())


def branch_releases(branch: int) -> list[str]:
    """The releases of one driver branch the knowledge names (the minimum drivers of its tables), oldest first."""
    return [d for d in tables.named_drivers() if driver_branch(d) == branch]


def driver_drives_rule(cc: str | None, gpu: str | None, driver: str | None) -> Reason | None:
    """Each architecture (and the products that came after their architecture's first branch) is driven from a first
    driver branch to a last one (knowledge/data/gpu_driver_branches.csv): outside them the GPU is not there at all,
    whatever the stack. None where there is nothing to judge: no driver, an architecture the table does not know,
    or a Jetson/Tegra GPU (driven by its JetPack's L4T, not by these branches)."""
    branch = driver_branch(driver)
    bounds = tables.driver_branches(cc, gpu) if branch is not None else None
    if bounds is None or bounds["l4t"] is not None or not (bounds["first"] or bounds["last"]):
        return None
    architecture, first, last = bounds["architecture"], bounds["first"], bounds["last"]
    what = f"{architecture} GPUs such as {gpu}" if gpu else f"{architecture} GPUs of compute capability {cc}"
    listed = device_listings(gpu, driver)
    yes, no = ([d for d, a in listed.items() if a[0] == verdict] for verdict in ("yes", "no"))
    # The lists are the open kernel modules' README (from R515): they name the products of architectures that began in
    # that era as they came out, but caught up late on older ones (the Tesla T4, driven since R410, is first named in
    # 575.51.02). So a list's silence decides only for an architecture whose first branch is in the lists' era.
    silence_decides = bool(first) and int(first["branch"]) >= LISTS_BEGIN
    if no and len(no) == len(listed) and not silence_decides and not yes:
        listed, no = {}, []  # judged by the architecture's branches below, and said so
        late = "its list of compatible GPUs (NVIDIA's open kernel modules) does not name it, but those lists name older products late"
    else:
        late = None
    if no and len(no) == len(listed):  # no board the name may be is in this release's list: the driver does not bind it
        answer, confidence, read = listed[no[0]]
        nearest = gpus.nearest_listing(no, driver)
        began = min((gpus.first_listing(d) for d in no), key=lambda row: tables.version(row["first"]))
        then = (f"; the nearest release that lists it is {nearest}" if nearest else "") + (
            f" (first listed in {began['first']})" if began and nearest != began["first"] else "")
        if first and branch < int(first["branch"]):  # the architecture's branches say so too
            then += f"; {first['gpu'] or architecture} needs R{first['branch']} or newer"
        elif last and branch > int(last["branch"]):
            then += f"; R{last['branch']} is the last branch for {last['gpu'] or architecture}"
        return weighed(Reason(DRIVES, FAIL, f"driver {driver} (R{branch}) does not drive {what}: {device_text(no)} "
                              f"{'are' if len(no) > 1 else 'is'} not in {read}{then}", listing_source(no[0], driver), "NO_DEVICE", "device"), confidence)
    if yes:  # the release lists it: driven, whatever the architecture's branches say
        confidence = "high" if all(listed[d][1] == "high" for d in yes) else "medium"
        began = gpus.first_listing(yes[0])
        warning = (f"driver {driver} does not list {device_text(no)}, another board of that name (first listed in "
                   f"{(gpus.first_listing(no[0]) or {}).get('first', '?')}): that one would not be driven") if no else None
        return weighed(Reason(DRIVES, PASS, f"driver {driver} (R{branch}) drives {what}: {device_text(yes)} "
                              f"{'are' if len(yes) > 1 else 'is'} in {listed[yes[0]][2]} ({listed_since(began['first'])})", listing_source(yes[0], driver),
                              warning=warning), confidence)
    if first and branch < int(first["branch"]):
        needs = first["gpu"] or architecture
        return weighed(Reason(DRIVES, FAIL, f"driver {driver} (R{branch}) does not drive {what}: {needs} needs R{first['branch']} or newer",
                              first["source"], "NO_DEVICE", "device"), first["confidence"])
    if last and branch > int(last["branch"]):
        return weighed(Reason(DRIVES, FAIL, f"driver {driver} (R{branch}) does not drive {what}: R{last['branch']} is the last branch for "
                              f"{last['gpu'] or architecture}", last["source"], "NO_DEVICE", "device"), last["confidence"])
    # inside the bounds the GPU is driven however loosely a bound was sourced: a bound's doubt is only below or above it
    if listed and branch >= 515:  # a driver list of this era not read for it: the architecture's branches, and said so
        return Reason(DRIVES, PASS, f"driver {driver} (R{branch}) drives {what} ({drive_span(bounds)}); whether it lists "
                      f"{device_text(list(listed))} is not known ({next(iter(listed.values()))[2]}), so this rests on the "
                      "architecture's branches", (first or last)["source"], confidence="medium",
                      warning=f"driver {driver}'s own list of compatible GPUs was not read, and {device_text(list(listed))} is not in "
                              f"every read one near it ({next(iter(listed.values()))[2]}): it may not be driven")
    return Reason(DRIVES, PASS, f"driver {driver} (R{branch}) drives {what} ({drive_span(bounds)})", (first or last)["source"],
                  warning=f"driver {driver}: {late}; this rests on the architecture's branches" if late else None)


LISTS_BEGIN = 515  # the first branch whose open-kernel-module README lists compatible GPUs (driver_readmes.csv)


def device_listings(gpu: str | None, driver: str) -> dict[str, tuple[str, str, str]]:
    """Per PCI device ID the GPU's name may be (gpus.device_ids), whether the driver's release lists it
    (gpus.driver_lists: 'yes' | 'no' | 'unknown', confidence, what was read); {} where no driver list names the GPU."""
    ids = [d for d in gpus.device_ids(gpu) if gpus.first_listing(d)] if gpu else []
    return {d: gpus.driver_lists(d, driver) for d in ids}


def listed_since(release: str) -> str:
    """'first listed in 550.40.07', or for a device in the oldest list read 'listed since 515.48.07, the oldest list read'."""
    oldest = min((r["release"] for r in tables.table("driver_readmes")), key=tables.version, default=None)
    return f"listed since {release}, the oldest list read" if release == oldest else f"first listed in {release}"


def device_text(devices: list[str]) -> str:
    """'PCI device 10de:2783' / 'PCI devices 10de:2330, 10de:2337'."""
    return f"PCI device{'s' if len(devices) > 1 else ''} " + ", ".join(f"10de:{d.lower()}" for d in devices)


def listing_source(device: str, driver: str) -> str:
    """The README read for a driver (where read) and the device's first listing: the facts a listing verdict rests on."""
    read = next((r for r in tables.table("driver_readmes") if r["release"] == driver), None)
    began = gpus.first_listing(device)
    return " ; ".join(s for s in ((read or {}).get("source"), began and began["source"], "knowledge/data/driver_devices.csv") if s)


def driving_branch(cc: str | None, gpu: str | None, driver: str) -> tuple[int, str | None, str]:
    """For a driver outside the GPU's branches: (the branch nearest to it that drives the GPU, the newest release of that
    branch the knowledge names or None, 'drivers R570 and newer drive Blackwell GPUs')."""
    listed = device_listings(gpu, driver)
    if listed and all(answer == "no" for answer, _c, _r in listed.values()):  # the driver lists no board of that name
        nearest = gpus.nearest_listing(list(listed), driver)
        if nearest is not None:
            branch = driver_branch(nearest)
            named = [d for d in branch_releases(branch) if any(gpus.driver_lists(i, d)[0] == "yes" for i in listed)]
            head = f"driver {nearest} (R{branch}) lists {gpu} ({device_text(list(listed))})"
            bounds = tables.driver_branches(cc, gpu)
            asked = driver_branch(driver)
            if bounds and asked is not None and ((bounds["first"] and asked < int(bounds["first"]["branch"]))
                                                 or (bounds["last"] and asked > int(bounds["last"]["branch"]))):
                head = f"drivers {drive_span(bounds)} drive {bounds['architecture']} GPUs; {head}"  # the architecture's reason first
            return branch, (named or [nearest])[-1], head
    bounds = tables.driver_branches(cc, gpu)
    asked, first, last = driver_branch(driver), bounds["first"], bounds["last"]
    bound = last if last and asked is not None and asked > int(last["branch"]) else first
    branch = int(bound["branch"])
    newest = (branch_releases(branch) or [None])[-1]
    return branch, newest, f"drivers {drive_span(bounds)} drive {bound['gpu'] or bounds['architecture'] + ' GPUs'}"


def drive_span(bounds: dict) -> str:
    """'R367 to R580', 'up to R470', 'R570 and newer': the branches that drive a GPU, from tables.driver_branches."""
    first, last = bounds["first"], bounds["last"]
    return (f"R{first['branch']} to R{last['branch']}" if first and last else f"up to R{last['branch']}" if last
            else f"R{first['branch']} and newer")


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

_STAGE_ORDER = {"resolve": 0, "install": 1, "import": 2, "device": 3, "compute": 4}


def disagreeing(reasons: list[Reason]) -> list[Reason]:
    """Where public reports contradict each other on the same check (one rule, a pass from one source and a
    fail from another), the check is uncertain, naming both: never a confident verdict picked from one."""
    out: list[Reason] = []
    for reason in reasons:
        rivals = [r for r in reasons if r.rule == reason.rule and r.source != reason.source and {r.verdict, reason.verdict} == {PASS, FAIL}]
        if not rivals:
            out.append(reason)
        elif reason.verdict == PASS:  # once per pair, at the passing side
            other = rivals[0]
            out.append(Reason(reason.rule, UNCERTAIN, f"sources disagree: {reason.text} ({reason.source}), but {other.text} ({other.source})",
                              f"{reason.source} ; {other.source}"))
    return out


def combine(reasons: list[Reason], resolved: dict) -> Prediction:
    """The verdict of a stack's reasons: its first failure heads it, and a cause no pip install can fix (the driver does
    not drive the GPU, or is too old for the build's CUDA) comes before one the user can (a missing wheel for a Python),
    the ladder's stage order deciding within each; without a failure, uncertain where any reason is, else a pass."""
    reasons = disagreeing(reasons)
    failures = sorted((r for r in reasons if r.verdict == FAIL),
                      key=lambda r: (not (r.rule == DRIVES or r.code == "DRIVER_TOO_OLD"), _STAGE_ORDER.get(r.stage or "", 9)))
    warnings = [r.warning for r in reasons if r.warning]
    if failures:
        return Prediction(FAIL, failures[0].code, failures[0].stage, warnings, reasons, resolved, failures[0].confidence)
    if not reasons or any(r.verdict == UNCERTAIN for r in reasons):
        return Prediction(UNCERTAIN, None, None, warnings, reasons, resolved, "low" if any(r.confidence == "low" for r in reasons) else "high")
    return Prediction(PASS, None, None, warnings, reasons, resolved, "medium" if any(r.confidence == "medium" for r in reasons) else "high")


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


def _jax_ptxas_rule(release: str, variant: str, cc: str | None, sass: list[str] | None) -> Reason | None:
    """XLA compiles JAX's kernels as it runs, with the ptxas of the nvidia-cuda-nvcc wheel the plugin requires: that
    ptxas must know the GPU's architecture, whatever the driver could JIT (arch-specific sm_XYa PTX never carries over).
    None where it has nothing to add (the plugin's SASS covers the GPU and even the lowest ptxas allowed knows it)."""
    pin = _compiler_pin("jax", variant, release)
    found = pin and re.fullmatch(r"\s*([A-Za-z0-9_.-]+?)\s*>=\s*([0-9.]+)\s*", pin["requirement"])
    if cc is None or not found:
        return None
    package, floor = found.groups()
    lowest, given = _compiler_targets("ptxas", floor, package), _compiler_targets("ptxas", pin["resolves_to"], package)
    if lowest is None or given is None:
        return None
    major, minor = (int(p) for p in cc.split("."))
    oldest = min((p[1], p[2]) for p in (_arch(s) for s in given["sm"].split(";")) if p)
    if (major, minor) < oldest:  # older than every target: the build's own minimum says so first
        return None
    covered = any(p and sass_runs(p, major, minor) for p in (_arch(s) for s in sass or []))
    name, sm = "run-time compiler (ptxas)", f"sm_{major}{minor}"
    said = f"XLA compiles jax's kernels for {sm} as it runs, with the ptxas of {package} (jax-{variant}-plugin {release} requires {pin['requirement']})"
    source = f"{pin['source']} ; {given['source']}" + (f" ; {lowest['source']}" if lowest is not given else "")
    if _knows(lowest, major, minor):
        return None if covered else Reason(name, PASS, f"{said}: ptxas {floor} and later know {sm}", source)
    if _knows(given, major, minor):
        return Reason(name, PASS, f"{said}: pip installs {pin['resolves_to']}, whose ptxas knows {sm}; ptxas {floor}, the oldest "
                      f"it allows, does not", source, warning=f"an environment that keeps {package} older than the first "
                      f"release that knows {sm} fails to compile (ptxas {floor} does not know it)")
    newest = max((p for p in (_arch(s) for s in given["sm"].split(";")) if p), key=lambda p: (p[1], p[2]))
    return Reason(name, FAIL, f"{said}: pip installs {pin['resolves_to']}, and ptxas {pin['resolves_to']} does not know {sm} "
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
            "cupy": f"cupy-{variant}"}.get(framework)


def wheel_pythons(framework: str, release: str, variant: str) -> list[str]:
    """The Pythons PyPI has Linux x86_64 wheels of this release for, as the tables list them ('3.11'; free-threaded
    builds such as '3.14t' left out); none where the tables do not know."""
    package = wheel_package(framework, variant)
    row, _newest = tables.python_wheels(package, release) if package else (None, None)
    return [p for p in (row["pythons"].split(";") if row and row["pythons"] else []) if p[-1:].isdigit()]


def predict_stack(framework: str, release: str, variant: str, cc: str | None, driver: str | None, python: str | None = None,
            cuda_runtime: str | None = None, arch: tuple | None = None, gpu: str | None = None) -> Prediction:
    """Expected outcome of one stack on one GPU class. `cuda_runtime` (from resolution or the
    probe) and `arch` (sass, ptx, source: from inspecting the installed build) override the tables;
    `gpu` (the name as reported) lets a product whose driver branches differ from its architecture's be judged."""
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
    drives = driver_drives_rule(cc, gpu, driver)
    if drives is not None:  # a GPU the driver does not drive is not there, whatever else fails: that comes first
        reasons.insert(0 if drives.verdict != PASS else len(reasons), drives)
    plain = version(release.split("+")[0])
    if framework != "torch" and plain is not None and plain.is_prerelease:  # torch says so itself, with its CUDA
        reasons.append(Reason("release", UNCERTAIN, f"{framework} {release} is a pre-release or nightly; the tables describe releases", ""))
    reasons += defect_rules(framework, release, variant, cc)
    stuck = installs.unresolvable(framework, release, variant, python)
    if stuck:  # a PASS only for what installs: uv's own answer for this build's install line
        nearest = f"; {stuck['nearest']} resolves" if stuck["nearest"] else ""
        for_python = f" for Python {python}" if python and stuck["resolves"] == "some" else ""
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
