"""Observation first: before the rules answer a question, the store (the --db in use) is asked for the
cells it observed of that stack on that GPU and driver branch. The newest observation decides; the
rules' prediction is shown beside it, and where the two disagree the answer says so (a knowledge gap
to report upstream, or a broken node). `results --surprises` lists every such disagreement.

A cell answers a question about the build it is, however each was written: a sweep's stack names its build
(its variant); a cell of the interpreter as installed (`check`, `--env current`) is read from what its probe
saw: torch's local label (2.11.0+cu130) or, without one, its CUDA runtime; CuPy's package from its CUDA runtime
(13.2 -> cupy-cuda13x); JAX's plugin from the CUDA libraries the process loaded (libcudart.so.13 -> cuda13).
torch's PyPI default (`torch==2.11.0`) is the build the tables name for that release (cu130 for 2.11). A cell
whose build was not recorded answers only a question that left the build open, and says so.
"""

from __future__ import annotations

import datetime
import json
import os
import re
from contextlib import suppress
from pathlib import Path

from ..knowledge import tables
from ..model import PASS, UNTESTED, is_verified
from ..paths import cache_dir, default_url, sqlite_readonly


# The store schemas explain reads through sqlite3 (store.SCHEMA_VERSION, and 5, which reading alone does not upgrade and
# which lacks sources.signer/verified): written here, not imported, since importing the store is what this path avoids.
SQLITE_READ_SCHEMAS = (5, 6, 7)  # 7 adds only what result rows do not read (identities, vouchers)


def stored_rows(db: str | None, source: str | None = None, framework: str | None = None) -> list[dict]:
    """Every stored cell (of one source, of one framework) as a display row; none when the SQLite file does not
    exist yet. A SQLite store is read through the standard library's sqlite3 with the store's own query,
    compiled by SQLAlchemy once (`_sqlite_rows`): importing SQLAlchemy would take most of explain's start."""
    url = db or default_url()
    path = Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") and "?" not in url else None
    if path is not None and not path.exists():
        return []
    rows = _sqlite_rows(path, source, framework) if path is not None else None
    if rows is not None:
        return rows
    from ..store import Store

    return [_row(r) for r in Store(url, readonly=True).result_rows(None, source=source, framework=framework)]


def _query_file(source: str | None, framework: str | None, schema: int) -> Path:
    """Where the compiled query is kept: one per gpucompat version, store schema, store source and kind of question."""
    from .. import __version__

    here = Path(__file__).resolve().parent.parent
    stamp = "-".join(f"{s.st_mtime_ns:x}{s.st_size:x}" for s in ((here / "store.py").stat(), (here / "store_schema.py").stat()))
    kind = "all" if source is None else source if source in ("local", "imported") else "site"
    return cache_dir() / "queries" / f"result-rows-{__version__}-{stamp}-s{schema}-{kind}-{'one' if framework else 'every'}.json"


def _query(source: str | None, framework: str | None, schema: int) -> dict:
    """The compiled query for a store of this schema: read from the cache, else compiled by SQLAlchemy and kept."""
    import json

    query_file = _query_file(source, framework, schema)
    try:
        return json.loads(query_file.read_text())
    except (OSError, ValueError):
        from ..store import result_rows_sqlite

        query = {"schema_version": str(schema), "sql": result_rows_sqlite(source, framework, schema)}
        with suppress(OSError):
            query_file.parent.mkdir(parents=True, exist_ok=True)
            partial = query_file.with_suffix(f".{os.getpid()}")
            partial.write_text(json.dumps(query))
            os.replace(partial, query_file)
        return query


def _sqlite_rows(path: Path, source: str | None, framework: str | None) -> list[dict] | None:
    """The rows through sqlite3, read-only; None where that cannot answer (another schema version, a file
    sqlite3 cannot open read-only, not a gpucompat store): the store then opens it and says what is wrong."""
    import sqlite3
    from contextlib import closing

    database, mode = sqlite_readonly(path)
    try:
        with closing(sqlite3.connect(database + ("?" + "&".join(f"{k}={v}" for k, v in mode.items()) if mode else ""), uri=bool(mode))) as conn:
            conn.execute("PRAGMA query_only = ON")
            conn.row_factory = sqlite3.Row
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if version is None or not str(version[0]).isdigit() or int(version[0]) not in SQLITE_READ_SCHEMAS:
                return None
            query = _query(source, framework, int(version[0]))
            return [_row(dict(r)) for r in conn.execute(query["sql"], {"site": source, "framework": framework})]
    except sqlite3.Error:
        return None


