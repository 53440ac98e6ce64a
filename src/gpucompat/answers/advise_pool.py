"""`gpucompat advise FRAMEWORK --pool slurm|htcondor|kubernetes|PLAN.toml`: what a site should install.

The classes are read as `explain --pool` reads them (asked.pool_targets: the executor's discovery, or a plan's
[[targets]]). Two answers, observed first and predicted second as `advise` gives them:

- for the whole site, the newest release that runs on every class: a sweep's pass on a class counts as it
  ran, a sweep's failure there rules the release out, and the rules judge the classes no sweep ran it on;
  where none runs everywhere, the one that runs on the most classes, naming those it leaves out;
- per class, `advise`'s own answer (the newest observed, the newest predicted) with its install line and the
  scheduler request that selects the class; a class nothing runs on gets `advise`'s sentence saying why and
  what would change that (a driver branch, another Python).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UserError
from ..knowledge.rules import PASS, predict_stack
from ..model import Target, is_verified
from .advise import advise_for, candidates, install_commands, release_for, series_releases
from .asked import NEWEST, Asked, newest_python
from .conditions import CONDITIONAL, system_libraries
from .pool import check_pool, class_driver, htcondor_request, scheduler_request
from .target import target as read_target


@dataclass(frozen=True)
class Site:
    """One GPU class as the advice judges it: the class, the GPU and driver as a question reads them, and where its
    driver came from."""

    target: Target
    where: dict
    driver_from: str

    @property
    def label(self) -> str:
        return self.target.name or f"CC {self.where['cc']}"


def classes_of(targets: list[Target], driver: str | None) -> tuple[list[Site], list[dict]]:
    """(the classes that can be judged, one row per class that cannot: no compute capability or no driver known)."""
    check_pool(targets, driver)
    judged, unjudged = [], []
    for t in targets:
        class_drv, driver_from = class_driver(t, driver)
        if class_drv is None:
            unjudged.append({"name": t.name, "cc": t.cc, "why": f"its driver is {driver_from}"})
            continue
        where = read_target(t.name, None, class_drv, typed=False) if t.name else read_target(None, t.cc, class_drv)
        if t.cc and where["cc"] != t.cc:  # the pool's own compute capability outranks a name lookup
            where.update(cc=t.cc, cc_source="the pool", cc_confidence="high")
        if where["cc"] is None:
            unjudged.append({"name": t.name, "cc": None, "why": "its compute capability is not known (the pool does not say, and the "
                             "knowledge holds no GPU of that name)"})
            continue
        judged.append(Site(t, where, driver_from))
    return judged, unjudged


def _seen(observed_rows: list[dict], framework: str, version: str, variant: str, site: Site, python: str | None) -> str | None:
    """'PASS' or 'FAIL' where a stored sweep ran this release on this very class: its GPU and driver, and the Python
    asked where one was (its newest cell decides). A cell that could not be tested, a prediction stored beside a sweep
    and a row imported unverified are no facts: they never decide for a class."""
    cells = [r for r in observed_rows if r["framework"] == framework and r["variant"] == variant
             and r["gpu"] == site.target.name and r.get("driver") == site.where["driver"] and (python is None or r["python"] == python)
             and r["code"] not in ("PENDING", "UNTESTED") and r.get("observed") is not False and is_verified(r)
             and r["version"].split("+")[0] == version]
    if not cells:
        return None
    newest = max(cells, key=lambda r: (r.get("sweep") or 0, r.get("cell") or 0))
    return "PASS" if newest["code"] == "PASS" else "FAIL"


def runs_on(framework: str, version: str, variant: str, site: Site, python: str | None, observed_rows: list[dict],
            memo: dict) -> str | None:
    """'observed' or 'predicted' where the release runs on the class, else None: a sweep's own verdict there first,
    the rules for a class no sweep ran it on."""
    seen = _seen(observed_rows, framework, version, variant, site, python)
    if seen is not None:
        return "observed" if seen == "PASS" else None
    key = (version, variant, site.where["cc"], site.where.get("matched") or site.target.name, site.where["driver"])
    if key not in memo:
        memo[key] = predict_stack(framework, release_for(framework, version, variant), variant, site.where["cc"], site.where["driver"],
                                  python, gpu=site.where.get("matched") or site.target.name).verdict == PASS
    return "predicted" if memo[key] else None


def site_wide(framework: str, sites: list[Site], python: str | None, observed_rows: list[dict]) -> dict | None:
    """The newest release that runs on every class (a self-contained build before one that needs the system's CUDA
    libraries); where none does, the newest of those that run on the most classes, with the classes it leaves out."""
    memo: dict = {}
    best, conditional = None, None
    for series, variant in candidates(framework):
        for version in series_releases(framework, series, variant):  # newest first: an older patch may run where it does not
            how = {s.label: runs_on(framework, version, variant, s, python, observed_rows, memo) for s in sites}
            covered = [label for label, h in how.items() if h]
            found = {"version": version, "variant": variant, "runs_on": covered, "left_out": [label for label, h in how.items() if not h],
                     "observed_on": [label for label, h in how.items() if h == "observed"], "everywhere": len(covered) == len(sites)}
            if found["everywhere"]:
                needs = system_libraries(framework, version, variant)
                if needs is None:
                    return found
                conditional = conditional or {**found, "needs": needs}
                break
            if covered and (best is None or len(covered) > len(best["runs_on"])):
                best = found
    return conditional or best


def advise_pool(framework: str, executor: str, targets: list[Target], origin: str, driver: str | None, python: str | None,
                python_from: str, notes: tuple[str, ...], observed_rows: list[dict]) -> dict:
    """The site's answer, then each class's, each with its install line and its scheduler request."""
    sites, unjudged = classes_of(targets, driver)
    if not sites:
        raise UserError(f"no GPU class of {origin} can be judged: " + "; ".join(f"{u['name'] or '?'}: {u['why']}" for u in unjudged[:3]) + ".")
    chosen = site_wide(framework, sites, python if python_from != NEWEST else None, observed_rows)
    if chosen is not None:
        if python_from == NEWEST:  # another machine's Python is not known: the newest the release has wheels for
            chosen["python"] = newest_python(framework, chosen["version"], chosen["variant"])
        chosen["commands"] = install_commands(framework, chosen["version"], chosen["variant"])
        chosen["install"] = chosen["commands"]["pip"]
        chosen["verdict"] = CONDITIONAL if chosen.get("needs") else PASS
    classes = []
    for site in sites:
        asked = Asked("advise", framework, None, site.where, site.where["driver"], None, python, python_from, ())
        advice = advise_for(asked, observed_rows, limit=1)
        classes.append({
            "name": site.target.name, "cc": site.where["cc"], "driver": site.where["driver"], "driver_from": site.driver_from,
            "count": site.target.count, "gres": site.target.gres,
            "observed": (advice["observed"] or [None])[0], "predicted": (advice["predicted"] or [None])[0],
            "empty": advice.get("empty") or (advice["notes"][-1] if advice.get("undriven") else None),
            "request": scheduler_request(executor, site.target) or (htcondor_request([site.target]) if executor == "htcondor" else None),
        })
    return {"framework": framework, "executor": executor, "origin": origin, "notes": list(notes),
            "python": python, "python_from": python_from, "site": chosen, "classes": classes, "unjudged": unjudged,
            "note": "observed: a stored sweep ran it on that GPU class; predicted: the knowledge rules expect it to work, not run"}
