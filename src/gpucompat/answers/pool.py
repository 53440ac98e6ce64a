"""`gpucompat explain SPEC --pool slurm|htcondor|kubernetes|PLAN.toml`: one question, every GPU class of a site.

The classes are read with the question (asked.pool_targets), the way a sweep finds them: the executor's
discovery (`executors.discover`), or a plan's [[targets]]. Each class gets the verdict of
the rules, the cells the store has observed for that stack there (the `history` command's query),
and, for the classes that pass, how to ask the scheduler for them: Slurm's --gres/--constraint,
HTCondor's request_GPUs with require_gpus, a Kubernetes nodeSelector on GPU Feature Discovery labels.
"""

from __future__ import annotations

import shlex

from ..errors import UserError
from ..knowledge import tables
from ..knowledge.rules import FAIL, PASS, UNCERTAIN, predict_stack
from ..model import Target
from ..plan import DRIVER_VERSION
from . import conditions
from .nearest import nearest_yes
from .questions import Question, release_of

MAX_CLASSES = 10000


def class_driver(target: Target, assumed: str | None) -> tuple[str | None, str]:
    """The driver a class is judged with, and where it came from: its own; for HTCondor, which advertises only the CUDA the
    driver supports, the oldest driver of that CUDA (a lower bound); else the --driver given for every class."""
    if target.driver:
        return target.driver, "its own"
    if target.cuda_driver and (row := tables.cuda_row(target.cuda_driver)):
        return row["toolkit_driver_min"], f"at least, for the CUDA {target.cuda_driver} it advertises"
    if assumed:
        return assumed, "assumed: --driver"
    return None, "not reported by the pool: give --driver to assume one"


def check_pool(targets: list[Target], driver: str | None) -> None:
    """One sentence for a --driver that is no driver version, or a pool past MAX_CLASSES classes."""
    if driver is not None and not DRIVER_VERSION.fullmatch(driver):
        raise UserError(f"--driver {driver[:40]!r} is not a driver version like '535.104.05'.")
    if len(targets) > MAX_CLASSES:
        raise UserError(f"the pool has {len(targets)} GPU classes; gpucompat answers for at most {MAX_CLASSES}.")


def observed_cells(rows: list[dict], framework: str, version: str | None, gpu: str | None, cc: str | None) -> list[dict]:
    """The stored verdicts of one stack on one GPU class (by name, or by compute capability): the `history` command's query;
    a cell that could not be tested, or is pending, is no fact."""
    return [r for r in rows
            if r["framework"] == framework and r["code"] not in ("PENDING", "UNTESTED")
            and (version is None or r["version"] == version or r["version"].split("+")[0] == version)
            and (r["gpu"] == gpu or (cc is not None and r["cc"] == cc))]


def scheduler_request(executor: str, target: Target) -> str | None:
    """How to ask the scheduler for one GPU of this class, written with the executor's own request code."""
    if executor == "slurm":
        from ..executors.slurm import request_args

        return shlex.join(["sbatch", *request_args(target)])  # a line to paste: --constraint=a&b is quoted
    if executor == "kubernetes":
        from ..executors.kubernetes.manifest import node_selector

        selector = node_selector(target)
        return "nodeSelector: {" + ", ".join(f"{k}: {v}" for k, v in selector.items()) + "}" if selector else None
    return None


def htcondor_request(targets: list[Target]) -> str | None:
    """One submit description's GPU request that matches any of the passing classes."""
    from ..executors.htcondor import gpu_requirement

    clauses = [c for c in (gpu_requirement(t) for t in targets) if c]
    if not clauses:
        return None
    joined = " || ".join(f"({c})" for c in dict.fromkeys(clauses)) if len(clauses) > 1 else clauses[0]
    return f"request_GPUs = 1\nrequire_gpus = {joined}"


