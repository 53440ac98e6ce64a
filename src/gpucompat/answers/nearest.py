"""The nearest yes: after a no (or an uncertain), what would work on the same GPU and driver.

In this order, the smallest change first: the same release in another build (torch==2.4.1+cu118 for
torch==2.4.1); the nearest release down and the nearest up that run, each in whichever of its builds
runs (torch==2.7.0+cu128 for torch==2.6.0 on a Blackwell GPU); the framework's newest release that
runs (advise's own search, limited to one); where only the Python is in the way, the Pythons the
release has wheels for; and the oldest driver that would make the asked stack run. Each stack comes
with the commands that install it, from advise's `install_commands`; a driver is an administrator's
change and a Python another interpreter, so they come with none. A build that needs the system's
CUDA libraries (answers/conditions.py) is marked conditional wherever it is offered.
"""

from __future__ import annotations

from ..errors import UserError
from ..knowledge import tables
from ..knowledge.rules import FAIL, PASS, Prediction, driver_drives_rule, driving_branch, predict_stack, wheel_pythons
from .asked import newest_python
from .conditions import CONDITIONAL, system_libraries
from .drivers import oldest_driver
from .questions import gpu_variants, release_of, spec_text


def other_variants(framework: str, version: str, variant: str) -> list[str]:
    """The release's other builds, newest CUDA first."""
    if framework == "torch":
        builds = [r["variant"] for r in tables.table("torch_builds") if r["release"] == tables.minor_series(version)]
        default = tables.torch_default(version)
        same = {variant, default["variant"] if default and variant == "default" else None}
        ordered = sorted(builds, key=lambda v: int(v[2:]) if v[2:].isdigit() else 0, reverse=True)
        return [v for v in ordered if v not in same] + ([] if variant == "default" or default is None or default["variant"] == variant else ["default"])
    if framework == "jax":
        return [v for v in gpu_variants("jax", version) if v != variant]
    if framework == "cupy":
        return [v for v in gpu_variants("cupy", version) if v != variant]
    if framework == "tensorflow":
        return [v for v in [*gpu_variants("tensorflow", version), "and-cuda", "plain"] if v != variant and
                (v != "and-cuda" or "and-cuda" in gpu_variants("tensorflow", version))]
    return []


def _item(kind: str, label: str, framework: str, version: str, variant: str, prediction: Prediction) -> dict:
    from .advise import install_commands  # only after a no: the install commands' imports cost a passing answer nothing

    spec = spec_text(framework, version, variant)
    needs = system_libraries(framework, version, variant) if prediction.verdict == PASS else None
    return {"kind": kind, "label": label, "spec": spec, "framework": framework, "version": version, "variant": variant,
            "verdict": CONDITIONAL if needs else prediction.verdict, "warnings": prediction.warnings,
            **({"needs": needs} if needs else {}),
            "install": install_commands(framework, version, variant, prediction.resolved.get("cuda_runtime"))}


def _builds(framework: str, version: str, variant: str) -> list[str]:
    """The builds of one release to try for a step up or down: the asked one first, then the others, newest CUDA first."""
    if framework == "cuda-runtime":
        return ["default"]
    return list(dict.fromkeys([variant, *other_variants(framework, version, variant)]))


def steps(framework: str, version: str, variant: str, cc: str | None, driver: str, python: str | None,
          gpu: str | None = None, self_contained: bool = False, kernel_module: str | None = None) -> list[dict]:
    """The nearest release below and the nearest above the asked one that run here (in whichever of their builds runs):
    the smallest change of version from what was asked; with self_contained, only builds that bring their own CUDA
    libraries (beside a conditional yes, which needs the system's)."""
    asked = tables.version(version.split("+")[0])
    if asked is None:
        return []
    from .advise import judgeable_releases

    releases = judgeable_releases(framework, variant)
    below = [v for v in reversed(releases) if v < asked]
    above = [v for v in releases if v > asked]
    found = []
    for kind, label, candidates in (("older", "nearest older", below), ("newer", "nearest newer", above)):
        for release in candidates:
            text = str(release)
            passing = next(((v, p) for v in _builds(framework, text, variant)
                            # another machine's Python (None): each step on the newest Python it has wheels for, as it is shown
                            for p in [predict_stack(framework, release_of(framework, text, v), v, cc, driver,
                                                    python or newest_python(framework, text, v), gpu=gpu, kernel_module=kernel_module)]
                            if p.verdict == PASS and not (self_contained and system_libraries(framework, text, v))), None)
            if passing is None:
                continue
            try:
                found.append(_item(kind, label, framework, text, passing[0], passing[1]))
            except UserError:  # the index has no package for it (CUDA runtimes before 11): not a step a person can take
                continue
            break
    return found