def _row(raw: dict) -> dict:
    """What matching needs of a stored row, with the version and Python a current environment learnt from its probe,
    and the build it is (`build`, None where not recorded) with where that was read (`build_from`)."""
    from ..analysis import as_read, shown_python, shown_version  # here: a question with no store never loads the classifier
    raw = as_read(raw)  # a verdict stored before its could-not-test cause existed (NO_MATCH, a framework not installed) is none
    version = shown_version(raw)
    build, build_from = stored_build(raw["framework"], version, raw["variant"], raw.get("probe_cuda_runtime") or raw.get("cuda_runtime"),
                                     raw.get("probe_libraries"), raw.get("env"))
    return {"cell": raw["cell_id"], "sweep": raw["sweep_id"], "created_at": raw["created_at"], "framework": raw["framework"],
            "version": version, "variant": raw["variant"], "python": shown_python(raw), "gpu": raw["gpu"],
            "cc": raw["cc"] or "", "driver": raw["driver"] or "", "code": raw["code"] or "PENDING", "stage": raw["stage"] or "",
            "observed": bool(raw["observed"]) if raw["code"] else None, "reason": raw["summary"] or "", "source": raw.get("source") or "local",
            # False: imported from a bundle no key this site trusts signed (`import --untrusted`)
            "verified": is_verified(raw), "signer": raw.get("signer"),
            "build": build, "build_from": build_from}


# -- which build a stored cell is ------------------------------------------------------------------

NOT_RECORDED = "its probe did not record which build it was"


def _libraries(value) -> list[dict]:
    """The probe's loaded_libraries as stored: a list (through SQLAlchemy) or its JSON text (through sqlite3)."""
    if isinstance(value, str):
        with suppress(ValueError):
            value = json.loads(value)
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _cuda_major_loaded(libraries) -> str | None:
    """The CUDA major of the runtime (else cuBLAS) a process loaded: 'libcudart.so.13' -> '13'."""
    for name in ("libcudart", "libcublas"):
        for lib in _libraries(libraries):
            found = re.fullmatch(r"([0-9]{2})(?:\.[0-9.]*)?", str(lib.get("version") or ""))
            if lib.get("name") == name and found:
                return found.group(1)
    return None


def stored_build(framework: str, version: str, variant: str, cuda_runtime: str | None, libraries=None,
                 env: str | None = None) -> tuple[str | None, str]:
    """(the build of a stored cell in a question's own words: torch's local label or 'default', JAX's extra, CuPy's
    package suffix; how that was read). None where the cell does not record it. A cell of an environment gpucompat
    did not build (env current or container) is what its probe saw, whatever its stack's variant says."""
    if framework == "torch" and "+" in version:
        return version.split("+", 1)[1], "its version's local label"
    if variant not in ("installed", "") and env not in ("current", "container"):
        return variant, "the sweep's stack"
    runtime = re.fullmatch(r"([0-9]+)\.([0-9]+)", str(cuda_runtime or ""))
    if framework == "torch":
        if runtime:  # a torch without a local label names its CUDA only through its runtime (PyPI's default builds)
            return f"cu{runtime.group(1)}{runtime.group(2)}", f"the CUDA runtime {cuda_runtime} its probe reported"
    if framework == "cupy" and runtime and tables.version(version) is not None:
        for package in (f"cuda{runtime.group(1)}x", f"cuda{runtime.group(1)}{runtime.group(2)}"):
            if any(tables.version(r["first_version"]) <= tables.version(version) <= tables.version(r["last_version"])
                   for r in tables.cupy_packages(package)):
                return package, f"the CUDA runtime {cuda_runtime} its probe reported"
    if framework == "jax" and (major := _cuda_major_loaded(libraries)) and tables.jax_build(version, f"cuda{major}") is not None:
        return f"cuda{major}", f"the CUDA {major} libraries it loaded"
    if framework == "cuda-runtime":
        return "default", "the runtime it loaded"
    return None, NOT_RECORDED


