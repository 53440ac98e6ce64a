"""Observation first: before the rules answer a question, the store (the --db in use) is asked for the
cells it observed of that stack on that GPU and driver branch. The newest observation decides; the
rules' prediction is shown beside it, and where the two disagree the answer says so (a knowledge gap
to report upstream, or a broken node). `results --surprises` lists every such disagreement.
"""

from __future__ import annotations

import datetime
import os
from contextlib import suppress
from pathlib import Path

from ..model import PASS, UNTESTED
from ..paths import cache_dir, default_url, sqlite_readonly


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


def _query_file(source: str | None, framework: str | None) -> Path:
    """Where the compiled query is kept: one per gpucompat version, store source and kind of question."""
    from .. import __version__

    here = Path(__file__).resolve().parent.parent
    stamp = "-".join(f"{s.st_mtime_ns:x}{s.st_size:x}" for s in ((here / "store.py").stat(), (here / "store_schema.py").stat()))
    kind = "all" if source is None else source if source in ("local", "imported") else "site"
    return cache_dir() / "queries" / f"result-rows-{__version__}-{stamp}-{kind}-{'one' if framework else 'every'}.json"


def _sqlite_rows(path: Path, source: str | None, framework: str | None) -> list[dict] | None:
    """The rows through sqlite3, read-only; None where that cannot answer (another schema version, a file
    sqlite3 cannot open read-only, not a gpucompat store): the store then opens it and says what is wrong."""
    import json
    import sqlite3
    from contextlib import closing

    try:
        query_file = _query_file(source, framework)
        query = json.loads(query_file.read_text())
    except (OSError, ValueError):
        from ..store import SCHEMA_VERSION, result_rows_sqlite

        query = {"schema_version": str(SCHEMA_VERSION), "sql": result_rows_sqlite(source, framework)}
        with suppress(OSError):
            query_file.parent.mkdir(parents=True, exist_ok=True)
            partial = query_file.with_suffix(f".{os.getpid()}")
            partial.write_text(json.dumps(query))
            os.replace(partial, query_file)
    database, mode = sqlite_readonly(path)
    try:
        with closing(sqlite3.connect(database + ("?" + "&".join(f"{k}={v}" for k, v in mode.items()) if mode else ""), uri=bool(mode))) as conn:
            conn.execute("PRAGMA query_only = ON")
            conn.row_factory = sqlite3.Row
            version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if version is None or str(version[0]) != query["schema_version"]:
                return None
            return [_row(dict(r)) for r in conn.execute(query["sql"], {"site": source, "framework": framework})]
    except sqlite3.Error:
        return None


def _row(raw: dict) -> dict:
    """What matching needs of a stored row, with the version and Python a current environment learnt from its probe."""
    from ..analysis import shown_python, shown_version  # here: a question with no store never loads the classifier
    return {"cell": raw["cell_id"], "sweep": raw["sweep_id"], "created_at": raw["created_at"], "framework": raw["framework"],
            "version": shown_version(raw), "variant": raw["variant"], "python": shown_python(raw), "gpu": raw["gpu"],
            "cc": raw["cc"] or "", "driver": raw["driver"] or "", "code": raw["code"] or "PENDING", "stage": raw["stage"] or "",
            "observed": bool(raw["observed"]) if raw["code"] else None, "reason": raw["summary"] or "", "source": raw.get("source") or "local"}


def _base(version: str) -> str:
    return version.split("+", 1)[0]


def matching(rows: list[dict], framework: str, release: str, variant: str | None, python: str | None,
             gpu: str | None, cc: str | None, driver: str | None) -> list[dict]:
    """The observed verdicts (not pending, not could-not-test) of this stack on this GPU class and driver
    branch, newest first. A cell of the same release in another variant is another stack: a cell run
    in a current environment names its build in its version (2.4.1+cu118), others in their variant."""
    found = []
    for row in rows:
        if row["framework"] != framework or row["code"] in ("PENDING", UNTESTED) or not row.get("observed"):
            continue
        if _base(row["version"]) != _base(release):
            continue
        built = row["version"].split("+", 1)[1] if "+" in row["version"] else row["variant"]
        if variant is not None and built not in (variant, "installed", "default") and row["variant"] != variant:
            continue
        if gpu and row["gpu"] != gpu and not (cc and row["cc"] == cc):
            continue
        if not gpu and cc and row["cc"] != cc:
            continue
        if driver and row.get("driver") and row["driver"].split(".")[0] != driver.split(".")[0]:
            continue
        if python and not str(row["python"]).startswith(python):
            continue
        found.append(row)
    return sorted(found, key=lambda r: (r.get("created_at") or 0, r["cell"]), reverse=True)


def observed_verdict(row: dict) -> str:
    return "pass" if row["code"] == PASS else "fail"


def decide(result: dict, observations: list[dict]) -> dict:
    """The answer with observation first: `source` says what decided ("observed" or "rule"); the rules'
    own answer stays under `predicted`; `disagreement` says where the two part."""
    predicted = {k: result[k] for k in ("verdict", "code", "stage")}
    if not observations:
        result.update(source="rule", decided_by="predicted by rule" + (f" ({result['code']})" if result.get("code") else ""),
                      predicted=predicted, observed=None, disagreement=None)
        return result
    newest = observations[0]
    when = datetime.datetime.fromtimestamp(newest["created_at"]).strftime("%Y-%m-%d") if newest.get("created_at") else "?"
    site = newest.get("source") or "local"
    where = f"{newest['gpu']}, driver {newest.get('driver') or '?'}" + ("" if site == "local" else f", at {site}")
    verdict = observed_verdict(newest)
    result.update(
        source="observed", predicted=predicted,
        decided_by=f"observed: {newest['code']} in sweep {newest['sweep']} ({when}) on {where}",
        observed={"code": newest["code"], "stage": newest.get("stage"), "sweep": newest["sweep"], "date": when,
                  "gpu": newest["gpu"], "driver": newest.get("driver"), "site": site, "reason": newest.get("reason"),
                  "cells": len(observations), "passed": sum(1 for r in observations if r["code"] == PASS)},
        verdict=verdict, code=None if verdict == "pass" else newest["code"], stage=newest.get("stage"))
    differs = predicted["verdict"] != verdict or (verdict == "fail" and predicted["code"] not in (None, newest["code"]))
    result["disagreement"] = (f"the rules predicted {predicted['verdict'].upper()}"
                              + (f" {predicted['code']}" if predicted.get("code") else "")
                              + f"; observed {newest['code']}: a knowledge gap to report upstream, or a broken node") if differs else None
    return result
