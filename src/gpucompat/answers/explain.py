"""`gpucompat explain`: a question about one stack and a GPU -> the prediction, offline, in one object,
with how the question was read and, after a no or an uncertain, the nearest yes."""

from __future__ import annotations

from ..knowledge.rules import FAIL, PASS, predict_stack
from . import conditions
from .asked import Asked
from .asked import read as read_question
from .nearest import nearest_yes
from .observed import decide, matching
from .questions import Question, assumed_note, gpu_variants, release_of, spec_text

__all__ = ["answer", "ask", "explain", "judge"]


def judge(question: Question, cc: str | None, driver: str | None, python: str | None, gpu: str | None = None) -> tuple[str, list[str], object]:
    """(the variant judged, notes, the prediction): a question without a build means the first GPU build that passes here;
    where none passes with this Python, the first that this GPU and driver would run (so the answer is the Python, never
    a driver the build the Python rules out would need); else the first the release has."""
    if question.variant is not None:
        return question.variant, [], predict_stack(question.framework, question.release, question.variant, cc, driver, python, gpu=gpu)
    choices = gpu_variants(question.framework, question.version)

    def predicted(variant: str, with_python: str | None):
        return predict_stack(question.framework, release_of(question.framework, question.version, variant), variant, cc, driver, with_python,
                             gpu=gpu)

    judged = [(v, predicted(v, python)) for v in choices]
    here = next((v for v in choices if predicted(v, None).verdict == PASS), None) if python else None  # the build read without a Python
    variant, prediction = next(((v, p) for v, p in judged if p.verdict == PASS), None) or \
        next(((v, p) for v, p in judged if v == here), judged[0])
    # the build read is said, unless it is what was typed (tensorflow==2.11.0 is TensorFlow 2.11's GPU build)
    notes = [assumed_note(question, variant)] if spec_text(question.framework, question.version, variant) != question.typed else []
    if here is not None and here != variant:
        notes.append(f"with Python {python} the build judged is {spec_text(question.framework, question.version, variant)}: "
                     f"{spec_text(question.framework, question.version, here)}, the build this GPU and driver would run, "
                     f"has no wheel for Python {python}")
    elif here is not None and prediction.verdict != PASS:
        notes.append(f"{spec_text(question.framework, question.version, variant)} is the build this GPU and driver would run; "
                     f"it is the Python {python} that rules it out")
    return variant, notes, prediction


def explain(spec, gpu: str | None = None, cc: str | None = None, driver: str | None = None, python: str | None = None) -> dict:
    """The stack form read and answered at once, without a store. `spec`: the question as typed, one string ('torch==2.4',
    'torch 2.4') or its words. What is not given of the GPU and driver is this machine's; of the Python, this
    interpreter's. After a fail or an uncertain, `nearest` holds what would pass on the same GPU and driver."""
    return answer_stack(read_question(spec, None, None, gpu, cc, driver, python), [])


def answer_stack(asked: Asked, observed_rows: list[dict]) -> dict:
    """The stack form's answer: the rules' verdict, decided by the store's observation of it where there is one."""
    question, found, python = asked.stack, asked.target, asked.python
    variant, assumed, prediction = judge(question, found["cc"], found["driver"], python, found.get("matched") or found.get("gpu"))
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    notes = list(asked.notes)
    notes[len(question.notes):len(question.notes)] = assumed  # the build assumed right after how the stack was read
    result = {"spec": judged.spec, "asked": question.typed, "notes": notes,
              "target": asked.target_view(), **prediction.to_dict()}
    # observation first: the store's newest cell of this stack here decides, the rules' answer stays beside it
    seen = matching(observed_rows, judged.framework, release_of(judged.framework, judged.version, variant), variant, python,
                    found.get("matched") or found.get("gpu"), found["cc"], found["driver"],
                    build_named=question.variant is not None)
    decide(result, seen)
    if result["source"] == "rule":  # a build that needs the system's CUDA is a conditional yes (an observation saw it run)
        conditions.apply(result, judged.framework, judged.version, variant)
    result["nearest"] = (nearest_yes(judged.framework, judged.version, variant, found, python)
                         if result["verdict"] in (FAIL, "uncertain", conditions.CONDITIONAL) else [])
    if result["verdict"] == conditions.CONDITIONAL:  # beside a conditional yes, only what brings its own libraries
        result["nearest"] = [n for n in result["nearest"] if n.get("verdict") == PASS]
    return result


def answer_requirements(asked: Asked) -> dict:
    """`explain -r FILE` (or `-r -` with pip freeze output): every GPU package of the file, and the set."""
    from .requirements import judge as judge_set

    result = judge_set(asked.parsed, asked.target, asked.python)
    result["target"] = asked.target_view()
    return {"file": "standard input" if asked.requirements == "-" else asked.requirements, **result,
            "notes": result["notes"] + list(asked.notes)}


def answer_pool(asked: Asked, observed_rows: list[dict]) -> dict:
    """`explain SPEC --pool ...`: the question on every GPU class of a site (answers/pool.py)."""
    from .pool import answer

    question, driver, python = asked.stack, asked.driver, asked.python
    executor, targets, origin = asked.classes
    notes = list(asked.notes)
    variant = question.variant
    if variant is None:  # the GPU build that passes on the most classes (the first the release has, where none does)
        choices = gpu_variants(question.framework, question.version)
        passes = {v: sum(predict_stack(question.framework, release_of(question.framework, question.version, v), v,
                                       t.cc, t.driver or driver, python, gpu=t.name).verdict == PASS for t in targets) for v in choices}
        variant = max(choices, key=lambda v: (passes[v], -choices.index(v)))
        notes.insert(len(question.notes), assumed_note(question, variant))
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    return {"spec": judged.spec, "asked": question.typed, "notes": notes, "pool": asked.pool, "python": python,
            "python_from": asked.python_from, "driver_typed": asked.driver_typed, **answer(judged, variant, executor, targets, origin, driver, python, observed_rows)}


def answer(asked: Asked, observed_rows: list[dict] | None = None) -> dict:
    """The answer to a question read once (answers/asked.py), in its form; `mode` says which."""
    if asked.mode == "pool":
        return {"mode": "pool", **answer_pool(asked, observed_rows or [])}
    if asked.mode == "requirements":
        return {"mode": "requirements", **answer_requirements(asked)}
    return {"mode": "stack", **answer_stack(asked, observed_rows or [])}


def ask(spec, requirements: str | None, pool: str | None, gpu: str | None, cc: str | None, driver: str | None,
        python: str | None, stdin_text: str | None = None, observed_rows: list[dict] | None = None) -> dict:
    """The command's three forms read and answered at once (the CLI reads first, then asks the store, then answers)."""
    return answer(read_question(spec, requirements, pool, gpu, cc, driver, python, stdin_text), observed_rows)
