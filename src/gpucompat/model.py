"""The types that flow through the pipeline (see DESIGN.md), and nothing else."""

from __future__ import annotations

import re

from dataclasses import dataclass, field
from enum import Enum

FRAMEWORKS = ("torch", "tensorflow", "jax", "cupy", "cuda-runtime")
ENV_PROVIDERS = ("uv", "current", "conda", "container")
# executors/__init__.py registers one backend under each name (tests/test_architecture.py checks it)
EXECUTORS = ("local", "slurm", "htcondor", "kubernetes")


class Stage(str, Enum):
    """The ladder a cell climbs; the first rung it cannot reach is its verdict."""

    RESOLVE = "resolve"
    SCHEDULE = "schedule"
    INSTALL = "install"
    IMPORT = "import"
    DEVICE = "device"
    COMPUTE = "compute"
    BENCH = "bench"

    def __str__(self) -> str:
        return self.value


# The rungs the probe itself climbs inside a job (bench, when asked, comes after them).
PROBE_STAGES = (Stage.IMPORT.value, Stage.DEVICE.value, Stage.COMPUTE.value)


class Code(str, Enum):
    """Verdict codes. Stable strings: the store, reports, diffs and scripts depend on them."""

    PASS = "PASS"
    ENV_UNRESOLVABLE = "ENV_UNRESOLVABLE"  # the index answered: no such version, no wheel, conflicting pins
    # a job no node could run: stored before the cause not-scheduled, and read as it (analysis.as_read); never written now
    NO_MATCH = "NO_MATCH"
    ENV_INSTALL_FAILED = "ENV_INSTALL_FAILED"
    IMPORT_FAILED = "IMPORT_FAILED"
    NO_DEVICE = "NO_DEVICE"
    DRIVER_TOO_OLD = "DRIVER_TOO_OLD"
    ARCH_UNSUPPORTED = "ARCH_UNSUPPORTED"
    PTX_TOOLCHAIN_TOO_NEW = "PTX_TOOLCHAIN_TOO_NEW"
    COMPUTE_ERROR = "COMPUTE_ERROR"
    COMPUTE_WRONG = "COMPUTE_WRONG"
    TIMEOUT = "TIMEOUT"
    CRASHED = "CRASHED"  # a crash that no signature explains
    INTERNAL = "INTERNAL"  # gpucompat's own bug, never the stack's
    UNTESTED = "UNTESTED"  # the test could not be carried out: no verdict, see its cause

    def __str__(self) -> str:
        return self.value


STAGES = tuple(stage.value for stage in Stage)
PASS = Code.PASS.value
UNTESTED = Code.UNTESTED.value
# The codes that say a stack is broken (everything but PASS and UNTESTED).
FAILURE_CODES = tuple(code.value for code in Code if code not in (Code.PASS, Code.UNTESTED))

# Every pattern is matched whole (fullmatch) with ASCII classes only. Here, not in plan.py, so that explain reads a
# version without loading the plan reader (docs/performance.md).
PYTHON_VERSION = re.compile(r"3\.(8|9|1[0-5])", re.ASCII)  # the probe needs 3.8+; 3.15 is the newest in sight
CC_VERSION = re.compile(r"[0-9]{1,2}\.[0-9]", re.ASCII)  # a compute capability, or a CUDA version "12.2"
DRIVER_VERSION = re.compile(r"[0-9]{3}(\.[0-9]{1,3}){0,2}", re.ASCII)

# Why a cell could not be tested: nothing here is the stack's fault (DCGM's "could not run").
UNTESTED_CAUSES = {
    "network": "the network failed (DNS, connection, TLS or timeout) while fetching packages",
    "index": "the package index did not answer properly (refused, or a server error)",
    "wheelhouse": "the wheelhouse does not hold the wheels this stack needs",
    "offline-cache": "offline, and uv's cache does not hold what this stack needs",
    "python-download": "the Python this stack needs is not on the node and could not be downloaded",
    "disk": "the disk filled up or a quota was reached",
    "scheduler": "the scheduler lost or refused the job (node failure, preemption)",
    "not-scheduled": "the job never started: the scheduler could not place it (no node matched its request) or it was cancelled before it ran",
    "image": "the container image could not be pulled, or lacks what the job needs",
    "runtime": "the node has no container runtime that can run the image (apptainer, singularity, podman, docker)",
    "interrupted": "the job was stopped from outside before it finished",
    "resolver": "the resolver (uv, or py-rattler for conda) failed or ran out of time without saying the stack is impossible",
    "installer": "the node has no conda installer (micromamba, mamba, conda, or py-rattler for its python3)",
    "gpu-busy": "other processes held the GPU (its memory, or its only context), so this job had no room on it; run it again when the GPU is free",
    "not-installed": "not installed here: env = \"current\" tests this interpreter as it is (install the framework there, or use env = \"uv\")",
    "gpu-fault": "the GPU itself failed while the job ran (an Xid, an uncorrectable ECC error, or it fell off the bus); an admin should drain the node and check the GPU",
    "no-gpu": "no GPU here: no NVIDIA driver, or none of its GPUs visible to the job, so no stack can be tested on a GPU",
    "env-fault": "the job's environment (the libcuda it loads, its limits, device nodes or variables) keeps CUDA from starting or from running the stack, so the stack was not tested",
}

