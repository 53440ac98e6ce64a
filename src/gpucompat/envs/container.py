"""`container`: the framework as an image holds it, run by Apptainer/Singularity, Podman or Docker.

Nothing is installed into the image and the image is never modified: the install step only
pulls it (or checks that it is there), and the probe runs as the image's own `python3` with
the job directory bind-mounted at the same path (result.json out), and probe.pyz with it: the job
directory's own copy, or the sweep's one probe.pyz bound read-only at its own path.

The runtime is the stack's `runtime`, else the first of RUNTIMES that can run the image and is
on the PATH where the job runs: run.sh and install.sh choose it on the node (`command -v`), so
one plan fits nodes with Apptainer and nodes with Podman. The local executor decides on the
submit side (the same machine) and writes only that runtime's command.

GPU flags, per runtime (see docs/containers.md):
- apptainer/singularity: `exec --nv` (nvidia-container-cli is used instead of Apptainer's own
  library binding where apptainer.conf sets `use nvidia-container-cli = yes`; discover shows it);
- podman: CDI, `--device nvidia.com/gpu=all` (podman 4.1+, a spec from `nvidia-ctk cdi generate`);
- docker: `--gpus all` (the NVIDIA Container Toolkit's hook).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ..model import ResolvedStack
from ..probe_build import PROBE_FILE
from ..quoting import shell_word

RUNTIMES = ("apptainer", "singularity", "podman", "docker")
SIF_RUNTIMES = ("apptainer", "singularity")
SIF_NAME = "image.sif"  # a pulled docker:// or oras:// image, for Apptainer/Singularity, in the environment's directory
NO_RUNTIME = "gpucompat: no container runtime"  # the scripts' own words when the node has none (analysis reads them)


def image_kind(image: str) -> str:
    """'sif' (a SIF file path), 'oras' (oras://), 'registry' (docker://) or 'name' (a name as
    Podman and Docker read it: pulled from its registry unless the runtime has it locally)."""
    if image.startswith("oras://"):
        return "oras"
    if image.startswith("docker://"):
        return "registry"
    if image.endswith(".sif") or image.startswith(("/", "./", "../")):
        return "sif"
    return "name"


def runtimes_for(image: str, runtime: str | None = None) -> tuple[str, ...]:
    """The runtimes that can run this image, in order of preference (or just the stack's choice)."""
    if runtime:
        return (runtime,)
    return SIF_RUNTIMES if image_kind(image) in ("sif", "oras") else RUNTIMES


def oci_name(image: str) -> str:
    """The image as Podman and Docker name it: without the docker:// transport."""
    return image.removeprefix("docker://")


def sif_source(image: str) -> str:
    """What Apptainer pulls or runs: a bare name is a Docker Hub-style reference (docker://)."""
    return image if image_kind(image) != "name" else f"docker://{image}"


def local_runtime(resolved: ResolvedStack, which=shutil.which) -> str | None:
    """The local executor's choice, on the submit side: the full path of the first runtime found."""
    for name in runtimes_for(resolved.stack.image or "", resolved.stack.runtime):
        found = which(name)
        if found:
            return found
    return None


def _name(runtime: str) -> str:
    return Path(runtime).name


def _run_image(runtime: str, image: str, env_dir: str) -> str:
    """The image argument of the run command: a pulled SIF lies in the environment's directory."""
    if _name(runtime) in SIF_RUNTIMES:
        return image if image_kind(image) == "sif" else f"{env_dir}/{SIF_NAME}"
    return oci_name(image)


def run_words(runtime: str, image: str, env_dir: str, bind_probe: bool = False) -> list[str]:
    """The command that runs `python3` in the image with a GPU, each item one shell word. The items in
    EXPANDED are the job shell's own expansions (the job directory, the uid), written as they are;
    everything else is quoted by the caller. The job directory is bound at its own path, and with
    `bind_probe` the file "$probe" (the sweep's probe.pyz, outside the job directory) read-only at its own."""
    name = _name(runtime)
    target = _run_image(runtime, image, env_dir)
    if name in SIF_RUNTIMES:
        # the host's environment passes through (CUDA_VISIBLE_DEVICES among it); no $HOME: the image as it is
        probe = ["--bind", '"$probe:$probe:ro"'] if bind_probe else []
        return [runtime, "exec", "--nv", "--no-home", "--bind", '"$PWD"', *probe, "--pwd", '"$PWD"', target, "python3"]
    words = [runtime, "run", "--rm", "--network=none", "--ipc=host", "-v", '"$PWD:$PWD"',
             *(["-v", '"$probe:$probe:ro"'] if bind_probe else []), "-w", '"$PWD"',
             "-e", "CUDA_VISIBLE_DEVICES", "-e", "GPUCOMPAT_TELEMETRY", "-e", "GPUCOMPAT_IMAGE_ENV=1"]  # nothing else of the shell's
    if name == "podman":
        words += ["--device", "nvidia.com/gpu=all"]  # CDI: the NVIDIA Container Toolkit's generated spec
    else:
        # Docker writes as root into the bind mount unless told otherwise: the files stay the user's
        words += ["--gpus", "all", "--user", '"$(id -u):$(id -g)"']
    return [*words, "--pull=never", target, "python3"]


# The words of ours that the job's shell must expand (the job directory, the user's ids): written as they are.
EXPANDED = frozenset({'"$PWD"', '"$PWD:$PWD"', '"$(id -u):$(id -g)"', '"$probe"', '"$probe:$probe:ro"'})


def _shell(words: list[str]) -> str:
    return " ".join(word if word in EXPANDED else shell_word(word) for word in words)


def _pick(candidates: tuple[str, ...]) -> str:
    """Shell lines that set $runtime to the first candidate on the PATH ('' if none)."""
    listed = " ".join(shell_word(c) for c in candidates)
    return (f'runtime=; for candidate in {listed}; do if command -v "$candidate" >/dev/null 2>&1; '
            'then runtime=$candidate; break; fi; done\n')


def _no_runtime(candidates: tuple[str, ...]) -> str:
    wanted = ", ".join(_name(c) for c in candidates)
    return f'*) echo {shell_word(f"{NO_RUNTIME} ({wanted}) on the PATH")}" of node $(hostname)" >&2; exit 127 ;;\n'


def probe_command(resolved: ResolvedStack, env_dir: str, probe_args: str, runtime: str | None = None, redirect: str = "",
                  probe: str = PROBE_FILE) -> str:
    """The lines of run.sh that start the probe in the image: `exec <runtime ...> python3 probe.pyz ARGS`.
    `runtime`: decided on the submit side (the local executor), else chosen on the node. `probe`: probe.pyz
    relative to the job directory; one outside it (the sweep's, ../probe.pyz) is bound into the container too."""
    stack = resolved.stack
    candidates = (runtime,) if runtime else runtimes_for(stack.image or "", stack.runtime)
    suffix = f" {redirect}" if redirect else ""
    lines = [_pick(candidates), 'case "$runtime" in\n']
    outside = probe != PROBE_FILE
    shown = PROBE_FILE
    if outside:  # its absolute path, as the container sees it at the same place
        folder, name = probe.rsplit("/", 1) if "/" in probe else (".", probe)
        lines.insert(0, f'probe="$(cd {shell_word(folder)} && pwd)"/{shell_word(name)}\n')
        shown = '"$probe"'
    for candidate in candidates:
        lines.append(f"  {shell_word(candidate)}) exec {_shell(run_words(candidate, stack.image or '', env_dir, outside))} "
                     f"{shown} {probe_args}{suffix} ;;\n")
    lines.append("  " + _no_runtime(candidates))
    lines.append("esac\n")
    return "".join(lines)


def _pull_words(runtime: str, image: str, env_dir: str) -> str:
    """One runtime's pull step, as shell text: the image is fetched once, or checked to be there."""
    name, quoted = _name(runtime), shell_word(runtime)
    if name in SIF_RUNTIMES:
        if image_kind(image) == "sif":
            return f"test -r {shell_word(image)} || {{ echo {shell_word(f'FATAL: image file {image} not found')} >&2; exit 1; }}"
        sif = shell_word(f"{env_dir}/{SIF_NAME}")
        # once per image: a SIF already pulled (by another job on another node, the environment being shared) is
        # used as it is, never overwritten under a running container
        return f"test -s {sif} || {quoted} pull {sif} {shell_word(sif_source(image))}"
    name_ = shell_word(oci_name(image))
    return f"{quoted} image inspect {name_} >/dev/null 2>&1 || {quoted} pull {name_}"


def install_script(resolved: ResolvedStack, env_dir: str, requirements: str, wheelhouse: str | None, offline: bool,
                   uv: str, same_machine: bool, runtime: str | None = None) -> str:
    """install.sh: pull the image (or check that the runtime has it). Nothing is built: the image
    is tested as it is. `runtime` as for probe_command."""
    stack = resolved.stack
    candidates = (runtime,) if runtime else runtimes_for(stack.image or "", stack.runtime)
    lines = ["set -e\n", f"mkdir -p {shell_word(env_dir)}\n", _pick(candidates), 'case "$runtime" in\n']
    for candidate in candidates:
        lines.append(f"  {shell_word(candidate)}) {_pull_words(candidate, stack.image or '', env_dir)} ;;\n")
    lines += ["  " + _no_runtime(candidates), "esac\n"]
    return "".join(lines)


def requirements_text(resolved: ResolvedStack) -> str:
    return ""


def interpreter(resolved: ResolvedStack, env_dir: Path | str) -> str:
    return "python3"  # the image's own, started by the runtime (probe_command)


# -- why a container job did not get to the probe ---------------------------------------------------

# The registry answered: there is no such image or tag (the stack does not exist), against every other
# pull failure (network, authentication, a registry that cannot be reached) where nothing is known.
# Real messages: docker "manifest for X not found: manifest unknown: manifest unknown" (e.g.
# github.com/ivangabriele/dockfish/issues/13), apptainer/singularity "FATAL: Unable to pull docker://...:
# ... manifest unknown: manifest unknown" (github.com/apptainer/singularity/issues/2825), podman
# "reading manifest X in Y: manifest unknown". Docker Hub's "pull access denied for X, repository does not
# exist or may require 'docker login'" is left out: it says the same for a private image without a login.
NO_SUCH_IMAGE = re.compile(r"manifest unknown|name unknown|not found: manifest", re.I)
# The job started but the runtime could not run the image as the job needs it: no verdict on the stack.
# podman/crun: "executable file `python3` not found in $PATH"; apptainer: "\"python3\": executable file not
# found in $PATH"; podman --pull=never: "Error: X: image not known"; docker: "No such image".
IMAGE_UNUSABLE = (
    (re.compile(r"python3.{0,3}:? executable file not found|executable file `?python3`? not found", re.I),
     "the image has no python3 on its PATH (the probe needs CPython 3.8+ in the image)"),
    (re.compile(r"image not known|No such image|could not open image", re.I),
     "the runtime does not have the image (it was removed after it was pulled, or never pulled)"),
)


# The runtime is there but cannot work: a docker client with no daemon it can reach (this workplace has
# only the client), "Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker daemon running?"
RUNTIME_DOWN = re.compile(r"Cannot connect to the Docker daemon|Is the docker daemon running", re.I)


def pull_failure(log: str) -> tuple[str, str]:
    """('unresolvable' | 'image' | 'runtime', what) from a failed pull step's log."""
    if NO_RUNTIME in log:
        return "runtime", _line(log, NO_RUNTIME)
    if RUNTIME_DOWN.search(log):
        return "runtime", _line(log, RUNTIME_DOWN)
    if NO_SUCH_IMAGE.search(log):
        return "unresolvable", _line(log, NO_SUCH_IMAGE)
    return "image", _line(log, re.compile(r"^(Error|FATAL)|error|denied|unauthorized|refused|timeout", re.I), last=True)


def start_failure(stderr: str) -> tuple[str, str] | None:
    """('runtime' | 'image', what) where the runtime never started the probe for a reason that is not the
    stack's: no runtime on the node, an image without python3, an image that is gone."""
    if NO_RUNTIME in stderr:
        return "runtime", _line(stderr, NO_RUNTIME)
    if RUNTIME_DOWN.search(stderr):
        return "runtime", _line(stderr, RUNTIME_DOWN)
    for pattern, meaning in IMAGE_UNUSABLE:
        if pattern.search(stderr):
            return "image", f"{meaning}: {_line(stderr, pattern)}"
    return None


def _line(text: str, pattern, last: bool = False) -> str:
    """The first (or last) line of the text where the pattern is, else its last non-empty line, trimmed."""
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("+ ")]
    matching = [line for line in lines if (pattern in line if isinstance(pattern, str) else pattern.search(line))]
    found = (matching[-1] if last else matching[0]) if matching else None
    return (found or (lines[-1] if lines else "no message"))[:300]


