"""The compute ladder: rungs run in order, each recorded with expected vs found; the first that fails
stops the ladder and gives the stage its error or reason (see the package's docstring).
"""

import json
import os
import time

from .records import _checkpoint, _error

MATRIX_N = 256
TOLERANCE = 1e-3  # relative Frobenius error allowed against the float64 reference
EXPECTED = "relative error <= %.0e against float64" % TOLERANCE


class StageFailed(Exception):
    """A stage (or rung) ran but found what stops the ladder (no device, wrong numbers)."""


class RungSkipped(Exception):
    """A rung that cannot run here for a reason that is not a failure of the stack."""


class RungFailed(Exception):
    """The compute ladder stopped: carries the failing rung's error or reason for the stage."""

    def __init__(self, rung):
        Exception.__init__(self, rung.get("reason") or (rung.get("error") or {}).get("message", ""))
        self.outcome = {"error": rung["error"]} if "error" in rung else {"reason": rung.get("reason", "")}


def _compare(rung, error):
    """Expected vs found for a numeric rung; raises StageFailed when the numbers are wrong."""
    rung.update(expected=EXPECTED, found="%.2g" % error, rel_error=error)
    if not error <= TOLERANCE:
        raise StageFailed("result differs from the float64 reference: relative error %.3g > %.0e" % (error, TOLERANCE))


def run_rung(facts, name, body):
    """Run one rung: body(rung) fills the rung's record; what it learnt stays when it fails."""
    rung = {"name": name, "ok": False}
    facts.setdefault("rungs", []).append(rung)
    began = time.perf_counter()
    try:
        body(rung)
        rung["ok"] = True
    except RungSkipped as exc:
        rung.update(ok=None, skipped=True, reason=str(exc))
    except StageFailed as exc:
        rung["reason"] = str(exc)
    except Exception as exc:  # noqa: B902 - the evidence is the point
        rung["error"] = _error(exc)
    rung["duration_s"] = round(time.perf_counter() - began, 4)
    _checkpoint()
    return rung


def skip_rung(facts, name, reason):
    rung = {"name": name, "ok": None, "skipped": True, "reason": reason, "duration_s": 0.0}
    facts.setdefault("rungs", []).append(rung)
    return rung


def finish_ladder(facts, failed=None):
    """Summarise the rungs into the stage's facts; raise RungFailed for the failing rung."""
    measured = [r["rel_error"] for r in facts.get("rungs", []) if "rel_error" in r]
    if measured:
        facts["rel_error"] = max(measured)
        facts["tolerance"] = TOLERANCE
    if failed is not None:
        facts["failed_rung"] = failed["name"]
        if "rel_error" not in failed:  # it failed for another reason than wrong numbers
            facts.pop("rel_error", None)
        raise RungFailed(failed)


def _cached():
    """{rung: sentence}: the rungs an earlier check passed in this environment on this GPU and driver, handed
    over by gpucompat (executors/rungs.py) so that they are not run again."""
    try:
        found = json.loads(os.environ.get("GPUCOMPAT_CACHED_RUNGS") or "{}")
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def ladder(facts, rungs):
    """rungs: [(name, body)] in order; stops at the first that fails."""
    failed, cached = None, _cached()
    for name, body in rungs:
        if failed is not None:
            skip_rung(facts, name, "not run: the %s rung failed" % failed["name"])
            continue
        if name in cached:
            facts.setdefault("rungs", []).append({"name": name, "ok": True, "cached": str(cached[name]), "duration_s": 0.0})
            continue
        rung = run_rung(facts, name, body)
        if rung["ok"] is False:
            failed = rung
    finish_ladder(facts, failed)


def _numpy_error(np, out, ref):
    out = np.asarray(out, dtype="float64").ravel()
    ref = np.asarray(ref, dtype="float64").ravel()
    if not np.isfinite(out).all():
        return float("inf")
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def _numpy_inputs(np):
    a = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
    b = np.random.standard_normal((MATRIX_N, MATRIX_N)).astype("float32")
    return a, b, a.astype("float64"), b.astype("float64")
