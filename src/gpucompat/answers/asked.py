"""One question, read once at the command's edge: `explain` and `advise` turn what was typed into one `Asked`
(the stack or framework, the GPU, the driver and the Python, with a note for every reading that was not literally
what the user wrote), and the answer flows from it: read -> judge -> nearest -> view. Reading includes a
requirements file's parse (-r) and a pool's GPU classes (--pool: its discovery or its plan's targets). Only a
question read without error is answered, and only then is the store asked for what it observed.

What is assumed is said: a Python not given is this interpreter's for a question about this machine, and, for one
about another (--gpu, --cc, --driver or --pool), the newest Python the release has Linux wheels for (the wheel
tables know which; this interpreter's says nothing of the other machine); a bare driver branch (`--driver 550`) is
read as the first release of that branch the knowledge names (every release of a production branch reports the
branch's one CUDA version, so the CUDA it supports is the branch's); what is not given of the GPU and driver is
this machine's (target.where).
"""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import UserError
from ..knowledge import tables
from ..knowledge.rules import branch_releases, wheel_pythons
from ..model import DRIVER_VERSION, EXECUTORS, KERNEL_MODULES, PYTHON_VERSION, Target
from .questions import Question, framework_name, release_of, spec_text
from .questions import read as read_stack
from .target import where

if TYPE_CHECKING:
    from .lockfiles import Parsed

# A question may name any Python a release was built for, from 3.6 on (the wheel tables cover torch 1.x);
# only a test needs the probe, which runs on 3.8 and newer.
QUESTION_PYTHON = re.compile(r"3\.([6-9]|1[0-5])", re.ASCII)
BARE_BRANCH = re.compile(r"[0-9]{3}", re.ASCII)
NEWEST = "newest with wheels"  # python_from of a question about another machine: each build on its newest wheel Python
ELSEWHERE = "--gpu, --cc, --driver or --pool"
MAX_CLASSES = 10000


@dataclass(frozen=True)
class PoolClass:
    """One GPU class of a site, read once at the command's edge (resolve_pool): every --pool answer judges, looks up
    observations for and selects the class through this one reading. The compute capability is the pool's own where
    it says one, else the knowledge's for the GPU name (one lookup, whether the plan names cc or not)."""

    target: Target  # the class as the pool gave it: count, gres, features, selector, nodes
    name: str | None  # the GPU name as the pool reports it
    matched: str | None  # the knowledge's name for it (None: a name the knowledge does not hold)
    cc: str | None
    cc_from: str  # "the pool", "the knowledge" or "unknown"
    driver: str | None  # the driver judged (class_driver)
    driver_from: str
    request: str | None  # how to ask the scheduler for one GPU of the class
    kernel_module: str | None = None  # the driver's kernel module, 'open' or 'proprietary': the class's own, else --kernel-module
    pythons: tuple[str, ...] = ()  # the Pythons it is judged on: --python or the plan's; () each release's newest

    @property
    def gpu(self) -> str | None:
        """The name the rules judge: the knowledge's where it holds the GPU, else the pool's."""
        return self.matched or self.name

    @property
    def label(self) -> str:
        return self.name or f"CC {self.cc}"

    @property
    def key(self) -> tuple:
        """What a judgement depends on: classes with the same key get the same answer (judged once per command)."""
        return (self.gpu, self.cc, self.driver, self.kernel_module)

    def where(self) -> dict:
        """The class as a one-GPU question reads its target (target.target's fields)."""
        supported = tables.driver_cuda(self.driver) if self.driver else None
        row = tables.gpu(self.name) if self.name else None
        return {"gpu": self.name, "matched": self.matched, "cc": self.cc,
                "cc_source": "the pool" if self.cc_from == "the pool" else (row or {}).get("source"),
                "cc_confidence": "high" if self.cc_from == "the pool" else (row or {}).get("confidence", "high") if row else None,
                "driver": self.driver, "driver_cuda": supported["cuda"] if supported else None, "gpu_read_as": None,
                "kernel_module": self.kernel_module}


