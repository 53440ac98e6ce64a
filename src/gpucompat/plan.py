"""Plan file (TOML) -> a validated SweepSpec. Every mistake gets one clear sentence."""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from .errors import UserError
from .model import ENV_PROVIDERS, FRAMEWORKS, StackSpec, SweepSpec, Target, Timeouts

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

TOP_KEYS = {
    "name", "executor", "targets", "python", "timeouts", "stacks",
    "max_parallel_installs", "platform", "wheelhouse", "offline", "slurm", "kubernetes",
}
STACK_KEYS = {"framework", "versions", "variants", "python", "env"}
TARGET_KEYS = {"name", "cc", "driver", "cuda_driver", "memory_mib", "count", "gres", "features"}
EXECUTOR_KEYS = {"slurm": {"partition", "account"}, "kubernetes": {"image", "namespace"}}
TIMEOUT_KEYS = {"install", "import", "device", "compute", "cell", "pending"}
EXECUTORS = ("local", "slurm", "htcondor", "kubernetes")

DEFAULT_VARIANTS = {
    "torch": ("default",),
    "tensorflow": ("and-cuda",),
    "jax": ("cuda12",),
    "cupy": ("cuda12x",),
    "cuda-runtime": ("default",),
}
KNOWN_VARIANTS = {
    "torch": re.compile(r"^(default|cpu|cu\d{2,3}|rocm[\d.]+)$"),
    "tensorflow": re.compile(r"^(and-cuda|plain)$"),
    "jax": re.compile(r"^(cpu|cuda\d{2})$"),
    "cupy": re.compile(r"^cuda\d{2}x$"),
    "cuda-runtime": re.compile(r"^default$"),
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*$")
_PYTHON = re.compile(r"^3\.\d{1,2}$")
_LATEST = re.compile(r"^latest:(\d+)$")


def parse_duration(value: object, where: str) -> float:
    """'90', 90, '90s', '10m', '2h' -> seconds."""
    if isinstance(value, bool):
        raise UserError(f"{where}: {value!r} is not a duration; write seconds (90) or '90s', '10m', '2h'.")
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise UserError(f"{where}: {value!r} is not a duration; write seconds (90) or '90s', '10m', '2h'.")
        seconds = float(match.group(1)) * {"s": 1, "m": 60, "h": 3600, None: 1}[match.group(2)]
    if seconds <= 0:
        raise UserError(f"{where}: a duration must be greater than zero, not {value!r}.")
    return seconds


def check_version_spec(spec: object, where: str) -> str | tuple[str, ...]:
    """An exact list, a PEP 440 range string, or 'latest:N'."""
    if isinstance(spec, list):
        if not spec:
            raise UserError(f"{where}: the list of versions is empty; name at least one.")
        for item in spec:
            try:
                Version(str(item))
            except InvalidVersion:
                raise UserError(f"{where}: {item!r} is not a version (e.g. '2.4.1' or, for cuda-runtime, '12.4').") from None
        return tuple(str(item) for item in spec)
    if not isinstance(spec, str) or not spec.strip():
        raise UserError(f"{where}: versions must be a list like ['2.4.1'], a range like '>=2.3,<2.6', or 'latest:N'.")
    spec = spec.strip()
    if spec.startswith("latest"):
        match = _LATEST.match(spec)
        if not match or int(match.group(1)) < 1:
            raise UserError(f"{where}: {spec!r} is malformed; write 'latest:N' with N a whole number >= 1.")
        return spec
    try:
        SpecifierSet(spec)
    except InvalidSpecifier:
        raise UserError(f"{where}: {spec!r} is not a PEP 440 version range (e.g. '>=2.3,<2.6').") from None
    return spec


def _check_keys(table: dict, allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise UserError(f"{where}: unknown key {unknown[0]!r}; expected one of: {', '.join(sorted(allowed))}.")


def _pythons(value: object, where: str) -> tuple[str, ...]:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if not isinstance(item, str) or not _PYTHON.match(item):
            raise UserError(f"{where}: {item!r} is not a Python version; write it as a string like '3.11'.")
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
    variants = table.get("variants", list(DEFAULT_VARIANTS[framework]))
    if isinstance(variants, str):
        variants = [variants]
    if not isinstance(variants, list) or not variants:
        raise UserError(f"{where}: 'variants' must be a non-empty list of strings.")
    for variant in variants:
        if not isinstance(variant, str) or not KNOWN_VARIANTS[framework].match(variant):
            raise UserError(f"{where}: {variant!r} is not a variant of {framework} (see README, 'Plan files').")
    return StackSpec(framework, versions, tuple(variants), pythons, env)


def _target(table: object, index: int) -> Target:
    where = f"[[targets]] #{index}"
    if not isinstance(table, dict):
        raise UserError(f"{where}: each target must be a table with at least name and cc.")
    _check_keys(table, TARGET_KEYS, where)
    name = table.get("name")
    if not isinstance(name, str) or not name:
        raise UserError(f"{where}: 'name' is missing (the GPU class, e.g. 'NVIDIA A100-SXM4-40GB').")
    cc = table.get("cc")
    if cc is not None and not re.match(r"^\d{1,2}\.\d$", str(cc)):
        raise UserError(f"{where}: cc {cc!r} is not a compute capability; write it as a string like '8.0'.")
    driver = table.get("driver")
    if driver is not None and not re.match(r"^\d{3}(\.\d+){0,2}$", str(driver)):
        raise UserError(f"{where}: driver {driver!r} is not a driver version like '580.65.06'.")
    count = table.get("count", 1)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise UserError(f"{where}: count must be a whole number >= 1.")
    memory = table.get("memory_mib")
    if memory is not None and (not isinstance(memory, int) or memory < 1):
        raise UserError(f"{where}: memory_mib must be a whole number of MiB.")
    cuda_driver = table.get("cuda_driver")
    if cuda_driver is not None and not re.match(r"^\d{1,2}\.\d$", str(cuda_driver)):
        raise UserError(f"{where}: cuda_driver {cuda_driver!r} is not a CUDA version like '12.2' (the newest CUDA the driver supports).")
    gres = table.get("gres")
    if gres is not None and (not isinstance(gres, str) or not re.match(r"^[A-Za-z0-9_.-]+$", gres)):
        raise UserError(f"{where}: gres {gres!r} is not a Slurm GRES type like 'a100'.")
    features = table.get("features", [])
    if not isinstance(features, list) or not all(isinstance(f, str) and re.match(r"^[A-Za-z0-9_.-]+$", f) for f in features):
        raise UserError(f"{where}: features must be a list of Slurm feature names like ['hbm'].")
    return Target(
        name=name, cc=str(cc) if cc else None, driver=str(driver) if driver else None,
        cuda_driver=str(cuda_driver) if cuda_driver else None, memory_mib=memory, count=count, declared=True,
        gres=gres, features=tuple(features),
    )


def parse_plan(text: str, source: str = "plan") -> SweepSpec:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{source} is not valid TOML: {exc}.") from None
    try:
        return _spec(data)
    except UserError as exc:
        raise UserError(f"{source}: {exc}") from None


def _spec(data: dict) -> SweepSpec:
    _check_keys(data, TOP_KEYS, "plan")
    name = data.get("name", "sweep")
    if not isinstance(name, str):
        raise UserError("'name' must be a string.")
    executor = data.get("executor", "local")
    if executor not in EXECUTORS:
        raise UserError(f"unknown executor {executor!r}; this version has: {', '.join(EXECUTORS)}.")
    default_pythons = _pythons(data["python"], "python") if "python" in data else (f"{sys.version_info[0]}.{sys.version_info[1]}",)
    stacks_data = data.get("stacks")
    if not isinstance(stacks_data, list) or not stacks_data:
        raise UserError("the plan has no [[stacks]]; add at least one with framework = ... and versions = ....")
    stacks = tuple(_stack(table, i, default_pythons) for i, table in enumerate(stacks_data, 1))

    targets_data = data.get("targets", "local" if executor == "local" else "discover")
    if targets_data in ("local", "discover"):
        if targets_data == "local" and executor != "local":
            raise UserError(f"targets = \"local\" means this machine's GPUs; with executor {executor!r} write targets = \"discover\" or [[targets]].")
        targets: str | tuple[Target, ...] = targets_data
    elif isinstance(targets_data, list) and targets_data:
        targets = tuple(_target(t, i) for i, t in enumerate(targets_data, 1))
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
    parallel = data.get("max_parallel_installs", 2)
    if not isinstance(parallel, int) or isinstance(parallel, bool) or parallel < 1:
        raise UserError("max_parallel_installs must be a whole number >= 1.")
    platform = data.get("platform", "x86_64-manylinux_2_28")
    if not isinstance(platform, str) or not re.match(r"^[A-Za-z0-9_.-]+$", platform):
        raise UserError(f"platform {platform!r} is not a uv target platform like 'x86_64-manylinux_2_28'.")
    wheelhouse = data.get("wheelhouse")
    if wheelhouse is not None and not isinstance(wheelhouse, str):
        raise UserError("wheelhouse must be a path to a directory of wheels.")
    offline = data.get("offline", False)
    if not isinstance(offline, bool):
        raise UserError("offline must be true or false.")
    options: dict = {}
    for section, allowed in EXECUTOR_KEYS.items():
        if section in data:
            if section != executor:
                raise UserError(f"[{section}] is given but the executor is {executor!r}.")
            if not isinstance(data[section], dict):
                raise UserError(f"[{section}] must be a table.")
            _check_keys(data[section], allowed, f"[{section}]")
            for key, value in data[section].items():
                if not isinstance(value, str) or not re.match(r"^[A-Za-z0-9_.,:/@-]+$", value):
                    raise UserError(f"[{section}] {key} {value!r} is not a plain name.")
            options = dict(data[section])
    return SweepSpec(
        name=name, stacks=stacks, targets=targets, timeouts=Timeouts(**durations),
        executor=executor, max_parallel_installs=parallel, platform=platform,
        wheelhouse=wheelhouse, offline=offline, executor_options=options,
    )


def load_plan(path: str | Path) -> tuple[SweepSpec, str]:
    """Read and validate a plan file; returns the spec and the text (stored with the sweep)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"plan file {str(path)!r} does not exist.") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read plan file {str(path)!r}: {exc.__class__.__name__}.") from None
    spec = parse_plan(text, str(path))
    if spec.wheelhouse and not Path(spec.wheelhouse).is_absolute():
        spec = replace(spec, wheelhouse=str((path.parent / spec.wheelhouse).resolve()))
    return spec, text


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def parse_spec(text: str) -> tuple[str, str | None, str | None]:
    """A stack spec, read as pip reads a requirement -> (framework, version or range, variant).

    torch==2.4.1 (PyPI's default build), torch==2.7.0+cu128, jax[cuda12]==0.4.30 (plain
    `jax` is the CPU build, as pip installs it), cupy-cuda12x==13.3.0, tensorflow==2.15.0
    (tensorflow[and-cuda]), cuda-runtime==12.4. The version is None when none is given.
    """
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        requirement = Requirement(text)
    except InvalidRequirement:
        raise UserError(f"{text!r} is not a stack spec; write e.g. torch==2.4.1, jax[cuda12]==0.4.30 or cuda-runtime==12.4.") from None
    name = requirement.name.lower().replace("_", "-")
    variant = None
    if name.startswith("cupy-cuda"):
        name, variant = "cupy", name[len("cupy-"):]
    if name not in FRAMEWORKS:
        raise UserError(f"{text!r}: unknown framework {requirement.name!r}; expected one of: {', '.join(FRAMEWORKS)}.")
    if requirement.extras:
        variant = sorted(requirement.extras)[0]
    elif name == "jax" and variant is None:
        variant = "cpu"
    specifiers = list(requirement.specifier)
    if not specifiers:
        return name, None, variant
    if len(specifiers) == 1 and specifiers[0].operator == "==" and "*" not in specifiers[0].version:
        version = specifiers[0].version
        if "+" in version:  # torch==2.7.0+cu128: the local label names the variant
            version, variant = version.split("+", 1)
        return name, version, variant
    return name, str(requirement.specifier), variant


def check_plan_text(specs: list[str], python: str | None, env: str) -> str:
    """`gpucompat check SPEC...` as a plan: one stack per SPEC, on this machine's GPUs.

    With --env current each SPEC is just a framework name: what is installed is tested.
    """
    if env not in ENV_PROVIDERS:
        raise UserError(f"unknown env {env!r}; expected one of: {', '.join(ENV_PROVIDERS)}.")
    if python is not None and not _PYTHON.match(python):
        raise UserError(f"--python {python!r} is not a Python version like '3.11'.")
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
