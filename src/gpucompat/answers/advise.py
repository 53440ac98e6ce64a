"""`gpucompat advise`: the newest stacks that work for a GPU and driver, observed results
first and predictions second (each says which), with the exact install command."""

from __future__ import annotations

import json
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from ..knowledge import tables
from ..knowledge.rules import FAIL, PASS, Prediction, Reason, driver_drives_rule, driving_branch, predict_stack, wheel_pythons
from ..model import is_verified
from .asked import NEWEST, Asked, newest_python, read_advice
from .conditions import CONDITIONAL, system_libraries
from .drivers import oldest_driver
from .observed import seen_in
from .questions import gpu_variants, judgeable, known_releases, release_of, spec_text, wheel_releases


def install_command(framework: str, version: str, variant: str) -> str:
    """The pip command for one point of the space (uv: prefix with `uv`)."""
    from ..space import requirements_for  # here: the version space's registries cost explain ~20 ms of imports

    requirements, index = requirements_for(framework, version, variant)
    if framework == "torch" and variant == "default":
        requirements, index = (f"torch=={version}",), None
    quoted = " ".join(f"'{r}'" for r in requirements)
    return f"pip install {quoted}" + (f" --index-url {index}" if index else "")


def install_commands(framework: str, version: str, variant: str, cuda_runtime: str | None = None) -> dict[str, str]:
    """Every way to install one point: pip (with the variant's index URL), uv (the same arguments), and conda
    (conda-forge's package with the CUDA pin the variant, or the CUDA it is known to bring, names; conda-forge
    may not carry every PyPI release)."""
    from ..envs.conda import PACKAGES, advised_pin

    pip = install_command(framework, version, variant)
    release = version.split("+")[0]
    package = PACKAGES[framework]
    spec = f"{package}={release[:-2]}" if release.endswith(".*") else (
        f"{package}={release}" if framework == "cuda-runtime" else f"{package}=={release}")
    pin = advised_pin(framework, release.removesuffix(".*"), variant, cuda_runtime)
    conda = " ".join(["conda install -c conda-forge", f"'{spec}'", *([f"'{pin}'"] if pin else [])])
    return {"pip": pip, "uv": f"uv {pip}", "conda": conda}


def image_line(image: str) -> str:
    """What to run for an advised container stack: the plan's stack as an inline TOML table (a JSON
    string is a valid TOML basic string, escapes and all)."""
    return f'{{ env = "container", image = {json.dumps(image)} }}'


def candidates(framework: str) -> list[tuple[str, str]]:
    """(version, variant) points the knowledge can judge, newest first."""
    if framework == "torch":
        default = {r["release"]: r["variant"] for r in tables.table("torch_pypi_default")}
        rows = [(f"{r['release']}.*", r["variant"]) for r in tables.table("torch_builds") if default.get(r["release"]) != r["variant"]]
        rows += [(f"{release}.*", "default") for release in default]  # PyPI's own wheel: no index URL needed
    elif framework == "tensorflow":
        # each release's GPU build, as a question reads it: tensorflow-gpu before 2.1 (plain tensorflow was the CPU
        # package), plain tensorflow with the system's CUDA to 2.13, tensorflow[and-cuda] bringing its own from 2.14
        rows = [(f"{r['release']}.*", gpu_variants("tensorflow", r["release"])[0]) for r in tables.table("tensorflow_builds")]
    elif framework == "jax":
        # the releases of each CUDA plugin (PyPI's file lists), the newest of each minor series
        rows = [(str(v), variant) for variant in ("cuda12", "cuda13") for v in _newest_per_series(f"jax-{variant}-plugin")
                if tables.jax_build(str(v), variant) is not None]
    elif framework == "cupy":
        rows = [(f"{r['series']}.*", r["variant"]) for r in tables.table("cupy_packages") if int(r["series"]) >= 12]
        # with the [ctk] extra where a series has it (compiler_pins.csv): it brings the NVRTC that decides a newer GPU
        ctk = [(r["variant"], Version(r["from_version"])) for r in tables.table("compiler_pins") if r["framework"] == "cupy"]
        rows += [(series, extra) for series, variant in list(rows) for extra, since in ctk
                 if extra.split("[")[0] == variant and _key(series) >= Version(f"{since.major}")]
    else:
        rows = [(r["cuda"], "default") for r in tables.table("cuda_drivers") if Version(r["cuda"]).major >= 11]
    # builds of one release newest CUDA first: a set's order changes with each process's string hashing
    return sorted(set(rows), key=lambda p: (_key(p[0]), p[1] != "default", cuda_order(p[1])), reverse=True)


