"""`gpucompat advise FRAMEWORK --pool slurm|htcondor|kubernetes|PLAN.toml`: what a site publishes.

The classes are read once, as `explain --pool` reads them (asked.read_pool: each an asked.PoolClass). For each Python
the plan lists (or --python; where neither names one, each release's newest Python with wheels), the answer is the
fewest install lines such that every class gets the newest release that runs on it:

- each distinct class (GPU, driver, kernel module) gets `advise`'s own answer once, on the store's facts of that very
  class (observed.Observations): a sweep's verified pass counts as it ran, a sweep's failure there rules the release out,
  the rules judge what no sweep ran; its newest release is the newer of the newest observed and the newest predicted;
- classes whose newest is the same release share one line, in the one build that runs on the most of them (a build
  covers a class where the class runs it: observed, else predicted), so no class is ever given a release older than
  its own newest;
- where more than one line is needed, the classes not on the newest line hold the site back, each with the driver
  change that would make the newest line run there (drivers.oldest_driver), or why none would.
"""

from __future__ import annotations

from packaging.version import InvalidVersion, Version

from ..errors import UserError
from ..knowledge.rules import PASS, predict_stack
from ..model import is_verified
from .advise import cuda_order, advise_for, install_commands, release_for
from .asked import NEWEST, Asked, Pool, PoolClass, newest_python
from .conditions import CONDITIONAL, system_libraries
from .drivers import oldest_driver
from .observed import Observations, matching

NOTE = "observed: a stored sweep ran it on that GPU class; predicted: the knowledge rules expect it to work, not run"


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _order(version: str) -> Version:
    try:
        return Version(_base(version))
    except InvalidVersion:
        return Version("0")


def newest_of(advice: dict) -> dict | None:
    """A class's newest release that runs: the newer of the newest observed and the newest predicted (observed on a tie)."""
    found = [i for i in ((advice["observed"] or [None])[0], (advice["predicted"] or [None])[0]) if i and i.get("install")]
    return max(found, key=lambda i: (_order(i["version"]), i["source"] == "observed")) if found else None


class Judge:
    """One command's judging, memoised: each (release, build, class key, Python) predicted once, each class's facts looked
    up once in the one index."""

    def __init__(self, framework: str, observations: Observations):
        self.framework, self.observations, self.memo = framework, observations, {}

    def facts(self, c: PoolClass, python: str | None) -> list[dict]:
        """The verified facts of this very class (its GPU, its driver branch), of the Python judged where one is."""
        return [r for r in self.observations.on(c.name, c.cc, c.driver, c.matched)
                if r["framework"] == self.framework and is_verified(r)
                and (python is None or str(r["python"]) == python or str(r["python"]).startswith(python + "."))]

    def runs(self, version: str, variant: str, c: PoolClass, python: str | None) -> str | None:
        """'observed' or 'predicted' where the release runs on the class, else None: a sweep's own verdict first."""
        key = (version, variant, c.key, python)
        if key not in self.memo:
            release = release_for(self.framework, version, variant)
            seen = [r for r in matching(self.observations, self.framework, release, variant, python, c.name, c.cc, c.driver,
                                        also=c.matched) if r["same_python"] and is_verified(r)]
            if seen:
                self.memo[key] = "observed" if seen[0]["code"] == "PASS" else None
            else:
                p = predict_stack(self.framework, release, variant, c.cc, c.driver, python, gpu=c.gpu, kernel_module=c.kernel_module)
                self.memo[key] = "predicted" if p.verdict == PASS else None
        return self.memo[key]


def _lines(framework: str, judge: Judge, keys: dict[tuple, list[PoolClass]], newest: dict[tuple, dict | None],
           python: str | None) -> list[dict]:
    """The fewest install lines that give each class its own newest release: one per release, in the build that runs on
    the most of the classes whose newest it is (newest CUDA first on a tie), until each is covered."""
    by_version: dict[str, list[tuple]] = {}
    for key, item in newest.items():
        if item is not None:
            by_version.setdefault(_base(item["version"]), []).append(key)
    lines = []
    for version in sorted(by_version, key=_order, reverse=True):
        remaining = list(by_version[version])
        while remaining:
            builds = list(dict.fromkeys(newest[k]["variant"] for k in remaining))

            def covers(variant: str) -> list[tuple]:
                return [k for k in remaining if newest[k]["variant"] == variant or judge.runs(version, variant, keys[k][0], python)]

            chosen = max(builds, key=lambda v: (len(covers(v)), cuda_order(v)))
            covered = covers(chosen)
            remaining = [k for k in remaining if k not in covered]
            lines.append(_line(framework, judge, version, chosen, covered, keys, newest, python))
    return lines