def _summary(rows: list[dict]) -> str:
    codes: dict[str, int] = {}
    for row in rows:
        codes[row["code"]] = codes.get(row["code"], 0) + 1
    sweeps = sorted({row["sweep"] for row in rows if row.get("sweep") is not None})
    unverified = sum(1 for row in rows if not row.get("verified", True))  # imported from a bundle no trusted key of its site signed
    return ", ".join(f"{code} x{n}" if n > 1 else code for code, n in codes.items()) + (f" (sweep {', '.join(map(str, sweeps))})" if sweeps else "") + (
        f"; {unverified} UNVERIFIED" if unverified else "")


def answer(question: Question, variant: str, executor: str, targets: list[Target], origin: str, driver: str | None,
           python: str | None, observed_rows: list[dict]) -> dict:
    """One row per class, then the scheduler requests for the classes that pass."""
    check_pool(targets, driver)
    release = release_of(question.framework, question.version, variant)
    classes, passing, runnable = [], [], []
    nearest: dict[tuple, list[dict]] = {}  # one search per GPU and driver: classes often share them
    for target in targets:
        judged_driver, driver_from = class_driver(target, driver)
        cc = target.cc or ((tables.gpu(target.name) or {}).get("cc") if target.name else None)
        prediction = predict_stack(question.framework, release, variant, cc, judged_driver, python, gpu=target.name)
        deciding = next((r for r in prediction.reasons if r.verdict == FAIL), None) or \
            next((r for r in prediction.reasons if r.verdict == UNCERTAIN), None)
        judged = conditions.apply({"verdict": prediction.verdict, "code": prediction.code, "stage": prediction.stage,
                                   "reasons": prediction.to_dict()["reasons"]}, question.framework, question.version, variant)
        needs = judged.get("needs")
        seen = observed_cells(observed_rows, question.framework, question.version, target.name, cc)
        runs = judged["verdict"] in (PASS, conditions.CONDITIONAL)
        row = {"name": target.name, "cc": cc, "driver": judged_driver, "driver_from": driver_from, "count": target.count,
               "gres": target.gres, "features": list(target.features), "selector": list(target.selector), "nodes": list(target.nodes),
               "verdict": judged["verdict"], "code": judged["code"], "stage": judged["stage"], "warnings": prediction.warnings,
               "reason": f"it needs {needs['text']}" if needs else deciding.text if deciding else "; ".join(prediction.warnings) or "every rule passes",
               "source": needs["source"] if needs else deciding.source if deciding else "", "observed": seen,
               "observed_summary": _summary(seen) if seen else "",
               "request": scheduler_request(executor, target) if runs else None, **({"needs": needs} if needs else {}),
               "nearest": _class_nearest(nearest, question, variant, target, cc, judged_driver, python) if not runs else []}
        classes.append(row)
        if prediction.verdict == PASS and not needs:
            passing.append(target)
        if runs:
            runnable.append(target)
    request = htcondor_request(runnable) if executor == "htcondor" and runnable else None
    verdicts = {c["verdict"] for c in classes}
    return {"executor": executor, "origin": origin, "classes": classes, "passing": len(passing),
            "conditional": sum(c["verdict"] == conditions.CONDITIONAL for c in classes),
            "verdict": PASS if PASS in verdicts else conditions.CONDITIONAL if conditions.CONDITIONAL in verdicts
            else FAIL if verdicts == {FAIL} else UNCERTAIN,
            "htcondor": request}


def _class_nearest(memo: dict, question: Question, variant: str, target: Target, cc: str | None, driver: str | None,
                   python: str | None) -> list[dict]:
    """The nearest yes for a class the stack does not run on (answers/nearest.py), once per GPU and driver."""
    if cc is None or driver is None:
        return []  # nothing to search with: the row says what is missing
    key = (cc, target.name, driver)
    if key not in memo:
        where = {"gpu": target.name, "matched": (tables.gpu(target.name) or {}).get("name") if target.name else None, "cc": cc, "driver": driver}
        memo[key] = nearest_yes(question.framework, question.version, variant, where, python)
    return memo[key]
