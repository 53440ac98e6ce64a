"""Questions as people type them -> the one stack the knowledge judges, with a note for every reading.

`torch 2.4`, `torch==2.4` (the newest 2.4.x), `pytorch`, `tf`, `tensorflow-gpu`, `cupy-cuda12x`,
`nvidia-cuda-runtime-cu12==12.4.127`, `jax[cuda12]`, `torch>=2.4`: each is read as one framework, one
release the knowledge holds and one variant, and every step that was not literally what the user
wrote is said in a note. A question that names a GPU means the GPU build of JAX and TensorFlow
unless the user wrote a CPU one (`jax[cpu]`, `tensorflow-cpu`); the note says which was assumed.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from functools import lru_cache

from packaging.version import Version

from ..errors import UserError
from ..knowledge import installs, releases, tables
from ..model import FRAMEWORKS
from ..quoting import CONTROL_CHARACTERS

MAX_SPEC_CHARS = 200
_REQUIREMENT = re.compile(r"(?P<name>[A-Za-z][A-Za-z0-9_.-]{0,80})\s*(?:\[(?P<extras>[A-Za-z0-9_,\s-]{0,80})\])?\s*"
                          r"(?P<spec>(?:===?|~=|!=|<=|>=|<|>)\s*[^;]*)?", re.ASCII)
_VERSION_WORD = re.compile(r"[0-9][0-9A-Za-z.+*_-]{0,80}", re.ASCII)
# name (as pip and conda spell it) -> (framework, variant or None, what it was read as)
ALIASES = {
    "pytorch": ("torch", None, "pytorch (conda's name) read as torch"),
    "tf": ("tensorflow", None, "tf read as tensorflow"),
    "tensorflow-gpu": ("tensorflow", "gpu", "tensorflow-gpu read as tensorflow, variant gpu (the GPU package of TensorFlow 1.x to 2.11)"),
    "tensorflow-cpu": ("tensorflow", "cpu", "tensorflow-cpu read as tensorflow, variant cpu (TensorFlow's CPU-only package)"),
    "jaxlib": ("jax", None, "jaxlib (JAX's compiled half) read as jax"),
    "cuda": ("cuda-runtime", None, "cuda read as cuda-runtime"),
    "cudart": ("cuda-runtime", None, "cudart read as cuda-runtime"),
}
_JAX_PLUGIN = re.compile(r"jax-(cuda[0-9]{2})-(plugin|pjrt)", re.ASCII)
_CUDA_RUNTIME_WHEEL = re.compile(r"nvidia-cuda-runtime(-cu[0-9]{2})?", re.ASCII)
CPU_VARIANTS = {"torch": "cpu", "tensorflow": "cpu", "jax": "cpu"}


@dataclass
class Question:
    """One stack to judge: framework, exact release, variant; `typed` is what the user wrote, `notes` how it was read."""

    typed: str
    framework: str
    version: str
    variant: str | None  # None: a GPU build is still to be chosen (JAX, TensorFlow, CuPy asked without one)
    notes: list[str] = field(default_factory=list)

    @property
    def release(self) -> str:
        """The release as the rules take it: torch's variant as its local label."""
        return release_of(self.framework, self.version, self.variant) if self.variant is not None else self.version

    @property
    def spec(self) -> str:
        return spec_text(self.framework, self.version, self.variant or "default")


def release_of(framework: str, version: str, variant: str) -> str:
    """The release as the rules take it (torch's variant as its local label)."""
    if framework == "torch" and variant not in ("default", "installed") and "+" not in version:
        return f"{version}+{variant}"
    return version


