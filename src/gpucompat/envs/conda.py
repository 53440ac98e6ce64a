"""`conda`: an environment.yml per stack, solved on the submit side into an explicit lock.

The solve uses py-rattler (imported only when a conda stack is used). Its answer is stored as
the stack's pins in conda's `@EXPLICIT` format (one package URL#md5 a line), so the job installs
exactly what was solved: with micromamba, mamba or conda when one is on the node's PATH, else
with py-rattler. Nodes without internet use a channel on a shared filesystem (file:// URLs are
read where they are) or a filled package cache (CONDA_PKGS_DIRS).
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import threading
import urllib.parse
from datetime import timedelta
from pathlib import Path

from ..errors import UserError
from ..model import ResolvedStack, Stack, StackSpec

# The conda package that carries each framework (conda-forge's names).
PACKAGES = {"torch": "pytorch", "tensorflow": "tensorflow", "jax": "jax", "cupy": "cupy", "cuda-runtime": "cuda-cudart"}
# A conda stack's variant is its CUDA pin: cuda-version (the CUDA 12+ metapackage conda-forge
# uses) or cudatoolkit (older releases, as the seed's sweep pinned it); "default": no pin.
VARIANT = re.compile(r"default|(cuda-version|cudatoolkit)=[0-9]{1,2}\.[0-9]{1,2}", re.ASCII)
# A channel name (conda-forge, nvidia, pytorch), an http(s) URL, or a file:// URL of a local channel.
CHANNEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}|https?://[A-Za-z0-9._~:/%@+-]{1,400}|file:///[A-Za-z0-9._~/%+-]{1,4000}", re.ASCII)
DEFAULT_CHANNELS = ("conda-forge",)
# The submit side has no driver: it solves as if the node's driver supported this CUDA (or the
# stack's pin); the real driver is checked by the knowledge and by the probe.
NEWEST_CUDA = "13.0"
SOLVE_TIMEOUT = timedelta(seconds=300)
_SOLVING = threading.Lock()  # py-rattler one call at a time: resolve_all runs stacks in threads, and a solve is CPU-bound


def rattler():
    """py-rattler, or one sentence saying how to get it."""
    try:
        import rattler as module
        import rattler.exceptions  # SolverError, GatewayError: not loaded by `import rattler`
    except ImportError:
        raise UserError("conda stacks are solved with py-rattler, which is not installed: "
                        "pip install 'gpucompat[conda]' (or py-rattler>=0.28).") from None
    return module


def check_channel(channel: object, where: str) -> str:
    """A plan's channel: a name, an http(s) URL, or the file:// URL of a local channel that exists here."""
    if not isinstance(channel, str) or not CHANNEL.fullmatch(channel):
        raise UserError(f"{where}: {str(channel)[:60]!r} is not a conda channel; write a name like \"conda-forge\", "
                        "an https:// URL, or file:///absolute/path of a local channel.")
    if channel.startswith("file:"):
        path = Path(urllib.parse.unquote(urllib.parse.urlsplit(channel).path))  # url2pathname, without urllib.request's 35 ms
        if not (path / "noarch" / "repodata.json").is_file():
            raise UserError(f"{where}: the local channel {channel} has no noarch/repodata.json here; "
                            "index it first (e.g. rattler-index fs DIR, or conda index DIR).")
    return channel


def subdir(platform: str) -> str:
    """The conda subdir for a plan's platform ('x86_64-manylinux_2_28' -> 'linux-64')."""
    return "linux-aarch64" if platform.startswith("aarch64") else "linux-64"


def cuda_pin(variant: str) -> str | None:
    """'cuda-version=12.6' -> '12.6'; None for 'default'."""
    return variant.split("=", 1)[1] if "=" in variant else None


def match_specs(framework: str, version: str, variant: str, python: str) -> tuple[str, ...]:
    """The environment.yml dependencies of one point of the space (conda's spelling: `=` is a prefix, `==` exact)."""
    package = PACKAGES[framework]
    # cuda-runtime's version is a CUDA minor series ("12.6"): any patch release of cuda-cudart in it
    specs = [f"{package}={version}" if framework == "cuda-runtime" else f"{package}=={version}"]
    if variant != "default":
        specs.append(variant)
    return (*specs, f"python={python}")  # the probe runs with the environment's own Python


