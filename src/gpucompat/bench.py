"""The bench rung's figures: taken out of the probe's facts for the store, and put beside the
datasheet peak of the GPU they ran on for the reports (see the probe's "The bench rung"); what each
figure was measured under (conditions: other processes computing, the power cap, thermal or
hardware slowdown, an administrator's lower limit); and the figures the bench could not make, with why."""

from __future__ import annotations

from .analysis import shown_python, shown_version
from .discover.local import mig_name
from .gpu_state import _NO_ROOM
from .knowledge import tables

# NVML's clocks-event reasons (probe/nvml.py THROTTLE_REASONS) that hold a figure below what the card gives
# as set up, each as a warning a reader understands; the SW power cap is the card's normal ceiling under a
# large product unless the limit was set below the default, and idle, sync boost and display clocks lower nothing.
CLOCK_WARNINGS = {"sw_thermal": "thermal slowdown (software)", "hw_thermal": "thermal slowdown (hardware)",
                  "hw_slowdown": "hardware slowdown", "hw_power_brake": "power brake (external)"}
IDLE_CLOCKED = 0.5  # an SM clock under half its maximum as the figure starts: the GPU was still idle-clocked
DATA_KEYS = ("clocks", "size", "note", "samples", "duration_s", "processes", "per_process", "loss", "epoch_seconds", "final_loss",
             "accuracy", "speedup", "efficiency", "parameters", "contention", "limits")


def _bench_facts(facts: dict | None) -> dict:
    found = (facts or {}).get("stages", {}).get("bench", {}).get("facts", {})
    return found if isinstance(found, dict) else {}


def _made(figure: dict) -> bool:
    """A figure with a value: not unsupported, broken, skipped, or NaN."""
    return isinstance(figure.get("value"), (int, float)) and figure["value"] == figure["value"]


def figures(facts: dict | None) -> list[dict]:
    """The figures a probe made (those with a value), as store rows: measurement, dtype, value, unit,
    better, spread, repetitions, data (clocks, size, note, samples, contention, the GPU's limits)."""
    bench = _bench_facts(facts)
    rows = []
    for figure in bench.get("figures", []):
        if not isinstance(figure, dict) or not _made(figure):
            continue  # unsupported, broken, or NaN: missing() says why
        data = {key: figure[key] for key in DATA_KEYS if key in figure}
        if isinstance(bench.get("limits"), dict):
            data["limits"] = bench["limits"]
        rows.append({
            "measurement": str(figure.get("measurement", ""))[:32], "dtype": str(figure.get("dtype") or "")[:16],
            "value": float(figure["value"]), "unit": str(figure.get("unit", ""))[:16],
            "better": "lower" if figure.get("better") == "lower" else "higher",
            "spread": float(figure["spread"]) if isinstance(figure.get("spread"), (int, float)) else None,
            "repetitions": int(figure.get("repetitions") or 1),
            "data": data,
        })
    return rows


def _mib(value) -> str:
    return f"{value / 1024:.1f} GiB" if value >= 1024 else f"{value} MiB"


def _others(contention: dict | None) -> list[dict]:
    """The processes of a figure's contention record that are not the probe's own."""
    processes = (contention or {}).get("processes") if isinstance(contention, dict) else None
    return [p for p in processes or [] if isinstance(p, dict) and not p.get("own")]


def _who(p: dict) -> str:
    name = str(p.get("name") or "").rsplit("/", 1)[-1]
    return f"pid {p.get('pid')}" + (f" {name}" if name else "")


def missing_reason(figure: dict) -> tuple[str, str]:
    """(kind, sentence) for a figure the bench did not make: kind is one of out_of_memory, gpu (the GPU
    lacks the data type), framework (no such operation), environment, depends (a figure it needed was not
    made), skipped (not tried), error."""
    if figure.get("skipped"):
        return "skipped", str(figure["skipped"])
    if figure.get("unsupported"):
        kind = str(figure.get("unsupported_kind") or "framework")
        return (kind if kind in ("gpu", "framework", "environment", "depends") else "framework"), str(figure["unsupported"])
    error = figure.get("error") if isinstance(figure.get("error"), dict) else {}
    lines = str(error.get("message") or "").strip().splitlines()  # none where the message is blank
    text = f"{error.get('type') or 'error'}: {lines[0] if lines else ''}".strip(": ")
    if _NO_ROOM.search(f"{error.get('type')} {error.get('message')}"):
        holders = [p for p in _others(figure.get("contention")) if isinstance(p.get("used_mib"), int) and p["used_mib"] > 0]
        memory = figure.get("memory") if isinstance(figure.get("memory"), dict) else {}
        held = sum(p["used_mib"] for p in holders)
        if holders:
            of = f" of {_mib(memory['total_mib'])}" if isinstance(memory.get("total_mib"), int) else ""
            named = ", ".join(f"{_who(p)} {_mib(p['used_mib'])}" for p in sorted(holders, key=lambda p: -p["used_mib"])[:3])
            return "out_of_memory", f"out of GPU memory while other processes held {_mib(held)}{of} ({named})"
        return "out_of_memory", f"out of GPU memory ({text[:160]})"
    return "error", f"failed: {text[:200]}"


