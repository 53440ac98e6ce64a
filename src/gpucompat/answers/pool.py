"""`gpucompat explain SPEC --pool slurm|htcondor|kubernetes|PLAN.toml`: one question, every GPU class of a site.

The classes are read once with the question (asked.read_pool: each an asked.PoolClass, its compute capability,
driver and scheduler request resolved there), the way a sweep finds them: the executor's discovery
(`executors.discover`), or a plan's [[targets]]. Each distinct (GPU, driver, kernel module) is judged once: the
verdict of the rules, the cells the store has observed for that stack there (observed.Observations, the one reading
of "observed on this class"), and the nearest yes where it does not run; the classes that pass get how to ask the
scheduler for them: Slurm's --gres/--constraint, HTCondor's request_GPUs with require_gpus, a Kubernetes
nodeSelector on GPU Feature Discovery labels.
"""

from __future__ import annotations

from ..knowledge.rules import FAIL, PASS, UNCERTAIN, predict_stack
from ..model import is_verified
from . import conditions
from .asked import Pool, PoolClass, htcondor_request, newest_python
from .nearest import nearest_yes
from .observed import Observations, matching
from .questions import Question, release_of


def _summary(rows: list[dict]) -> str:
    codes: dict[str, int] = {}
    for row in rows:
        codes[row["code"]] = codes.get(row["code"], 0) + 1
    sweeps = sorted({row["sweep"] for row in rows if row.get("sweep") is not None})
    unverified = sum(1 for row in rows if not is_verified(row))  # imported from a bundle no trusted key of its site signed
    return ", ".join(f"{code} x{n}" if n > 1 else code for code, n in codes.items()) + (f" (sweep {', '.join(map(str, sweeps))})" if sweeps else "") + (
        f"; {unverified} UNVERIFIED" if unverified else "")


def observed_cells(rows: list[dict], framework: str, version: str | None, gpu: str | None, cc: str | None) -> list[dict]:
    """The `history` command's rows: every stored verdict of one stack on one GPU class (by name, or by compute
    capability), on any driver, read as Observations.on reads a class."""
    from ..knowledge import tables

    matched = (tables.gpu(gpu) or {}).get("name") if gpu else None
    return [r for r in Observations(rows).on(gpu, cc, None, also=matched)
            if r["framework"] == framework and (version is None or r["version"] == version or r["version"].split("+")[0] == version)]


def judge_class(question: Question, variant: str, c: PoolClass, python: str | None, observations: Observations,
                newest: bool = False) -> dict:
    """The verdict on one class, what the store observed of the stack there, and, where it does not run, its nearest yes:
    what every class of the same GPU, driver and kernel module shares (answer judges each such key once)."""
    prediction = predict_stack(question.framework, release_of(question.framework, question.version, variant), variant, c.cc, c.driver,
                               python, gpu=c.gpu, kernel_module=c.kernel_module)
    deciding = next((r for r in prediction.reasons if r.verdict == FAIL), None) or \
        next((r for r in prediction.reasons if r.verdict == UNCERTAIN), None)
    judged = conditions.apply({"verdict": prediction.verdict, "code": prediction.code, "stage": prediction.stage,
                               "reasons": prediction.to_dict()["reasons"]}, question.framework, question.version, variant)
    needs = judged.get("needs")
    seen = matching(observations, question.framework, release_of(question.framework, question.version, variant), variant, python,
                    c.name, c.cc, c.driver, build_named=question.variant is not None, also=c.matched)
    runs = judged["verdict"] in (PASS, conditions.CONDITIONAL)
    return {"verdict": judged["verdict"], "code": judged["code"], "stage": judged["stage"], "warnings": prediction.warnings,
            "reason": f"it needs {needs['text']}" if needs else deciding.text if deciding else "; ".join(prediction.warnings) or "every rule passes",
            "source": needs["source"] if needs else deciding.source if deciding else "", "observed": seen,
            "observed_summary": _summary(seen) if seen else "", **({"needs": needs} if needs else {}),
            "runs": runs, "passes": prediction.verdict == PASS and not needs,
            "nearest": _class_nearest(question, variant, c, python, newest) if not runs else []}


def answer(question: Question, variant: str, pool: Pool, python: str | None, observations: Observations, newest: bool = False) -> dict:
    """One row per class, then the scheduler requests for the classes that pass; each distinct (GPU, driver, kernel
    module) judged once. `newest`: the Python is the release's newest with wheels (no --python), so each nearest yes is
    judged on its own newest, as `explain`'s is."""
    memo: dict[tuple, dict] = {}
    classes, passing, runnable = [], 0, []
    for c in pool.classes:
        if c.key not in memo:
            memo[c.key] = judge_class(question, variant, c, python, observations, newest)
        judged = dict(memo[c.key])
        runs, passes = judged.pop("runs"), judged.pop("passes")
        t = c.target
        classes.append({"name": c.name, "cc": c.cc, "driver": c.driver, "driver_from": c.driver_from, "count": t.count,
                        "gres": t.gres, "features": list(t.features), "selector": list(t.selector), "nodes": list(t.nodes),
                        **judged, "request": c.request if runs and pool.executor != "htcondor" else None})
        passing += passes
        if runs:
            runnable.append(t)
    request = htcondor_request(runnable) if pool.executor == "htcondor" and runnable else None
    verdicts = {c["verdict"] for c in classes}
    return {"executor": pool.executor, "origin": pool.origin, "classes": classes, "passing": passing,
            "conditional": sum(c["verdict"] == conditions.CONDITIONAL for c in classes),
            "verdict": PASS if PASS in verdicts else conditions.CONDITIONAL if conditions.CONDITIONAL in verdicts
            else FAIL if verdicts == {FAIL} else UNCERTAIN,
            "htcondor": request}


def _class_nearest(question: Question, variant: str, c: PoolClass, python: str | None, newest: bool) -> list[dict]:
    """The nearest yes for a class the stack does not run on (answers/nearest.py); another machine's Python not known
    (`newest`), each step on the newest Python it has wheels for, and said."""
    if c.cc is None or c.driver is None:
        return []  # nothing to search with: the row says what is missing
    found = nearest_yes(question.framework, question.version, variant, c.where(), None if newest else python)
    for item in found if newest else []:
        if item.get("version") and item.get("variant") and item["kind"] != "python":
            item["python"] = newest_python(item["framework"], item["version"], item["variant"])
    return found
