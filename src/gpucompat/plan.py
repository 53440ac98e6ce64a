"""Plan file (TOML) -> a validated SweepSpec. Every mistake gets one clear sentence."""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace
from pathlib import Path

from packaging.version import InvalidVersion, Version

from .errors import UserError
from .knowledge import tables
from .model import (BENCH_DTYPES, BENCH_MEASUREMENTS, CC_VERSION, DRIVER_VERSION, ENV_PROVIDERS, EXECUTORS, FRAMEWORKS, KERNEL_MODULES,
                    PYTHON_VERSION, BenchSpec, StackSpec, SweepSpec, Target, Timeouts)
from .paths import read_user_text
from .quoting import CONTROL_CHARACTERS
from .sbatch_options import check_extra_sbatch

# Imported where used, not here: `explain` reads a spec through this module and must start in
# well under 300 ms, and packaging's specifiers, tomllib and the executors cost ~70 ms together.

# Each executor's own table of the plan ([slurm], [htcondor], [kubernetes]): key -> kind of value.
EXECUTOR_OPTIONS = {
    "slurm": {"partition": "name", "account": "name", "qos": "name", "reservation": "name",
              "mem": "memory", "cpus_per_task": "count", "extra_sbatch": "sbatch_lines", "max_running": "limit",
              "build_first": "flag"},
    "htcondor": {"request_memory": "memory", "request_cpus": "count", "request_disk": "memory", "max_running": "limit"},
    "kubernetes": {"image": "image", "namespace": "namespace", "memory": "memory", "cpu": "count", "max_running": "limit"},
}
MAX_RUNNING = 100_000  # the largest max_running: far above any pool's GPU count; Slurm's %N, DAGMan's and the watcher's caps take it
TOP_KEYS = {
    "name", "executor", "targets", "python", "timeouts", "stacks",
    "max_parallel_installs", "max_parallel_probes", "platform", "wheelhouse", "offline", "bench", "max_cells", *EXECUTOR_OPTIONS,
}
MAX_CELLS = SweepSpec.max_cells  # cells a plan may expand to unless it raises `max_cells` (10,000)
BENCH_KEYS = {"measurements", "dtypes", "size", "repetitions", "timeout", "share", "scale", "nodes", "profile"}
STACK_KEYS = {"framework", "versions", "variants", "python", "env", "channels", "image", "runtime"}
TARGET_KEYS = {"name", "cc", "driver", "cuda_driver", "memory_mib", "count", "gres", "features", "kernel_module"}
TIMEOUT_KEYS = {"install", "import", "device", "compute", "bench", "cell", "pending"}

DEFAULT_VARIANTS = {
    "torch": ("default",),
    "tensorflow": ("and-cuda",),
    "jax": ("cuda12",),
    "cupy": ("cuda12x",),
    "cuda-runtime": ("default",),
}
KNOWN_VARIANTS = {  # matched with fullmatch
    "torch": re.compile(r"default|cpu|cu[0-9]{2,3}|rocm[0-9]{1,2}(\.[0-9]{1,2}){0,2}", re.ASCII),
    "tensorflow": re.compile(r"and-cuda|plain|gpu", re.ASCII),  # gpu: the tensorflow-gpu package (1.x to 2.11)
    # jax's extras: cuda12, cuda13, and the older cuda, cuda11_pip, cuda12_local, cuda11_cudnn82...
    "jax": re.compile(r"cpu|cuda([0-9]{2,3})?(_pip|_local|_cudnn[0-9]{2,3})?", re.ASCII),
    # cupy-cuda12x, cupy-cuda13x, and the per-CUDA packages of old: cupy-cuda80 ... cupy-cuda117
    "cupy": re.compile(r"cuda[0-9]{2,3}x?", re.ASCII),
    "cuda-runtime": re.compile(r"default", re.ASCII),
}
# Every pattern is matched against the whole string (fullmatch) with ASCII classes only:
# `$` would let a trailing newline through, and `\d` would accept other scripts' digits.
# PYTHON_VERSION, CC_VERSION and DRIVER_VERSION live in model.py: explain reads them without loading the plan reader
_DURATION = re.compile(r"\s*([0-9]{1,9}(?:\.[0-9]{1,9})?)\s*(s|m|h|d)?\s*", re.ASCII)
_LATEST = re.compile(r"latest:([0-9]{1,3})", re.ASCII)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)  # Slurm GRES types, features, partitions, accounts
# uv's --python-platform values for the Linux machines GPUs sit in
_PLATFORM = re.compile(r"linux|(x86_64|aarch64)-(unknown-linux-gnu|manylinux2014|manylinux_2_(1[7-9]|[2-3][0-9]|40))", re.ASCII)
_K8S_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", re.ASCII)  # RFC 1123 label: namespaces
# An image reference: registry[:port]/path[:tag][@digest], ASCII, no shell or YAML syntax.
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(:[0-9]{1,5})?(/[a-z0-9]+([._-][a-z0-9]+)*)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?", re.ASCII)
_SIF_PATH = re.compile(r"[A-Za-z0-9._/:@+=,%~-]+", re.ASCII)  # a SIF file's path, as apptainer gets it on its command line
MIN_TIMEOUT_S, MAX_TIMEOUT_S = 1, 30 * 86400
MAX_PLAN_BYTES = 1 << 20


