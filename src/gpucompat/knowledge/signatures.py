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


# uv's own words for "I could not ask", from its error and cause chain (uv 0.13: `error: Failed to
# fetch`, exit 2), against "I asked and the index said no" (`No solution found`, exit 1). Checked
# in order; each is tested with a real uv in tests/test_uv_causes.py.
_COULD_NOT_ASK = (
    ("disk", re.compile(r"No space left on device|Disk quota exceeded|os error 28\b|os error 122\b", re.I)),
    # envs/conda.py's INSTALLER on a node with no micromamba, mamba, conda nor py-rattler (its own words)
    ("installer", re.compile(r"no conda installer here", re.I)),
    ("python-download", re.compile(r"python-build-standalone|No interpreter found for Python|No download found for request"
                                   r"|managed Python download|Failed to download .*cpython", re.I)),
    ("offline-cache", re.compile(r"network was disabled|not found in the cache|Network connectivity is disabled", re.I)),
    ("wheelhouse", re.compile(r"not found in the provided package locations", re.I)),
    ("index", re.compile(r"Connection refused|HTTP status server error|status code 5[0-9][0-9]|Hash mismatch", re.I)),
    ("network", re.compile(r"dns error|error resolving DNS|tcp connect error|timed out|Connection reset|certificate|tls handshake"
                           r"|error sending request|Request failed after|network is unreachable|No route to host"
                           # micromamba (libcurl's words): "Download error (6) Couldn't resolve host name",
                           # github.com/mamba-org/mamba/issues/3536; "Download error (28) Timeout was reached",
                           # github.com/mamba-org/mamba/issues/3454
                           r"|Download error \([0-9]+\) (?:Couldn't resolve host|Timeout was reached|Couldn't connect)"
                           # conda: "CondaHTTPError: HTTP 000 CONNECTION FAILED for url", github.com/conda/conda/issues/11367
                           r"|HTTP 000 CONNECTION FAILED", re.I)),
)


def could_not_ask(text: str, wheelhouse: bool = False) -> str | None:
    """The cause (a key of model.UNTESTED_CAUSES) when uv's output says it could not get an answer
    about the stack, not that the stack is impossible; None when the index did answer."""
    for cause, pattern in _COULD_NOT_ASK:
        if pattern.search(text or ""):
            return cause
    if wheelhouse and "No solution found" in (text or ""):
        return "wheelhouse"  # a wheelhouse is a partial copy: missing wheels say nothing of the index
    return None
