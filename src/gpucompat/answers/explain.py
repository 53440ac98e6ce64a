"""`gpucompat explain`: a question about one stack and a GPU -> the prediction, offline, in one object,
with how the question was read and, after a no or an uncertain, the nearest yes."""

from __future__ import annotations

from ..knowledge.rules import FAIL, PASS, predict_stack
from . import conditions
from .asked import NEWEST, Asked, newest_python, python_note
from .asked import read as read_question
from .nearest import nearest_yes
from .observed import decide, matching
from .questions import Question, assumed_note, extra_note, release_of, spec_text, typed_variants

__all__ = ["answer", "ask", "explain", "judge"]


def judge(question: Question, cc: str | None, driver: str | None, python: str | None, gpu: str | None = None,
          newest: bool = False, kernel_module: str | None = None) -> tuple[str, list[str], object, str | None]:
    """(the variant judged, notes, the prediction, the Python judged): a question without a build means the first GPU build
    that passes here; where none passes with this Python, the first that this GPU and driver would run (so the answer is the
    Python, never a driver the build the Python rules out would need); else the first the release has. `newest` (a question
    about another machine, no --python): each build is judged on the newest Python its release has wheels for."""
    def python_of(variant: str) -> str | None:
        return newest_python(question.framework, question.version, variant) if newest else python

    if question.variant is not None:
        judged_python = python_of(question.variant)
        return question.variant, [], predict_stack(question.framework, question.release, question.variant, cc, driver, judged_python,
                                                   gpu=gpu, kernel_module=kernel_module), judged_python
    choices = typed_variants(question.framework, question.version)

    def predicted(variant: str, with_python: str | None):
        return predict_stack(question.framework, release_of(question.framework, question.version, variant), variant, cc, driver, with_python,
                             gpu=gpu, kernel_module=kernel_module)

    judged = [(v, predicted(v, python_of(v))) for v in choices]
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
    return variant, notes, prediction, python_of(variant)


def explain(spec, gpu: str | None = None, cc: str | None = None, driver: str | None = None, python: str | None = None,
            kernel_module: str | None = None) -> dict:
    """The stack form read and answered at once, without a store. `spec`: the question as typed, one string ('torch==2.4',
    'torch 2.4') or its words. What is not given of the GPU and driver is this machine's; of the Python, this
    interpreter's. After a fail or an uncertain, `nearest` holds what would pass on the same GPU and driver."""
    return answer_stack(read_question(spec, None, None, gpu, cc, driver, python, kernel_module=kernel_module), [])


def answer_stack(asked: Asked, observed_rows: list[dict]) -> dict:
    """The stack form's answer: the rules' verdict, decided by the store's observation of it where there is one."""
    question, found = asked.stack, asked.target
    newest = asked.python_from == NEWEST
    variant, assumed, prediction, python = judge(question, found["cc"], found["driver"], asked.python,
                                                 found.get("matched") or found.get("gpu"), newest, found.get("kernel_module"))
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    notes = list(asked.notes)
    notes[len(question.notes):len(question.notes)] = assumed  # the build assumed right after how the stack was read
    if newest:  # the Python assumed for another machine, said with the build it was read for
        notes.append(python_note(judged.framework, judged.version, variant, python))
    extra = extra_note(judged.framework, judged.version, variant, python)
    if extra:  # plain tensorflow is judged as typed; the [and-cuda] extra's own fate is a line of its own
        notes.append(extra)
    result = {"spec": judged.spec, "asked": question.typed, "notes": notes,
              "target": {**asked.target_view(), "python": python}, **prediction.to_dict()}
    # observation first: the store's newest cell of this stack here decides, the rules' answer stays beside it
    seen = matching(observed_rows, judged.framework, release_of(judged.framework, judged.version, variant), variant, python,
                    found.get("gpu"), found["cc"], found["driver"], build_named=question.variant is not None, also=found.get("matched"))
    decide(result, seen)
    if result["source"] == "rule":  # a build that needs the system's CUDA is a conditional yes (an observation saw it run)
        conditions.apply(result, judged.framework, judged.version, variant)
    # another machine's Python is not known: each step is judged on the newest Python it has wheels for, as the asked stack was
    result["nearest"] = (nearest_yes(judged.framework, judged.version, variant, found, None if newest else python,
                                     self_contained=result["verdict"] == conditions.CONDITIONAL)
                         if result["verdict"] in (FAIL, "uncertain", conditions.CONDITIONAL) else [])
    for item in result["nearest"] if newest else []:
        if item.get("version") and item.get("variant") and item["kind"] != "python":
            item["python"] = newest_python(item["framework"], item["version"], item["variant"])
    if result["verdict"] == conditions.CONDITIONAL:  # beside a conditional yes, only what brings its own libraries
        result["nearest"] = [n for n in result["nearest"] if n.get("verdict") == PASS]
    if result["verdict"] == PASS:  # a yes comes with what installs it: advise's own commands (pip with its extra or index, uv, conda)
        result["install"] = install_for(judged.framework, judged.version, variant, prediction.resolved.get("cuda_runtime"))
    return result


