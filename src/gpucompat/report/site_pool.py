"""This site's GPU classes, for `report --site` (issue 39 section 3): which classes the site publishes, which stored rows
are observations of them, and each class's install lines.

The classes are, first found: `--pool PLAN|EXECUTOR` (answers.asked.pool_targets, as `explain --pool` and `advise --pool`
read one); else the plan every sweep run here shares (the same plan text), where it declares its [[targets]]; else the
GPU classes the sweeps run here were run on. A row imported from another site never makes a class of its own: it is an
observation of one of these classes where it matches it, else it is listed as observed elsewhere.

A row matches a class (`class_of`) where it is the same GPU, by the name the driver reports; a class a plan declares
under a label that is no GPU name the knowledge knows (a Slurm type such as "a100") takes, besides, the rows of that
compute capability whose GPU is no class of the site. A row imported from another site must also be of the class's driver
branch (its major version: 580.65.06 and 580.159.04 are one branch; the class's driver is the plan's, else the newest a
probe read here), since a branch decides what a stack may run; a class whose driver is not known takes any. A row run
here is of its class on whatever driver it ran.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from functools import cached_property

from ..errors import UserError
from ..model import Target


@dataclass(frozen=True)
class SitePool:
    """This site's GPU classes, the executor whose scheduler requests select them, and where they were read."""

    targets: tuple[Target, ...]
    executor: str
    origin: str

    @cached_property
    def by_name(self) -> dict[str, list[Target]]:
        found: dict[str, list[Target]] = {}
        for target in self.targets:
            found.setdefault(target.name, []).append(target)
        return found

    @cached_property
    def labels(self) -> tuple[Target, ...]:
        """The declared classes named by a label the knowledge does not know as a GPU: matched by compute capability too."""
        from ..knowledge import tables

        return tuple(t for t in self.targets if t.declared and t.cc and tables.gpu(t.name) is None)


def site_pool(pool: str | None, local_sweeps: list[dict], local_rows: list[dict]) -> SitePool:
    """The classes the site publishes. local_sweeps: Store.sweep() of each sweep run here (its plan_text); local_rows: the
    cells of those sweeps, each its gpu, cc, driver, driver_seen (the driver its probe read) and created_at."""
    if pool is not None:
        from ..answers.asked import pool_targets

        executor, targets, origin = pool_targets(pool)[:3]
        return SitePool(tuple(_completed(t, local_rows) for t in targets), executor, origin)
    texts = {s.get("plan_text") or "" for s in local_sweeps}
    executor = "local"
    if len(texts) == 1 and "" not in texts:
        from ..plan import parse_plan

        text = texts.pop()
        try:
            spec = parse_plan(text, "the plan")
        except UserError:
            spec = None
        if spec is not None:
            executor = spec.executor
            digest = hashlib.sha256(text.encode()).hexdigest()[:12]
            name = next(iter({s.get("name") for s in local_sweeps}))
            if isinstance(spec.targets, tuple):
                return SitePool(tuple(_completed(t, local_rows) for t in spec.targets), executor,
                                f"the [[targets]] of the plan {name!r} (sha256 {digest}), which every sweep run here shares")
    seen: dict[tuple, Target] = {}
    for row in sorted(local_rows, key=lambda r: r.get("created_at") or 0):  # the newest driver a probe read on each class
        if row["cc"]:
            seen[(row["gpu"], row["cc"])] = Target(row["gpu"], row["cc"], row.get("driver_seen") or row["driver"] or None, count=1)
    return SitePool(tuple(seen.values()), executor, "the GPU classes the sweeps run here ran on")


def _completed(target: Target, local_rows: list[dict]) -> Target:
    """A declared class with what the store knows of it: its compute capability (else the knowledge's, by its name) and,
    where the plan gives none, the newest driver a probe read on it."""
    mine = [r for r in local_rows if r["gpu"] == target.name]
    cc = target.cc or next((r["cc"] for r in mine if r["cc"]), None)
    if cc is None:
        from ..knowledge import tables

        cc = (tables.gpu(target.name) or {}).get("cc")
    seen = [r.get("driver_seen") for r in sorted(mine, key=lambda r: r.get("created_at") or 0) if r.get("driver_seen")]
    return replace(target, cc=cc, driver=target.driver or (seen[-1] if seen else None))


def _branch(driver: str | None) -> str:
    return (driver or "").split(".")[0]


def class_of(row: dict, pool: SitePool) -> Target | None:
    """The class of the site a stored row observes, or None (the module's docstring says the rule)."""
    named = pool.by_name.get(row["gpu"])
    if named is not None:
        candidates = [t for t in named if not t.cc or not row["cc"] or row["cc"] == t.cc]
    else:
        candidates = [t for t in pool.labels if row["cc"] == t.cc]
    if (row.get("source") or "local") == "local":
        return candidates[0] if candidates else None
    driver = row.get("driver_seen") or row.get("driver")
    return next((t for t in candidates if not t.driver or not driver or _branch(driver) == _branch(t.driver)), None)


def install_lines(pool: SitePool, classes: list[tuple], frameworks: list[str], observed_rows: list[dict]) -> dict[tuple, dict]:
    """Each class's install lines, as `advise FRAMEWORK --pool` answers them (answers.advise_pool: the class's own newest
    release, observed or predicted, with its install line), and the scheduler request that selects the class.
    classes: the (name, cc) of each class shown; returns (name, cc) -> {"request", "lines": [...], "why"}."""
    from ..answers.advise_pool import advise_pool
    from ..answers.asked import NEWEST, resolve_pool

    targets = [t for t in pool.targets if (t.name, t.cc or "") in classes]
    found: dict[tuple, dict] = {c: {"request": None, "lines": [], "why": ""} for c in classes}
    if not targets:
        return found
    resolved = resolve_pool(pool.executor, targets, pool.origin, None)
    for framework in frameworks:
        try:
            answer = advise_pool(framework, resolved, NEWEST, (), observed_rows)
        except UserError as exc:  # no class of the site can be judged (no compute capability or driver known)
            for entry in found.values():
                entry["why"] = str(exc)
            continue
        for unjudged in answer["unjudged"]:
            key = (unjudged["name"], unjudged["cc"] or "")
            if key in found:
                found[key]["why"] = f"not judged: {unjudged['why']}"
        for line in answer["answers"][0]["classes"]:  # no Python asked: one answer, each release on its newest Python
            key = (line["name"], line["cc"] or "")
            if key not in found:
                continue
            found[key]["request"] = found[key]["request"] or line["request"]
            newest = line["newest"] or {}
            found[key]["lines"].append({
                "framework": framework, "how": newest.get("source") or "", "version": newest.get("version"),
                "variant": newest.get("variant"), "install": newest.get("install") or "",
                "empty": "" if newest else (line["empty"] or "no release with an install line runs here"),
                "site": newest.get("site"), "verified": newest.get("verified", True)})
    return found