def spec_text(framework: str, version: str, variant: str) -> str:
    """How pip (or gpucompat's own cuda-runtime) writes one point: torch==2.4.1+cu118, jax[cuda12]==0.4.30, cupy-cuda12x==13.3.0."""
    if framework == "torch":
        local = "" if variant in ("default", "installed") or "+" in version else f"+{variant}"
        return f"torch=={version}{local}"
    if framework == "tensorflow":
        return {"and-cuda": "tensorflow[and-cuda]", "gpu": "tensorflow-gpu", "cpu": "tensorflow-cpu"}.get(variant, "tensorflow") + f"=={version}"
    if framework == "jax":
        return f"jax[{variant}]=={version}"
    if framework == "cupy":
        return f"cupy-{variant}=={version}"
    return f"{framework}=={version}"


def framework_name(text: str) -> tuple[str, str | None, list[str]]:
    """A framework as people name it -> (framework, the variant the name implies, notes)."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"give a framework: {', '.join(FRAMEWORKS)} (e.g. gpucompat advise torch).")
    name = text.strip().lower().replace("_", "-")
    if name in FRAMEWORKS:
        return name, None, []
    if name in ALIASES:
        framework, variant, note = ALIASES[name]
        return framework, variant, [note]
    shown = text if len(text) <= 60 else text[:60] + "..."
    if name.startswith("cupy-cuda"):
        variant = name[len("cupy-"):]
        known = sorted({r["variant"] for r in tables.table("cupy_packages")})
        if variant not in known and not _CUPY_PACKAGE.fullmatch(variant):  # cupy-cuda12: not a package; cupy-cuda14x may be new
            close = difflib.get_close_matches(variant, known, n=1, cutoff=0.8)
            raise UserError(f"{shown!r} is not a CuPy package on PyPI" + (f"; did you mean cupy-{close[0]}?" if close else
                            " (they are named cupy-cuda12x, cupy-cuda13x, or cupy-cuda102 for CUDA 10.2 and older)."))
        return "cupy", variant, []
    if plugin := _JAX_PLUGIN.fullmatch(name):
        return "jax", plugin.group(1), [f"{name} (JAX's CUDA plugin) read as jax[{plugin.group(1)}]"]
    if _CUDA_RUNTIME_WHEEL.fullmatch(name):
        return "cuda-runtime", None, [f"{name} (the CUDA runtime's wheel) read as cuda-runtime"]
    if meant := _meant(name):
        raise UserError(f"unknown framework {shown!r}; did you mean {meant}?")
    raise UserError(f"unknown framework {shown!r}; expected one of: {', '.join(FRAMEWORKS)} (or pytorch, tf, tensorflow-gpu, "
                    "jaxlib, cupy-cuda12x, nvidia-cuda-runtime-cu12).")


# Names a package is written as, for "did you mean": each framework, its aliases, and the package names it reads.
_SPELLINGS = {**{f: f for f in FRAMEWORKS}, **{a: framework for a, (framework, _v, _n) in ALIASES.items()},
              "cupy-cuda12x": "cupy-cuda12x", "cupy-cuda13x": "cupy-cuda13x", "cupy-cuda11x": "cupy-cuda11x",
              "jax-cuda12-plugin": "jax-cuda12-plugin", "jax-cuda13-plugin": "jax-cuda13-plugin",
              "nvidia-cuda-runtime-cu12": "nvidia-cuda-runtime-cu12", "nvidia-cuda-runtime-cu13": "nvidia-cuda-runtime-cu13"}
_CUPY_PACKAGE = re.compile(r"cuda[0-9]{2}x", re.ASCII)


def _meant(name: str) -> str | None:
    """The framework a misspelt name most likely means, within a small edit distance ('pytroch' -> torch)."""
    close = difflib.get_close_matches(name, list(_SPELLINGS), n=1, cutoff=0.75)
    if not close:
        return None
    framework = _SPELLINGS[close[0]]
    return framework if close[0] == framework else f"{close[0]} ({framework})"


@lru_cache(maxsize=None)
def wheel_releases(package: str) -> tuple[Version, ...]:
    """Final releases with Linux wheels in PyPI's file lists the tables hold, oldest first."""
    found = [Version(r["version"]) for r in tables.table("python_wheels") if r["package"] == package and r["pythons"]]
    return tuple(sorted(v for v in found if not v.is_prerelease and not v.is_devrelease))


