"""One quoting helper per format a job file is written in: shell, Slurm, HTCondor, Kubernetes.

Values reach these files from plans, the command line and scheduler output; the plan
parser already refuses control characters, and these helpers make sure that whatever
gets through is written as data, never as a new line of commands.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from .errors import UserError

# Anything that can end a line, and the bidirectional marks and overrides that reorder the text around
# them in a terminal, a table or an editor (U+200E/F, U+202A-U+202E, U+2066-U+2069: "Trojan Source").
CONTROL_CHARACTERS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# A terminal's escape sequences, each removed whole: CSI (ESC [ ... a final byte: colours, a cleared screen, a moved
# cursor), OSC, DCS and the like (ESC ] ... up to BEL or ESC \\: a window title, a hyperlink), their 8-bit forms,
# and ESC with one character. What is left of ESC alone is a control character like any other.
_ESCAPE_SEQUENCE = re.compile(r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"
                              r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\n]*?(?:\x07|\x1b\\|\x9c|(?=\n)|$)"
                              r"|\x1b[ -~]")
# Characters a DAG file or an HTCondor submit value can carry unquoted: DAGMan splits its
# lines on whitespace and has no quoting for paths.
_CONDOR_PATH = re.compile(r"[A-Za-z0-9_./+@%,=-]+", re.ASCII)


def printable(text: object, lines: bool = False) -> str:
    """Text that came from a probe, a framework, a scheduler or a stored row, as it may be printed to a terminal, a
    table or a report: escape sequences removed whole, every other control character and bidirectional mark or
    override (U+202E) a space. `lines`: line breaks are kept (a log), else they are spaces too (a table cell)."""
    text = _ESCAPE_SEQUENCE.sub("", str(text))
    if lines:
        return "\n".join(CONTROL_CHARACTERS.sub(" ", line) for line in text.split("\n"))
    return CONTROL_CHARACTERS.sub(" ", text)


# What a spreadsheet reads as the start of a formula (OWASP, CSV injection): = + - @, a tab, a carriage return.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value):
    """A value as a CSV cell a spreadsheet never runs: text that begins as a formula would gets a single quote before it,
    as OWASP advises (`=cmd|' /C calc'!A0` is written `'=cmd|' /C calc'!A0`); numbers, booleans and None stay as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def csv_row(row: dict) -> dict:
    """csv_cell() on every value of a row a csv.DictWriter writes."""
    return {key: csv_cell(value) for key, value in row.items()}


def printable_values(value):
    """printable() on every text inside a row, a list or a dict (a stored cell, the doctor's facts), the rest as it is."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        return {k: printable_values(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [printable_values(v) for v in value]
    return value


def shell_word(value: object) -> str:
    """One word of a POSIX shell command line."""
    return shlex.quote(str(value))


def shell_comment(text: str) -> str:
    """A `# ...` line whose text can never end the comment (no line breaks of any kind)."""
    return "# " + CONTROL_CHARACTERS.sub(" ", text)


def sbatch_directive(option: str) -> str:
    """The text after `#SBATCH`: sbatch reads these lines itself, not through a shell, so a plain
    value stays plain; anything else is refused rather than guessed at."""
    if not re.fullmatch(r"--[a-z-]+(=[\w.,:=&%/@+\[\]-]+)?", option, re.ASCII):  # [ ]: a node list, gpu[01-03]
        raise UserError(f"cannot write the sbatch option {option[:80]!r} into a batch script; use plain names.")
    return option


def slurm_name(text: str) -> str:
    """A job name: letters, digits and `_.-` only."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text)[:48].strip("-") or "gpucompat"


def classad_string(text: str) -> str:
    """A ClassAd string literal for a submit description: quotes and backslashes escaped, line
    breaks removed, and `$` written as HTCondor's $(DOLLAR) so no macro is ever expanded."""
    escaped = CONTROL_CHARACTERS.sub(" ", text).replace("\\", "\\\\").replace('"', '\\"').replace("$", "$(DOLLAR)")
    return '"' + escaped + '"'


def condor_path(path: Path) -> str:
    """A path for a DAG file or a submit description, which cannot quote one."""
    text = str(path)
    if not _CONDOR_PATH.fullmatch(text):
        raise UserError(f"HTCondor DAG and submit files cannot hold the path {text[:80]!r} (spaces, quotes or other "
                        "special characters); choose a --workdir or --out made of letters, digits and ./_-")
    return text


def k8s_name(prefix: str, unique: str, suffix: str = "", limit: int = 63) -> str:
    """An RFC 1123 label (lowercase alphanumerics and '-', at most 63): `prefix` is shortened to
    fit, a hash of `unique` keeps two long prefixes apart, and `suffix` is always kept whole."""
    slug = re.sub(r"[^a-z0-9-]+", "-", prefix.lower()).strip("-")
    import hashlib  # here: explain, which imports this module, never needs it (5 ms of its start)

    digest = hashlib.sha256(unique.encode()).hexdigest()[:8]
    tail = f"-{digest}" + (f"-{suffix}" if suffix else "")
    room = limit - len(tail)
    name = (slug[:room].rstrip("-") or "gpucompat") + tail
    if not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) or len(name) > limit:
        raise UserError(f"cannot make a Kubernetes name from {prefix[:40]!r} and {suffix!r}.")
    return name
