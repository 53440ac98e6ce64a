"""Whether a driver drives a GPU at all, with which flavour of its kernel module: each architecture's first and last
driver branch (gpu_driver_branches.csv); the chips each release's own code recognises (driver_chips.csv, read from
NVIDIA's open-gpu-kernel-modules at every tag); the GPUs each flavour does not drive (kernel_modules.csv: the open
modules nothing before Turing, the proprietary ones no Blackwell and no Grace Hopper). Outside them the GPU is not
there, whatever the stack. The releases whose README lists a PCI device ID as supported (driver_devices.csv) decide
only where the code tables were not read: where the code knows the chip, a README that leaves the board out is a
warning, never NO_DEVICE.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..model import KERNEL_MODULES
from . import gpus, tables
from .reasons import DRIVES, FAIL, PASS, UNCERTAIN, Reason, weighed


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


# One question asks it for every candidate stack (the nearest yes: 121 of them for torch==2.6.0 on an RTX 5090) with the
# same GPU, driver and module, and each answer reads the device tables; they do not change while a process runs, and a
# Reason is frozen: judged once per (cc, GPU, driver, module).
@lru_cache(maxsize=4096)
def driver_drives_rule(cc: str | None, gpu: str | None, driver: str | None, kernel_module: str | None = None) -> Reason | None:
    """Whether the driver drives the GPU with that flavour of kernel module ('open' or 'proprietary'). Where the flavour
    is not known it is assumed, and the reason says so: the one flavour that drives the GPU's kind at all (before
    Turing the proprietary, Blackwell and Grace Hopper the open), else the branch's default (open from R560); where
    the two flavours' verdicts differ, the answer is uncertain and names both. None where there is nothing to judge."""
    branch = driver_branch(driver)
    bounds = tables.driver_branches(cc, gpu) if branch is not None else None
    if bounds is None or bounds["l4t"] is not None or not (bounds["first"] or bounds["last"]):
        return None
    if kernel_module in KERNEL_MODULES:
        return flavour_drives(kernel_module, cc, gpu, driver)
    if branch < first_open_branch():  # one flavour only: nothing to assume
        return flavour_drives("proprietary", cc, gpu, driver)
    only = only_flavour(bounds["architecture"], gpu)
    if only is not None:
        flavour, why = only
        reason = flavour_drives(flavour, cc, gpu, driver)
        return replace(reason, text=f"{reason.text} ({flavour} kernel modules assumed: {why})")
    assumed, _source = default_kernel_module(branch)
    other = "proprietary" if assumed == "open" else "open"
    mine, theirs = flavour_drives(assumed, cc, gpu, driver), flavour_drives(other, cc, gpu, driver)
    if mine.verdict == theirs.verdict:
        return replace(mine, text=f"{mine.text} ({assumed} kernel modules assumed, R{branch}'s default; both flavours "
                                  f"{'drive' if mine.verdict == PASS else 'judge'} it alike)")
    yes, no = (mine, theirs) if mine.verdict == PASS else (theirs, mine)
    flavour_yes = assumed if yes is mine else other
    flavour_no = other if yes is mine else assumed
    return Reason(DRIVES, UNCERTAIN, f"the kernel module decides: with the {flavour_yes} kernel modules {yes.text}; with the "
                  f"{flavour_no} ones {no.text} (--kernel-module says which is loaded)", f"{yes.source} ; {no.source}",
                  warning=f"whether driver {driver} drives {gpu or 'this GPU'} depends on its kernel module: {flavour_yes} does, "
                          f"{flavour_no} does not", confidence=min(yes.confidence, no.confidence, key=("high", "medium", "low").index))


def flavour_drives(flavour: str, cc: str | None, gpu: str | None, driver: str) -> Reason:
    """One flavour's answer: a GPU that flavour never drives is NO_DEVICE; else the architecture's branches and the
    release's code tables decide, and a README that does not list the board is a warning."""
    branch = driver_branch(driver)
    bounds = tables.driver_branches(cc, gpu)
    architecture = bounds["architecture"]
    what = f"{architecture} GPUs such as {gpu}" if gpu else f"{architecture} GPUs of compute capability {cc}"
    if flavour == "open" and branch < first_open_branch():
        row = kernel_module_rows("first")[0]
        return Reason(DRIVES, FAIL, f"driver {driver} (R{branch}) has no open kernel modules (they begin with R{row['branch']})",
                      row["source"], "NO_DEVICE", "device")
    refused = refusing(flavour, architecture, gpu)
    if refused is not None:
        kind = refused["gpu"] or architecture
        return Reason(DRIVES, FAIL, f"the {flavour} kernel modules of driver {driver} (R{branch}) do not drive {what}: "
                      f"{kind} GPUs need the {'open' if flavour == 'proprietary' else 'proprietary'} kernel modules",
                      refused["source"], "NO_DEVICE", "device")
    listed = listed_drives(cc, gpu, driver)
    code = code_chips(driver)
    if code is None or (refusing("open", architecture, None) is not None):  # a release not read, or a GPU before Turing
        return listed
    row, exact = code
    chip = (gpus.lookup(gpu) or {}).get("chip") if gpu else None
    cc_of = cc or (gpus.lookup(gpu) or {}).get("cc") if gpu else cc
    knows = chip in row["chips"].split() if chip else (cc_of in row["ccs"].split(";") if cc_of else None)
    read = f"driver {row['release']}'s code (g_chips2halspec_nvoc.c)" + ("" if exact else f", the newest release of R{branch} read before {driver}")
    named = chip or f"chip of compute capability {cc_of}"
    if knows is False and listed.verdict != FAIL:
        return Reason(DRIVES, FAIL, f"driver {driver} (R{branch}) does not drive {what}: {read} recognises no {named}",
                      row["source"], "NO_DEVICE", "device", confidence="high" if exact else "medium")
    if knows and listed.verdict == FAIL and not outside_architecture(cc_of, branch):
        listed = Reason(DRIVES, PASS, f"driver {driver} (R{branch}) drives {what}: {read} recognises "
                        f"{chip or 'its chips of compute capability ' + str(cc_of)}", row["source"],
                        confidence="high" if exact else "medium",
                        warning=f"{gpu or what} is not listed as supported by NVIDIA's README for {driver} "
                                f"({listed.text.split(': ', 1)[-1]}): the code drives it, NVIDIA may not support it")
    if flavour == "open" and row["open_geforce"] and listed.verdict == PASS and not data_center(gpu):
        alpha = (f"the open kernel modules of {row['release']} drive GeForce and workstation GPUs only as alpha, with the "
                 "nvidia.ko parameter NVreg_OpenRmEnableUnsupportedGpus=1")
        listed = replace(listed, warning="; ".join(w for w in (listed.warning, alpha) if w))
    return listed