def text_value(value: object, where: str, limit: int = 200) -> str:
    """A free-text value (a name): a string of printable characters, bounded in length.
    Control characters never pass: they would end a line in a script or a submit file."""
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where} must be a non-empty string.")
    if len(value) > limit:
        raise UserError(f"{where} is {len(value)} characters long; at most {limit} are allowed.")
    if CONTROL_CHARACTERS.search(value):
        raise UserError(f"{where} {value[:60]!r} contains a control character (a newline, tab, escape, or a bidirectional "
                        "mark or override such as U+202E that reorders text); remove it.")
    return value


def parse_duration(value: object, where: str) -> int:
    """'90', 90, '90s', '10m', '2h', '1d' -> whole seconds, rounded up, from 1 s to 30 days.
    Never 0: `timeout 0` and activeDeadlineSeconds 0 would mean no limit at all."""
    shown = repr(value)[:40]
    problem = f"{where}: {shown} is not a duration; write seconds (90) or '90s', '10m', '2h', '1d'."
    if isinstance(value, bool):
        raise UserError(problem)
    if isinstance(value, int):  # compared as an int: a 400-digit one would overflow a float
        seconds: float = value if value <= MAX_TIMEOUT_S else MAX_TIMEOUT_S + 1
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise UserError(problem)
        seconds = value
    else:
        match = _DURATION.fullmatch(str(value))
        if not match:
            raise UserError(problem)
        seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400, None: 1}[match.group(2)]
    if seconds <= 0:
        raise UserError(f"{where}: a duration must be greater than zero, not {shown}.")
    if seconds > MAX_TIMEOUT_S:
        raise UserError(f"{where}: {shown} is longer than 30 days; give at most '30d'.")
    return max(MIN_TIMEOUT_S, math.ceil(seconds))


def _version(item: object, where: str) -> str:
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        # TOML reads 2.10 as the number 2.1 (and 12.40 as 12.4): a version is only ever the string as written
        lost = " (a TOML number loses its trailing zeros: 2.10 is read as 2.1)" if isinstance(item, float) else ""
        raise UserError(f"{where}: {str(item)[:20]} is a number, not a version string; quote it: versions = [\"{str(item)[:20]}\"]{lost}.")
    text = item if isinstance(item, str) else ""
    if CONTROL_CHARACTERS.search(text) or tables.version(text) is None:  # also None past 64 characters
        raise UserError(f"{where}: {str(item)[:40]!r} is not a version (e.g. '2.4.1' or, for cuda-runtime, '12.4').")
    return text


def check_version_spec(spec: object, where: str) -> str | tuple[str, ...]:
    """An exact list, a PEP 440 range string, or 'latest:N'."""
    if isinstance(spec, list):
        if not spec:
            raise UserError(f"{where}: the list of versions is empty; name at least one.")
        return tuple(_version(item, where) for item in spec)
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"{where}: versions must be a list like ['2.4.1'], a range like '>=2.3,<2.6', or 'latest:N'.")
    spec = spec.strip()
    if spec.startswith("latest"):
        match = _LATEST.fullmatch(spec)
        if not match or not 1 <= int(match.group(1)) <= 100:
            raise UserError(f"{where}: {spec[:40]!r} is malformed; write 'latest:N' with N a whole number from 1 to 100.")
        return spec
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        if len(spec) > 200 or CONTROL_CHARACTERS.search(spec):
            raise InvalidSpecifier(spec)
        for item in SpecifierSet(spec):
            Version(item.version.replace(".*", ""))
    except (InvalidSpecifier, InvalidVersion, ValueError):
        raise UserError(f"{where}: {spec[:40]!r} is not a PEP 440 version range (e.g. '>=2.3,<2.6').") from None
    return spec


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; expected one of: {', '.join(sorted(allowed))}.")


