"""Stored results -> flat display rows (one per cell), the seed's valid/invalid split."""

from __future__ import annotations

from ..model import PASS


def _import_facts(row: dict) -> dict:
    return ((row.get("probe") or {}).get("stages") or {}).get("import", {}).get("facts", {}) or {}


def display_row(row: dict) -> dict:
    """What a person reads about one cell; versions a `current` env only learns from its probe."""
    facts = _import_facts(row)
    version = row["version"]
    if version == "installed":
        version = facts.get("version") or "not installed"
    return {
        "cell": row["cell_id"],
        "framework": row["framework"],
        "version": version,
        "variant": row["variant"],
        "python": (row.get("probe") or {}).get("system", {}).get("python", row["python"]) if row["python"] == "current" else row["python"],
        "env": row["env"],
        "gpu": row["gpu"],
        "cc": row["cc"] or "",
        "driver": row["driver"] or "",
        "cuda_runtime": row["cuda_runtime"] or facts.get("cuda_runtime") or "",
        "cudnn": row["cudnn"] or (str(facts["cudnn"]) if facts.get("cudnn") else ""),
        "code": row["code"] or "PENDING",
        "stage": row["stage"] or "",
        "reason": row["summary"] or "",
        "warnings": list(row["warnings"] or []),
        "duration_s": row["duration_s"],
        "observed": bool(row["observed"]) if row["code"] else None,
        "predicted": row.get("predicted") or "",
        "predicted_code": row.get("predicted_code") or "",
        "predicted_reason": next((r["text"] for r in row.get("predicted_reasons") or [] if r["verdict"] == row.get("predicted")), ""),
    }


def is_surprise(row: dict) -> bool:
    """An observed verdict that contradicts a firm prediction: a knowledge gap or a broken cluster."""
    if not row["observed"] or row["predicted"] not in ("pass", "fail"):
        return False
    if row["predicted"] == "pass":
        return row["code"] != PASS
    return row["code"] == PASS or row["code"] != row["predicted_code"]


def split(rows: list[dict]) -> tuple[list[dict], list[dict], list[dict]]:
    """(surprises, valid, invalid) display rows; cells still pending count as none of them."""
    shown = [display_row(r) for r in rows]
    valid = [r for r in shown if r["code"] == PASS]
    invalid = [r for r in shown if r["code"] not in (PASS, "PENDING")]
    return [r for r in shown if is_surprise(r)], valid, invalid
