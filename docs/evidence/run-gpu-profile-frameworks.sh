#!/usr/bin/env bash
# The profiling windows of torch.profiler and jax.profiler, and JAX's scaling, on a 4-GPU machine.
# 1. examples/plans/gpu-profile-frameworks.toml four times, alternating: with CUPTI kept after
#    torch's window (TEARDOWN_CUPTI=0, torch's own default) and with gpucompat's default (torn
#    down), so that what the window costs the steps outside it is seen side by side.
# 2. examples/plans/gpu-scale-jax.toml: the seed CNN over a mesh of 1, 2 and 4 GPUs.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH"
log="$OUT/sweep-terminal.txt"
plan=examples/plans/gpu-profile-frameworks.toml
for round in 1 2; do
  echo "== round $round: TEARDOWN_CUPTI=0 (CUPTI kept after the window)" >> "$log"
  TEARDOWN_CUPTI=0 GPUCOMPAT_DB="sqlite:///$OUT/profile-keep-cupti.db" gpucompat sweep "$plan" --workdir /tmp/keep >> "$log" 2>&1
  echo "sweep exit: $?" >> "$log"
  echo "== round $round: gpucompat's default (CUPTI torn down)" >> "$log"
  GPUCOMPAT_DB="sqlite:///$OUT/profile.db" gpucompat sweep "$plan" --workdir /tmp/default >> "$log" 2>&1
  echo "sweep exit: $?" >> "$log"
done
echo "== JAX scaling" >> "$log"
GPUCOMPAT_DB="sqlite:///$OUT/scale-jax.db" gpucompat sweep examples/plans/gpu-scale-jax.toml --workdir /tmp/scale >> "$log" 2>&1
echo "sweep exit: $?" >> "$log"
GPUCOMPAT_DB="sqlite:///$OUT/scale-jax.db" gpucompat results --bench >> "$log" 2>&1
GPUCOMPAT_DB="sqlite:///$OUT/profile.db" gpucompat report -o "$OUT/report.html" >> "$log" 2>&1
(cd /tmp/default && find . -name 'profile-trace.json.gz' | tar -czf "$OUT/traces.tar.gz" -T -)
"$PY" - "$OUT" > "$OUT/profile-windows.json" <<'PY'
import json, sqlite3, sys
out = {}
for db in ("profile-keep-cupti.db", "profile.db"):
    out[db] = []
    for row_id, text in sqlite3.connect(sys.argv[1] + "/" + db).execute("select id, probe from results order by id"):
        probe = json.loads(text)
        facts = (probe.get("stages", {}).get("bench") or {}).get("facts", {})
        out[db].append({"result": row_id, "framework": probe.get("framework"), "profile": facts.get("profile"),
                        "telemetry_samples": len(facts.get("telemetry", {}).get("samples", [])), "log": probe.get("log", [])[:40]})
print(json.dumps(out, indent=1))
PY
"$PY" - "$OUT/profile-windows.json" <<'PY'
import json, sys
for db, rows in json.load(open(sys.argv[1])).items():
    for r in rows:
        p = r["profile"] or {}
        print(db, r["framework"], {k: p.get(k) for k in ("cupti_teardown", "step_s_before", "step_s_inside", "step_s_just_after", "step_s_after", "overhead_outside", "trace_bytes", "error")},
              [(k["kernel"][:50], round(k["share"], 3)) for k in p.get("top_kernels", [])[:3]])
PY
tail -40 "$log"; ls -la "$OUT"
