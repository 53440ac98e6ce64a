"""Error text -> failure code, from data/error_signatures.csv (each row keeps its source)."""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

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
    with DATA.open(newline="", encoding="utf-8") as handle:
        return tuple(Signature(**row) for row in csv.DictReader(handle))


def match(text: str) -> Signature | None:
    """The first signature (file order: most specific first) found in the text."""
    if not text:
        return None
    for signature in signatures():
        if re.search(re.escape(signature.pattern), text, re.IGNORECASE):
            return signature
    return None