# Causes that are expected on an ordinary machine and say nothing went wrong: a sweep that met only these
# exits 0 (a fresh machine's quick sweep has no torch in its interpreter), `check` still exits 4.
EXPECTED_CAUSES = frozenset({"not-installed", "no-gpu"})


@dataclass(frozen=True)
class Timeouts:
    """Seconds. Stage timeouts bound one rung; `cell` bounds the whole job."""

    install: float = 1200.0
    import_: float = 300.0
    device: float = 120.0
    compute: float = 300.0
    bench: float = 600.0
    cell: float = 1800.0
    pending: float = 3600.0

    def for_stage(self, stage: str) -> float:
        return getattr(self, "import_" if stage == "import" else stage, self.cell)


BENCH_MEASUREMENTS = ("matmul", "copy", "transfer", "launch", "train")
BENCH_DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8")


@dataclass(frozen=True)
class BenchSpec:
    """The optional bench rung: what the probe measures after compute passed (its timeout is Timeouts.bench)."""

    measurements: tuple[str, ...] = BENCH_MEASUREMENTS
    dtypes: tuple[str, ...] = BENCH_DTYPES
    size: int = 8192  # the matrix products' n: large enough to saturate a datacenter GPU
    repetitions: int = 10
    share: tuple[int, ...] = ()  # process counts sharing one GPU, e.g. (1, 2, 4); () = no sharing measurement
    scale: tuple[int, ...] = ()  # GPU counts for data-parallel training (torch, JAX), e.g. (1, 2, 4); () = none
    nodes: tuple[int, ...] = ()  # Slurm node counts for that training, max(scale) GPUs on each, e.g. (1, 2); () = one node
    profile: tuple[int, int] | None = None  # (start, steps): the framework's profiler (torch, JAX) around that window of training steps

    def probe_config(self) -> dict:
        return {"measurements": list(self.measurements), "dtypes": list(self.dtypes), "size": self.size, "repetitions": self.repetitions,
                **({"share": list(self.share)} if self.share else {}), **({"scale": list(self.scale)} if self.scale else {}),
                **({"nodes": list(self.nodes)} if self.nodes else {}),
                **({"profile": {"start": self.profile[0], "steps": self.profile[1]}} if self.profile else {})}


@dataclass(frozen=True)
class StackSpec:
    """One [[stacks]] table of a plan, before the version space is expanded."""

    framework: str
    versions: str | tuple[str, ...]  # exact list, a PEP 440 range, or "latest:N"
    variants: tuple[str, ...]
    pythons: tuple[str, ...]
    env: str
    channels: tuple[str, ...] = ()  # env "conda": the channels to solve against, in priority order
    image: str | None = None  # env "container": the image (docker://, oras://, a .sif path, a local name)
    runtime: str | None = None  # env "container": apptainer, singularity, podman or docker; None: the first the node has


# The two flavours of every Linux driver release's kernel modules (/proc/driver/nvidia/version says which is loaded):
# they drive different GPUs (knowledge/driving.py).
KERNEL_MODULES = ("open", "proprietary")


@dataclass(frozen=True)
class Target:
    """A GPU class: identical devices that a job can be sent to."""

    name: str  # device name as the driver reports it, or a declared class name
    cc: str | None = None  # compute capability "9.0"
    driver: str | None = None  # driver version "580.159.04"
    cuda_driver: str | None = None  # newest CUDA the driver supports, "13.0"
    memory_mib: int | None = None
    count: int = 0
    devices: tuple[str, ...] = ()  # CUDA_VISIBLE_DEVICES values that select it
    declared: bool = False  # from the plan, not discovered
    gres: str | None = None  # Slurm GRES type ("a100" in gpu:a100:1)
    features: tuple[str, ...] = ()  # Slurm node features to require (--constraint)
    selector: tuple[str, ...] = ()  # Kubernetes node labels "key=value" that select it
    nodes: tuple[str, ...] = ()  # the nodes that have it, where discovery knows
    mig: bool | None = None  # MIG mode, where discovery knows (True for a MIG instance)
    # A MIG instance (local discovery: each is its own target, `devices` its MIG-... UUID, `name` NVML's,
    # "NVIDIA A100-SXM4-40GB MIG 3g.20gb"): its profile, its compute slices, its GPU instance's and the
    # whole GPU's (3 of 7), and the whole GPU's UUID.
    mig_profile: str | None = None
    mig_slices: int | None = None
    mig_gi_slices: int | None = None
    mig_gpu_slices: int | None = None
    parent: str | None = None
    kernel_module: str | None = None  # the driver's kernel module, one of KERNEL_MODULES (None: not known)

    @property
    def key(self) -> str:
        parts = [self.name]
        if self.cc:
            parts.append(f"cc{self.cc}")
        if self.driver:
            parts.append(f"drv{self.driver}")
        return " ".join(parts)


