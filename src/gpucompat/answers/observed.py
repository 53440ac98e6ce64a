"""Observation first: before the rules answer a question, the store (the --db in use) is asked for the
cells it observed of that stack on that GPU and driver branch. The newest observation decides; the
rules' prediction is shown beside it, and where the two disagree the answer says so (a knowledge gap
to report upstream, or a broken node). `results --surprises` lists every such disagreement.
"""

from __future__ import annotations

import datetime
from pathlib import Path

from ..analysis import shown_python, shown_version
from ..model import PASS, UNTESTED
from ..paths import default_url


def stored_rows(db: str | None, source: str | None = None, framework: str | None = None) -> list[dict]:
    """Every stored cell as a display row, or none when the default SQLite file does not exist yet
    (then the store and SQLAlchemy are never even imported: explain stays offline and fast)."""
    url = db or default_url()
    if url.startswith("sqlite:///") and "?" not in url and not Path(url[len("sqlite:///"):]).exists():
        return []
    from ..store import Store

    return [_row(r) for r in Store(url, readonly=True).result_rows(None, source=source, framework=framework)]


def _row(raw: dict) -> dict:
    """What matching needs of a stored row, with the version and Python a current environment learnt from its probe."""
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