def listed_drives(cc: str | None, gpu: str | None, driver: str) -> Reason:
    """Each architecture (and the products that came after their architecture's first branch) is driven from a first
    driver branch to a last one (knowledge/data/gpu_driver_branches.csv): outside them the GPU is not there at all,
    whatever the stack. None where there is nothing to judge: no driver, an architecture the table does not know,
    or a Jetson/Tegra GPU (driven by its JetPack's L4T, not by these branches). The README lists (driver_devices.csv)
    and the product rows (read from them) decide here; flavour_drives lets the code tables overrule them."""
    branch = driver_branch(driver)
    bounds = tables.driver_branches(cc, gpu)
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
                      warning=f"no list of compatible GPUs read says whether driver {driver} names {device_text(list(listed))}: "
                              "it may not be driven")
    return Reason(DRIVES, PASS, f"driver {driver} (R{branch}) drives {what} ({drive_span(bounds)})", (first or last)["source"],
                  warning=f"driver {driver}: {late}; this rests on the architecture's branches" if late else None)


def kernel_module_rows(kind: str) -> list[dict]:
    """kernel_modules.csv's rows of one kind: 'first' (the first branch with open modules), 'default', 'not_driven'."""
    return [r for r in tables.table("kernel_modules") if r["kind"] == kind]


def first_open_branch() -> int:
    return int(kernel_module_rows("first")[0]["branch"])


def default_kernel_module(branch: int) -> tuple[str, str]:
    """The flavour a branch installs by default and its source: proprietary, open from R560."""
    rows = sorted(kernel_module_rows("default"), key=lambda r: int(r["branch"] or 0))
    row = [r for r in rows if int(r["branch"] or 0) <= branch][-1]
    return row["flavour"], row["source"]


def refusing(flavour: str, architecture: str, gpu: str | None) -> dict | None:
    """The kernel_modules.csv row by which that flavour never drives the GPU (its architecture, or its product), or None."""
    for row in kernel_module_rows("not_driven"):
        if row["flavour"] == flavour and (architecture in row["architecture"].split(";")
                                          or (gpu and row["gpu"] and gpus.words_begin(gpu, row["gpu"]))):
            return row
    return None


def only_flavour(architecture: str, gpu: str | None) -> tuple[str, str] | None:
    """(the one flavour that drives this kind of GPU, why) where the other never does; None where both may."""
    for flavour in KERNEL_MODULES:
        row = refusing(flavour, architecture, gpu)
        if row is not None:
            other = "proprietary" if flavour == "open" else "open"
            return other, f"the {flavour} ones do not drive {row['gpu'] or architecture}"
    return None


def code_chips(driver: str) -> tuple[dict, bool] | None:
    """driver_chips.csv's row for the release (exact: True), else for the newest release of its branch read before it
    (a branch's code only gains chips); None where no release of the branch up to it was read."""
    asked = tables.version(driver)
    branch = driver_branch(driver)
    if asked is None:
        return None
    same = [r for r in tables.table("driver_chips") if driver_branch(r["release"]) == branch and tables.version(r["release"]) <= asked]
    if not same:
        return None
    row = max(same, key=lambda r: tables.version(r["release"]))
    return row, row["release"] == driver


def outside_architecture(cc: str | None, branch: int) -> bool:
    """Whether the branch is outside the architecture's own branches (its architecture rows, not a product's)."""
    bounds = tables.driver_branches(cc, None) if cc else None
    if not bounds:
        return False
    first, last = bounds["first"], bounds["last"]
    return bool((first and branch < int(first["branch"])) or (last and branch > int(last["branch"])))


def data_center(gpu: str | None) -> bool:
    """A data-center GPU by its name (the open modules' early releases drove those fully, others as alpha): not GeForce,
    TITAN, Quadro or RTX workstation. An unnamed GPU is taken as not one, so the alpha warning is said rather than not."""
    words = (gpu or "").lower().split()
    return bool(words) and not {"geforce", "titan", "quadro", "rtx"} & set(words)


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