def install_for(framework: str, version: str, variant: str, cuda_runtime: str | None) -> dict | None:
    """advise's install_commands for a stack that passes; None where the index has no package for it."""
    from ..errors import UserError
    from .advise import install_commands  # only for a yes: the install commands' imports cost a no nothing

    try:
        return install_commands(framework, version, variant, cuda_runtime)
    except UserError:
        return None


def answer_requirements(asked: Asked) -> dict:
    """`explain -r FILE` (or `-r -` with pip freeze output): every GPU package of the file, and the set."""
    from .requirements import judge as judge_set

    result = judge_set(asked.parsed, asked.target, asked.python)
    result["target"] = asked.target_view()
    return {"file": "standard input" if asked.requirements == "-" else asked.requirements, **result,
            "notes": result["notes"] + list(asked.notes)}


def answer_pool(asked: Asked, observed_rows: list[dict]) -> dict:
    """`explain SPEC --pool ...`: the question on every GPU class of a site (answers/pool.py), each class as read once
    (asked.PoolClass), the store's observations indexed once (observed.Observations)."""
    from .observed import Observations
    from .pool import answer

    question, python, pool = asked.stack, asked.python, asked.classes
    notes = list(asked.notes)
    newest = asked.python_from == NEWEST
    python_from = asked.python_from
    if newest and pool.plan_pythons:  # a plan that lists its Pythons answers on them, as advise --pool does
        python, newest, python_from = pool.plan_pythons[0], False, "the plan"
        others = f"; it also lists {', '.join(pool.plan_pythons[1:])}" if len(pool.plan_pythons) > 1 else ""
        notes.append(f"Python {python}: the Python the plan lists{others} (give --python X.Y for another)")

    def python_of(v: str) -> str | None:  # a pool is other machines: without --python, each build's newest wheel Python
        return newest_python(question.framework, question.version, v) if newest else python

    variant = question.variant
    if variant is None:  # the GPU build that passes on the most classes (the first the release has, where none does)
        choices = typed_variants(question.framework, question.version)
        distinct: dict[tuple, int] = {}  # classes judged once per distinct GPU, driver and kernel module
        for c in pool.classes:
            distinct[c.key] = distinct.get(c.key, 0) + 1
        by_key = {c.key: c for c in pool.classes}
        passes = {v: sum(n for key, n in distinct.items()
                         if predict_stack(question.framework, release_of(question.framework, question.version, v), v,
                                          by_key[key].cc, by_key[key].driver, python_of(v), gpu=by_key[key].gpu,
                                          kernel_module=by_key[key].kernel_module).verdict == PASS)
                  for v in choices}
        variant = max(choices, key=lambda v: (passes[v], -choices.index(v)))
        notes.insert(len(question.notes), assumed_note(question, variant))
    python = python_of(variant)
    if newest:
        notes.append(python_note(question.framework, question.version, variant, python))
    judged = Question(question.typed, question.framework, question.version, variant, question.notes)
    result = {"spec": judged.spec, "asked": question.typed, "notes": notes, "pool": asked.pool, "python": python,
              "python_from": python_from, "driver_typed": asked.driver_typed,
              **answer(judged, variant, pool, python, Observations(observed_rows), newest)}
    if result["passing"]:  # where some class passes, the command that installs the stack there
        result["install"] = install_for(judged.framework, judged.version, variant, None)
    return result


def answer(asked: Asked, observed_rows: list[dict] | None = None) -> dict:
    """The answer to a question read once (answers/asked.py), in its form; `mode` says which."""
    if asked.mode == "pool":
        return {"mode": "pool", **answer_pool(asked, observed_rows or [])}
    if asked.mode == "requirements":
        return {"mode": "requirements", **answer_requirements(asked)}
    return {"mode": "stack", **answer_stack(asked, observed_rows or [])}


def ask(spec, requirements: str | None, pool: str | None, gpu: str | None, cc: str | None, driver: str | None,
        python: str | None, stdin_text: str | None = None, observed_rows: list[dict] | None = None,
        kernel_module: str | None = None) -> dict:
    """The command's three forms read and answered at once (the CLI reads first, then asks the store, then answers)."""
    return answer(read_question(spec, requirements, pool, gpu, cc, driver, python, stdin_text, kernel_module), observed_rows)
