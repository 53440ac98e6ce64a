"""Error text -> failure code, from data/error_signatures.csv (each row keeps its source)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..model import Code, Stage

DATA = Path(__file__).with_name("data") / "error_signatures.csv"


@dataclass(frozen=True)
class Signature:
    pattern: str
    code: str
    stage: str
    meaning: str
    fix: str
    source: str


@lru_cache(maxsize=1)
def signatures() -> tuple[Signature, ...]:
    """The table, checked at load: every code and stage must be one of model.Code and model.Stage."""
    with DATA.open(newline="", encoding="utf-8") as handle:
        found = tuple(Signature(**row) for row in csv.DictReader(handle))
    for line, signature in enumerate(found, start=2):
        if signature.code not in Code.__members__ or signature.code in (Code.PASS, Code.UNTESTED):
            raise ValueError(f"{DATA.name} line {line}: {signature.code!r} is not a failure code of model.Code")
        if signature.stage not in {stage.value for stage in Stage}:
            raise ValueError(f"{DATA.name} line {line}: {signature.stage!r} is not a stage of model.Stage")
    return found


def match(text: str) -> Signature | None:
    """The first signature (file order: most specific first) found in the text."""
    if not text:
        return None
    for signature in signatures():
        if re.search(re.escape(signature.pattern), text, re.IGNORECASE):
            return signature
    return None
