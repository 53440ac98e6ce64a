"""A fix line is offered only where it resolves: each set `explain -r` would suggest is resolved with uv first.

A fix changes the user's file (a line dropped, a line replaced by another build or release); the set that results
is what must install, not the changed line alone: keeping nvidia-cudnn-cu11==8.9.6.50 beside torch 2.3.1+cu118,
whose own pin is cuDNN 8.7.0.84, does not resolve. Each set goes to `uv pip compile` (PyPI, and PyTorch's index
where a line names a +cuXXX build), all at once and each bounded in time. A set uv finds impossible is not
offered, and the note says why; one uv could not ask about (offline, an index down, no answer in time) is
offered marked "not checked", with the reason, never silently as if it resolved.
"""

from __future__ import annotations

import shlex
import subprocess
from concurrent.futures import ThreadPoolExecutor

from .lockfiles import Parsed

TIMEOUT_S = 20.0  # per set; the sets run side by side, so explain -r waits at most about this long
PLATFORM = "x86_64-manylinux_2_28"
RESOLVES = "resolves"


def from_pip_command(command: str) -> tuple[list[str], list[str]]:
    """(requirements, indexes) of a `pip install 'X==1' --index-url URL` line as advise writes it."""
    words = shlex.split(command)[2:]
    requirements, indexes = [], []
    for i, word in enumerate(words):
        if word in ("--index-url", "--extra-index-url") and i + 1 < len(words):
            indexes.append(words[i + 1])
        elif not word.startswith("-") and (i == 0 or words[i - 1] not in ("--index-url", "--extra-index-url")):
            requirements.append(word)
    return requirements, indexes


def changed_set(parsed: Parsed, drop: set[int] = frozenset(), replace: dict[int, str] | None = None,
                indexes: list[str] = ()) -> dict:
    """The file's requirements with lines dropped or replaced ({line: requirement}), and the indexes it then needs."""
    replace = replace or {}
    requirements = [replace.get(pin.line, pin.typed) for pin in parsed.pins if pin.line not in drop]
    return {"requirements": requirements, "indexes": list(dict.fromkeys([*parsed.indexes, *indexes])),
            "conda": any(pin.conda for pin in parsed.pins)}


def _resolve(wanted: dict, python: str | None) -> str:
    """RESOLVES, 'does not resolve: <uv's reason>' or 'not checked: <why>'."""
    from ..envs.uv import uv_bin
    from ..resolve import _error_text, resolution_cause, uv_env

    if wanted["conda"]:
        return "not checked: a conda environment is solved by conda, not uv"
    if not python:
        return "not checked: no Python to resolve for (give --python X.Y)"
    command = [uv_bin(), "pip", "compile", "-", "--python-version", python, "--python-platform", PLATFORM,
               "--no-header", "--no-annotate", "--no-build"]
    for index in wanted["indexes"]:  # PyPI stays the default index; a PyTorch index adds its +cuXXX builds
        command += ["--extra-index-url", index]
    if wanted["indexes"]:
        command += ["--index-strategy", "unsafe-best-match"]
    try:
        proc = subprocess.run(command, input="\n".join(wanted["requirements"]) + "\n", capture_output=True, encoding="utf-8", errors="replace",
                              env=uv_env(), timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"not checked: uv did not answer within {TIMEOUT_S:.0f} s"
    except OSError as exc:
        return f"not checked: uv could not run ({exc.strerror or exc})"
    if proc.returncode == 0:
        return RESOLVES
    error = _error_text(proc.stderr) or f"uv exited {proc.returncode}"
    cause = resolution_cause(proc.returncode, error, False)
    if cause is None:
        reason = next((line.strip() for line in error.splitlines() if line.strip().startswith("╰─▶") or "Because" in line), error)
        return f"does not resolve: {reason.lstrip('╰─▶ ').strip()}"
    return "not checked: offline" if cause in ("network", "offline-cache") else f"not checked: uv could not ask the index ({cause})"


def checked(fixes: list[dict], python: str | None) -> tuple[list[dict], list[str]]:
    """(the fixes that resolve or could not be checked, each with `checked`; notes naming those uv found impossible).
    Each fix carries the set it leaves as `set` (changed_set); it is taken off."""
    wanted = [fix.pop("set", None) for fix in fixes]
    with ThreadPoolExecutor(max_workers=max(1, len(fixes))) as pool:
        answers = list(pool.map(lambda w: _resolve(w, python) if w else "not checked: no set to resolve", wanted))
    kept, notes = [], []
    for fix, answer in zip(fixes, answers):
        if answer.startswith("does not resolve"):
            notes.append(f"not offered: {fix['text']} — the set it leaves {answer} (uv pip compile)")
        else:
            kept.append({**fix, "checked": answer})
    return kept, notes