def environment_yml(stack: Stack, name: str | None = None) -> str:
    """The stack as an environment.yml (every value a JSON string, which YAML reads as it is)."""
    name = name or "gpucompat-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", stack.key).strip("-")
    lines = [f"name: {json.dumps(name)}", "channels:"]
    lines += [f"  - {json.dumps(channel)}" for channel in stack.channels]
    lines += ["dependencies:"] + [f"  - {json.dumps(spec)}" for spec in stack.requirements]
    return "\n".join(lines) + "\n"


# -- the version space ---------------------------------------------------------------------------

def _gateway(offline: bool):
    module = rattler()
    from ..paths import cache_dir

    config = module.SourceConfig(cache_action="force-cache-only") if offline else None
    return module.Gateway(cache_dir=cache_dir() / "conda-repodata", default_config=config)


def _channel_error(exc: Exception, channels: tuple[str, ...]) -> UserError:
    return UserError(f"cannot read the conda channels {', '.join(channels)} ({str(exc).splitlines()[0][:200]}); "
                     "public channels cannot be reached from a machine without internet: use a local channel "
                     "(file://...) or give exact versions.")


def available_versions(spec: StackSpec, offline: bool = False, platform: str = "x86_64-manylinux_2_28") -> list[str]:
    """Every version of the framework's package in the stack's channels (the platform's subdir and
    noarch), as the seed's `conda search` listed them; cuda-runtime's as CUDA minor series."""
    import asyncio  # here, not at the top: envs is imported by commands that must start fast

    module = rattler()
    package = PACKAGES[spec.framework]
    try:
        with _SOLVING:
            found = asyncio.run(_gateway(offline).query(list(spec.channels), [subdir(platform), "noarch"], [package], recursive=False))
    except module.exceptions.GatewayError as exc:
        raise _channel_error(exc, spec.channels) from None
    versions = {str(record.version) for records in found for record in records}
    if spec.framework == "cuda-runtime":
        versions = {".".join(v.split(".")[:2]) for v in versions}
    return sorted(versions)


# -- resolution on the submit side ---------------------------------------------------------------

def virtual_packages(stack: Stack, platform: str) -> list:
    module = rattler()
    glibc = re.search(r"manylinux_2_([0-9]+)", platform)
    cuda = cuda_pin(stack.variant) or (stack.version if stack.framework == "cuda-runtime" else NEWEST_CUDA)
    found = {"__unix": "0", "__linux": "5.10", "__glibc": f"2.{glibc.group(1) if glibc else 17}", "__cuda": cuda}
    return [module.GenericVirtualPackage(module.PackageName(name), module.Version(version), module.BuildString("0"))
            for name, version in found.items()]


def lock_lines(records) -> tuple[str, ...]:
    """The solved records as @EXPLICIT lines, URL#md5 (what conda, mamba and micromamba all read)."""
    return tuple(f"{record.url}#{record.md5.hex()}" if record.md5 else record.url for record in records)


def cuda_versions(records) -> tuple[str | None, str | None]:
    """(CUDA runtime 'X.Y', cuDNN 'X.Y.Z') from the solved records: cuda-version, else cudatoolkit, else cuda-cudart."""
    versions = {record.name.normalized: str(record.version) for record in records}
    cuda = next((versions[name] for name in ("cuda-version", "cudatoolkit", "cuda-cudart") if name in versions), None)
    cudnn = versions.get("cudnn")
    return (".".join(cuda.split(".")[:2]) if cuda else None), (".".join(cudnn.split(".")[:3]) if cudnn else None)