def _pythons(value: object, where: str) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, (int, float)) and not isinstance(item, bool):
            # TOML reads 3.11 as a number (and 3.10 as 3.1): the fix is the same digits in quotes
            text = str(item) if not isinstance(item, float) or PYTHON_VERSION.fullmatch(str(item)) else f"{item}0"
            raise UserError(f"{where}: {str(item)[:20]} is a number, not a Python version string; quote it: python = [\"{text[:20]}\"].")
        if not isinstance(item, str) or not PYTHON_VERSION.fullmatch(item):
            raise UserError(f"{where}: {str(item)[:20]!r} is not a Python version from 3.8 to 3.15; write it as a string like '3.11'.")
    if not values:
        raise UserError(f"{where}: the list of Python versions is empty.")
    return tuple(values)


def _stack(table: object, index: int, default_pythons: tuple[str, ...]) -> StackSpec:
    where = f"[[stacks]] #{index}"
    if not isinstance(table, dict):
        raise UserError(f"{where}: each stack must be a table ([[stacks]] with framework = ...).")
    _check_keys(table, STACK_KEYS, where)
    framework = table.get("framework")
    if framework not in FRAMEWORKS:
        raise UserError(f"{where}: unknown framework {framework!r}; expected one of: {', '.join(FRAMEWORKS)}.")
    env = table.get("env", "uv")
    if env not in ENV_PROVIDERS:
        raise UserError(f"{where}: unknown env {env!r}; expected one of: {', '.join(ENV_PROVIDERS)}.")
    if env == "container":
        return _container_stack(table, where, framework)
    if "image" in table or "runtime" in table:
        raise UserError(f"{where}: 'image' and 'runtime' are for env = \"container\"; this stack's env is {env!r}.")
    if env == "current":
        # The interpreter already there decides the version; nothing is installed.
        versions: str | tuple[str, ...] = "installed"
        pythons: tuple[str, ...] = ("current",)
        if "versions" in table or "python" in table:
            raise UserError(f"{where}: env 'current' tests the interpreter running gpucompat; drop 'versions' and 'python'.")
    else:
        if "versions" not in table:
            raise UserError(f"{where}: 'versions' is missing (a list, a range like '>=2.3', or 'latest:N').")
        versions = check_version_spec(table["versions"], f"{where} versions")
        pythons = _pythons(table["python"], f"{where} python") if "python" in table else default_pythons
    if env == "conda":
        return _conda_stack(table, where, framework, versions, pythons)
    if "channels" in table:
        raise UserError(f"{where}: 'channels' are for env = \"conda\"; this stack's env is {env!r}.")
    variants = table.get("variants", list(DEFAULT_VARIANTS[framework]))
    if isinstance(variants, str):
        variants = [variants]
    if not isinstance(variants, list) or not variants:
        raise UserError(f"{where}: 'variants' must be a non-empty list of strings.")
    for variant in variants:
        if not isinstance(variant, str) or not KNOWN_VARIANTS[framework].fullmatch(variant):
            raise UserError(f"{where}: {str(variant)[:40]!r} is not a variant of {framework} (see README, 'Plan files').")
    return StackSpec(framework, versions, tuple(variants), pythons, env)


def _conda_stack(table: dict, where: str, framework: str, versions, pythons: tuple[str, ...]) -> StackSpec:
    """env = "conda": variants are CUDA pins (cuda-version=12.6, or cudatoolkit=11.2 for older releases)."""
    from .envs import conda

    variants = table.get("variants", ["default"])
    if isinstance(variants, str):
        variants = [variants]
    if not isinstance(variants, list) or not variants or not all(isinstance(v, str) and conda.VARIANT.fullmatch(v) for v in variants):
        raise UserError(f"{where}: variants of a conda stack are CUDA pins, e.g. [\"cuda-version=12.6\"] or "
                        "[\"cudatoolkit=11.2\"] for older releases, or [\"default\"] for none.")
    channels = table.get("channels", list(conda.DEFAULT_CHANNELS))
    if not isinstance(channels, list) or not channels:
        raise UserError(f"{where}: channels must be a non-empty list, e.g. [\"conda-forge\"] or [\"file:///srv/conda-channel\"].")
    channels = tuple(conda.check_channel(c, f"{where} channels") for c in channels)
    return StackSpec(framework, versions, tuple(dict.fromkeys(variants)), pythons, "conda", channels)