# -- NVIDIA_REQUIRE_CUDA ------------------------------------------------------------------------------

# libnvidia-container's grammar (the variable's value): alternatives separated by spaces, each a
# comma-separated list of conditions that must all hold; a condition is KEY OP VALUE with KEY one of
# cuda, driver, arch, brand. NVIDIA's images say "cuda>=12.8 brand=tesla,driver>=535,driver<536 ...":
# the driver supports CUDA 12.8, or it is one of the listed branches (forward compatibility).
_CONDITION = re.compile(r"(cuda|driver|arch|brand)\s*(>=|<=|==|!=|=|<|>)\s*([A-Za-z0-9_.]+)", re.ASCII)
_COMPARE = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, "<": lambda a, b: a < b,
            "=": lambda a, b: a == b, "==": lambda a, b: a == b, "!=": lambda a, b: a != b}


def parse_require(text: str) -> list[list[tuple[str, str, str]]]:
    """The alternatives of an NVIDIA_REQUIRE_CUDA value, each a list of (key, op, value); conditions the
    grammar does not know are left out (libnvidia-container refuses them at container start)."""
    alternatives = []
    for word in (text or "").split():
        conditions = [_CONDITION.fullmatch(part.strip()) for part in word.split(",") if part.strip()]
        alternatives.append([m.groups() for m in conditions if m])
    return [a for a in alternatives if a]