def _same_build(framework: str, version: str, build: str | None) -> str | None:
    """A build as the tables name it: torch's 'default' as the release's PyPI default label (cu130 for 2.11)."""
    if framework == "torch" and build == "default":
        row = tables.torch_default(version)
        return row["variant"] if row else build
    if framework == "cupy" and build:  # the package is the build; [ctk] adds CUDA's own wheels beside it, which the
        return build.split("[", 1)[0]  # cell's environment had or not: its probe's NVRTC rung says which, in its evidence
    return build


def shown_build(row: dict, asked_variant: str | None) -> tuple[str, str | None]:
    """(the stored build as a person reads it, e.g. 'torch 2.11.0+cu130'; why it is the asked one, or None)."""
    framework, base, build = row["framework"], _base(row["version"]), row.get("build")
    label = _same_build(framework, base, build)
    if framework == "torch":
        shown = f"torch {base}+{label}" if label not in (None, "default") else f"torch {base}"
    elif framework == "cupy":
        shown = f"cupy-{build} {base}" if build else f"cupy {base}"
    elif framework == "jax":
        shown = f"jax[{build}] {base}" if build else f"jax {base}"
    elif framework == "tensorflow":
        shown = {"and-cuda": "tensorflow[and-cuda]", "gpu": "tensorflow-gpu", "cpu": "tensorflow-cpu"}.get(build or "", "tensorflow") + f" {base}"
    else:
        shown = f"{framework} {base}"
    why = []
    if framework == "torch" and asked_variant == "default" and tables.torch_default(base) and label == tables.torch_default(base)["variant"]:
        why.append(f"PyPI's default build of {base}")
    if build is None:
        why.append(NOT_RECORDED)
    elif row.get("build_from") not in ("the sweep's stack", "its version's local label", "the runtime it loaded"):
        why.append(f"read from {row['build_from']}")
    return shown, "; ".join(why) or None


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def _branch(driver: str | None) -> str:
    return (driver or "").split(".")[0]


class Observations:
    """The store's observed facts of one command, indexed once by (GPU name, driver branch) and (compute capability,
    driver branch): the one reading of "observed on this class" that `explain`, `explain --pool` and `advise --pool` share
    (`on`). A cell that could not be tested, is pending, or is a prediction stored beside a sweep is no fact."""

    def __init__(self, rows: list[dict]):
        self.by_gpu: dict[tuple[str, str], list[dict]] = {}
        self.by_cc: dict[tuple[str, str], list[dict]] = {}
        for row in rows:
            if row["code"] in ("PENDING", UNTESTED) or not row.get("observed"):
                continue
            branch = _branch(row.get("driver"))
            self.by_gpu.setdefault((row["gpu"], branch), []).append(row)
            if row.get("cc"):
                self.by_cc.setdefault((row["cc"], branch), []).append(row)

    def on(self, gpu: str | None, cc: str | None, driver: str | None, also: str | None = None) -> list[dict]:
        """The facts of a GPU class: cells of that very GPU (its name as reported, or `also`, the knowledge's name for it),
        or, for a class known only by its compute capability, of that capability; on the class's driver branch (any
        where the class's driver or the cell's is not known)."""
        index, names = (self.by_gpu, [n for n in dict.fromkeys((gpu, also)) if n]) if (gpu or also) else (self.by_cc, [cc] if cc else [])
        found: list[dict] = []
        for name in names:
            if driver:
                found += index.get((name, _branch(driver)), []) + index.get((name, ""), [])
            else:
                found += [r for (n, _b), rows in index.items() if n == name for r in rows]
        return found


def matching(rows: list[dict] | Observations, framework: str, release: str, variant: str | None, python: str | None,
             gpu: str | None, cc: str | None, driver: str | None, build_named: bool = True, also: str | None = None) -> list[dict]:
    """The observed verdicts of this build on this GPU class and driver branch (Observations.on): those of the asked Python
    first, newest first. A cell answers for the build it is (stored_build): torch's default as the release's default
    label, never another build (cu126 asked is not cu130 stored). A cell whose build was not recorded answers only a
    question that left the build open (`build_named` False: `jax==0.11.2`, not `jax[cuda12]==0.11.2`). Cells of another
    Python are kept for decide() to mention, never to decide. A verified cell (run here, or imported under a key this
    site trusts) comes before an unverified one, however new: a bundle nobody vouches for never outranks the site's own
    observation."""
    index = rows if isinstance(rows, Observations) else Observations(rows)
    wanted = _same_build(framework, _base(release), release.split("+", 1)[1] if "+" in release else variant)
    found = []
    for row in index.on(gpu, cc, driver, also):
        if row["framework"] != framework or _base(row["version"]) != _base(release):
            continue
        build = row["build"] if "build" in row else stored_build(framework, row["version"], row["variant"], None)[0]
        if build is None:
            if build_named:
                continue
        elif wanted is not None and _same_build(framework, _base(release), build) != wanted:
            continue
        found.append({**row, "asked_variant": variant, "same_python": python is None or _same_python(str(row["python"]), python)})
    return sorted(found, key=lambda r: (r["same_python"], is_verified(r), r.get("created_at") or 0, r.get("cell") or 0), reverse=True)