def known_releases(framework: str, variant: str | None) -> tuple[Version, ...]:
    """The releases of a framework the knowledge holds, oldest first (CUDA minor series for cuda-runtime)."""
    if framework == "cuda-runtime":
        return tuple(sorted(Version(r["cuda"]) for r in tables.table("cuda_drivers")))
    package = {"torch": "torch", "jax": "jaxlib", "tensorflow": "tensorflow-gpu" if variant == "gpu" else "tensorflow"}.get(framework)
    if framework == "cupy":
        package = f"cupy-{variant or 'cuda12x'}"
    return wheel_releases(package) if package else ()


def judgeable(framework: str, release: Version) -> bool:
    """Whether the build tables describe this release (PyPI's file lists run further than they do)."""
    text = str(release)
    if framework == "torch":
        return tables.torch_default(text) is not None or any(r["release"] == tables.minor_series(text) for r in tables.table("torch_builds"))
    if framework == "tensorflow":
        return tables.tensorflow_build(text) is not None
    if framework == "jax":
        return not tables.past_newest("jax", text)
    if framework == "cupy":
        return release <= tables.newest_cupy()
    return True


def _newest(framework: str, variant: str | None, accepts, judged_only: bool = False) -> Version | None:
    return max((v for v in known_releases(framework, variant) if accepts(v) and (not judged_only or judgeable(framework, v))), default=None)


def _split_words(words: list[str]) -> str:
    """`torch 2.4` -> `torch==2.4`; `torch >=2.4` -> `torch>=2.4`; one word as it is."""
    words = [w for w in (w.strip() for w in words) if w]
    if not words:
        raise UserError("give a stack to ask about, e.g. torch==2.4.1, 'torch 2.4' or jax[cuda12]==0.4.30.")
    if len(words) == 1:
        return words[0]
    if len(words) == 2 and _VERSION_WORD.fullmatch(words[1]):
        return f"{words[0]}=={words[1]}"
    if len(words) == 2 and words[1][:1] in "<>=!~":
        return words[0] + words[1]
    shown = " ".join(words)
    raise UserError(f"{shown[:60]!r}: ask about one stack, as NAME VERSION or NAME==VERSION (e.g. 'torch 2.4' or torch==2.4.1).")


def read(words: list[str] | str, exact: bool = False) -> Question:
    """The words of a question -> the stack it asks about; `variant` None where a GPU build is still to be chosen.
    `exact`: ==2.4 means 2.4.0, as pip reads a requirements file (a question means the newest 2.4.x)."""
    raw = [words] if isinstance(words, str) else list(words)
    if any(CONTROL_CHARACTERS.search(w.strip(" ")) for w in raw):  # a newline or an escape is no part of a spec
        shown = " ".join(raw)
        raise UserError(f"{shown[:60]!r} is not a stack spec; write e.g. torch==2.4.1, 'torch 2.4', jax[cuda12]==0.4.30 or cuda-runtime==12.4.")
    text = _split_words(" ".join(raw).split())
    if len(text) > MAX_SPEC_CHARS:
        raise UserError(f"the stack spec is {len(text)} characters long; a spec like torch==2.4.1 needs at most {MAX_SPEC_CHARS}.")
    found = _REQUIREMENT.fullmatch(text)
    if not found or CONTROL_CHARACTERS.search(text):
        raise UserError(f"{text[:60]!r} is not a stack spec; write e.g. torch==2.4.1, 'torch 2.4', jax[cuda12]==0.4.30 or cuda-runtime==12.4.")
    framework, variant, notes = framework_name(found.group("name"))
    extras = sorted(e.strip().lower() for e in (found.group("extras") or "").split(",") if e.strip())
    if extras and framework == "cupy" and variant:  # cupy-cuda12x[ctk]: the package, with the CUDA components pip brings
        variant = f"{variant}[{','.join(extras)}]"
    elif extras:
        variant = extras[0]
    specifier = re.sub(r"\s+", "", found.group("spec") or "")
    version, version_notes = _version(framework, variant, specifier, text, exact)
    if "+" in version:  # torch==2.7.0+cu128: the local label names the variant
        version, local = version.split("+", 1)
        variant = local if framework == "torch" else variant
    if framework == "cuda-runtime" and found.group("name").lower().startswith("nvidia") and version.count(".") >= 2:
        series = ".".join(version.split(".")[:2])
        version_notes.append(f"version {version} of the runtime wheel is CUDA {series}")
        version = series
    if framework == "cuda-runtime" and tables.version(version) is not None and tables.version(version).major == 0:
        # No CUDA release is numbered 0.x (CUDA began at 1.0): a typo, said plainly rather than judged 'uncertain'.
        raise UserError(f"cuda-runtime {version} is not a CUDA release; give a CUDA version such as 12.4.")
    if framework == "torch" and variant is None:
        variant = "default"
    if framework == "cuda-runtime":
        variant = "default"
    if not exact and framework != "cuda-runtime":  # a release the index lacks, or one newer than the tables describe
        newer = releases.check(framework, variant, version, judgeable(framework, tables.version(version)))
        version_notes += [newer] if newer else []
    return Question(text, framework, version, variant, notes + version_notes)


