"""The bench rung's figures: taken out of the probe's facts for the store, and put beside the
datasheet peak of the GPU they ran on for the reports (see the probe's "The bench rung")."""

from __future__ import annotations

from .analysis import shown_python, shown_version
from .discover.local import mig_name
from .knowledge import tables

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


def with_shown_version(series: dict) -> dict:
    """A cell's bench record (Store.telemetry's samples, Store.profiles' window) with the stack's version as reports show it."""
    return {**series, "version": shown_version(series)}


# The figures a MIG instance should reach in proportion to its compute slices (3g.20gb: 3 of 7): the
# compute-bound ones, the matrix products. The seed CNN's training step is launch-bound (a fraction of
# its time on the GPU), so a small instance runs it near full speed; it, copies, transfers and launch
# latency are set against the whole GPU with no expected share (memory slices are eighths, not sevenths,
# and PCIe is not partitioned). A slice share is not an SM share either: a 3g A100 instance has 42 of 108.
MIG_COMPUTE = ("matmul", "shared_matmul")


def _figure_key(row: dict, gpu: str) -> tuple:
    return (gpu, row.get("framework"), str(row.get("version")), row.get("variant"), str(row.get("python")),
            row.get("measurement"), row.get("dtype") or "", row.get("processes") or 1)


def mig_comparison(rows: list[dict], reference: list[dict] = ()) -> list[dict]:
    """Each MIG instance's figure in `rows` (present()'s rows; an instance's GPU is named '<GPU> MIG <profile>')
    against the whole GPU's figure of the same stack, measurement, data type and process count, found in `rows`
    or in `reference` (other sweeps; the newest sweep's where several). `relative`: the instance's speed as a
    share of the whole GPU's (value / whole, or whole / value where lower is better); `expected`: its compute
    slices over the GPU's, for compute-bound figures; `of_expected`: relative / expected. None where unknown."""
    whole: dict[tuple, dict] = {}
    for r in [*reference, *rows]:
        if mig_name(r.get("gpu")) is None and r.get("value"):
            key, newer = _figure_key(r, r.get("gpu")), (r.get("sweep") or 0, r.get("cell") or 0)
            if key not in whole or newer > (whole[key].get("sweep") or 0, whole[key].get("cell") or 0):
                whole[key] = r
    out = []
    for r in rows:
        sliced = mig_name(r.get("gpu"))
        if sliced is None or not r.get("value"):
            continue
        w = whole.get(_figure_key(r, sliced.parent))
        relative = None
        if w:
            relative = w["value"] / r["value"] if r.get("better") == "lower" else r["value"] / w["value"]
        expected = sliced.slices / sliced.gpu_slices if r.get("measurement") in MIG_COMPUTE and sliced.gpu_slices else None
        out.append({
            **{k: r.get(k) for k in ("cell", "sweep", "framework", "version", "variant", "python", "measurement", "dtype",
                                     "processes", "value", "unit", "better")},
            "gpu": sliced.parent, "instance": r.get("gpu"), "profile": sliced.profile, "slices": sliced.slices,
            "gpu_slices": sliced.gpu_slices, "whole": w["value"] if w else None, "whole_sweep": w.get("sweep") if w else None,
            "whole_cell": w.get("cell") if w else None, "relative": relative, "expected": expected,
            "of_expected": relative / expected if relative is not None and expected else None,
        })
    return out