def _container_stack(table: dict, where: str, framework: str) -> StackSpec:
    """env = "container": the image decides the version and the Python; nothing is installed into it."""
    from .envs.container import RUNTIMES, image_kind

    for key in ("versions", "python", "variants", "channels"):
        if key in table:
            raise UserError(f"{where}: a container stack tests the {framework} its image holds; drop {key!r}.")
    if "image" not in table:
        raise UserError(f"{where}: 'image' is missing (e.g. \"docker://nvcr.io/nvidia/pytorch:25.01-py3\", an oras:// reference, a .sif path, or a local image name).")
    image = text_value(table["image"], f"{where} image", limit=500)
    reference = image.split("://", 1)[-1]  # what the runtime's command line gets after the transport is dropped
    if image.startswith("-") or reference.startswith("-") or any(c.isspace() for c in image):
        raise UserError(f"{where}: {image[:60]!r} is not an image reference (no spaces, and it cannot start with '-').")
    if "://" in image and not image.startswith(("docker://", "oras://")):
        raise UserError(f"{where}: {image[:60]!r}: the image transports gpucompat runs are docker:// and oras:// "
                        "(or a .sif path, or a local image name).")
    if not (_SIF_PATH if image_kind(image) == "sif" else _IMAGE).fullmatch(reference):
        # what no registry or file name holds ($, backticks, quotes, ;): refused as [kubernetes] image refuses it
        raise UserError(f"{where}: {image[:60]!r} is not a container image like 'docker://nvcr.io/nvidia/pytorch:24.08-py3' "
                        "or a .sif path (letters, digits and ./:@_+=,%~- only; no $, backticks or quotes).")
    runtime = table.get("runtime")
    if runtime is not None and runtime not in RUNTIMES:
        raise UserError(f"{where}: unknown runtime {str(runtime)[:40]!r}; expected one of: {', '.join(RUNTIMES)}.")
    if runtime in ("podman", "docker") and image_kind(image) in ("sif", "oras"):
        raise UserError(f"{where}: {runtime} cannot run {image[:60]!r} (a SIF or ORAS image); use apptainer or singularity.")
    return StackSpec(framework, "installed", ("installed",), ("image",), "container", image=image, runtime=runtime)


def _target(table: object, index: int, executor: str) -> Target:
    where = f"[[targets]] #{index}"
    if not isinstance(table, dict):
        raise UserError(f"{where}: each target must be a table with at least name and cc.")
    _check_keys(table, TARGET_KEYS, where)
    if "name" not in table:
        raise UserError(f"{where}: 'name' is missing (the GPU class, e.g. 'NVIDIA A100-SXM4-40GB').")
    name = text_value(table["name"], f"{where} name")
    cc = table.get("cc")
    if cc is not None and (isinstance(cc, bool) or not CC_VERSION.fullmatch(str(cc))):
        raise UserError(f"{where}: cc {str(cc)[:20]!r} is not a compute capability; write it as a string like '8.0'.")
    driver = table.get("driver")
    if driver is not None and (not isinstance(driver, str) or not DRIVER_VERSION.fullmatch(driver)):
        raise UserError(f"{where}: driver {str(driver)[:40]!r} is not a driver version; write it as a string like '580.65.06'.")
    kernel_module = table.get("kernel_module")
    if kernel_module is not None and kernel_module not in KERNEL_MODULES:
        raise UserError(f"{where}: kernel_module {str(kernel_module)[:40]!r} is not a driver kernel module; write 'open' or 'proprietary'.")
    count = table.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= 4096:
        raise UserError(f"{where}: count must be a whole number from 1 to 4096.")
    memory = table.get("memory_mib")
    if memory is not None and (not isinstance(memory, int) or isinstance(memory, bool) or not 1 <= memory <= 1 << 24):
        raise UserError(f"{where}: memory_mib must be a whole number of MiB (at most 16 TiB).")
    cuda_driver = table.get("cuda_driver")
    if cuda_driver is not None and (not isinstance(cuda_driver, str) or not CC_VERSION.fullmatch(cuda_driver)):
        raise UserError(f"{where}: cuda_driver {str(cuda_driver)[:20]!r} is not a CUDA version like '12.2' (the newest CUDA the driver supports).")
    gres = table.get("gres")
    if gres is not None and (not isinstance(gres, str) or not _NAME.fullmatch(gres)):
        raise UserError(f"{where}: gres {str(gres)[:40]!r} is not a Slurm GRES type like 'a100'.")
    features = table.get("features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) and _NAME.fullmatch(f) for f in features):
        raise UserError(f"{where}: features must be a list of Slurm feature names like ['hbm'].")
    if (gres or features) and executor != "slurm":
        # silently ignoring them would send the cell to any GPU of the pool
        raise UserError(f"{where}: gres and features select Slurm nodes; the executor is {executor!r}.")
    return Target(
        name=name, cc=str(cc) if cc else None, driver=driver, cuda_driver=cuda_driver, memory_mib=memory,
        count=count, declared=True, gres=gres, features=tuple(features), kernel_module=kernel_module,
    )


def parse_plan(text: str, source: str = "plan") -> SweepSpec:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source} is not valid TOML: {exc}.") from None
    except RecursionError:
        raise UserError(f"{source} nests tables or arrays too deeply to be a plan.") from None
    try:
        return _spec(data)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None