def _version_tuple(text: str) -> tuple[int, ...] | None:
    parts = text.split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _holds(key: str, op: str, value: str, facts: dict) -> bool | None:
    have = facts.get(key)
    if have is None:
        return None
    if key == "brand":
        return _COMPARE[op](have.lower(), value.lower())
    a, b = _version_tuple(have), _version_tuple(value)
    if a is None or b is None:
        return None
    width = max(len(a), len(b)) if key != "driver" else len(b)  # driver>=535 compares the branch: 535.129.03 >= 535
    a, b = (a + (0,) * width)[:width], (b + (0,) * width)[:width]
    return _COMPARE[op](a, b)


def check_require(text: str, cuda: str | None = None, driver: str | None = None, brand: str | None = None,
                  arch: str | None = None) -> tuple[bool | None, str]:
    """Whether NVIDIA_REQUIRE_CUDA admits a host: True, False, or None where a fact it needs is unknown
    (e.g. the brand), with the clause that decided. `cuda` is the newest CUDA the driver supports."""
    facts = {"cuda": cuda, "driver": driver, "brand": brand, "arch": arch}
    alternatives = parse_require(text)
    if not alternatives:
        return True, "no condition"
    unknown = None
    for alternative in alternatives:
        results = [_holds(*condition, facts) for condition in alternative]
        clause = ",".join(f"{k}{op}{v}" for k, op, v in alternative)
        if all(r is True for r in results):
            return True, clause
        if unknown is None and False not in results:
            unknown = clause
    if unknown is not None:
        return None, unknown
    return False, alternatives[0] and ",".join(f"{k}{op}{v}" for k, op, v in alternatives[0])