def cuda_order(variant: str) -> int:
    """A build's CUDA as a number that orders the builds of one framework: cu126 -> 126, cu92 -> 92, cupy's cuda110 -> 110
    and cuda11x (any 11.x) -> 119, jax's cuda13 -> 13; 0 for a build that names none (default, and-cuda, plain)."""
    digits = int("".join(c for c in variant if c.isdigit()) or 0)
    return digits * 10 + 9 if variant.endswith("x") else digits


def _newest_per_series(package: str) -> list[Version]:
    newest: dict = {}
    for v in wheel_releases(package):  # oldest first: each minor series keeps its newest
        newest[v.release[:2]] = v
    return list(newest.values())


def _key(version: str):
    try:
        return Version(version.replace(".*", ""))
    except InvalidVersion:
        return Version("0")


def _why_not(prediction) -> str:
    """The reason a candidate is left out: its first failure, else what is not known."""
    deciding = next((r for r in prediction.reasons if r.verdict == "fail"), None) \
        or next((r for r in prediction.reasons if r.verdict == "uncertain"), None)
    return f"{prediction.verdict}: {deciding.text}" if deciding else prediction.verdict


def release_for(framework: str, version: str, variant: str) -> str:
    """A candidate's release as the rules take it: an X.Y.* series as X.Y, torch's build as its local label."""
    return release_of(framework, version.replace(".*", ""), variant)


def advise(framework: str, gpu: str | None, cc: str | None, driver: str | None, python: str | None, observed_rows: list[dict],
           limit: int = 5) -> dict:
    """The question read and answered at once (the CLI reads it first, then asks the store, then `advise_for`)."""
    return advise_for(read_advice(framework, gpu, cc, driver, python), observed_rows, limit)