@dataclass(frozen=True)
class Pool:
    """--pool as read: the executor whose requests apply, its classes, where they came from, and the Pythons the plan lists."""

    executor: str
    classes: tuple[PoolClass, ...]
    origin: str
    plan_pythons: tuple[str, ...] = ()  # the plan's own python lists (empty: it lists none, or the pool is discovered)


@dataclass(frozen=True)
class Asked:
    """A question as read: what is asked about, on what, with which Python; `notes` say how each part was read."""

    mode: str  # "stack", "requirements" (-r FILE), "pool" (--pool) or "advise"
    framework: str | None  # the framework asked about (None for -r: the file names its own)
    stack: Question | None  # the stack asked about (explain SPEC and --pool); None for -r and advise
    target: dict | None  # the GPU and driver as read (target.where); None for --pool, whose classes are their own
    driver: str | None  # the driver as read: a bare branch as its first known release (--pool: the one assumed)
    driver_typed: str | None  # the driver as given (None: this machine's, or none for --pool)
    python: str | None  # the Python judged; None: not checked, or (NEWEST) each build's newest wheel Python
    python_from: str  # "given" (--python), "this interpreter", NEWEST (a question about another machine) or "not checked"
    notes: tuple[str, ...] = ()  # how the stack, the driver, the GPU and the Python were read, in that order
    requirements: str | None = None  # -r FILE as given ('-': standard input)
    parsed: Parsed | None = None  # that file as read (answers/lockfiles.py)
    pool: str | None = None  # --pool as given
    classes: Pool | None = None  # its GPU classes, each read once (resolve_pool)

    def target_view(self) -> dict:
        """The target as an answer shows it: the GPU and driver as read, the driver as typed, the Python and why."""
        return {**(self.target or {}), "driver_typed": self.driver_typed, "python": self.python, "python_from": self.python_from}


def check_python(python: str | None) -> list[str]:
    """Notes for a Python the probe cannot test (3.6, 3.7); one sentence for what is not a Python version."""
    if python is not None and not QUESTION_PYTHON.fullmatch(python):
        raise UserError(f"--python {python[:20]!r} is not a Python version from 3.6 to 3.15, like '3.11'.")
    if python is not None and not PYTHON_VERSION.fullmatch(python):
        return [f"Python {python}: answered from the knowledge's wheel tables; gpucompat's probe needs Python 3.8 or newer, "
                "so a sweep or check cannot test this Python"]
    return []


def read_python(python: str | None, elsewhere: bool = False) -> tuple[str | None, str, list[str]]:
    """(the Python judged, where it came from, notes): as given; else, for a question about another machine (`elsewhere`:
    --gpu, --cc, --driver or --pool), NEWEST, each build judged on the newest Python it has wheels for (newest_python,
    said once the build is known: python_note); else this interpreter's, as a sweep's plan assumes."""
    if python is not None:
        return python, "given", check_python(python)
    if elsewhere:
        return None, NEWEST, []
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if QUESTION_PYTHON.fullmatch(here):
        return here, "this interpreter", [f"Python {here}: this interpreter's, as a sweep assumes (give --python X.Y to ask about another)"]
    return None, "not checked", [f"Python not checked: this interpreter's {here} is outside the 3.6 to 3.15 the wheel tables describe "
                                 "(give --python X.Y)"]


def newest_python(framework: str, version: str, variant: str) -> str | None:
    """The newest Python this build's release has Linux x86_64 wheels for (rules.wheel_pythons: python_wheels.csv); None
    where the tables do not know."""
    pythons = wheel_pythons(framework, release_of(framework, version, variant), variant)
    return max(pythons, key=lambda p: tuple(int(n) for n in p.split("."))) if pythons else None