def missing(tried: list) -> list[dict]:
    """Of the figures a probe's bench recorded (its facts' "figures"), those it tried or meant to make and could not:
    {"measurement", "dtype", "missing": kind, "reason": sentence, "data": {...}} (missing_reason), in the probe's order."""
    out = []
    for figure in tried:
        if not isinstance(figure, dict) or _made(figure):
            continue
        kind, reason = missing_reason(figure) if any(k in figure for k in ("skipped", "unsupported", "error")) else \
            ("error", "no value recorded (NaN or none)")
        out.append({"measurement": str(figure.get("measurement", ""))[:32], "dtype": str(figure.get("dtype") or "")[:16],
                    "missing": kind, "reason": reason,
                    "data": {key: figure[key] for key in ("clocks", "duration_s", "processes", "contention", "memory") if key in figure}})
    return out


UNRECORDED = "no record of the other processes on the GPU (a probe without NVML, or one older than the record)"


def contention(data: dict | None) -> dict:
    """Whether other processes computed on the GPU while the figure was measured (NVML's per-process samples in
    the figure's window widened by the probe's margin, probe/nvml.py Contention):
    {"contended": bool, "others": [{"pid", "name", "sm_pct_mean", "sm_pct_max", "used_mib"}], "known": bool,
    "text": "pid 4242 python3 (SM 48 %)" or why it is not known}. A process counts when its SM utilisation was
    above 0 in any sample; a process that only held memory is listed but does not contend. Not known (never
    "not contended"): no record, NVML gave no per-process samples (or failed at the figure's end), or NVML's
    process ids are not the job's."""
    record = (data or {}).get("contention")
    if not isinstance(record, dict):
        return {"contended": False, "others": [], "known": False, "text": UNRECORDED}
    others = _others(record)
    computing = [p for p in others if isinstance(p.get("sm_pct_max"), (int, float)) and p["sm_pct_max"] > 0]
    if computing and record.get("own_seen") is False:  # NVML's pids are of another pid namespace: none is told apart
        return {"contended": False, "others": others, "known": False,
                "text": "NVML's process ids are not this job's (another pid namespace): other processes not told apart"}
    if not computing and record.get("error"):  # what NVML did not give may have shown another process
        held = [p for p in others if isinstance(p.get("used_mib"), int)]
        holding = ", ".join(f"{_who(p)} {_mib(p['used_mib'])}" for p in held[:3])
        return {"contended": False, "others": others, "known": False,
                "text": str(record["error"]) + (f"; holding a compute context: {holding}" if holding else "")}
    text = ", ".join(f"{_who(p)} (SM {p['sm_pct_mean']:.0f} %)" for p in sorted(computing, key=lambda p: -(p.get("sm_pct_mean") or 0)))
    return {"contended": bool(computing), "others": computing, "known": True, "text": text}


