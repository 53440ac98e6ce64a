"""Stored results -> flat display rows (one per cell), the seed's valid/invalid split."""

from __future__ import annotations

from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

import re

from ..analysis import as_read, collapse_runs, shown_python, shown_version
from ..discover.local import NO_GPU
from ..model import PASS, UNTESTED, UNTESTED_CAUSES, is_verified
from ..quoting import printable_values


def display_row(row: dict, printable: bool = True) -> dict:
    """What a person reads about one cell; versions a `current` env only learns from its probe. Every text in it is
    printable (quoting.printable): a probe's error, a framework's version or a scheduler's answer may carry escape
    sequences or bidirectional overrides, and every table, export and report is made from these rows. printable=False:
    the texts exactly as stored, for a format with its own escaping that a program reads (Prometheus labels)."""
    return printable_values(_display_row(row)) if printable else _display_row(row)


def _display_row(row: dict) -> dict:
    row = as_read(row)  # a verdict stored before its could-not-test cause existed reads as that cause
    version = shown_version(row)
    return {
        "cell": row["cell_id"],
        "sweep": row.get("sweep_id"),
        "created_at": row.get("created_at"),
        "framework": row["framework"],
        "version": version,
        # an interpreter's framework that is not installed is said once, by its version: no "installed" beside it
        "variant": "-" if version == "not installed" and row["variant"] == "installed" else row["variant"],
        "python": shown_python(row),
        "env": row["env"],
        **({"image": row["image"]} if row.get("image") else {}),  # a container stack's image
        "gpu": row["gpu"],
        "cc": row["cc"] or "",
        "driver": row["driver"] or "",  # the target's: as discovered, or as the plan declared it
        "driver_seen": probe_driver(row.get("probe_driver")),  # the driver the job's probe read on its node ("": none ran)
        # that driver's kernel module, open or proprietary (the same /proc line): it decides which GPUs the driver drives
        "kernel_module_seen": probe_kernel_module(row.get("probe_driver")),
        "cuda_runtime": row["cuda_runtime"] or row["probe_cuda_runtime"] or "",
        "cudnn": row["cudnn"] or row["probe_cudnn"] or "",
        "code": row["code"] or "PENDING",
        "stage": row["stage"] or "",
        "cause": (row.get("evidence") or {}).get("cause") if row["code"] == UNTESTED else None,
        "reason": row["summary"] or "",
        "warnings": list(row["warnings"] or []),
        "gpu_note": ((row.get("evidence") or {}).get("gpu") or {}).get("note") or "",
        "gpu_state": (row.get("evidence") or {}).get("gpu"),  # the GPU as the probe found it: others on it, modes, faults
        "libraries": (row.get("evidence") or {}).get("libraries"),  # the library rungs: each library's files, and its kernels when it failed
        "duration_s": row["duration_s"],
        "observed": bool(row["observed"]) if row["code"] else None,
        "predicted": row.get("predicted") or "",
        "predicted_code": row.get("predicted_code") or "",
        "predicted_reason": next((r["text"] for r in row.get("predicted_reasons") or [] if r["verdict"] == row.get("predicted")), ""),
        "source": row.get("source") or "local",  # where it was observed: "local" (run here) or the site a bundle came from
        # False: imported from a bundle no key this site trusts signed (`import --untrusted`); its signer's fingerprint, if signed
        "verified": is_verified(row),
        "signer": row.get("signer"),
    }


def probe_driver(text: str | None) -> str:
    """The driver version in the probe's /proc/driver/nvidia/version line ("NVRM version: NVIDIA UNIX x86_64 Kernel Module
    580.159.04 ..." -> "580.159.04"); "" where no probe read one."""
    found = re.search(r"\b([0-9]{3,}\.[0-9]+(?:\.[0-9]+)?)\b", text or "")
    return found.group(1) if found else ""


def probe_kernel_module(text: str | None) -> str:
    """The kernel module flavour in the probe's /proc/driver/nvidia/version line ('NVIDIA UNIX Open Kernel Module for
    x86_64 ...' -> 'open', 'NVIDIA UNIX x86_64 Kernel Module ...' -> 'proprietary'); "" where no probe read one."""
    from ..discover.local import kernel_module_from_proc

    return kernel_module_from_proc(text or "") or ""