_MEMORY = re.compile(r"([0-9]{1,9})\s*(M|MB|MiB|G|GB|GiB|T|TB|TiB)?", re.ASCII)
_OPTION_KINDS = {  # kind -> (whole-string pattern, what a value must be)
    "name": (_NAME, "a plain name ([A-Za-z0-9_.-], at most 64)"),
    "image": (_IMAGE, "a container image like 'nvcr.io/nvidia/pytorch:24.08-py3'"),
    "namespace": (_K8S_NAME, "a Kubernetes namespace (lowercase letters, digits and '-', at most 63)"),
    "memory": (_MEMORY, "an amount of memory in MiB, or with a unit: '16G', '4096M'"),
}


def _option(section: str, key: str, kind: str, value: object):
    """One value of an executor's table, checked; memory comes back as whole MiB."""
    where = f"[{section}] {key}"
    if kind == "count":
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1024:
            raise UserError(f"{where} must be a whole number from 1 to 1024.")
        return value
    if kind == "limit":  # how many of the sweep's GPU jobs may run at once
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_RUNNING:
            raise UserError(f"{where} must be a whole number from 1 to {MAX_RUNNING:,}: how many GPU jobs may run at once "
                            "(leave it out for no cap).")
        return value
    if kind == "flag":
        if not isinstance(value, bool):
            raise UserError(f"{where} must be true or false, not {_kind(value)}.")
        return value
    if kind == "sbatch_lines":  # an allowlist: only options that leave the job's environment, identity, output and timing
        return check_extra_sbatch(value, where)
    if kind == "memory" and isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    pattern, what = _OPTION_KINDS[kind]
    found = pattern.fullmatch(value) if isinstance(value, str) else None
    if not found:
        raise UserError(f"{where} {str(value)[:80]!r} is not {what}.")
    if kind == "memory":
        mib = int(found.group(1)) * {"G": 1024, "T": 1024 * 1024}.get((found.group(2) or "M")[0], 1)
        if not 1 <= mib <= 64 * 1024 * 1024:
            raise UserError(f"{where} {value!r} is outside 1 MiB to 64 TiB.")
        return mib
    return value


def _executor_options(section: str, table: object) -> dict:
    if not isinstance(table, dict):
        raise UserError(f"[{section}] must be a table.")
    kinds = EXECUTOR_OPTIONS[section]
    _check_keys(table, set(kinds), f"[{section}]")
    return {key: _option(section, key, kinds[key], value) for key, value in table.items()}