def advise_for(asked: Asked, observed_rows: list[dict], limit: int = 5) -> dict:
    """Observed passes that this target can also run (same compute capability; the asked driver and
    Python judged by the rules), then predicted passes; `left_out` says why every other candidate is not advised."""
    framework, where, python = asked.framework, asked.target, asked.python
    driver, name = where["driver"], where.get("matched") or where.get("gpu")
    drives = driver_drives_rule(where["cc"], name, driver, where.get("kernel_module"))
    if drives is not None and drives.verdict == FAIL:  # no stack can use a GPU its driver does not drive: advise none
        return {"framework": framework, "notes": [*asked.notes, undriven_sentence(framework, where, drives)], "target": asked.target_view(),
                "observed": [], "predicted": [], "left_out": [], "undriven": drives.text,
                "note": "the driver does not drive this GPU, so no stack can use it"}
    observed, left_out, seen = [], [], set()
    for row in sorted(observed_rows, key=lambda r: _key(r["version"]), reverse=True):
        if len(observed) >= limit:  # newest first: the older passes are never advised, so they are not judged (as predicted below)
            break
        if row["framework"] != framework or row["code"] != "PASS" or row["cc"] != where["cc"] or (row["version"], row["variant"]) in seen:
            continue
        seen.add((row["version"], row["variant"]))
        # it passed on this GPU class; whether it runs with this driver and Python the rules judge, with the CUDA it really had
        check = predict_stack(framework, release_for(framework, row["version"], row["variant"]), row["variant"], where["cc"], driver, python,
                              row.get("cuda_runtime") or None, gpu=name, kernel_module=where.get("kernel_module"))
        if check.verdict == "fail":
            left_out.append({"source": "observed", "version": row["version"], "variant": row["variant"], "why": _why_not(check)})
            continue
        version = row["version"].split("+")[0]
        observed.append({"source": "observed", "version": row["version"], "variant": row["variant"], "python": row["python"],
                         "gpu": row["gpu"], "driver": row["driver"], "sweep": row.get("sweep"), "seen_in": seen_in(row), "warnings": row["warnings"],
                         "cuda_runtime": row.get("cuda_runtime") or None,
                         # where it was observed, and False where a bundle no key this site trusts brought it (`import --untrusted`)
                         "site": row.get("source") or "local", "verified": is_verified(row),
                         # a container stack's answer is its image, where a uv stack's is a pip command
                         "install": install_command(framework, version, row["variant"]) if row["env"] == "uv"
                         else image_line(row["image"]) if row.get("image") else None,
                         **({"image": row["image"]} if row.get("image") else {})})
    # what a sweep saw fail (it could not resolve, or it broke on this GPU class) outranks any prediction
    refuted = {(row["version"].split("+")[0], row["variant"]) for row in observed_rows
               if row["framework"] == framework and row["code"] not in ("PASS", "UNTESTED", "PENDING")
               and (row["python"] == python if row["stage"] == "resolve" else row["cc"] == where["cc"])}
    # each candidate series as the newest of its releases that runs here (with this Python): an exact version, never X.Y.*;
    # self-contained builds first, those that need the system's CUDA libraries (answers/conditions.py) after them
    self_contained, conditional = [], []
    for version, variant in candidates(framework):
        if len(self_contained) >= limit:
            break
        release = version.replace(".*", "")
        if any(v == release or v.startswith(release + ".") and version.endswith(".*") for v, var in refuted if var == variant):
            left_out.append({"source": "observed", "version": version, "variant": variant, "why": "a stored sweep saw it fail on this GPU class"})
            continue
        exact, p = _first_running(framework, version, variant, where["cc"], driver, python, name, where.get("kernel_module"))
        if p.verdict != PASS:
            left_out.append({"source": "predicted", "version": exact, "variant": variant, "why": _why_not(p)})
            continue
        needs = system_libraries(framework, exact, variant)
        commands = install_commands(framework, exact, variant, p.resolved.get("cuda_runtime"))
        item = {"source": "predicted", "version": exact, "variant": variant, "verdict": CONDITIONAL if needs else PASS,
                **({"needs": needs} if needs else {}), "warnings": p.warnings, "install": commands["pip"], "commands": commands,
                "reasons": [r.text for r in p.reasons],
                # another machine's Python is not known: the newest this release has wheels for (answers/asked.py)
                **({"python": newest_python(framework, exact, variant)} if asked.python_from == NEWEST else {})}
        (conditional if needs else self_contained).append(item)
    predicted = (self_contained + conditional)[:limit]
    result = {"framework": framework, "notes": list(asked.notes), "target": asked.target_view(),
              "observed": observed[:limit], "predicted": predicted,
              "left_out": left_out,
              "note": "observed: a stored sweep ran it on this GPU class; predicted: the knowledge rules expect it to work, not run"}
    if not observed and not predicted:
        result["empty"] = why_empty(asked, left_out)
    return result


def judgeable_releases(framework: str, variant: str) -> tuple[Version, ...]:
    """The final releases the knowledge can judge, oldest first (JAX: jaxlib's and the CUDA plugins' file lists)."""
    # one file list per package: torch's and JAX's releases do not depend on the build, TensorFlow's and CuPy's package do
    # cupy-cuda12x[ctk]'s releases are cupy-cuda12x's (the extra adds CUDA's components, not wheels)
    return _judgeable_releases(framework, variant.split("[")[0] if framework in ("tensorflow", "cupy") else None)


@lru_cache(maxsize=None)  # the tables do not change while a process runs; advise asks once per candidate series
def _judgeable_releases(framework: str, variant: str | None) -> tuple[Version, ...]:
    found = set(known_releases(framework, variant))  # final releases only, as are the plugins'
    if framework == "jax":
        found.update(wheel_releases("jax-cuda12-plugin"), wheel_releases("jax-cuda13-plugin"))
    return tuple(sorted(v for v in found if judgeable(framework, v)))


def series_releases(framework: str, version: str, variant: str) -> list[str]:
    """A candidate's releases, newest first: every X.Y.z of an X.Y.* series (JAX: of the plugin's minor series) the
    knowledge holds; the candidate itself where the tables hold none."""
    if framework == "cuda-runtime":
        return [version]
    plain = _key(version)
    series = plain.release[:len(plain.release) if version.endswith(".*") else 2]
    found = [str(v) for v in reversed(judgeable_releases(framework, variant)) if v.release[:len(series)] == series]
    return found or [version]


