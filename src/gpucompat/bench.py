"""The bench rung's figures: taken out of the probe's facts for the store, and put beside the
datasheet peak of the GPU they ran on for the reports (see the probe's "The bench rung")."""

from __future__ import annotations

from .knowledge import tables
from .report.rows import shown_python, shown_version

# NVML's clocks-event reasons that lower a figure; idle, application clocks, sync boost and display do not
THROTTLING = {"sw_power_cap", "hw_slowdown", "sw_thermal", "hw_thermal", "hw_power_brake"}


def figures(facts: dict | None) -> list[dict]:
    """The figures a probe made (those with a value), as store rows: measurement, dtype, value, unit,
    better, spread, repetitions, data (clocks, size, note, samples)."""
    made = (facts or {}).get("stages", {}).get("bench", {}).get("facts", {}).get("figures", [])
    rows = []
    for figure in made:
        if not isinstance(figure.get("value"), (int, float)) or figure["value"] != figure["value"]:
            continue  # unsupported, broken, or NaN: the probe's record keeps why
        rows.append({
            "measurement": str(figure.get("measurement", ""))[:32], "dtype": str(figure.get("dtype") or "")[:16],
            "value": float(figure["value"]), "unit": str(figure.get("unit", ""))[:16],
            "better": "lower" if figure.get("better") == "lower" else "higher",
            "spread": float(figure["spread"]) if isinstance(figure.get("spread"), (int, float)) else None,
            "repetitions": int(figure.get("repetitions") or 1),
            "data": {key: figure[key] for key in ("clocks", "size", "note", "samples", "duration_s", "processes", "per_process", "loss",
                                                 "epoch_seconds", "final_loss", "accuracy", "speedup", "efficiency", "parameters")
                     if key in figure},
        })
    return rows


def peak(gpu: str, measurement: str, dtype: str) -> float | None:
    """The datasheet's dense peak for this measurement on this GPU (TFLOP/s, GB/s), None where unknown."""
    row = tables.gpu_peak(gpu)
    if row is None:
        return None
    column = dtype if measurement in ("matmul", "shared_matmul") else "memory_gbs" if measurement == "copy" else None
    value = row.get(column) if column else None
    return float(value) if value else None


def throttled(clocks: dict | None) -> bool:
    """Whether NVML saw the GPU held back (power cap, thermal, hardware slowdown) during the figure."""
    return any(reason in THROTTLING for side in (clocks or {}).values() if isinstance(side, dict)
               for reason in side.get("throttle") or [])


def present(row: dict) -> dict:
    """A store row (Store.bench_rows) as reports show it: the stack's real version, share of peak, throttling."""
    data = row.get("data") or {}
    version, python = shown_version(row), shown_python(row)
    known = peak(row["gpu"], row["measurement"], row["dtype"])
    return {
        "cell": row["cell"], "sweep": row["sweep"], "framework": row["framework"], "version": version,
        "variant": row["variant"], "python": python, "env": row["env"], "gpu": row["gpu"], "cc": row["cc"] or "",
        "driver": row["driver"] or "", "measurement": row["measurement"], "dtype": row["dtype"], "value": row["value"],
        "unit": row["unit"], "better": row["better"], "spread": row["spread"], "repetitions": row["repetitions"],
        "peak": known, "share": row["value"] / known if known else None, "throttled": throttled(data.get("clocks")),
        "clocks": data.get("clocks") or {}, "note": data.get("note", ""),
        # sharing one GPU: how many processes ran the workload at once, each one's figure, the loss against alone
        "processes": data.get("processes", 1), "per_process": data.get("per_process"), "loss": data.get("loss"),
        # scaling over GPUs (processes = GPUs): the seed's table
        **{key: data.get(key) for key in ("epoch_seconds", "final_loss", "accuracy", "speedup", "efficiency")},
    }


def present_telemetry(series: dict) -> dict:
    """A cell's NVML samples (Store.telemetry) with the stack's version as reports show it."""
    return {**series, "version": shown_version(series)}