def _spec(data: dict) -> SweepSpec:
    _check_keys(data, TOP_KEYS, "plan")
    name = text_value(data.get("name", "sweep"), "'name'", limit=100)
    executor = data.get("executor", "local")
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor {str(executor)[:40]!r}; this version has: {', '.join(EXECUTORS)}.")
    default_pythons = _pythons(data["python"], "python") if "python" in data else (f"{sys.version_info[0]}.{sys.version_info[1]}",)
    stacks_data = data.get("stacks")
    if stacks_data is not None and not isinstance(stacks_data, list):
        raise UserError(f"'stacks' must be [[stacks]] tables (framework = ..., versions = ...), not {_kind(stacks_data)}.")
    if not stacks_data:
        raise UserError("the plan has no [[stacks]]; add at least one with framework = ... and versions = ....")
    stacks = tuple(_stack(table, i, default_pythons) for i, table in enumerate(stacks_data, 1))

    targets_data = data.get("targets", "local" if executor == "local" else "discover")
    if isinstance(targets_data, str) and targets_data in ("local", "discover"):
        if targets_data == "local" and executor != "local":
            raise UserError(f"targets = \"local\" means this machine's GPUs; with executor {executor!r} write targets = \"discover\" or [[targets]].")
        targets: str | tuple[Target, ...] = targets_data
    elif isinstance(targets_data, list) and targets_data:
        targets = tuple(_target(t, i, executor) for i, t in enumerate(targets_data, 1))
    else:
        raise UserError("'targets' must be \"local\", \"discover\" or a list of [[targets]] tables.")

    timeouts_data = data.get("timeouts", {})
    if not isinstance(timeouts_data, dict):
        raise UserError("[timeouts] must be a table, e.g. install = '20m'.")
    _check_keys(timeouts_data, TIMEOUT_KEYS, "[timeouts]")
    durations = {
        ("import_" if key == "import" else key): parse_duration(value, f"[timeouts] {key}")
        for key, value in timeouts_data.items()
    }
    parallel = {key: data.get(key) for key in ("max_parallel_installs", "max_parallel_probes")}  # None: from the node
    for key, value in parallel.items():
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= 64):
            raise UserError(f"{key} must be a whole number from 1 to 64 (leave it out to derive it from the node's cores and memory).")
    platform = data.get("platform", "x86_64-manylinux_2_28")
    if not isinstance(platform, str) or not _PLATFORM.fullmatch(platform):
        raise UserError(f"platform {str(platform)[:60]!r} is not a Linux platform uv knows, like 'x86_64-manylinux_2_28' or 'aarch64-unknown-linux-gnu'.")
    wheelhouse = data.get("wheelhouse")
    if wheelhouse is not None:
        wheelhouse = text_value(wheelhouse, "wheelhouse", limit=4096)
    offline = data.get("offline", False)
    if not isinstance(offline, bool):
        raise UserError("offline must be true or false.")
    options: dict[str, dict] = {}
    for section in EXECUTOR_OPTIONS:
        if section in data:
            if section != executor:
                raise UserError(f"[{section}] is given but the executor is {executor!r}.")
            options[section] = _executor_options(section, data[section])
    max_cells = data.get("max_cells", MAX_CELLS)
    if not isinstance(max_cells, int) or isinstance(max_cells, bool) or not 1 <= max_cells <= 10_000_000:
        raise UserError("max_cells must be a whole number from 1 to 10000000 (the cells a plan may expand to).")
    bench, bench_timeout = parse_bench(data.get("bench", False))
    check_nodes(bench, executor)
    if bench_timeout is not None:
        if "bench" in durations:
            raise UserError("the bench timeout is given twice, in [timeouts] and in [bench]; keep one.")
        durations["bench"] = bench_timeout
    return SweepSpec(
        name=name, stacks=stacks, targets=targets, timeouts=Timeouts(**durations),
        executor=executor, **parallel, platform=platform,
        wheelhouse=wheelhouse, offline=offline, executor_options=options, bench=bench, max_cells=max_cells,
    )


def _kind(value: object) -> str:
    """What a TOML value is, in words, for a sentence about a key of the wrong type."""
    return {str: "a string", bool: "true or false", int: "a number", float: "a number", dict: "a table"}.get(type(value), "a list")


def parse_bench(value: object) -> tuple[BenchSpec | None, int | None]:
    """`bench = true`, or a [bench] table (measurements, dtypes, size, repetitions, timeout) -> (spec or None, timeout)."""
    if isinstance(value, bool):
        return (BenchSpec() if value else None), None
    if not isinstance(value, dict):
        raise UserError("bench must be true, false, or a [bench] table (measurements, dtypes, size, repetitions, timeout).")
    _check_keys(value, BENCH_KEYS, "[bench]")
    chosen = {}
    for key, allowed in (("measurements", BENCH_MEASUREMENTS), ("dtypes", BENCH_DTYPES)):
        if key in value:
            items = value[key]
            if not isinstance(items, list) or not items or not all(isinstance(i, str) and i in allowed for i in items):
                raise UserError(f"[bench] {key} must be a list of some of: {', '.join(allowed)}.")
            chosen[key] = tuple(dict.fromkeys(items))
    for key, low, high in (("size", 256, 32768), ("repetitions", 1, 100)):
        if key in value:
            number = value[key]
            if not isinstance(number, int) or isinstance(number, bool) or not low <= number <= high:
                raise UserError(f"[bench] {key} must be a whole number from {low} to {high}.")
            chosen[key] = number
    for key, what in (("share", "process counts"), ("scale", "GPU counts"), ("nodes", "node counts")):
        if key in value:
            counts = value[key]
            if not isinstance(counts, list) or not counts or not all(isinstance(n, int) and not isinstance(n, bool) and 1 <= n <= 16 for n in counts):
                raise UserError(f"[bench] {key} must be a list of {what} from 1 to 16, e.g. [1, 2, 4].")
            chosen[key] = tuple(sorted(set(counts)))
    if "nodes" in chosen and "scale" not in chosen:
        raise UserError("[bench] nodes needs scale, the GPUs per node: e.g. scale = [1, 2, 4] with nodes = [1, 2].")
    if "profile" in value:
        window = value["profile"]
        if not isinstance(window, dict) or set(window) != {"start", "steps"} or not all(
                isinstance(window[k], int) and not isinstance(window[k], bool) for k in window) \
                or not 0 <= window["start"] <= 100000 or not 1 <= window["steps"] <= 1000:
            raise UserError("[bench] profile must be {start = S, steps = K}: the profiler around K training steps (1 to 1000) from step S.")
        chosen["profile"] = (window["start"], window["steps"])
    timeout = parse_duration(value["timeout"], "[bench] timeout") if "timeout" in value else None
    return BenchSpec(**chosen), timeout