UNSATISFIED = re.compile(r"unsatisfied condition: ([^,\n]+(?:,\s*driver[^,\n]+)*)", re.I)


def refused_condition(text: str) -> str | None:
    """The condition nvidia-container-cli named when it refused to start the container, e.g.
    'cuda>=12.8' from "requirement error: unsatisfied condition: cuda>=12.8, please update your driver"."""
    found = UNSATISFIED.search(text or "")
    return found.group(1).strip() if found else None


# -- what the node has ---------------------------------------------------------------------------------

APPTAINER_CONFS = ("/etc/apptainer/apptainer.conf", "/usr/local/etc/apptainer/apptainer.conf",
                   "/etc/singularity/singularity.conf", "/usr/local/etc/singularity/singularity.conf")


def nvccli_configured(conf_paths=APPTAINER_CONFS) -> bool | None:
    """Whether apptainer.conf/singularity.conf sets `use nvidia-container-cli = yes` (None: no file read)."""
    for path in conf_paths:
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        found = re.search(r"^\s*use nvidia-container-cli\s*=\s*(\w+)", text, re.M | re.I)
        return bool(found and found.group(1).lower() == "yes")
    return None


def runtimes_here(which=shutil.which) -> list[dict]:
    """The container runtimes on this node's PATH: name, path, version (its own words), and for
    Apptainer/Singularity whether --nv goes through nvidia-container-cli."""
    found = []
    for name in RUNTIMES:
        path = which(name)
        if not path:
            continue
        try:
            proc = subprocess.run([path, "--version"], capture_output=True, encoding="utf-8", errors="replace", timeout=10)
            version = (proc.stdout or proc.stderr).strip().splitlines()[0] if (proc.stdout or proc.stderr).strip() else ""
        except (OSError, subprocess.TimeoutExpired):
            version = ""
        entry = {"name": name, "path": path, "version": version[:120]}
        if name in SIF_RUNTIMES:
            entry["nvccli"] = nvccli_configured()
        if name == "docker":  # the client alone runs nothing: say whether its daemon answers
            try:
                proc = subprocess.run([path, "info", "--format", "{{.ServerVersion}}"], capture_output=True, encoding="utf-8", errors="replace", timeout=10)
                entry["daemon"] = proc.stdout.strip() if proc.returncode == 0 else f"not reachable: {(proc.stderr.strip().splitlines() or ['?'])[-1][:160]}"
            except (OSError, subprocess.TimeoutExpired):
                entry["daemon"] = "not reachable: docker info did not answer"
        found.append(entry)
    return found