def _first_running(framework: str, version: str, variant: str, cc: str, driver: str, python: str | None, gpu: str | None,
                   kernel_module: str | None = None):
    """(exact version, prediction): the newest release of the candidate's series predicted to run; else its newest, judged."""
    first = None
    for exact in series_releases(framework, version, variant):
        p = predict_stack(framework, release_for(framework, exact, variant), variant, cc, driver, python, gpu=gpu,
                          kernel_module=kernel_module)
        if p.verdict == PASS:
            return exact, p
        first = first or (exact, p)
    return first


def newest_running(framework: str, cc: str | None, driver: str, python: str | None, gpu: str | None,
                   kernel_module: str | None = None) -> tuple[str, str, Prediction] | None:
    """(exact version, variant, prediction) of what advise would advise first without a store: the newest candidate
    predicted to run on this GPU and driver with this Python, a self-contained build before one that needs the system's
    CUDA libraries. For the nearest yes, on this driver or on a branch that drives the GPU."""
    conditional = None
    for version, variant in candidates(framework):
        exact, p = _first_running(framework, version, variant, cc, driver, python, gpu, kernel_module)
        if p.verdict != PASS:
            continue
        if system_libraries(framework, exact, variant) is None:
            return exact, variant, p
        conditional = conditional or (exact, variant, p)
    return conditional


def why_empty(asked: Asked, left_out: list[dict]) -> str:
    """One sentence for an empty advice: why nothing is advised, and what would work (another Python, a newer driver)."""
    framework, where, python = asked.framework, asked.target, asked.python
    gpu = where.get("matched") or where.get("gpu")
    here = f"{gpu or 'compute capability ' + where['cc']} with driver {where['driver']}" + (f" and Python {python}" if python else "")
    said = f"No {framework} release the knowledge holds is predicted to run on {here}"
    if python:  # where the Python is what is in the way: the newest stack that runs with another, and which Pythons it has
        for version, variant in candidates(framework):
            exact, p = _first_running(framework, version, variant, where["cc"], where["driver"], None, gpu, where.get("kernel_module"))
            if p.verdict == PASS:
                pythons = wheel_pythons(framework, release_for(framework, exact, variant), variant)
                with_python = f" with Python {pythons[0]} to {pythons[-1]}" if len(pythons) > 1 else f" with Python {pythons[0]}" if pythons else ""
                return (f"{said}: every release that runs on this GPU and driver lacks wheels for Python {python}. "
                        f"{spec_text(framework, exact, variant)} would run{with_python} ({install_command(framework, exact, variant)}).")
    for version, variant in candidates(framework):  # a newer driver for the newest candidate that one would make run
        exact = series_releases(framework, version, variant)[0]
        newer = oldest_driver(framework, release_for(framework, exact, variant), variant, where["cc"], where["driver"], python, gpu,
                              where.get("kernel_module"))
        if newer is not None:
            return f"{said}. Driver {newer['driver']} or newer would run {spec_text(framework, exact, variant)} (an administrator's change)."
    first = left_out[0]["why"] if left_out else "the knowledge holds no candidate"
    return f"{said}; the newest was left out for {first} (--explain lists every candidate with why)."


def undriven_sentence(framework: str, where: dict, drives: Reason) -> str:
    """advise's one sentence for a GPU its driver does not drive, with the command that lists what a driving branch runs
    (or, where the driver's other kernel module drives it, what that module runs)."""
    name = where.get("matched") or where.get("gpu")
    gpu = f"--gpu '{name}'" if name else f"--cc {where['cc']}"
    module = where.get("kernel_module")
    other = {"open": "proprietary", "proprietary": "open"}.get(module or "")
    if other and (by_other := driver_drives_rule(where["cc"], name, where["driver"], other)) is not None and by_other.verdict == PASS:
        return (f"{drives.text}, so no {framework} stack can use it with the {module} kernel modules; `gpucompat advise {framework} "
                f"{gpu} --driver {where['driver']} --kernel-module {other}` lists what the {other} ones run")
    branch, on, head = driving_branch(where["cc"], name, where["driver"])
    then = f"; `gpucompat advise {framework} {gpu} --driver {on}` lists what R{branch} runs" if on else ""
    return f"{drives.text}, so no {framework} stack can use it ({head}){then}"