def check_nodes(bench: BenchSpec | None, executor: str) -> None:
    """Training across nodes is launched with srun inside a Slurm allocation: no other executor has one."""
    if bench is not None and max(bench.nodes, default=1) > 1 and executor != "slurm":
        raise UserError(f"[bench] nodes = {list(bench.nodes)} trains across Slurm nodes through srun, which only "
                        f"executor = \"slurm\" provides; the executor is {executor!r}, so keep nodes = [1] or leave it out.")


def check_path(path: Path | str, what: str) -> Path:
    """A path given on the command line or in a plan: it ends up in scripts and submit files,
    so it may hold no control character (a newline would end the line it is written on)."""
    text = str(path)
    if not text.strip():
        raise UserError(f"{what} is empty; give a path.")
    if CONTROL_CHARACTERS.search(text) or len(text) > 4096 or any(len(part.encode()) > 255 for part in Path(text).parts):
        raise UserError(f"{what} {text[:60]!r} contains a control character (such as a newline) or is too long "
                        "(a name over 255 bytes, or a path over 4096); choose another path.")
    return Path(text)


def load_plan(path: str | Path) -> tuple[SweepSpec, str]:
    """Read and validate a plan file; returns the spec and the text (stored with the sweep)."""
    path = check_path(path, "the plan file")
    text = read_user_text(path, "plan file", MAX_PLAN_BYTES, "a plan is a short TOML file.")
    spec = parse_plan(text, str(path))
    if spec.wheelhouse:
        wheelhouse = Path(spec.wheelhouse) if Path(spec.wheelhouse).is_absolute() else (path.parent / spec.wheelhouse).resolve()
        check_wheelhouse(wheelhouse, "the plan's wheelhouse")
        spec = replace(spec, wheelhouse=str(wheelhouse))
    stacks = tuple(_image_path(stack, f"{path}: [[stacks]] #{i}", path.parent) for i, stack in enumerate(spec.stacks, 1))
    return replace(spec, stacks=stacks), text


def _image_path(stack: StackSpec, where: str, plan_dir: Path) -> StackSpec:
    """A container stack's image path, made absolute against the plan file's own directory.

    Written into each run.sh as it is, a relative path would be read against the cell's directory when
    the job runs (`../../../etc/passwd.sif` from there). Relative to the plan is the only thing it can
    mean, so it must lie there now: one that does not is refused, where it would fail every cell of the
    stack in its install step. An absolute path (or ~) is kept unchecked: it may lie where only the
    compute nodes see it (/cvmfs, a node-local cache). docker://, oras:// and image names are
    references, not paths, and stay as they are."""
    from .envs.container import image_kind

    if stack.env != "container" or not stack.image or image_kind(stack.image) != "sif":
        return stack
    given = Path(stack.image).expanduser()
    if given.is_absolute():
        absolute = given
    else:
        joined = plan_dir / given
        # the directories resolved, the file itself not: a symbolic link such as current.sif stays a link the job follows
        absolute = joined.parent.resolve() / joined.name if joined.name not in ("", ".", "..") else joined.resolve()
        if not absolute.exists():
            raise UserError(f"{where} image {stack.image[:100]!r} is a path relative to the plan file, and {str(absolute)[:200]!r} "
                            "does not exist; put the image there, or give its absolute path (which may lie where only the compute nodes see it).")
    if len(str(absolute)) > 500 or not _SIF_PATH.fullmatch(str(absolute)):
        raise UserError(f"{where} image {stack.image[:100]!r} is {str(absolute)[:200]!r} from the plan's directory, which a job "
                        "script does not take (letters, digits and ./:@_+=,%~- only); give an absolute path made of those.")
    return replace(stack, image=str(absolute))