def python_note(framework: str, version: str, variant: str, python: str | None) -> str:
    """What a question about another machine assumed of the Python, and why (python_from NEWEST)."""
    spec = spec_text(framework, version, variant)
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    if python is None:
        return (f"Python not checked: the question is about another machine ({ELSEWHERE}) and the knowledge's wheel tables list "
                f"no Python for {spec} (give --python X.Y)")
    return (f"Python {python}: the newest {spec} has Linux x86_64 wheels for, assumed because the question is about another "
            f"machine ({ELSEWHERE}), not this interpreter's {here} (give --python X.Y for another)")


def read_driver(driver: str | None) -> tuple[str | None, list[str]]:
    """(the driver judged, notes): a bare branch such as 550 as the first release of R550 the knowledge names (the
    oldest of rules.branch_releases: the minimum drivers of the tables, which are each branch's first releases)."""
    if driver is None or not isinstance(driver, str) or not BARE_BRANCH.fullmatch(driver):
        return driver, []
    releases = branch_releases(int(driver))
    if releases:
        first = releases[0]
        cuda = (tables.driver_cuda(first) or {}).get("cuda", "?")
        return first, [f"driver {driver} read as {first}, the first release of branch R{driver} the knowledge names (CUDA {cuda}; "
                       f"every R{driver} release supports CUDA {cuda}); give the full version nvidia-smi shows for another"]
    supported = tables.driver_cuda(driver)
    reach = f"read as supporting CUDA {supported['cuda']}, the newest CUDA whose minimum driver it meets" if supported else \
        "older than every CUDA release in the knowledge tables"
    return driver, [f"driver {driver}: the knowledge names no release of branch R{driver}; {reach} "
                    "(give the full version nvidia-smi shows)"]


def read_kernel_module(kernel_module: str | None, here: bool) -> tuple[str | None, list[str]]:
    """(the driver's kernel module judged, notes): as given (--kernel-module); else, where the driver is this machine's
    (`here`), the flavour /proc/driver/nvidia/version says is loaded; else None, and the rules assume one and say which."""
    if kernel_module is not None:
        if kernel_module not in KERNEL_MODULES:
            raise UserError(f"--kernel-module {kernel_module[:40]!r} is not a driver kernel module; give open or proprietary.")
        return kernel_module, []
    if not here:
        return None, []
    from ..discover.local import proc_kernel_module

    found = proc_kernel_module()
    return found, ([f"kernel module: {found}, this machine's, read from /proc/driver/nvidia/version (give --kernel-module "
                    "to ask about the other)"] if found else [])


def pool_targets(pool: str) -> tuple[str, list[Target], str, tuple[str, ...]]:
    """--pool as given: (the executor whose requests apply, the GPU classes, where they came from, the Pythons a plan
    lists), the way a sweep finds them: the executor's discovery, or a plan's [[targets]] (its "discover" or "local"
    as the sweep reads them)."""
    if pool in EXECUTORS:
        from ..executors import discover

        return pool, _found(pool, discover(pool)), f"{pool} discovery", ()
    path = Path(pool)
    if path.suffix != ".toml" or not path.is_file():
        raise UserError(f"--pool {pool[:60]!r} is neither a pool ({', '.join(EXECUTORS)}) nor a plan file (PLAN.toml) that exists.")
    from ..plan import load_plan  # only a --pool PLAN reads a plan: explain's other forms never load the reader

    spec, text = load_plan(path)
    pythons = plan_pythons(spec, text)
    if isinstance(spec.targets, tuple):
        return spec.executor, list(spec.targets), f"the [[targets]] of {path.name}", pythons
    from ..executors import discover

    return (spec.executor, _found(spec.executor, discover(spec.executor)), f"{spec.executor} discovery (targets = \"{spec.targets}\" in {path.name})",
            pythons)