def resolve(stack: Stack, platform: str, offline: bool = False) -> ResolvedStack:
    """Solve the stack against its channels into an explicit lock. No answer is ENV_UNRESOLVABLE
    with the solver's words; a channel that cannot be read is "could not test" (a cause)."""
    import asyncio

    module = rattler()
    from ..knowledge.signatures import could_not_ask

    try:
        with _SOLVING:
            records = asyncio.run(module.solve(
                list(stack.channels), list(stack.requirements), gateway=_gateway(offline),
                platforms=[subdir(platform), "noarch"], virtual_packages=virtual_packages(stack, platform), timeout=SOLVE_TIMEOUT))
    except module.exceptions.SolverError as exc:
        if "Solve operation has been cancelled" in str(exc):  # SOLVE_TIMEOUT ran out (py-rattler 0.28's words): no proof that there is no solution
            return ResolvedStack(stack, ok=False, error=f"the conda solve did not finish within "
                                 f"{SOLVE_TIMEOUT.total_seconds():.0f} s ({str(exc).strip()[:200]})", cause="resolver")
        return ResolvedStack(stack, ok=False, error=f"conda cannot solve it: {str(exc).strip()[-4000:]}")
    except (module.exceptions.GatewayError, module.exceptions.FetchRepoDataError, OSError) as exc:  # the channels did not answer
        text = f"{type(exc).__name__}: {exc}"[-4000:]
        cause = could_not_ask(text) or ("offline-cache" if offline else "index")
        return ResolvedStack(stack, ok=False, error=text, cause=cause)
    records = sorted(records, key=lambda r: r.name.normalized)
    cuda, cudnn = cuda_versions(records)
    return ResolvedStack(stack, ok=True, pins=lock_lines(records), cuda_runtime=cuda, cudnn=cudnn)


# -- the job side --------------------------------------------------------------------------------

# Run with a Python that has py-rattler, where no conda binary is on the node: installs the
# @EXPLICIT lock into the prefix. Standard library and rattler only; errors in the words
# analysis.could_not_ask reads (offline cache, network, hash mismatch) so they say "could not test".
INSTALLER = r'''
import asyncio, hashlib, os, shutil, sys, tempfile, traceback, urllib.parse, urllib.request
lock, prefix, cache = sys.argv[1:4]
offline = "--offline" in sys.argv[4:]
cache = (os.environ.get("CONDA_PKGS_DIRS") or "").split(",")[0] or cache

def leave(code, message=""):
    # os._exit: py-rattler's runtime can crash in interpreter teardown (a few runs in a hundred, 0.28)
    sys.stderr.write(message + "\n" if message else "")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)

try:
    import rattler
except ImportError:
    # "no conda installer here": the words resolve._COULD_NOT_ASK maps to the cause "installer"
    leave(1, "error: no conda installer here: put micromamba, mamba or conda on PATH, or install py-rattler for " + sys.executable)

def fetch(url, md5):
    parts = urllib.parse.urlsplit(url)
    name = os.path.basename(parts.path)
    if parts.scheme == "file":
        path = urllib.request.url2pathname(parts.path)
    else:
        path = os.path.join(cache, name)
        if not os.path.exists(path):
            if offline:
                leave(1, "error: offline, and %s was not found in the cache %s" % (name, cache))
            os.makedirs(cache, exist_ok=True)
            # a name of its own in the cache (jobs share CONDA_PKGS_DIRS), renamed whole; a timeout so a
            # stalled server ends in words, not in the install timeout
            handle, part = tempfile.mkstemp(dir=cache, prefix=name + ".", suffix=".part")
            try:
                with os.fdopen(handle, "wb") as out, urllib.request.urlopen(url, timeout=120) as answer:
                    shutil.copyfileobj(answer, out)
                umask = os.umask(0)
                os.umask(umask)
                os.chmod(part, 0o666 & ~umask)  # not mkstemp's 0600: the other users of a shared cache read it too
                os.replace(part, path)
            except OSError as exc:  # URLError and socket.timeout are OSErrors
                if os.path.exists(part):
                    os.unlink(part)
                leave(1, "error sending request for url %s: %s" % (url, exc))
    with open(path, "rb") as handle:
        digest = hashlib.md5(handle.read()).hexdigest()
    if md5 and digest != md5:
        leave(1, "error: Hash mismatch for %s: the lock says md5 %s, the file has %s" % (url, md5, digest))
    return path

async def main():
    records = []
    for line in open(lock):
        line = line.strip()
        if line and not line.startswith(("#", "@")):
            url, _, md5 = line.partition("#")
            records.append(await rattler.RepoDataRecord.from_package_archive(fetch(url, md5)))
    await rattler.install(records, prefix, cache_dir=os.path.join(cache, "rattler"), show_progress=False)
    print("installed %d packages into %s with py-rattler" % (len(records), prefix))

try:
    asyncio.run(main())
except Exception:
    leave(1, "error: " + traceback.format_exc())
leave(0)
'''