def check_wheelhouse(path: Path, what: str = "--wheelhouse") -> Path:
    """The same sentence for --wheelhouse and a plan's wheelhouse that is not a directory."""
    check_path(path, what)
    if not path.is_dir():
        raise UserError(f"{what} {str(path)!r} is not a directory.")
    return path


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_spec(text: str) -> tuple[str, str | None, str | None]:
    """A stack spec, read as pip reads a requirement -> (framework, version or range, variant).

    torch==2.4.1 (PyPI's default build), torch==2.7.0+cu128, jax[cuda12]==0.4.30 (plain
    `jax` is the CPU build, as pip installs it), cupy-cuda12x==13.3.0, tensorflow==2.15.0
    (tensorflow[and-cuda]), cuda-runtime==12.4. The version is None when none is given.
    """
    exact = _EXACT_SPEC.fullmatch(text)
    if exact and tables.version(exact.group(3).split("+")[0]) is not None:
        # the common case, name[extra]==version, without packaging's requirement parser (~60 ms of imports)
        return _spec_parts(exact.group(1), tuple(filter(None, (exact.group(2) or "").split(","))), exact.group(3), text)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        if len(text) > 200 or CONTROL_CHARACTERS.search(text):
            raise InvalidRequirement(text)
        requirement = Requirement(text)
        for item in requirement.specifier:
            Version(item.version.replace(".*", "").split("+")[0])
    except (InvalidRequirement, InvalidVersion, ValueError):
        raise UserError(f"{text[:60]!r} is not a stack spec; write e.g. torch==2.4.1, jax[cuda12]==0.4.30 or cuda-runtime==12.4.") from None
    specifiers = list(requirement.specifier)
    if len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version:
        return _spec_parts(requirement.name, tuple(requirement.extras), specifiers[0].version, text)
    name, _version, variant = _spec_parts(requirement.name, tuple(requirement.extras), None, text)
    return name, (str(requirement.specifier) if specifiers else None), variant


_EXACT_SPEC = re.compile(r"([A-Za-z][A-Za-z0-9_.-]{0,60})(?:\[([a-z0-9_-]{1,40}(?:,[a-z0-9_-]{1,40})*)\])?==([0-9][0-9A-Za-z.+_-]{0,63})", re.ASCII)


def _spec_parts(raw_name: str, extras: tuple[str, ...], version: str | None, text: str) -> tuple[str, str | None, str | None]:
    """(framework, version, variant) from a requirement's name, extras and exact version."""
    name = raw_name.lower().replace("_", "-")
    variant = None
    if name.startswith("cupy-cuda"):
        name, variant = "cupy", name[len("cupy-"):]
    if name not in FRAMEWORKS:
        raise UserError(f"{text!r}: unknown framework {raw_name!r}; expected one of: {', '.join(FRAMEWORKS)}.")
    if extras and name == "cupy" and variant:  # cupy-cuda12x[ctk]: the package, with the CUDA components pip brings
        variant = f"{variant}[{','.join(sorted(extras))}]"
    elif extras:
        variant = sorted(extras)[0]
    elif name == "jax" and variant is None:
        variant = "cpu"
    if version and "+" in version:  # torch==2.7.0+cu128: the local label names the variant
        version, variant = version.split("+", 1)
    return name, version, variant


def check_plan_text(specs: list[str], python: str | None, env: str) -> str:
    """`gpucompat check SPEC...` as a plan: one stack per SPEC, on this machine's GPUs.

    With --env current each SPEC is just a framework name: what is installed is tested.
    """
    if env not in ENV_PROVIDERS:
        raise UserError(f"unknown env {env!r}; expected one of: {', '.join(ENV_PROVIDERS)}.")
    if python is not None and re.fullmatch(r"3\.[67]", python):
        raise UserError(f"gpucompat's probe needs Python 3.8 or newer, so it cannot test Python {python}; "
                        f"`gpucompat explain SPEC --python {python}` answers from the knowledge's wheel tables.")
    if python is not None and not PYTHON_VERSION.fullmatch(python):
        raise UserError(f"--python {python[:20]!r} is not a Python version from 3.8 to 3.15, like '3.11'.")
    lines = ['name = "check"']
    if python and env == "uv":
        lines.append(f"python = [{_toml_str(python)}]")
    for text in specs:
        name, version, variant = parse_spec(text)
        lines += ["", "[[stacks]]", f"framework = {_toml_str(name)}", f"env = {_toml_str(env)}"]
        if env == "current":
            if version or (variant and variant != "cpu") or "[" in text:
                raise UserError(f"{text!r}: with --env current the installed version is tested; give just the name ({name}).")
            continue
        if version is None:
            lines.append('versions = "latest:1"')
        elif version[0].isdigit():
            lines.append(f"versions = [{_toml_str(version)}]")
        else:
            lines.append(f"versions = {_toml_str(version)}")
        if variant:
            lines.append(f"variants = [{_toml_str(variant)}]")
    return "\n".join(lines) + "\n"