def plan_pythons(spec, text: str) -> tuple[str, ...]:
    """The Pythons a plan lists (its python = [...] and its stacks' own), as versions sort; none where it lists none (a plan
    without python tests this interpreter's, which says nothing of the site's)."""
    import tomllib

    data = tomllib.loads(text)
    listed = "python" in data or any(isinstance(s, dict) and "python" in s for s in data.get("stacks") or [])
    found = {p for stack in spec.stacks for p in stack.pythons if p != "current"} if listed else set()
    return tuple(sorted(found, key=lambda p: tuple(int(n) for n in p.split("."))))


def class_driver(target: Target, assumed: str | None) -> tuple[str | None, str]:
    """The driver a class is judged with, and where it came from: its own; for HTCondor, which advertises only the CUDA the
    driver supports, the oldest driver of that CUDA (a lower bound); else the --driver given for every class."""
    if target.driver:
        return target.driver, "its own"
    if target.cuda_driver and (row := tables.cuda_row(target.cuda_driver)):
        return row["toolkit_driver_min"], f"at least, for the CUDA {target.cuda_driver} it advertises"
    if assumed:
        return assumed, "assumed: --driver"
    return None, "not reported by the pool: give --driver to assume one"


def check_pool(targets: list[Target], driver: str | None) -> None:
    """One sentence for a --driver that is no driver version, or a pool past MAX_CLASSES classes."""
    if driver is not None and not DRIVER_VERSION.fullmatch(driver):
        raise UserError(f"--driver {driver[:40]!r} is not a driver version like '535.104.05'.")
    if len(targets) > MAX_CLASSES:
        raise UserError(f"the pool has {len(targets)} GPU classes; gpucompat answers for at most {MAX_CLASSES}.")


def scheduler_request(executor: str, target: Target) -> str | None:
    """How to ask the scheduler for one GPU of this class, written with the executor's own request code."""
    if executor == "slurm":
        from ..executors.slurm import request_args

        return shlex.join(["sbatch", *request_args(target)])  # a line to paste: --constraint=a&b is quoted
    if executor == "kubernetes":
        from ..executors.kubernetes.manifest import node_selector

        selector = node_selector(target)
        return "nodeSelector: {" + ", ".join(f"{k}: {v}" for k, v in selector.items()) + "}" if selector else None
    if executor == "htcondor":
        return htcondor_request([target])
    return None


def htcondor_request(targets: list[Target]) -> str | None:
    """One submit description's GPU request that matches any of the classes."""
    from ..executors.htcondor import gpu_requirement

    clauses = [c for c in (gpu_requirement(t) for t in targets) if c]
    if not clauses:
        return None
    joined = " || ".join(f"({c})" for c in dict.fromkeys(clauses)) if len(clauses) > 1 else clauses[0]
    return f"request_GPUs = 1\nrequire_gpus = {joined}"


def resolve_pool(executor: str, targets: list[Target], origin: str, driver: str | None, pythons: tuple[str, ...] = (),
                 plan_pythons: tuple[str, ...] = (), kernel_module: str | None = None) -> Pool:
    """Each class read once: its GPU as the knowledge names it, its compute capability, its driver, its scheduler request,
    its driver's kernel module (the class's own, else --kernel-module's for every class)."""
    check_pool(targets, driver)
    classes = []
    for t in targets:
        row = tables.gpu(t.name) if t.name else None
        cc = t.cc or (row or {}).get("cc")
        class_drv, driver_from = class_driver(t, driver)
        classes.append(PoolClass(t, t.name or None, row["name"] if row else None, cc,
                                 "the pool" if t.cc else "the knowledge" if cc else "unknown", class_drv, driver_from,
                                 scheduler_request(executor, t), t.kernel_module or kernel_module, pythons))
    return Pool(executor, tuple(classes), origin, plan_pythons)


def read_pool(pool: str, driver: str | None, python: str | None, kernel_module: str | None = None) -> Pool:
    """--pool read once, every class resolved: judged on --python where given, else on the Pythons the plan lists."""
    executor, targets, origin, listed = pool_targets(pool)
    kernel_module, _notes = read_kernel_module(kernel_module, here=False)
    return resolve_pool(executor, targets, origin, driver, (python,) if python else listed, listed, kernel_module)


