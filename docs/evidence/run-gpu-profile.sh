#!/usr/bin/env bash
# The profiling window on one GPU: examples/plans/gpu-profile.toml, its report, the trace it kept,
# and the window's record as stored (top kernels, what it cost the steps outside it, the log).
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/profile.db"
gpucompat sweep examples/plans/gpu-profile.toml > "$OUT/sweep-terminal.txt" 2>&1
echo "sweep exit: $?" >> "$OUT/sweep-terminal.txt"
gpucompat report -o "$OUT/report.html" 2>&1
cp "$OUT"/profile-runs/sweep-1/cell-1/profile-trace.json.gz "$OUT/" 2>/dev/null
"$PY" - "$OUT/profile.db" > "$OUT/profile-window.json" <<'PY'
import json, sqlite3, sys
probe = json.loads(sqlite3.connect(sys.argv[1]).execute("select probe from results").fetchone()[0])
facts = probe["stages"]["bench"]["facts"]
print(json.dumps({"profile": facts.get("profile"), "telemetry_samples": len(facts.get("telemetry", {}).get("samples", [])),
                  "log": probe["log"]}, indent=1))
PY
head -c 3000 "$OUT/profile-window.json"; ls -la "$OUT"