def unverified_note(rows: list[dict]) -> str:
    """One sentence where some rows were imported unverified: how many, from which sites; '' where every row is verified."""
    sites: dict[str, int] = {}
    for row in rows:
        if not is_verified(row):
            sites[row["source"]] = sites.get(row["source"], 0) + 1
    if not sites:
        return ""
    count = sum(sites.values())
    return (f"UNVERIFIED: {count} {'cell was' if count == 1 else 'cells were'} imported from {', '.join(map(repr, sorted(sites)))} "
            "without a signature from a key this site trusts as that site's own: that site's word, not checked")


def is_surprise(row: dict) -> bool:
    """An observed verdict that contradicts a firm prediction: a knowledge gap or a broken cluster."""
    if not row["observed"] or row["code"] == UNTESTED or row["predicted"] not in ("pass", "fail"):
        return False
    if row["predicted"] == "pass":
        return row["code"] != PASS
    return row["code"] == PASS or row["code"] != row["predicted_code"]


@dataclass
class Verdicts:
    """A sweep's cells as the seed reads them: valid, invalid, and apart from both the cells that
    could not be tested and those still pending; surprises are drawn from valid and invalid."""

    surprises: list[dict]
    valid: list[dict]
    invalid: list[dict]
    untested: list[dict]
    pending: list[dict]


def split(rows: list[dict]) -> Verdicts:
    shown = [display_row(r) for r in rows]
    return Verdicts(
        surprises=[r for r in shown if is_surprise(r)],
        valid=[r for r in shown if r["code"] == PASS],
        invalid=[r for r in shown if r["code"] not in (PASS, UNTESTED, "PENDING")],
        untested=[r for r in shown if r["code"] == UNTESTED],
        pending=[r for r in shown if r["code"] == "PENDING"],
    )


def _version_key(text: str):
    try:
        return (0, Version(text.split("+")[0]))
    except InvalidVersion:
        return (1, text)


def _seed_framework(row: dict) -> str:
    """A conda stack's line of its own: its CUDA axis is the cuda-version (or cudatoolkit) pin the
    environment was solved with, as in the seed's conda sweep, not a wheel's runtime."""
    return f"{row['framework']} (conda)" if row.get("env") == "conda" else row["framework"]


def python_differs(rows: list[dict]) -> bool:
    """Whether some framework and version was tested on more than one Python (valid and invalid together): then the
    grouped lines are kept apart by Python, or torch 2.4.1 would read invalid everywhere when only its cp313 wheel is
    missing (and, where all pass, the table says on which Pythons)."""
    seen: dict[tuple, set] = {}
    for row in rows:
        seen.setdefault((row["framework"], row["version"]), set()).add(row.get("python"))
    return any(len(pythons) > 1 for pythons in seen.values())


def seed_table(rows: list[dict], with_reason: bool, by_python: bool = False) -> list[dict]:
    """The CHTC sweep's published format: one line per framework, version, compute capability (and failure and reason),
    with the CUDA runtime versions collapsed into runs ('11.1-11.5'); with by_python (python_differs), per Python too,
    each line's `python` kept (a column of the terminal's table; Markdown and HTML write it after the version)."""
    rows = [{**row, "framework": _seed_framework(row)} for row in rows]
    axis: dict[str, list[str]] = {}
    for row in rows:
        axis.setdefault(row["framework"], []).append(row["cuda_runtime"])
    axis = {fw: sorted({v for v in values if v}, key=_version_key) for fw, values in axis.items()}
    groups: dict[tuple, list[str]] = {}
    for row in rows:
        version = "-" if row["framework"].startswith("cuda-runtime") else row["version"]  # its version is the CUDA runtime
        key = (row["framework"], version, row["cc"] or "-",
               (row["code"], row["stage"], row["observed"], row.get("reason") or "") if with_reason else None,
               (row.get("python") or "-") if by_python else None)
        groups.setdefault(key, []).append(row["cuda_runtime"] or "-")
    out = []
    for (framework, version, cc, failure, python), cudas in sorted(groups.items(), key=lambda item: (
            item[0][0], _version_key(item[0][1]), item[0][2], _version_key(item[0][4] or "0"))):
        for run in collapse_runs(cudas, axis.get(framework, [])):
            line = {"framework": framework, "version": version, "cc": cc, "cuda_runtime": run,
                    **({"python": python} if python is not None else {})}
            if with_reason:
                line["failure"] = f"{failure[0]} ({failure[1]}{'' if failure[2] else ', predicted'})"
                line["reason"] = failure[3]  # the cells of one line share it: a different sentence is another line
            out.append(line)
    return out


