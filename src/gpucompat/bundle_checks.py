"""What an imported sweep must be to be stored: observations gpucompat could have made (issue 41 item 4).

A signature says who sealed a bundle, never that what it holds is true, and `import --untrusted` takes bundles nobody
vouches for: whatever a bundle says reaches explain's answers, the reports and the site. So verify() (bundle.py) puts
every record of every sweep through SweepChecks before the store is opened, and one implausible record refuses the
whole bundle with one sentence (nothing stored, exit 2):

- a stack's framework is one gpucompat knows (model.FRAMEWORKS), its version `installed` or a version (PEP 440, at most
  64 characters, as a plan's);
- a result's code is one of gpucompat's codes, and a PASS that was run says the version it found installed: its probe's
  import stage records a version (cuda-runtime: the runtime it loaded) that parses as one;
- a GPU class's name agrees with the probe's own device record: where a cell's probe named the devices it saw, the
  class's name is one of them, or one holds the other (a MIG slice, a class named shorter than the card), compared
  case-folded with spaces collapsed. A name the probe never said is refused, not marked: marking would keep the
  disagreeing name in every view, and a genuine bundle never has one (every store in docs/evidence agrees);
- each GPU class, stack and cell once: a cell held twice (the same stack on the same class) was the store's
  IntegrityError, exit 3;
- no text with half a UTF-16 pair (JSON's "\\ud800" alone), which the store's insert met as UnicodeEncodeError (exit 3).
"""

from __future__ import annotations

import re

from .knowledge.tables import version as parsed_version
from .model import FRAMEWORKS, Code

CODES = frozenset(code.value for code in Code)


def _said(value, limit: int = 60) -> str:
    return repr(str(value)[:limit])


def _folded(name) -> str:
    return re.sub(r"\s+", " ", str(name)).strip().casefold()


def _probe_stage(result: dict, stage: str) -> dict:
    probe = result.get("probe") if isinstance(result, dict) else None
    stages = probe.get("stages") if isinstance(probe, dict) else None
    found = stages.get(stage) if isinstance(stages, dict) else None
    facts = found.get("facts") if isinstance(found, dict) else None
    return facts if isinstance(facts, dict) else {}


def installed_version(result: dict):
    """The version a probe found installed: its import stage's `version` (cuda-runtime: the runtime it loaded)."""
    facts = _probe_stage(result, "import")
    return facts.get("version") or facts.get("cuda_runtime")


def device_names(result: dict) -> set[str]:
    """The GPU names a probe recorded for the devices it saw (device stage) and computed on (compute stage)."""
    devices = _probe_stage(result, "device").get("devices")
    names = {d.get("name") for d in devices if isinstance(d, dict)} if isinstance(devices, list) else set()
    names.add(_probe_stage(result, "compute").get("device"))
    return {name for name in names if isinstance(name, str) and name.strip()}


def same_gpu(name, seen: set[str]) -> bool:
    """A GPU class's name agrees with the names its probe saw: equal, or one holds the other, folded."""
    mine = _folded(name)
    return any(mine == other or mine in other or other in mine for other in map(_folded, seen))


SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")  # a line that may hold one; has_lone_surrogate() says whether it does


def has_lone_surrogate(value) -> bool:
    """Whether a parsed record holds a string with half a UTF-16 pair (JSON's "\\ud800" alone): text no UTF-8 store,
    file or terminal can hold, which the store's insert met as UnicodeEncodeError (exit 3)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(has_lone_surrogate(k) or has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_lone_surrogate(v) for v in value)
    return False


class SweepChecks:
    """One sweep's records as verify() reads them; check() gives why a record is implausible (a phrase completing
    "<bundle> ..."), or None. Records that are not objects are left to merge(), which refuses them."""

    def __init__(self, number: int):
        self.number = number  # the sweep's place in the bundle, 1 first
        self.targets: dict = {}  # ref -> name
        self.stacks: dict = {}  # ref -> framework
        self.cells: set = set()

    def check(self, kind: str, body) -> str | None:
        if not isinstance(body, dict):
            return None
        where = f"sweep {self.number} of the bundle"
        if kind in ("target", "stack"):
            ref = body.get("ref")
            held = self.targets if kind == "target" else self.stacks
            if isinstance(ref, (dict, list)) or ref in held:
                return f"holds {'GPU class' if kind == 'target' else 'stack'} {_said(ref)} twice in {where} (a bundle gpucompat writes holds each once)"
            if kind == "target":
                held[ref] = body.get("name")
                return None
            framework, version = body.get("framework"), body.get("version")
            if framework not in FRAMEWORKS:
                return f"names a framework gpucompat does not know, {_said(framework)}, in {where} (it knows {', '.join(FRAMEWORKS)})"
            if version != "installed" and parsed_version(version) is None:
                return f"gives {framework} the version {_said(version)} in {where}, which is not a version"
            held[ref] = framework
            return None
        if kind != "cell":
            return None
        pair = (body.get("stack"), body.get("target"))
        if any(isinstance(part, (dict, list)) for part in pair):
            return None  # merge() refuses a cell naming no stack or class
        if pair in self.cells:
            return (f"holds one cell twice in {where}: stack {_said(pair[0])} on GPU class {_said(pair[1])} (a bundle gpucompat writes "
                    "holds each cell once)")
        self.cells.add(pair)
        result = body.get("result")
        if not isinstance(result, dict):
            return None
        code = result.get("code")
        if code is None:
            return None  # a missing column is merge()'s to refuse (bundle._row), in the transaction
        if code not in CODES:
            return f"holds a verdict gpucompat does not have, {_said(code)}, in {where} (its codes: {', '.join(sorted(CODES))})"
        framework = self.stacks.get(pair[0], "the stack")
        if code == Code.PASS.value and result.get("observed") is not False:
            found = installed_version(result)
            if parsed_version(found if isinstance(found, str) else None) is None:
                return (f"holds a PASS of {framework} in {where} whose probe recorded no installed version"
                        + (f" (it says {_said(found)})" if found else "") + ": a probe that ran a stack records the version it imported")
        seen = device_names(result)
        gpu = self.targets.get(pair[1])
        if seen and isinstance(gpu, str) and not same_gpu(gpu, seen):
            return (f"names a GPU class {_said(gpu)} in {where} that its own probe contradicts: the probe saw "
                    f"{', '.join(_said(name) for name in sorted(seen))}")
        return None