def _same_python(stored: str, asked: str) -> bool:
    """'3.12.3' is Python 3.12; '3.1' is not 3.12."""
    return stored == asked or stored.startswith(asked + ".")


def observed_verdict(row: dict) -> str:
    return "pass" if row["code"] == PASS else "fail"


def seen_in(row: dict) -> str:
    """The sweep an observation comes from, in words: a sweep imported from another site names that site, never a sweep
    number of this store alone (`sweep 3 (imported from siteb)`)."""
    site = row.get("source") or "local"
    return f"sweep {row.get('sweep')}" if site == "local" else f"sweep {row.get('sweep')} (imported from {site})"


def decide(result: dict, observations: list[dict]) -> dict:
    """The answer with observation first: `source` says what decided ("observed" or "rule"); the rules'
    own answer stays under `predicted`; `disagreement` says where the two part."""
    predicted = {k: result[k] for k in ("verdict", "code", "stage")}
    other_python = [r for r in observations if not r.get("same_python", True)]
    observations = [r for r in observations if r.get("same_python", True)]
    if other_python and not observations:  # said, never deciding: the Python decides which wheels exist
        seen = other_python[0]
        build, why = shown_build(seen, seen.get("asked_variant"))
        python = ".".join(str(seen["python"]).split(".")[:2])
        result.setdefault("notes", []).append(
            f"the store observed {build}{f' ({why})' if why else ''} {seen['code']} on {seen['gpu']}, driver {seen.get('driver') or '?'}, "
            f"with Python {seen['python']} ({seen_in(seen)}); give --python {python} for that observation to answer")
    if not observations:
        result.update(source="rule", decided_by="predicted by rule" + (f" ({result['code']})" if result.get("code") else ""),
                      predicted=predicted, observed=None, disagreement=None)
        return result
    newest = observations[0]
    when = datetime.datetime.fromtimestamp(newest["created_at"]).strftime("%Y-%m-%d") if newest.get("created_at") else "?"
    site, verified = newest.get("source") or "local", is_verified(newest)
    where = f"{newest['gpu']}, driver {newest.get('driver') or '?'}" + ("" if site == "local" else f", at {site}")
    where += "" if verified else " (UNVERIFIED: imported without a signature from a key this site trusts as that site's own)"
    verdict = observed_verdict(newest)
    build, why = shown_build(newest, newest.get("asked_variant"))
    result.update(
        source="observed", predicted=predicted,
        decided_by=f"observed{'' if site == 'local' else f' at {site}'}: {build}{f' ({why})' if why else ''} {newest['code']} on {where}, "
                   f"Python {newest['python']}, in {seen_in(newest)} on {when}",
        observed={"code": newest["code"], "stage": newest.get("stage"), "sweep": newest["sweep"], "date": when,
                  "gpu": newest["gpu"], "driver": newest.get("driver"), "site": site, "verified": verified, "signer": newest.get("signer"),
                  "reason": newest.get("reason"),
                  "build": build, "build_note": why, "build_from": newest.get("build_from"), "python": newest["python"],
                  "cells": len(observations), "passed": sum(1 for r in observations if r["code"] == PASS)},
        verdict=verdict, code=None if verdict == "pass" else newest["code"], stage=newest.get("stage"))
    differs = predicted["verdict"] != verdict or (verdict == "fail" and predicted["code"] not in (None, newest["code"]))
    result["disagreement"] = (f"the rules predicted {predicted['verdict'].upper()}"
                              + (f" {predicted['code']}" if predicted.get("code") else "")
                              + f"; observed {newest['code']}: a knowledge gap to report upstream, or a broken node") if differs else None
    return result