def install_script(resolved: ResolvedStack, env_dir: str, requirements: str, wheelhouse: str | None, offline: bool,
                   uv: str, same_machine: bool) -> str:
    """install.sh: the lock in `requirements` (requirements_text) into env_dir, with the first of
    micromamba, mamba, conda on PATH, else py-rattler in this Python (the node's python3 elsewhere)."""
    q = shlex.quote
    off = " --offline" if offline else ""
    cache = str(Path(env_dir).parent / "conda-pkgs")
    python = sys.executable if same_machine else "python3"
    return "\n".join([
        "set -e",
        f"lock={q(requirements)}; prefix={q(env_dir)}",
        'if command -v micromamba >/dev/null 2>&1; then',
        f'  exec micromamba create --yes --prefix "$prefix" --file "$lock"{off}',
        'elif command -v mamba >/dev/null 2>&1; then',
        f'  exec mamba create --yes --prefix "$prefix" --file "$lock"{off}',
        'elif command -v conda >/dev/null 2>&1; then',
        f'  exec conda create --yes --prefix "$prefix" --file "$lock"{off}',
        "fi",
        # the installer on stdin, from a here-document: `sh -x` traces commands, not their input,
        # so the install log holds only what really went wrong
        f'exec {q(python)} - "$lock" "$prefix" {q(cache)}{off} <<\'GPUCOMPAT_INSTALLER\'',
        INSTALLER.strip("\n"), "GPUCOMPAT_INSTALLER", ""])


def requirements_text(resolved: ResolvedStack) -> str:
    """The explicit lock file: conda's `@EXPLICIT` header, the platform, then one URL#md5 a line."""
    platforms = {url.split("#")[0].rsplit("/", 2)[-2] for url in resolved.pins} - {"noarch"}
    header = ["@EXPLICIT"] + [f"# platform: {p}" for p in sorted(platforms)[:1]]
    return "\n".join([*header, *resolved.pins]) + "\n"


def interpreter(resolved: ResolvedStack, env_dir: Path | str) -> str:
    return f"{env_dir}/bin/python"


def job_files(resolved: ResolvedStack) -> dict[str, str]:
    """Written into every job of a conda stack: what was asked for, and what was solved."""
    return {"environment.yml": environment_yml(resolved.stack), "conda-lock.txt": requirements_text(resolved)}


# -- advise --------------------------------------------------------------------------------------

def advised_pin(framework: str, version: str, variant: str, cuda_runtime: str | None = None) -> str | None:
    """The conda CUDA pin for an advised stack: its own (a conda variant), the CUDA it really ran
    with, or the one its wheel variant names; cudatoolkit before CUDA 12, as conda-forge packaged it."""
    if variant != "default" and VARIANT.fullmatch(variant):
        return variant
    cuda = cuda_runtime or (version if framework == "cuda-runtime" else None)
    wheel = re.fullmatch(r"cu([0-9]{2})([0-9])|cuda([0-9]{2})x?", variant or "", re.ASCII)
    if not cuda and wheel:  # torch cu121 -> 12.1; cupy cuda12x, jax cuda12 -> 12 (any 12.x)
        cuda = f"{wheel.group(1)}.{wheel.group(2)}" if wheel.group(1) else wheel.group(3)
    if not cuda:
        return None
    return f"{'cudatoolkit' if int(cuda.split('.')[0]) < 12 else 'cuda-version'}={cuda}"


def advised_environment(framework: str, version: str, variant: str, python: str | None, cuda_runtime: str | None,
                        comment: str, channels: tuple[str, ...] = DEFAULT_CHANNELS) -> str:
    """`advise --format conda`: an environment.yml for one advised stack (version X.Y.* as conda's X.Y)."""
    package = PACKAGES[framework]
    release = version.split("+")[0]
    spec = f"{package}={release[:-2]}" if release.endswith(".*") else (
        f"{package}={release}" if framework == "cuda-runtime" else f"{package}=={release}")
    specs = [spec, *filter(None, [advised_pin(framework, release.removesuffix(".*"), variant, cuda_runtime)]),
             *([f"python={python}"] if python else [])]
    stack = Stack(framework, release, variant, python or "", "conda", tuple(specs), channels=channels)
    lines = [f"# {line}" for line in comment.splitlines()]
    return "\n".join(lines) + "\n" + environment_yml(stack, f"{framework}-{release.removesuffix('.*')}")