def _version(framework: str, variant: str | None, specifier: str, text: str, exact_pin: bool = False) -> tuple[str, list[str]]:
    """The exact release a specifier means, with a note wherever that is not what was written."""
    name = text.split("=")[0].split("<")[0].split(">")[0].split("~")[0].split("!")[0]
    exact = re.fullmatch(r"===?([0-9][0-9A-Za-z.+_-]*?)(\.\*)?", specifier, re.ASCII)
    if exact and not exact.group(2):
        version = exact.group(1)
        if len(version) > tables.MAX_VERSION_CHARS or tables.version(version.split("+")[0]) is None:
            raise UserError(f"{text[:60]!r}: the version is not a release number of at most {tables.MAX_VERSION_CHARS} characters, like 2.4.1.")
        plain = tables.version(version.split("+")[0])
        if framework != "cuda-runtime" and len(plain.release) < 3 and not plain.is_prerelease and not exact_pin:
            # `torch==2.4`: people mean the 2.4 series; pip would read it as 2.4.0
            series = plain.release
            newest = _newest(framework, variant, lambda v: v.release[:len(series)] == series)
            if newest is not None and str(newest) != version.split("+")[0]:
                local = "+" + version.split("+", 1)[1] if "+" in version else ""
                return f"{newest}{local}", [f"{name}=={version} read as {newest}, the newest {plain}.x the knowledge holds "
                                            f"(pip itself would install {plain}.0 for =={plain})"]
        return version, []
    if exact:  # ==2.4.*
        series = tables.version(exact.group(1))
        newest = series and _newest(framework, variant, lambda v: v.release[:len(series.release)] == series.release)
        if not newest:
            raise UserError(f"{text[:60]!r}: the knowledge holds no {framework} release in {exact.group(1)}.*; give an exact version.")
        return str(newest), [f"{name}{specifier} read as {newest}, the newest release of that series the knowledge holds"]
    if not specifier:
        newest = _newest(framework, variant, lambda v: True, judged_only=True)
        if newest is None:
            raise UserError(f"{text[:60]!r}: give a version, e.g. {framework}==2.4.1.")
        return str(newest), [f"no version given: read as {newest}, the newest release the knowledge describes"]
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        wanted = SpecifierSet(specifier)
    except InvalidSpecifier:
        raise UserError(f"{text[:60]!r} is not a stack spec; write e.g. torch==2.4.1, torch>=2.4 or jax[cuda12]==0.4.30.") from None
    newest = _newest(framework, variant, lambda v: wanted.contains(v, prereleases=False), judged_only=True) or \
        _newest(framework, variant, lambda v: wanted.contains(v, prereleases=False))
    if newest is None:
        raise UserError(f"{text[:60]!r}: no {framework} release the knowledge holds satisfies {specifier}; give an exact version.")
    return str(newest), [f"{name}{specifier} read as {newest}, the newest release the knowledge describes that satisfies it "
                         "(pip installs the newest on the index, which may be newer)"]


