"""The stack's failure, or the job's environment's? Read from the probe's clean re-run (probe/clean_env.py).

When a cell failed, the probe ran the failing stages once more with nothing inherited but what the job needs,
and where that run did not fail the same way, it added the inherited variables back by halves until the ones
that bring the failure back were found. analysis.py classifies that clean run with the same rules as the job
and hands both verdicts here: the same code at the same stage and rung is the stack's; a clean run that went
further, passed, or failed otherwise is the environment's (could not test, `env-fault`), named by its
variables. A clean run that stopped earlier, or could not test, says nothing about the stack: the verdict stands.
"""

from __future__ import annotations

from .model import PASS, PROBE_STAGES, UNTESTED, Outcome

KEPT = "only PATH, HOME, the scheduler's GPU binding, gpucompat's own and the environment's own variables"


def record(facts: dict | None) -> dict | None:
    """The probe's clean re-run, where it ran to the end (a job killed midway leaves it without a verdict)."""
    found = (facts or {}).get("clean_run")
    return found if isinstance(found, dict) and isinstance(found.get("facts"), dict) else None


def _rung(outcome: Outcome) -> str | None:
    return ((outcome.evidence.get("stage_facts") or {}).get("facts") or {}).get("failed_rung")


def _position(outcome: Outcome, facts: dict) -> tuple:
    """How far a run got: its stage, then its rung in the ladder's order."""
    stage = PROBE_STAGES.index(outcome.stage) if outcome.stage in PROBE_STAGES else len(PROBE_STAGES)
    rungs = [r.get("name") for r in ((facts.get("stages") or {}).get("compute") or {}).get("facts", {}).get("rungs") or []]
    rung = _rung(outcome)
    return stage, rungs.index(rung) if rung in rungs else len(rungs)


def _variables(found: dict) -> str:
    names = [n + (" (past the framework's own entry)" if n == "PYTHONPATH" and found.get("python_path") else "")
             for n in found.get("culprits") or []]
    if len(names) == 1:
        return f"the job's inherited {names[0]} made the difference"
    return f"one or more of the job's inherited {', '.join(names[:12])}{' …' if len(names) > 12 else ''} made the difference (not narrowed further)"


def judge(judged: Outcome, clean: Outcome, facts: dict, found: dict) -> Outcome:
    """The verdict once the clean run is known. `judged`: the job's own failure; `clean`: the clean run's verdict."""
    runs = len(found.get("runs") or [])
    evidence = {**judged.evidence, "clean_run": {"code": clean.code, "stage": clean.stage, "summary": clean.summary,
                                                 "culprits": found.get("culprits"), "runs": found.get("runs"), "kept": found.get("kept"),
                                                 "python_path": found.get("python_path")}}
    same = clean.code == judged.code and clean.stage == judged.stage and _rung(clean) == _rung(judged)
    if same:
        return Outcome(judged.code, judged.stage, judged.summary, evidence, judged.warnings + (
            f"a clean re-run ({KEPT}) failed the same way: the stack's, not the job's environment's",), judged.cause)
    if clean.code == UNTESTED or _position(clean, found["facts"]) < _position(judged, facts) or not found.get("culprits"):
        why = (f"it could not test ({clean.summary})" if clean.code == UNTESTED
               else "nothing was left out of the job's environment, so the failure does not repeat" if not found.get("culprits")
               else f"it stopped earlier, at {clean.stage} with {clean.code}: the stack needs something of the job's environment")
        return Outcome(judged.code, judged.stage, judged.summary, evidence, judged.warnings + (
            f"a clean re-run ({KEPT}) says nothing here: {why}",), judged.cause)
    went = ("passed" if clean.code == PASS else f"stopped at {clean.stage} with {clean.code} instead")
    text = (f"could not test: the job's environment made this stack fail ({judged.code} at {judged.stage}), and a clean re-run "
            f"({KEPT}) {went}; {_variables(found)}" + (f" ({runs} runs)" if runs > 1 else "") +
            f"; unset {'it' if len(found.get('culprits') or []) < 2 else 'them'} in the job's environment, then test again")
    return Outcome(UNTESTED, judged.stage, text, {**evidence, "cause": "env-fault", "stack_would_be": judged.code}, judged.warnings,
                   cause="env-fault")
