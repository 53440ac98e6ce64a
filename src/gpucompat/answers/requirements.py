"""`gpucompat explain -r FILE`: every GPU package of the user's own requirements judged on one GPU and
driver, each on its own and all of them together.

The framework (torch, TensorFlow, JAX with its plugins, a CuPy wheel) is judged by the same rules as
a question; CUDA's own wheels (nvidia-cudnn-cu12, nvidia-cuda-runtime-cu12...) by the driver they
need; the set by the rules of knowledge/wheels.py (one CUDA major, torch's own pins, a JAX plugin of
jaxlib's version, one CuPy package). A framework that fails or is uncertain gets its nearest yes.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ..errors import UserError
from ..knowledge import conda_builds
from ..knowledge.reasons import STAGE_ORDER
from ..knowledge.rules import FAIL, PASS, UNCERTAIN, Reason, combine, predict_stack
from ..knowledge.tables import version as as_version
from ..knowledge.wheels import cuda_wheel, cupy_rule, in_toolkit, jax_plugin_rule, majors_rule, pin_rule, wheel_rule
from ..space import PYTORCH_INDEX
from . import conditions
from .lockfiles import Parsed, Pin
from .nearest import nearest_yes
from .questions import Question, read, release_of, spec_text

TORCH_INDEX = re.compile(re.escape(PYTORCH_INDEX.split("{")[0]) + r"(?P<variant>cu[0-9]{2,3}|cpu|rocm[0-9.]+)", re.ASCII)
_JAX_PLUGIN = re.compile(r"jax-(cuda[0-9]{2})-(plugin|pjrt)", re.ASCII)
_CONDA_CUDA = ("cudatoolkit", "cuda-version", "cuda-cudart", "cuda-runtime", "pytorch-cuda")
TORCH_NAMES, TF_NAMES = ("torch", "pytorch", "pytorch-gpu", "pytorch-cpu"), ("tensorflow", "tensorflow-gpu", "tensorflow-cpu")


def _reason_dict(reason: Reason) -> dict:
    return {"rule": reason.rule, "verdict": reason.verdict, "text": reason.text, "source": reason.source, "confidence": reason.confidence}


def _deciding(prediction) -> Reason | None:
    return next((r for r in prediction.reasons if r.verdict == FAIL), None) or next((r for r in prediction.reasons if r.verdict == UNCERTAIN), None)


def _row(pin: Pin, read_as: str, prediction, notes: list[str]) -> dict:
    deciding = _deciding(prediction)
    return {"package": pin.name, "line": pin.line, "typed": pin.typed, "read_as": read_as, "verdict": prediction.verdict,
            "code": prediction.code, "stage": prediction.stage, "warnings": prediction.warnings, "notes": notes,
            "reason": deciding.text if deciding else "; ".join(r.text for r in prediction.reasons if r.verdict == PASS),
            "reasons": [_reason_dict(r) for r in prediction.reasons]}


def _conda_cuda(pins: list[Pin]) -> str | None:
    """The CUDA a conda environment asks for (cudatoolkit=11.8, cuda-version=12.4, pytorch-cuda=12.1)."""
    for pin in pins:
        if pin.conda and pin.name in _CONDA_CUDA:
            value = pin.version or pin.specifier.strip("=*")
            found = re.match(r"[0-9]{1,2}(\.[0-9])?", value or "")
            if found:
                return found.group(0)
    return None


def torch_variant(pin: Pin, parsed: Parsed, conda_cuda: str | None) -> tuple[str, list[str]]:
    """Which build of torch the file installs: its local label, the PyTorch index it names, conda's CUDA pin, else PyPI's."""
    if pin.version and "+" in pin.version:
        return pin.version.split("+", 1)[1], []
    for index in [pin.index, *parsed.indexes]:
        found = TORCH_INDEX.match(index or "")
        if found:
            return found["variant"], [f"torch from {index}: the {found['variant']} build"]
    if pin.conda:
        cuda = conda_builds.build_cuda(pin.build) or conda_cuda
        if pin.name == "pytorch-cpu" or "cpu" in (pin.build or ""):
            return "cpu", ["conda's CPU build of pytorch"]
        if cuda:
            return f"cu{cuda.replace('.', '')}", [f"conda's pytorch for CUDA {cuda}, judged by the PyPI build of that CUDA (conda's own kernels may differ)"]
    return "default", []


def _version_words(pin: Pin, name: str) -> str:
    if pin.version:
        return f"{name}=={pin.version}"
    return f"{name}{pin.specifier}" if pin.specifier else name


def _framework_row(pin: Pin, framework_name: str, variant: str | None, where: dict, python: str | None, extra: list[str],
                   brings_own: bool = False) -> tuple[dict, object, object]:
    try:
        question = read(_version_words(pin, framework_name), exact=True)
    except UserError as exc:  # a range no release the knowledge holds satisfies: this package is uncertain, the file still answered
        prediction = combine([Reason("release", UNCERTAIN, str(exc).rstrip("."), "")], {})
        return _row(pin, pin.typed, prediction, extra), Question(pin.typed, framework_name, None, variant), prediction
    variant = variant or question.variant
    release = release_of(question.framework, question.version, variant) if variant else question.version
    prediction = predict_stack(question.framework, release, variant, where["cc"], where["driver"], python,
                               gpu=where.get("matched") or where.get("gpu"))
    row = _row(pin, spec_text(question.framework, question.version, variant), prediction, question.notes + extra)
    row["framework"] = {"framework": question.framework, "version": question.version, "variant": variant}
    if brings_own:  # the set itself pins what the build would need from the system (CuPy beside pip's NVRTC)
        return row, question, prediction
    if conditions.apply(row, question.framework, question.version, variant).get("needs"):  # it needs the system's CUDA: conditional
        row["reason"] = f"it needs {row['needs']['text']}"
    return row, question, prediction


def judge(parsed: Parsed, where: dict, python: str | None) -> dict:
    """Every GPU package of the file, then the set (see the module's docstring)."""
    pins = {pin.name: pin for pin in parsed.pins}
    conda_cuda = _conda_cuda(parsed.pins)
    rows, set_reasons, majors = [], [], []
    torch_build: dict | None = None  # torch's pin and release, where it is a CUDA build: the other way out of mixed majors
    wheels: list[tuple[Pin, int]] = []  # CUDA's own wheels in it, with their major
    gpu_names: set[str] = set()
    torch = next((pins[n] for n in TORCH_NAMES if n in pins), None)
    if torch is not None:
        variant, notes = torch_variant(torch, parsed, conda_cuda)
        row, question, prediction = _framework_row(torch, "torch", variant, where, python, notes)
        rows.append(row)
        gpu_names.add(torch.name)
        cuda = prediction.resolved.get("cuda_runtime")
        if cuda and variant != "cpu" and not torch.conda:  # conda's pytorch brings conda's CUDA, not pip's nvidia-* wheels
            majors.append((f"torch {question.version} ({prediction.resolved.get('variant', variant)})", int(cuda.split(".")[0])))
            torch_build = {"pin": torch, "version": question.version}
        if variant == "default" and not torch.conda and question.version:
            set_reasons += [r for r in (pin_rule(question.version, p.name, p.version) for p in parsed.pins if p.version) if r]
    tf = next((pins[n] for n in TF_NAMES if n in pins), None)
    if tf is not None:
        variant = {"tensorflow-gpu": "gpu", "tensorflow-cpu": "cpu"}.get(tf.name) or ("and-cuda" if "and-cuda" in tf.extras else None)
        variant = variant or ("plain" if not tf.conda else "and-cuda")
        row, question, prediction = _framework_row(tf, tf.name, variant, where, python, [])
        rows.append(row)
        gpu_names.add(tf.name)
        if prediction.resolved.get("cuda_runtime") and variant == "and-cuda" and not tf.conda:
            majors.append((f"tensorflow[and-cuda] {question.version}", int(prediction.resolved["cuda_runtime"].split(".")[0])))
    rows += _jax_rows(pins, where, python, set_reasons, majors, gpu_names, conda_cuda)
    rows += _cupy_rows(parsed.pins, where, python, set_reasons, majors, gpu_names, conda_cuda)
    found = []
    for pin in parsed.pins:
        wheel = cuda_wheel(pin.name, pin.version) if not pin.conda else None
        if pin.name == "cuda-toolkit" and pin.version:  # CUDA 13's metapackage of the toolkit's wheels
            wheel = replace(cuda_wheel("nvidia-cuda-runtime", pin.version), package=pin.name, library="the CUDA toolkit's wheels")
        if pin.conda and pin.name in _CONDA_CUDA and conda_cuda:
            wheel = replace(cuda_wheel("nvidia-cuda-runtime", conda_cuda + ".0"), package=pin.name, library="conda's CUDA pin")
        if wheel is not None:
            found.append((pin, wheel))
    toolkit = next((w.cuda for p, w in found if p.name == "cuda-toolkit"), None)
    for (pin, _), wheel in zip(found, in_toolkit([w for _, w in found], toolkit)):
        gpu_names.add(pin.name)
        reason = wheel_rule(wheel, where["driver"])
        prediction = combine([reason], {})
        rows.append(_row(pin, f"{wheel.library}, CUDA {wheel.cuda or wheel.cuda_major or '?'}", prediction, []))
        if wheel.cuda_major and not pin.conda:  # conda's CUDA pin is conda's, never a pip wheel that overwrites another
            majors.append((pin.name, wheel.cuda_major))
            wheels.append((pin, wheel.cuda_major))
    mixed = majors_rule(majors)
    conda = conda_cuda_rule(parsed.pins, conda_cuda)
    set_reasons = ([mixed] if mixed else []) + ([conda] if conda else []) + set_reasons
    result = _summary(parsed, rows, set_reasons, gpu_names, where, python)
    fixes = _package_fixes(rows, result["nearest"], parsed) + (_major_fixes(torch_build, wheels, majors, where, python, parsed) if mixed else [])
    if fixes:  # offered only where the set each leaves resolves (fix_check runs uv; imported here: a yes costs nothing)
        from .fix_check import checked

        fixes, not_offered = checked(fixes, python)
        result["notes"] = result["notes"] + not_offered
    result["fixes"] = fixes
    return result


def _package_fixes(rows: list[dict], nearest: dict, parsed: Parsed) -> list[dict]:
    """One fix line per failing framework: its nearest yes that installs (the smallest change first), as a line for the file;
    `set`: the file with that line changed, for fix_check to resolve."""
    from .fix_check import changed_set, from_pip_command

    fixes = []
    for row in rows:
        if row["verdict"] == PASS or row["read_as"] not in nearest:
            continue
        step = next((n for n in nearest[row["read_as"]] if n.get("install") and n.get("verdict") == PASS), None)
        if step is not None:
            requirements, indexes = from_pip_command(step["install"]["pip"])
            fixes.append({"for": row["package"], "line": row["line"], "text": f"line {row['line']}: {step['spec']} instead of "
                          f"{row['typed']} ({step['label']})", "install": step["install"]["pip"],
                          "set": changed_set(parsed, replace={row["line"]: "\n".join(requirements)}, indexes=indexes)})
    return fixes


def _major_fixes(torch: dict | None, wheels: list[tuple[Pin, int]], majors: list, where: dict, python: str | None,
                 parsed: Parsed) -> list[dict]:
    """For a set that mixes CUDA majors, the two ways out: drop CUDA's own wheels of the other major (the frameworks bring
    their libraries for their own), or take torch's build for the wheels' major, where one exists and runs here."""
    wheel_names = {pin.name for pin, _ in wheels}
    framework_majors = {major for what, major in majors if what not in wheel_names}
    if len(framework_majors) != 1:
        return []  # frameworks of two majors (or none): no line to drop settles it
    major = framework_majors.pop()
    others = [(pin, m) for pin, m in wheels if m != major]
    names = sorted({what for what, m in majors if what not in wheel_names})
    are = f"is a CUDA {major} build and brings its" if len(names) == 1 else f"are CUDA {major} builds and bring their"
    from .fix_check import changed_set, from_pip_command

    fixes = [{"for": "set", "line": None, "install": None,
              "text": f"remove {', '.join(f'line {pin.line} ({pin.name})' for pin, _ in others)}: {', '.join(names)} {are} own "
                      f"CUDA {major} libraries", "set": changed_set(parsed, drop={pin.line for pin, _ in others})}]
    wanted = {m for _pin, m in others}
    build = _torch_build_for(torch["version"], wanted.pop(), where, python) if torch and len(wanted) == 1 else None
    if build is not None:
        _requirements, indexes = from_pip_command(build[1])
        fixes.append({"for": "set", "line": torch["pin"].line, "install": build[1],
                      "text": f"or keep them and take torch's build for their CUDA: line {torch['pin'].line} torch=={torch['version']}+{build[0]}",
                      "set": changed_set(parsed, replace={torch["pin"].line: f"torch=={torch['version']}+{build[0]}"}, indexes=indexes)})
    return fixes


def _torch_build_for(version: str, major: int, where: dict, python: str | None) -> tuple[str, str] | None:
    """(variant, pip command) of the newest torch build of this release for a CUDA major that runs on the GPU and driver."""
    from ..knowledge import tables
    from .advise import install_command

    builds = sorted((r for r in tables.table("torch_builds") if r["release"] == tables.minor_series(version)
                     and r["cuda"].split(".")[0] == str(major)), key=lambda r: tables.version(r["cuda"]), reverse=True)
    for row in builds:
        if predict_stack("torch", f"{version}+{row['variant']}", row["variant"], where["cc"], where["driver"], python).verdict == PASS:
            return row["variant"], install_command("torch", version, row["variant"])
    return None


def _jax_rows(pins: dict, where: dict, python: str | None, set_reasons: list, majors: list, gpu_names: set, conda_cuda: str | None) -> list[dict]:
    jax = pins.get("jax") or pins.get("jaxlib")
    plugins = [p for name, p in pins.items() if _JAX_PLUGIN.fullmatch(name)]
    if jax is None and not plugins:
        return []
    gpu_names.update({"jax", "jaxlib"} & set(pins))
    gpu_names.update(p.name for p in plugins)
    jaxlib = pins.get("jaxlib")
    extras = [e for e in (jax.extras if jax else ()) if e.startswith("cuda") or e == "cpu"]
    if extras:
        variant, notes = extras[0], []
    elif plugins:
        variant = _JAX_PLUGIN.fullmatch(plugins[0].name).group(1)
        notes = [f"jax with {plugins[0].name}: the {variant} build"]
    elif jax is not None and jax.conda and ("cuda" in (jax.build or "") or "cuda" in ((jaxlib.build if jaxlib else "") or "")):
        variant, notes = f"cuda{(conda_cuda or '12').split('.')[0]}", ["conda's CUDA build of jaxlib"]
    else:
        variant, notes = "cpu", ["no CUDA plugin (jax-cuda12-plugin) and no [cuda12] extra in the file: pip installs JAX for the CPU"]
    anchor = jax or plugins[0]
    row, question, prediction = _framework_row(anchor, "jax", variant, where, python, notes)
    if variant.startswith("cuda") and variant[4:6].isdigit() and not anchor.conda:
        majors.append((f"jax[{variant}]", int(variant[4:6])))
    for plugin in plugins:
        # the jaxlib the file pins, else the one jax's own pins resolve to (jax 0.4.37 installs jaxlib 0.4.36), else jax's number
        installed = (jaxlib.version if jaxlib else None) or prediction.resolved.get("jaxlib") or question.version
        mismatch = jax_plugin_rule(installed, plugin.name, plugin.version)
        if mismatch:
            set_reasons.append(mismatch)
    return [row]


def _cupy_rows(all_pins: list[Pin], where: dict, python: str | None, set_reasons: list, majors: list, gpu_names: set, conda_cuda: str | None) -> list[dict]:
    cupys = [p for p in all_pins if p.name == "cupy" or p.name.startswith("cupy-cuda")]
    rows = []
    for pin in cupys:
        gpu_names.add(pin.name)
        if pin.name == "cupy" and not pin.conda:
            note = "plain cupy (pip) builds from source against the CUDA toolkit it finds; a cupy-cuda12x wheel needs none"
            question = read(_version_words(pin, "cupy"), exact=True)
            prediction = combine([Reason("CuPy build", UNCERTAIN, note, "https://docs.cupy.dev/en/stable/install.html")], {})
            rows.append(_row(pin, f"cupy {question.version} (from source)", prediction, []))
            continue
        if pin.name == "cupy":  # conda-forge's cupy: the build conda would resolve, never PyPI's cupy-cudaXXx
            rows.append(_conda_cupy_row(pin, where, conda_cuda))
            continue
        variant = pin.name[len("cupy-"):] + ("[ctk]" if "ctk" in pin.extras else "")
        # cupy-cudaXXx brings no NVRTC, so it is conditional on the system's toolkit, unless the set pins pip's NVRTC itself
        # (nvidia-cuda-nvrtc*, or cuda-toolkit as a node's pip freeze lists it beside cupy-cuda13x)
        nvrtc = any(p.name.startswith("nvidia-cuda-nvrtc") or p.name == "cuda-toolkit" for p in all_pins if not p.conda)
        row, _question, _prediction = _framework_row(pin, "cupy", variant, where, python, [], brings_own=nvrtc)
        rows.append(row)
        found = re.fullmatch(r"cuda([0-9]{2})", variant[:6])
        if found and not pin.conda:  # the one-major rule is about pip's nvidia-* wheels overwriting each other
            majors.append((pin.name, int(found.group(1))))
    duplicate = cupy_rule([p.name for p in cupys if not p.conda])
    if duplicate:
        set_reasons.append(duplicate)
    return rows


def _conda_cupy_row(pin: Pin, where: dict, conda_cuda: str | None) -> dict:
    """conda-forge's cupy: the build its version spec, the environment's CUDA pin and the driver's __cuda resolve to
    (knowledge/conda_builds.py), judged by the rules of that build's CUDA; Python is conda's to solve, not PyPI's wheels'."""
    build = conda_builds.cupy(pin.version, pin.specifier, conda_cuda, where["driver"])
    if build.variant is None:
        fails = build.version is not None and (conda_cuda is not None or where["driver"] is not None)
        reason = Reason("conda build", FAIL if fails else UNCERTAIN, build.why, build.source,
                        "ENV_UNRESOLVABLE" if fails else None, "resolve" if fails else None)
        return _row(pin, f"conda-forge cupy {build.version or pin.specifier or ''}".strip(), combine([reason], {}), [])
    # a conda build brings its CUDA (cudatoolkit, or cuda-nvrtc and the libraries) as its own run dependencies, NVRTC
    # included, as PyPI's [ctk] extra does: it is judged as that, never as a wheel needing the system's toolkit
    prediction = predict_stack("cupy", build.version, f"{build.variant}[ctk]", where["cc"], where["driver"], None,
                               cuda_runtime=build.cuda, gpu=where.get("matched") or where.get("gpu"))
    chosen = Reason("conda build", PASS, build.why, build.source)
    prediction = combine([chosen, *prediction.reasons], {**prediction.resolved, "conda_build_cuda": build.cuda})
    row = _row(pin, f"conda-forge cupy {build.version} (CUDA {build.cuda} build)", prediction, [])
    row["framework"] = {"framework": "cupy", "version": build.version, "variant": build.variant}
    return row


def conda_cuda_rule(pins: list[Pin], conda_cuda: str | None) -> Reason | None:
    """A conda build made for another CUDA major than the environment pins (pytorch=*=*cuda11.8* beside cuda-version=12.4):
    the build's own run requirements tie it to its CUDA (cuda-version or cudatoolkit of that major), so conda cannot
    solve the file. None where they agree or either is not said."""
    pinned = as_version(conda_cuda)
    if pinned is None:
        return None
    other = [(pin, conda_builds.build_cuda(pin.build)) for pin in pins if pin.conda and pin.name not in _CONDA_CUDA]
    other = [(pin, cuda) for pin, cuda in other if cuda and as_version(cuda).major != pinned.major]
    if not other:
        return None
    named = ", ".join(f"line {pin.line} {pin.typed!r} (CUDA {cuda})" for pin, cuda in other)
    return Reason("conda's CUDA", FAIL, f"the environment pins CUDA {conda_cuda}, but {named} is a build for another CUDA major, "
                  "whose own requirements ask for that major's cuda-version: conda cannot solve the file",
                  "https://github.com/conda-forge/cuda-version-feedstock (cuda-version: one CUDA per environment; builds depend "
                  "on it) ; https://github.com/conda-forge/cupy-feedstock/issues/247", "ENV_UNRESOLVABLE", "resolve")


def _summary(parsed: Parsed, rows: list[dict], set_reasons: list[Reason], gpu_names: set, where: dict, python: str | None) -> dict:
    verdicts = [r["verdict"] for r in rows] + [r.verdict for r in set_reasons]
    verdict = FAIL if FAIL in verdicts else UNCERTAIN if UNCERTAIN in verdicts or not rows else \
        conditions.CONDITIONAL if conditions.CONDITIONAL in verdicts else PASS
    failing = [r for r in rows if r["verdict"] == FAIL] + [{"code": r.code, "stage": r.stage} for r in set_reasons if r.verdict == FAIL]
    # the headline is what blocks first, as one stack's is (reasons.combine): a driver too old, then the ladder's order, so a
    # set pip cannot install is ENV_UNRESOLVABLE even where it would also mix CUDA majors at import
    failing.sort(key=lambda f: (f["code"] != "DRIVER_TOO_OLD", STAGE_ORDER.get(f["stage"] or "", 9)))
    nearest = {}
    for row in rows:
        if row["verdict"] != PASS and row.get("framework"):
            f = row["framework"]
            nearest[row["read_as"]] = nearest_yes(f["framework"], f["version"], f["variant"], where, python)
    notes = list(parsed.notes)
    if not rows:
        notes.append("the file holds none of the GPU packages gpucompat knows (torch, tensorflow, jax, cupy, CUDA's nvidia-* wheels)")
    return {"kind": parsed.kind, "lines": parsed.lines, "packages": len(parsed.pins), "gpu_packages": len(gpu_names),
            "target": {**where, "python": python}, "verdict": verdict, "code": failing[0]["code"] if failing else None,
            "stage": failing[0]["stage"] if failing else None, "rows": rows, "set": [_reason_dict(r) for r in set_reasons],
            "notes": notes, "nearest": nearest}