def _line(framework: str, judge: Judge, version: str, variant: str, covered: list[tuple], keys: dict, newest: dict,
          python: str | None) -> dict:
    classes = [c for k in covered for c in keys[k]]
    observed_on = [c.label for k in covered for c in keys[k]
                   if judge.runs(version, variant, keys[k][0], python) == "observed"
                   or (newest[k]["variant"] == variant and newest[k]["source"] == "observed")]
    needs = system_libraries(framework, version, variant)
    commands = install_commands(framework, version, variant, next((newest[k].get("cuda_runtime") for k in covered
                                                                  if newest[k]["variant"] == variant), None))
    return {"version": version, "variant": variant, "classes": [c.label for c in classes], "observed_on": observed_on,
            "python": python or newest_python(framework, version, variant), "verdict": CONDITIONAL if needs else PASS,
            **({"needs": needs} if needs else {}), "install": commands["pip"], "commands": commands}


def _held_back(framework: str, lines: list[dict], keys: dict[tuple, list[PoolClass]], python: str | None) -> list[dict]:
    """The classes not on the newest line, each distinct one with the driver that would make that line run there."""
    top = lines[0]
    on_top = set(top["classes"])
    release = release_for(framework, top["version"], top["variant"])
    held = []
    for group in keys.values():
        labels = [c.label for c in group if c.label not in on_top]
        if not labels:
            continue
        c = group[0]
        newer = oldest_driver(framework, release, top["variant"], c.cc, c.driver, python or top["python"], c.gpu)
        held.append({"classes": labels, "gpu": c.gpu, "cc": c.cc, "driver": c.driver,
                     "driver_change": newer["driver"] if newer else None,
                     "clean_driver": newer.get("clean_driver") if newer else None})
    return held


def _unjudged(c: PoolClass) -> dict | None:
    if c.driver is None:
        return {"name": c.name, "cc": c.cc, "why": f"its driver is {c.driver_from}"}
    if c.cc is None:
        return {"name": c.name, "cc": None, "why": "its compute capability is not known (the pool does not say, and the knowledge "
                "holds no GPU of that name)"}
    return None


def for_python(framework: str, sites: list[PoolClass], python: str | None, python_from: str, judge: Judge) -> dict:
    """The site's lines on one Python (None: each release's newest), then each class's own advice."""
    keys: dict[tuple, list[PoolClass]] = {}
    for c in sites:
        keys.setdefault(c.key, []).append(c)
    advice, newest = {}, {}
    for key, group in keys.items():  # each distinct class judged once
        c = group[0]
        asked = Asked("advise", framework, None, c.where(), c.driver, None, python, "given" if python else NEWEST, ())
        advice[key] = advise_for(asked, judge.facts(c, python), limit=1)
        newest[key] = newest_of(advice[key])
    lines = _lines(framework, judge, keys, newest, python)
    held = _held_back(framework, lines, keys, python) if len(lines) > 1 or (lines and len(lines[0]["classes"]) < len(sites)) else []
    classes = []
    for c in sites:
        a = advice[c.key]
        classes.append({
            "name": c.name, "cc": c.cc, "driver": c.driver, "driver_from": c.driver_from, "count": c.target.count, "gres": c.target.gres,
            "newest": newest[c.key], "observed": (a["observed"] or [None])[0], "predicted": (a["predicted"] or [None])[0],
            "empty": a.get("empty") or (a["notes"][-1] if a.get("undriven") else None), "request": c.request})
    return {"python": python, "python_from": python_from, "one_install": len(lines) == 1 and not held, "lines": lines,
            "held_back": held, "driver_change_gives_one_install": bool(held) and all(h["driver_change"] for h in held),
            "classes": classes}


def advise_pool(framework: str, pool: Pool, python_from: str, notes: tuple[str, ...], observed_rows: list[dict]) -> dict:
    """The site's answer on each of its Pythons: its install lines, the classes that hold it back and the driver changes
    that would give one install for all, then each class's own advice."""
    sites = [c for c in pool.classes if _unjudged(c) is None]
    unjudged = [u for u in map(_unjudged, pool.classes) if u is not None]
    if not sites:
        raise UserError(f"no GPU class of {pool.origin} can be judged: " + "; ".join(f"{u['name'] or '?'}: {u['why']}" for u in unjudged[:3]) + ".")
    judge = Judge(framework, Observations(observed_rows))
    pythons = sites[0].pythons or (None,)
    answers = [for_python(framework, sites, p, python_from if p is None or python_from == "given" else "the plan", judge) for p in pythons]
    return {"framework": framework, "executor": pool.executor, "origin": pool.origin, "notes": list(notes), "python_from": python_from,
            "pythons": [p for p in pythons if p], "answers": answers, "unjudged": unjudged, "note": NOTE}