def other_python(framework: str, version: str, variant: str, cc: str | None, driver: str, python: str | None,
                 gpu: str | None = None, kernel_module: str | None = None) -> dict | None:
    """Where only the Python is in the way (the stack runs here with a Python it has wheels for): the nearest such Python."""
    if python is None:
        return None
    release = release_of(framework, version, variant)
    if predict_stack(framework, release, variant, cc, driver, None, gpu=gpu, kernel_module=kernel_module).verdict != PASS:
        return None
    pythons = wheel_pythons(framework, release, variant)
    want = tables.version(python)
    runs = [p for p in pythons if predict_stack(framework, release, variant, cc, driver, p, gpu=gpu, kernel_module=kernel_module).verdict == PASS]
    if not runs or want is None:
        return None
    nearest = min(runs, key=lambda p: (abs(tables.version(p).minor - want.minor), tables.version(p) < want))
    needs = system_libraries(framework, version, variant)
    return {"kind": "python", "label": "another Python", "python": nearest, "pythons": runs, "spec": spec_text(framework, version, variant),
            "verdict": CONDITIONAL if needs else PASS, **({"needs": needs} if needs else {}), "warnings": [], "install": None}


def nearest_yes(framework: str, version: str, variant: str, where: dict, python: str | None, self_contained: bool = False) -> list[dict]:
    """What would work on the same GPU and driver, in the order people try it (see the module's docstring); with
    self_contained (beside a conditional yes), only stacks that bring their own CUDA libraries."""
    from .advise import newest_running

    cc, driver, gpu = where["cc"], where["driver"], where.get("matched") or where.get("gpu")
    module = where.get("kernel_module")
    drives = driver_drives_rule(cc, gpu, driver, module)
    if drives is not None and drives.verdict == FAIL:  # nothing runs on a GPU its driver does not drive: name the drivers that do
        return undriven(framework, version, variant, where, python)
    found = []
    for other in other_variants(framework, version, variant):
        p = predict_stack(framework, release_of(framework, version, other), other, cc, driver, python, gpu=gpu, kernel_module=module)
        if p.verdict == PASS and not (self_contained and system_libraries(framework, version, other)):
            found.append(_item("variant", "another variant", framework, version, other, p))
            break
    if not found:  # the same release in another build is the smallest change; else the nearest release down and up
        found += steps(framework, version, variant, cc, driver, python, gpu, self_contained, module)
    best = newest_running(framework, cc, driver, python, gpu, module) if cc is not None else None
    if best is not None:
        newest = _item("newest", "newest that works", framework, *best)
        same = next((item for item in found if item["spec"] == newest["spec"]), None)
        if same is not None:  # the nearest step is also the newest: one line that says both
            same["label"] += " (also the newest)"
        else:
            found.append(newest)
    python_item = other_python(framework, version, variant, cc, driver, python, gpu, module)
    if python_item:
        found.append(python_item)
    newer = oldest_driver(framework, release_of(framework, version, variant), variant, cc, driver, python, gpu, module)
    if newer:
        found.append({**newer, "spec": spec_text(framework, version, variant)})
    return found


# -- a GPU the driver does not drive -------------------------------------------------------------

def undriven(framework: str, version: str, variant: str, where: dict, python: str | None) -> list[dict]:
    """The nearest yes where the driver does not drive the GPU: never a stack on this driver, but the branches that
    drive it and, on the nearest of them, the asked stack (where it runs there) and the newest stack that runs. Where the
    other flavour of kernel module of this very driver drives the GPU, that is the change: the same driver, the other module."""
    cc, gpu = where["cc"], where.get("matched") or where.get("gpu")
    module = where.get("kernel_module")
    other = {"open": "proprietary", "proprietary": "open"}.get(module or "")
    drives = driver_drives_rule(cc, gpu, where["driver"], other) if other else None
    if drives is not None and drives.verdict == PASS:
        asked = predict_stack(framework, release_of(framework, version, variant), variant, cc, where["driver"], python, gpu=gpu,
                              kernel_module=other)
        runs = f"; with it {spec_text(framework, version, variant)} {'runs' if asked.verdict == PASS else 'is ' + asked.verdict}"
        return [{"kind": "branch", "label": "the other kernel module", "driver": where["driver"], "branch": None, "spec": None,
                 "warnings": [], "install": None,
                 "text": f"driver {where['driver']} with its {other} kernel modules drives {gpu or 'this GPU'} (the {module} ones do not){runs}"}]
    branch, on, head = driving_branch(cc, gpu, where["driver"])
    label = "another driver"
    if on is None:
        return [{"kind": "branch", "label": label, "text": f"{head}; the knowledge names no R{branch} release to judge stacks on",
                 "driver": None, "branch": branch, "spec": None, "warnings": [], "install": None}]
    from .advise import newest_running

    items = []
    asked = predict_stack(framework, release_of(framework, version, variant), variant, cc, on, python, gpu=gpu)
    if asked.verdict == PASS:
        item = _item("branch", label, framework, version, variant, asked)
        items.append({**item, "driver": on, "branch": branch, "text": f"{head}; on R{branch} ({on}) {item['spec']} runs"})
    newest = newest_running(framework, cc, on, python, gpu)
    if newest is not None and not (newest[0] == version and newest[1] == variant):
        item = _item("branch", label, framework, newest[0], newest[1], newest[2])
        items.append({**item, "driver": on, "branch": branch,
                      "text": f"{head}; on R{branch} ({on}) the newest {framework} that runs is {item['spec']}"})
    return items or [{"kind": "branch", "label": label, "driver": on, "branch": branch, "spec": None, "warnings": [], "install": None,
                      "text": f"{head}; on R{branch} ({on}) no {framework} release the knowledge holds is predicted to run"}]