@dataclass(frozen=True)
class SweepSpec:
    name: str
    stacks: tuple[StackSpec, ...]
    targets: str | tuple[Target, ...]  # "local", "discover" (the executor's pool), or declared GPU classes
    timeouts: Timeouts = field(default_factory=Timeouts)
    executor: str = "local"
    max_parallel_installs: int | None = None  # None: derived from the node (concurrency.limits)
    max_parallel_probes: int | None = None
    platform: str = "x86_64-manylinux_2_28"
    wheelhouse: str | None = None
    offline: bool = False
    executor_options: dict = field(default_factory=dict)  # {"slurm": the plan's [slurm] table, ...}
    bench: BenchSpec | None = None  # None: no bench rung
    max_cells: int = 10_000  # the plan's max_cells: a plan of more cells is refused before anything is resolved or written


@dataclass(frozen=True)
class Stack:
    """One point of the version space: what gets installed and probed."""

    framework: str
    version: str  # exact version, CUDA minor series for cuda-runtime, or "installed"
    variant: str
    python: str  # "3.11", or an interpreter path for env "current"
    env: str
    requirements: tuple[str, ...] = ()
    index_url: str | None = None  # an extra index with priority (PyTorch's variant indexes)
    channels: tuple[str, ...] = ()  # env "conda": its channels (requirements are then conda match specs)
    image: str | None = None  # env "container": the image the framework is tested in, as it is
    runtime: str | None = None  # env "container": the runtime the plan asks for, if any

    @property
    def key(self) -> str:
        if self.env == "current":
            return f"{self.framework} (as installed in the current interpreter)"
        if self.env == "container":
            return f"{self.framework} (as installed in the image {self.image})" + (f" [{self.runtime}]" if self.runtime else "")
        return f"{self.framework}=={self.version} [{self.variant}] py{self.python} {self.env}"


@dataclass(frozen=True)
class ResolvedStack:
    """The submit side's answer for a stack: pinned packages, or why there are none."""

    stack: Stack
    ok: bool
    pins: tuple[str, ...] = ()
    cuda_runtime: str | None = None
    cudnn: str | None = None
    error: str | None = None  # resolver output when not ok
    cause: str | None = None  # not ok because uv could not ask (an UNTESTED_CAUSES key), not because the index said no

    @property
    def env_key(self) -> str:
        """Cells whose stacks pin the same packages share one environment."""
        import hashlib

        text = "\n".join((self.stack.env, self.stack.python, *self.pins, *filter(None, (self.stack.image, self.stack.runtime))))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass
class Cell:
    id: int
    stack: Stack
    target: Target
    resolved: ResolvedStack


@dataclass
class Observation:
    """What came back from a job: the probe's facts and how the process ended."""

    facts: dict  # the probe's result.json ({} if it never wrote one)
    returncode: int | None = None
    signal: int | None = None
    timed_out_stage: str | None = None  # set by the parent when it killed the job
    install_log: str = ""  # tail of the environment build log
    install_failed: bool = False
    no_match: str | None = None  # the executor's reason no node could run it
    stderr: str = ""  # tail of the probe's stderr
    internal: str | None = None  # gpucompat's own error while running the job
    untested: tuple[str, str] | None = None  # (cause, what happened): the executor could not carry the test out
    duration_s: float = 0.0


@dataclass
class Outcome:
    """The verdict for a cell: PASS, a failure code or UNTESTED, the stage, and the evidence."""

    code: str
    stage: str
    summary: str  # one human sentence
    evidence: dict = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    cause: str | None = None  # for UNTESTED: a key of UNTESTED_CAUSES

    @property
    def passed(self) -> bool:
        return self.code == PASS


def is_verified(row: dict) -> bool:
    """Whether a stored row may be taken at its word: run here (no source: the store's query reads True, a row made without
    the column has none), or imported with a verified voucher: a signature by a key this site trusts as the sweep's own
    site (sources.verified). The one reading of `verified`: every view asks this, none defaults the key itself."""
    return row.get("verified") is None or bool(row["verified"])