def troubled_gpus(rows: list[dict]) -> dict[str, list[str]]:
    """The GPUs (node, UUID, PCI bus) whose cells could not be tested because the GPU was busy or
    faulty, by cause, each once with its count of cells: what an admin drains or a user waits for."""
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        if row.get("cause") in ("gpu-busy", "gpu-fault"):
            where = (row.get("gpu_state") or {}).get("where") or row.get("gpu") or "?"
            found.setdefault(row["cause"], {}).setdefault(where, 0)
            found[row["cause"]][where] += 1
    return {cause: [f"{where} ({count} cell{'s' if count > 1 else ''})" for where, count in gpus.items()] for cause, gpus in found.items()}


# Which cells a view counts apart as could not be tested, and which targets are real GPU classes: one rule for the
# HTML report and the static site (report --site).
GPU_STAGES = ("device", "compute", "bench")  # the rungs that need a GPU to be there
APART_SHOWN = 20  # the cells named under each cause that could not be tested; the rest are counted


def is_gpu_class(gpu: tuple, rows: list[dict]) -> bool:
    """A real GPU class: not the stand-in a sweep on a machine without a GPU runs on (discover/local.py's NO_GPU, which
    has no compute capability), nor a target on which every cell that went past resolving its stack (which needs no GPU:
    an unresolvable stack, a framework not installed here) found no GPU (cause no-gpu)."""
    if gpu[0] == NO_GPU.name and not gpu[1]:
        return False
    reached = [r for r in rows if r["stage"] not in ("", "resolve")]  # a cell still pending has no stage
    return not reached or not all(r["code"] == UNTESTED and r["cause"] == "no-gpu" for r in reached)


def apart_cause(row: dict, on_class: bool) -> str | None:
    """The cause under which a cell is counted apart, as could not be tested; None for a verdict, or a cell still pending.
    Off a GPU class, a failure at a stage that needs a GPU (device, compute, bench: a NO_DEVICE stored before the cause
    no-gpu existed) says nothing of the stack: no GPU was there to find (DESIGN.md, two causes before any stack verdict)."""
    if row["code"] == UNTESTED:
        return row["cause"] or ""
    if not on_class and row["code"] not in (PASS, "PENDING") and row["stage"] in GPU_STAGES:
        return "no-gpu"
    return None


def apart_summary(rows: list[dict], shown: int = APART_SHOWN) -> dict:
    """The cells that could not be tested, counted apart from every verdict: how many, and by cause (most cells first),
    each cause with its sentence and its first cells."""
    by_cause: dict[str, list[dict]] = {}
    for row in rows:
        by_cause.setdefault(row["apart"], []).append(row)
    causes = []
    for cause, mine in sorted(by_cause.items(), key=lambda item: (-len(item[1]), item[0])):
        sentence = UNTESTED_CAUSES.get(cause) or ("no cause was recorded" if not cause else "a cause this gpucompat does not know")
        said = f"could not test: {sentence} ("
        for row in mine[:shown]:  # each cell's own words, past the sentence its cause already says (analysis.untested's form)
            reason = row["reason"]
            row["detail"] = reason[len(said):-1] if reason.startswith(said) and reason.endswith(")") else reason
        causes.append({"cause": cause or "unknown", "sentence": sentence, "count": len(mine), "cells": mine[:shown],
                       "more": max(0, len(mine) - shown)})
    return {"count": len(rows), "causes": causes}
