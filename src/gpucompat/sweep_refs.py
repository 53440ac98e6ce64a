"""Which stored sweep a command reads: an id, `PLAN@latest`, `PLAN@latest~N`, `latest`, `latest~N`, or `--plan PLAN`.

A sweep's plan is the name its plan file gave it (the file's `name` key; "sweep" where it has none), which
`gpucompat results --list` shows. PLAN is that name, or a plan file (a path ending in .toml), whose `name` key
is read: `examples/plans/site.toml@latest` and `site@latest` are one sweep. `latest~N` is the Nth sweep of
that plan before its newest. A bare `latest` or `latest~N` is a sweep of one plan too: --plan's, else (in
`diff`) the plan the other reference names, else the plan of the newest sweep: so that `diff latest~1 latest`
never compares two plans' sweeps when a second plan is run into the same store. latest counts sweeps
(kind "sweep") run here, or of --source where one is given; a check is addressed by its id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import UserError

REFERENCE = re.compile(r"(?:(?P<plan>.+)@)?latest(?:~(?P<back>[0-9]{1,6}))?", re.ASCII | re.DOTALL)
SWEEP_ID = re.compile(r"[0-9]{1,18}", re.ASCII)
FORMS = "a sweep id, latest, latest~N, PLAN@latest or PLAN@latest~N"


@dataclass(frozen=True)
class SweepRef:
    """A reference as typed: an id, or the Nth sweep before the newest of a plan (None: the plan is implied)."""
    text: str
    sweep_id: int | None = None
    plan: str | None = None
    back: int = 0


def parse(ref: str) -> SweepRef:
    text = ref.strip()
    if SWEEP_ID.fullmatch(text):
        return SweepRef(text, sweep_id=int(text))
    found = REFERENCE.fullmatch(text)
    if found is None or (found["plan"] is not None and not found["plan"].strip()):
        raise UserError(f"{ref[:60]!r} is not a sweep: give {FORMS} (PLAN as `gpucompat results --list` names it).")
    return SweepRef(text, plan=found["plan"].strip() if found["plan"] else None, back=int(found["back"] or 0))


def plan_name(plan: str) -> str:
    """PLAN as given: a plan's name, or a plan file (ending in .toml), whose name is read from it."""
    plan = plan.strip()
    if not plan:
        raise UserError("--plan needs a plan's name (as `gpucompat results --list` shows it) or a plan file.")
    if not plan.lower().endswith(".toml"):
        return plan
    from .paths import read_user_text
    from .plan import MAX_PLAN_BYTES, check_path, parse_plan

    path = check_path(plan, "the plan file")
    if not path.is_file():
        raise UserError(f"there is no plan file {plan[:200]!r}; give a plan file that exists, or the plan's name as "
                        "`gpucompat results --list` shows it.")
    return parse_plan(read_user_text(path, "plan file", MAX_PLAN_BYTES, "a plan is a short TOML file."), str(path)).name


def _sweeps(store, source: str | None) -> list[dict]:
    """The sweeps latest counts, oldest first: kind "sweep", run here (or of the source given)."""
    listed = store.list_sweeps(source)
    return [s for s in listed if s["kind"] == "sweep" and (source is not None or s["source"] == "local")]


def _where(source: str | None) -> str:
    return "run here" if source in (None, "local") else ("imported" if source == "imported" else f"from {source!r}")


def _implied_plan(store, sweeps: list[dict], source: str | None) -> str:
    if not sweeps:
        raise UserError(f"no sweep {_where(source)} is stored in {store.shown}; run `gpucompat sweep PLAN` first "
                        "(a check is addressed by its id: `gpucompat results --list` shows them).")
    return sweeps[-1]["name"]


def _of_plan(store, sweeps: list[dict], plan: str, source: str | None) -> list[int]:
    """The plan's sweeps, newest first; refused if it has none."""
    ids = [s["id"] for s in reversed(sweeps) if s["name"] == plan]
    if not ids:
        raise UserError(f"no sweep of plan {plan[:100]!r} {_where(source)} is stored in {store.shown}; "
                        "`gpucompat results --list` shows each sweep's plan.")
    return ids


def _pick(store, ref: SweepRef, plan: str, sweeps: list[dict], source: str | None) -> int:
    ids = _of_plan(store, sweeps, plan, source)
    if ref.back >= len(ids):
        count = f"{len(ids)} sweep" + ("s" if len(ids) != 1 else "")
        raise UserError(f"plan {plan[:100]!r} has {count} {_where(source)} in {store.shown}, so latest~{ref.back} does not exist "
                        f"(latest~{len(ids) - 1} is its oldest).")
    return ids[ref.back]


def _checked_id(store, ref: SweepRef, plan: str | None, source: str | None) -> int:
    sweep = store.sweep(ref.sweep_id)  # a clear error if there is no such sweep
    if plan is not None and sweep["name"] != plan:
        raise UserError(f"sweep {ref.sweep_id} is of plan {sweep['name'][:100]!r}, not {plan[:100]!r}; leave out --plan, or give "
                        f"{plan[:100]}@latest~N.")
    if source is not None and ref.sweep_id not in {s["id"] for s in store.list_sweeps(source)}:
        raise UserError(f"sweep {ref.sweep_id} is not from the source {source!r}; `gpucompat results --list` shows each sweep's source.")
    return ref.sweep_id


def resolve(store, ref: str, plan: str | None = None, source: str | None = None) -> int:
    """One reference -> its sweep id. plan: --plan (a name or a plan file), what a bare latest means."""
    return resolve_all(store, [ref], plan, source)[0]


def resolve_all(store, refs: list[str], plan: str | None = None, source: str | None = None) -> list[int]:
    """Several references of one command (diff's two) -> their sweep ids. A bare latest or latest~N means --plan's plan,
    else the one plan the others name, else the plan of the newest sweep."""
    parsed = [parse(ref) for ref in refs]
    names = {p.plan: plan_name(p.plan) for p in parsed if p.plan is not None}  # a plan file is read once
    wanted = plan_name(plan) if plan is not None else None
    sweeps = _sweeps(store, source) if any(p.sweep_id is None for p in parsed) else []
    implied = wanted
    if implied is None and any(p.sweep_id is None and p.plan is None for p in parsed):
        named = sorted(set(names.values()))
        if len(named) > 1:
            raise UserError(f"{named[0]!r} and {named[1]!r} are two plans, so a bare latest means neither; give it as PLAN@latest, or --plan.")
        implied = named[0] if named else _implied_plan(store, sweeps, source)
    return [_checked_id(store, p, wanted, source) if p.sweep_id is not None
            else _pick(store, p, names[p.plan] if p.plan is not None else implied, sweeps, source) for p in parsed]


def chosen(store, ref: str | None, plan: str | None, source: str | None) -> int:
    """The sweep `results` and `report` show: --sweep's, else the newest of --plan, else the newest sweep (of --source, if
    given; the newest check where no sweep is stored, so `results` shows a check just run)."""
    if ref is None and plan is None:
        return store.latest_sweep_id(source)
    return resolve(store, ref if ref is not None else "latest", plan, source)


def sweeps_of_plan(store, plan: str, source: str | None = None) -> list[dict]:
    """`results --list --plan`: every stored sweep (checks too, of any kind) whose plan is PLAN."""
    name = plan_name(plan)
    return [s for s in store.list_sweeps(source) if s["name"] == name]