# -- the GPU build a question means -----------------------------------------------------------------

def gpu_variants(framework: str, version: str) -> list[str]:
    """The GPU builds a release has, in the order a question that names a GPU reads them (newest CUDA first)."""
    if framework == "jax":
        rows = {r["variant"] for r in tables.table("jax_builds")}
        ordered = sorted((v for v in rows if re.fullmatch(r"cuda[0-9]{2}", v)), reverse=True) + ["cuda"]
        return [v for v in ordered if tables.jax_build(version, v) is not None] or ["cuda12"]
    if framework == "tensorflow":
        plain = tables.version(version)
        if plain is not None and plain < Version("2.1"):
            return ["gpu"]  # before 2.1 the GPU build was its own package, tensorflow-gpu
        return ["and-cuda"] if plain is None or plain >= Version("2.14") else ["plain"]
    if framework == "cupy":
        plain = tables.version(version)
        builds = [r["variant"] for r in sorted(tables.table("cupy_packages"), key=lambda r: r["variant"], reverse=True)
                  if r["variant"].endswith("x") and plain is not None
                  and Version(r["first_version"]) <= plain <= Version(r["last_version"])] or ["cuda12x"]
        # with the [ctk] extra first where the release has it (compiler_pins.csv): it brings the NVRTC the plain wheel needs
        ctk = {r["variant"] for r in tables.table("compiler_pins") if r["framework"] == "cupy" and plain is not None
               and Version(r["from_version"]) <= plain}
        return [v for build in builds for v in ([f"{build}[ctk]"] if f"{build}[ctk]" in ctk else []) + [build]]
    return ["default"]


def typed_variants(framework: str, version: str) -> list[str]:
    """The builds a question without an extra or index reads, in order. As gpu_variants, except that `tensorflow==X` is
    plain TensorFlow whatever X is: from 2.14 the package as typed uses the system's CUDA and cuDNN (conditional), and it
    is never rewritten to tensorflow[and-cuda], whose own fate is said beside it (extra_note)."""
    if framework == "tensorflow":
        plain = tables.version(version)
        return ["gpu"] if plain is not None and plain < Version("2.1") else ["plain"]
    return gpu_variants(framework, version)


def extra_note(framework: str, version: str, variant: str, python: str | None) -> str | None:
    """For plain tensorflow 2.14+: the line about tensorflow[and-cuda] of the same release, which brings the CUDA
    libraries: whether its install line resolves (install_checks.csv) and, where not, the nearest spelling that does."""
    plain = tables.version(version)
    if framework != "tensorflow" or variant != "plain" or plain is None or plain < Version("2.14") or tables.tensorflow_build(version) is None:
        return None
    stuck = installs.unresolvable("tensorflow", version, "and-cuda", python)
    extra = spec_text("tensorflow", version, "and-cuda")
    if stuck is None:
        return f"{extra} brings CUDA and cuDNN with it (pip's own wheels) instead of the system's"
    for_python = f" for Python {python}" if python and stuck["resolves"] == "some" else ""
    nearest = f"; {spec_text('tensorflow', stuck['nearest'], 'and-cuda')} installs" if stuck["nearest"] else ""
    return f"{extra}, the spelling that brings CUDA and cuDNN, does not install{for_python} (uv: {stuck['reason']}){nearest}"


def assumed_note(question: Question, variant: str) -> str:
    """What a question without a build was read as."""
    what = {"jax": "write jax[cpu] for the CPU one", "tensorflow": "write tensorflow-cpu for the CPU one",
            "cupy": "plain cupy builds from source against the CUDA it finds"}[question.framework]
    return f"{question.typed} read as {spec_text(question.framework, question.version, variant)}: a question that names a GPU means the GPU build ({what})"
