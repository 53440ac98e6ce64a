"""The algebra of the knowledge's rules: a Reason (one rule's pass, fail or uncertain, with its sentence and its
source), the weight of the row it rests on, and how a stack's reasons combine into one Prediction: the first
failure heads it (a cause no pip install can fix before one the user can), else uncertain where any reason is,
else a pass. Every rule module builds on this one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

PASS, FAIL, UNCERTAIN = "pass", "fail", "uncertain"
DRIVES = "driver drives the GPU"  # the rule whose failure heads every other (combine)
UNKNOWN_CC = "the GPU's compute capability is not known"


@dataclass(frozen=True)
class Reason:
    rule: str
    verdict: str
    text: str
    source: str
    code: str | None = None
    stage: str | None = None
    warning: str | None = None
    confidence: str = "high"  # of the table row the reason rests on: high, medium (low rows never decide)
    needs_driver: str | None = None  # a DRIVER_TOO_OLD reason's driver that would do (rules.beyond_last_driver reads it)


def weighed(reason: Reason, confidence: str | None) -> Reason:
    """A reason resting on a table row of that confidence: a low-confidence row decides nothing."""
    confidence = confidence or "high"
    if confidence == "low" and reason.verdict != UNCERTAIN:
        return replace(reason, verdict=UNCERTAIN, code=None, stage=None, confidence="low",
                       text=f"{reason.text} — but that rests on a low-confidence source, so it is not a verdict")
    return replace(reason, confidence=confidence)


@dataclass
class Prediction:
    verdict: str
    code: str | None
    stage: str | None
    warnings: list[str] = field(default_factory=list)
    reasons: list[Reason] = field(default_factory=list)
    resolved: dict = field(default_factory=dict)
    confidence: str = "high"  # the weakest row among the reasons that decided the verdict

    def to_dict(self) -> dict:
        return {
            "verdict": self.verdict, "code": self.code, "stage": self.stage, "confidence": self.confidence, "warnings": self.warnings,
            "reasons": [{k: v for k, v in asdict(r).items() if k in ("rule", "verdict", "text", "source", "confidence")} for r in self.reasons],
            "resolved": self.resolved,
        }


STAGE_ORDER = {"resolve": 0, "install": 1, "import": 2, "device": 3, "compute": 4}  # the ladder: what blocks first


def disagreeing(reasons: list[Reason]) -> list[Reason]:
    """Where public reports contradict each other on the same check (one rule, a pass from one source and a
    fail from another), the check is uncertain, naming both: never a confident verdict picked from one."""
    out: list[Reason] = []
    for reason in reasons:
        rivals = [r for r in reasons if r.rule == reason.rule and r.source != reason.source and {r.verdict, reason.verdict} == {PASS, FAIL}]
        if not rivals:
            out.append(reason)
        elif reason.verdict == PASS:  # once per pair, at the passing side
            other = rivals[0]
            out.append(Reason(reason.rule, UNCERTAIN, f"sources disagree: {reason.text} ({reason.source}), but {other.text} ({other.source})",
                              f"{reason.source} ; {other.source}"))
    return out


def unchangeable(reason: Reason) -> bool:
    """A failure no pip install fixes: the driver does not drive the GPU, is too old for the build, or no driver for this GPU
    is new enough (rules.beyond_last_driver: ARCH_UNSUPPORTED at the device stage, where the GPU's last branch ends)."""
    return reason.rule == DRIVES or reason.code == "DRIVER_TOO_OLD" or (reason.code == "ARCH_UNSUPPORTED" and reason.stage == "device")


def combine(reasons: list[Reason], resolved: dict) -> Prediction:
    """The verdict of a stack's reasons: its first failure heads it, and a cause no pip install can fix (the driver does
    not drive the GPU, or is too old for the build's CUDA) comes before one the user can (a missing wheel for a Python),
    the ladder's stage order deciding within each; without a failure, uncertain where any reason is, else a pass."""
    reasons = disagreeing(reasons)
    failures = sorted((r for r in reasons if r.verdict == FAIL),
                      key=lambda r: (not unchangeable(r), STAGE_ORDER.get(r.stage or "", 9)))
    warnings = [r.warning for r in reasons if r.warning]
    if failures:
        return Prediction(FAIL, failures[0].code, failures[0].stage, warnings, reasons, resolved, failures[0].confidence)
    if not reasons or any(r.verdict == UNCERTAIN for r in reasons):
        return Prediction(UNCERTAIN, None, None, warnings, reasons, resolved, "low" if any(r.confidence == "low" for r in reasons) else "high")
    return Prediction(PASS, None, None, warnings, reasons, resolved, "medium" if any(r.confidence == "medium" for r in reasons) else "high")