def _found(executor: str, targets: list[Target]) -> list[Target]:
    """The discovered classes; local discovery's placeholder for a machine without a GPU is none."""
    found = [t for t in targets if t.count or executor != "local"]
    if not found:
        raise UserError(f"{executor} discovery found no GPU class, so there is nothing to answer for; give --gpu and --driver instead of --pool.")
    return found


def read(spec, requirements: str | None = None, pool: str | None = None, gpu: str | None = None, cc: str | None = None,
         driver: str | None = None, python: str | None = None, stdin_text: str | None = None, kernel_module: str | None = None) -> Asked:
    """`explain`'s question, in its three forms: a stack, a requirements file (-r), a pool (--pool). `kernel_module`: the
    driver's flavour (--kernel-module); with --pool, every class's that does not say its own."""
    if requirements is not None and (spec or pool):
        raise UserError("-r judges a file: give it without a stack spec or --pool.")
    if requirements is None and not spec:
        raise UserError("give a stack to ask about (e.g. torch==2.4.1 or 'torch 2.4'), or -r requirements.txt.")
    if pool is not None and (gpu or cc):
        raise UserError("--pool answers for the pool's own GPU classes: leave out --gpu and --cc.")
    stack = read_stack(spec) if requirements is None else None
    # a file's Python is the one it was frozen with, as likely this interpreter's: only a stack's is taken as the newest
    python, python_from, python_notes = read_python(python, elsewhere=bool(stack and (gpu or cc or driver or pool)))
    typed_driver = driver
    driver, driver_notes = read_driver(driver)
    if pool is not None:
        return Asked("pool", stack.framework, stack, None, driver, typed_driver, python, python_from, tuple(stack.notes + driver_notes + python_notes),
                     pool=pool, classes=read_pool(pool, driver, python, kernel_module))
    module, module_notes = read_kernel_module(kernel_module, here=typed_driver is None)
    found, target_notes = where(gpu, cc, driver)
    found, target_notes = {**found, "kernel_module": module}, target_notes + module_notes
    if stack is not None:
        return Asked("stack", stack.framework, stack, found, found["driver"], typed_driver, python, python_from,
                     tuple(stack.notes + driver_notes + target_notes + python_notes))
    from .lockfiles import load

    return Asked("requirements", None, None, found, found["driver"], typed_driver, python, python_from,
                 tuple(driver_notes + target_notes + python_notes), requirements=requirements, parsed=load(requirements, stdin_text))


def read_advice(framework: str | None, gpu: str | None, cc: str | None, driver: str | None, python: str | None,
                kernel_module: str | None = None) -> Asked:
    """`advise`'s question: a framework as people name it (pytorch, tf, cupy-cuda12x...) on a GPU, driver and kernel module."""
    framework, _variant, notes = framework_name(framework)
    python, python_from, python_notes = read_python(python, elsewhere=bool(gpu or cc or driver))
    if python_from == NEWEST:
        python_notes = [f"Python {sys.version_info[0]}.{sys.version_info[1]} is this interpreter's, which says nothing of another "
                        f"machine ({ELSEWHERE}): each release is judged on the newest Python it has Linux x86_64 wheels for "
                        "(give --python X.Y for one)"]
    typed_driver = driver
    driver, driver_notes = read_driver(driver)
    module, module_notes = read_kernel_module(kernel_module, here=typed_driver is None)
    found, target_notes = where(gpu, cc, driver)
    found, target_notes = {**found, "kernel_module": module}, target_notes + module_notes
    if found["cc"] is None:
        raise UserError(f"the knowledge holds no GPU named {found['gpu'][:80]!r}, so its compute capability is unknown; give --cc X.Y instead.")
    return Asked("advise", framework, None, found, found["driver"], typed_driver, python, python_from,
                 tuple(notes + driver_notes + target_notes + python_notes))