def conditions(data: dict | None) -> list[dict]:
    """What held the figure down, from NVML's view around it: [{"kind", "text", "warning"}]. Empty is "normal".
    kinds: contended, contention_unknown (a record that cannot say; no warning), at_power_limit (the card's own
    cap: expected, no warning), power_limit_lowered, applications_clocks, thermal, hw_slowdown, power_brake, idle_clocked."""
    data = data or {}
    clocks = data.get("clocks") if isinstance(data.get("clocks"), dict) else {}
    before = clocks.get("before") if isinstance(clocks.get("before"), dict) else {}
    after = clocks.get("after") if isinstance(clocks.get("after"), dict) else {}
    limits = data.get("limits") if isinstance(data.get("limits"), dict) else {}
    reasons = [r for side in (before, after) for r in side.get("throttle") or [] if isinstance(r, str)]
    out = []
    seen = contention(data)
    if seen["contended"]:
        out.append({"kind": "contended", "text": "contended: " + seen["text"], "warning": True})
    elif not seen["known"] and isinstance(data.get("contention"), dict):  # recorded, and not enough to say "not contended"
        out.append({"kind": "contention_unknown", "text": "contention unknown: " + seen["text"], "warning": False})
    default, enforced = limits.get("default_power_limit_w"), limits.get("enforced_power_limit_w") or after.get("power_limit_w")
    lowered = isinstance(default, (int, float)) and isinstance(enforced, (int, float)) and enforced < default - 0.5
    if lowered:
        out.append({"kind": "power_limit_lowered", "warning": True,
                    "text": f"power limit {enforced:.0f} W, below the card's default {default:.0f} W"})
    elif "sw_power_cap" in (after.get("throttle") or []):  # its own work at the cap; a cap left from the figure before is not
        cap = f" ({enforced:.0f} W)" if isinstance(enforced, (int, float)) else ""
        out.append({"kind": "at_power_limit", "warning": False, "text": f"at power limit{cap}"})
    app, app_default = limits.get("applications_sm_mhz"), limits.get("default_applications_sm_mhz")
    if isinstance(app, int) and isinstance(app_default, int) and app < app_default:
        out.append({"kind": "applications_clocks", "warning": True,
                    "text": f"application clocks set to {app} MHz, below the default {app_default} MHz"})
    elif "applications_clocks" in reasons and not (isinstance(app, int) and app == app_default):
        out.append({"kind": "applications_clocks", "warning": True, "text": "held by the application-clocks setting"})
    for reason, text in CLOCK_WARNINGS.items():
        if reason in reasons:
            kind = "thermal" if "thermal" in reason else "hw_slowdown" if reason == "hw_slowdown" else "power_brake"
            out.append({"kind": kind, "warning": True, "text": text})
    sm, top = before.get("sm_mhz"), before.get("max_sm_mhz")
    if isinstance(sm, (int, float)) and isinstance(top, (int, float)) and top > 0 and sm < IDLE_CLOCKED * top:
        out.append({"kind": "idle_clocked", "warning": True, "text": f"idle-clocked at the start (SM {sm:.0f} of {top:.0f} MHz)"})
    return out


def condition_text(found: list[dict]) -> str:
    """conditions() as one cell: "normal", "at power limit (700 W)", or the reasons joined by '; '."""
    return "; ".join(c["text"] for c in found) if found else "normal"


def peak(gpu: str, measurement: str, dtype: str) -> float | None:
    """The datasheet's dense peak for this measurement on this GPU (TFLOP/s, GB/s), None where unknown."""
    row = tables.gpu_peak(gpu)
    if row is None:
        return None
    column = dtype if measurement in ("matmul", "shared_matmul") else "memory_gbs" if measurement == "copy" else None
    value = row.get(column) if column else None
    return float(value) if value else None


def _clock_warned(found: list[dict]) -> bool:
    """A warning among conditions() other than contention: the clocks were held below what the card gives as set up."""
    return any(c["warning"] and c["kind"] != "contended" for c in found)


def throttled(clocks: dict | None, limits: dict | None = None) -> bool:
    """Whether the GPU's clocks were held below what the card gives as set up (thermal or hardware slowdown,
    a power brake, an administrator's lower power limit or application clocks, idle-clocked at the start).
    The card's own power cap under a large product is its normal ceiling, not throttling."""
    return _clock_warned(conditions({"clocks": clocks, "limits": limits}))


def present(row: dict) -> dict:
    """A store row (Store.bench_rows, or Store.missing_figures with value None) as reports show it: the stack's
    real version, share of peak, what it was measured under (condition, contended) or why it is missing."""
    data = row.get("data") or {}
    version, python = shown_version(row), shown_python(row)
    known = peak(row["gpu"], row["measurement"], row["dtype"])
    found = conditions(data)
    seen = contention(data)
    value = row.get("value")
    return {
        "cell": row["cell"], "sweep": row["sweep"], "framework": row["framework"], "version": version,
        "variant": row["variant"], "python": python, "env": row["env"], "gpu": row["gpu"], "cc": row["cc"] or "",
        "driver": row["driver"] or "", "measurement": row["measurement"], "dtype": row["dtype"], "value": value,
        "unit": row["unit"], "better": row["better"], "spread": row["spread"], "repetitions": row["repetitions"],
        "peak": known, "share": value / known if known and value is not None else None,
        "throttled": _clock_warned(found) and value is not None,  # a figure not made was measured under nothing
        "condition": condition_text(found) if value is not None else "", "conditions": found,
        "contended": seen["contended"] and value is not None, "contention": seen["others"], "contention_text": seen["text"],
        # why nobody can say whether another process computed beside it ('' where it is known or the figure was not made)
        "contention_unknown": seen["text"] if value is not None and not seen["known"] else "",
        "missing": data.get("missing"), "missing_reason": data.get("reason"),
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
