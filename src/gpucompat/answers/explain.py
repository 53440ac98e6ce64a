"""`gpucompat explain`: a question about one stack and a GPU -> the prediction, offline, in one object,
with how the question was read and, after a no or an uncertain, the nearest yes."""

from __future__ import annotations

import re

from ..errors import UserError
from ..knowledge.rules import FAIL, PASS, predict_stack
from ..plan import PYTHON_VERSION
from .nearest import nearest_yes, release_of
from .observed import decide, matching
from .questions import Question, assumed_note, gpu_variants, read
from .target import target, where

__all__ = ["explain", "judge", "check_python", "target"]


# A question may name any Python a release was built for, from 3.6 on (the wheel tables cover torch 1.x);
# only a test needs the probe, which runs on 3.8 and newer.
QUESTION_PYTHON = re.compile(r"3\.([6-9]|1[0-5])", re.ASCII)


def check_python(python: str | None) -> list[str]:
    """Notes for a Python the probe cannot test (3.6, 3.7); one sentence for what is not a Python version."""
    if python is not None and not QUESTION_PYTHON.fullmatch(python):
        raise UserError(f"--python {python[:20]!r} is not a Python version from 3.6 to 3.15, like '3.11'.")
    if python is not None and not PYTHON_VERSION.fullmatch(python):
        return [f"Python {python}: answered from the knowledge's wheel tables; gpucompat's probe needs Python 3.8 or newer, "
                "so a sweep or check cannot test this Python"]
    return []


def judge(question: Question, cc: str | None, driver: str | None, python: str | None) -> tuple[str, list[str], object]:
    """(the variant judged, notes, the prediction): a question without a build means the first GPU build that passes here,
    else the first the release has."""
    if question.variant is not None:
        return question.variant, [], predict_stack(question.framework, question.release, question.variant, cc, driver, python)
    choices = gpu_variants(question.framework, question.version)
    judged = [(v, predict_stack(question.framework, release_of(question.framework, question.version, v), v, cc, driver, python)) for v in choices]
    variant, prediction = next(((v, p) for v, p in judged if p.verdict == PASS), judged[0])
    return variant, [assumed_note(question, variant)], prediction


def explain(spec, gpu: str | None = None, cc: str | None = None, driver: str | None = None, python: str | None = None,
            nearest: bool = True, observed_rows: list[dict] | None = None) -> dict:
    """`spec`: the question as typed, one string ('torch==2.4', 'torch 2.4') or its words. What is not given of the GPU and
    driver is this machine's. After a fail or an uncertain, `nearest` holds what would pass on the same GPU and driver."""
    question = read(spec)
    python_notes = check_python(python)
    found, target_notes = where(gpu, cc, driver)
    variant, assumed, prediction = judge(question, found["cc"], found["driver"], python)
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    result = {"spec": judged.spec, "asked": question.typed, "notes": question.notes + assumed + target_notes + python_notes,
              "target": {**found, "python": python}, **prediction.to_dict()}
    # observation first: the store's newest cell of this stack here decides, the rules' answer stays beside it
    seen = matching(observed_rows or [], judged.framework, release_of(judged.framework, judged.version, variant), variant, python,
                    found.get("matched") or found.get("gpu"), found["cc"], found["driver"],
                    build_named=question.variant is not None)
    decide(result, seen)
    result["nearest"] = (nearest_yes(judged.framework, judged.version, variant, found, python)
                         if nearest and result["verdict"] in (FAIL, "uncertain") else [])
    return result



def explain_requirements(path: str, stdin_text: str | None, gpu: str | None, cc: str | None, driver: str | None,
                         python: str | None) -> dict:
    """`explain -r FILE` (or `-r -` with pip freeze output): every GPU package of the file, and the set."""
    from .lockfiles import load
    from .requirements import judge as judge_set

    parsed = load(path, stdin_text)
    check_python(python)
    found, target_notes = where(gpu, cc, driver)
    result = judge_set(parsed, found, python)
    return {"file": "standard input" if path == "-" else path, **result, "notes": result["notes"] + target_notes}


def explain_pool(spec, pool: str, driver: str | None, python: str | None, observed_rows: list[dict]) -> dict:
    """`explain SPEC --pool ...`: the question on every GPU class of a site (answers/pool.py)."""
    from .pool import answer, pool_targets

    question = read(spec)
    check_python(python)
    executor, targets, origin = pool_targets(pool)
    notes = list(question.notes)
    variant = question.variant
    if variant is None:  # the GPU build that passes on the most classes (the first the release has, where none does)
        choices = gpu_variants(question.framework, question.version)
        passes = {v: sum(predict_stack(question.framework, release_of(question.framework, question.version, v), v,
                                       t.cc, t.driver or driver, python).verdict == PASS for t in targets) for v in choices}
        variant = max(choices, key=lambda v: (passes[v], -choices.index(v)))
        notes.append(assumed_note(question, variant))
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    return {"spec": judged.spec, "asked": question.typed, "notes": notes, "pool": pool,
            **answer(judged, variant, executor, targets, origin, driver, python, observed_rows)}


def ask(spec, requirements: str | None, pool: str | None, gpu: str | None, cc: str | None, driver: str | None,
        python: str | None, stdin_text: str | None = None, observed_rows: list[dict] | None = None) -> dict:
    """The command's three forms: a stack, a requirements file (-r), a pool (--pool); `mode` says which."""
    if requirements is not None and (spec or pool):
        raise UserError("-r judges a file: give it without a stack spec or --pool.")
    if requirements is None and not spec:
        raise UserError("give a stack to ask about (e.g. torch==2.4.1 or 'torch 2.4'), or -r requirements.txt.")
    if pool is not None:
        if gpu or cc:
            raise UserError("--pool answers for the pool's own GPU classes: leave out --gpu and --cc.")
        return {"mode": "pool", **explain_pool(spec, pool, driver, python, observed_rows or [])}
    if requirements is not None:
        return {"mode": "requirements", **explain_requirements(requirements, stdin_text, gpu, cc, driver, python)}
    return {"mode": "stack", **explain(spec, gpu, cc, driver, python, observed_rows=observed_rows)}
