#!/usr/bin/env bash
# What a bench figure was measured under (issue 31): the exact command run on the GPU machine (the
# workplace's device tool, repository root, no internet; the image's python3 has torch 2.11 and CuPy 14).
# .whl/ holds gpucompat's wheel and the dependencies the image lacks, as for run-gpu-state.sh. Nothing
# changes the card's settings (no power limit, clock, compute-mode or MIG command): a lowered power limit
# and thermal slowdown are tested from the stand-in NVML (tests/test_bench_conditions.py).
#
#   0. plain       docs/evidence/bench_plain_matmul.py measure: a bf16 matmul loop written apart from
#                  gpucompat, alone on the GPU: the comparison figure
#   1. alone       gpucompat check torch --env current --bench, the GPU to itself
#   2. contended   the same while bench_plain_matmul.py load runs bf16 products on the GPU all the while
#   3. memory      the same while another process holds all but 3 GiB of the GPU's memory
#   4. hidden      gpucompat check cupy --env current with CUDA_VISIBLE_DEVICES=1 (one GPU here), then
#                  with CUDA_VISIBLE_DEVICES=GPU-<a UUID not on this machine>
#   then           gpucompat diff 1 2 --fail-on-slowdown and diff 1 3 (nothing contended is compared)
#
# What comes back in $OUT/bench-conditions/ (the tool returns at most 8 files):
#   conditions.txt   the log: nvidia-smi, each check's terminal output and closing line, results --bench
#                    tables, the two diffs, the verdicts of the hidden cases, the plain loop's figure
#   bench.json       {case: `gpucompat results --bench --json` of that check}, with the plain figure
#   prometheus.txt   each case's `results --format prometheus`, one after the other (a "# case" line before each)
#   conditions.db    the SQLite store: every probe's raw record (contention, limits, gpus)
#   extra.tar.gz     each case's JSON and Prometheus text on its own, nvidia-smi, pip's log, the load's log
# Budget: about 4-5 minutes of GPU time (each torch check with the bench ~60-70 s on an H100).
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
DIR="$OUT/bench-conditions"
WORK=/tmp/bench-conditions
mkdir -p "$DIR"
rm -rf "$WORK"; mkdir -p "$WORK"; rm -f "$DIR/conditions.db"  # a fresh store: the checks are sweeps 1 to 5
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$DIR/conditions.db"
LOG="$WORK/conditions.txt"
note() { echo "== $* ($(date -u +%H:%M:%S))" | tee -a "$LOG"; }
{ nvidia-smi; nvidia-smi --query-gpu=index,uuid,name,driver_version,power.limit,power.default_limit,clocks.applications.graphics,clocks.default_applications.graphics,clocks.max.sm --format=csv; } > "$WORK/nvidia-smi.txt" 2>&1
cat "$WORK/nvidia-smi.txt" >> "$LOG"

export_case() {  # export_case NAME SWEEP: its bench figures as JSON and Prometheus text, and its table in the log
  gpucompat results --bench --json --sweep "$2" > "$WORK/bench-$1.json" 2>> "$LOG"
  gpucompat results --format prometheus --sweep "$2" > "$WORK/$1.prom" 2>> "$LOG"
  gpucompat results --bench --sweep "$2" >> "$LOG" 2>&1
}

check_torch() {  # check_torch NAME SWEEP: each check is one sweep of the fresh store, 1 (alone), 2 (contended), 3 (memory)
  note "check torch --env current --bench ($1)"
  gpucompat check torch --env current --bench >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
  export_case "$1" "$2"
}

# 0. the plain loop, alone
note "plain bf16 matmul (bench_plain_matmul.py), alone"
"$PY" docs/evidence/bench_plain_matmul.py measure > "$WORK/plain.json" 2>> "$LOG"; echo "exit $?" >> "$LOG"
cat "$WORK/plain.json" >> "$LOG"

# 1. alone
check_torch alone 1

# 2. contended: another plain torch process multiplies bf16 matrices for the whole run
rm -f "$WORK/load.ready"
"$PY" docs/evidence/bench_plain_matmul.py load "$WORK/load.ready" > "$WORK/load.log" 2>&1 & load=$!
for _ in $(seq 60); do [ -f "$WORK/load.ready" ] && break; sleep 1; done
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$LOG" 2>&1
check_torch contended 2
kill "$load"; wait "$load" 2>/dev/null

# 3. memory: another process holds all but 3 GiB of the GPU's memory (and computes nothing)
cat > "$WORK/hold.py" <<'PY'
import sys, time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - (3 << 30), dtype=torch.uint8, device="cuda")
free_after, _ = torch.cuda.mem_get_info()
open(sys.argv[1], "w").write("holding %d MiB of %d; %d MiB free\n" % (held.numel() >> 20, total >> 20, free_after >> 20))
time.sleep(900)
PY
rm -f "$WORK/hold.ready"
"$PY" "$WORK/hold.py" "$WORK/hold.ready" > "$WORK/hold.log" 2>&1 & hold=$!
for _ in $(seq 60); do [ -f "$WORK/hold.ready" ] && break; sleep 1; done
cat "$WORK/hold.ready" "$WORK/hold.log" >> "$LOG" 2>&1
check_torch memory 3
kill "$hold"; wait "$hold" 2>/dev/null

# 4. a CUDA_VISIBLE_DEVICES that names no GPU on this machine
note "check cupy --env current, CUDA_VISIBLE_DEVICES=1"
CUDA_VISIBLE_DEVICES=1 gpucompat check cupy --env current >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
gpucompat results --format json --sweep 4 > "$WORK/hidden-index.json" 2>> "$LOG"
note "check cupy --env current, CUDA_VISIBLE_DEVICES=GPU-00000000-1111-2222-3333-444444444444"
CUDA_VISIBLE_DEVICES=GPU-00000000-1111-2222-3333-444444444444 gpucompat check cupy --env current >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
gpucompat results --format json --sweep 5 > "$WORK/hidden-uuid.json" 2>> "$LOG"

# the comparisons: a contended figure is never compared with an uncontended one
note "diff 1 2 --fail-on-slowdown (alone, contended)"
gpucompat diff 1 2 --fail-on-slowdown >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
note "diff 1 3 --fail-on-slowdown (alone, memory held)"
gpucompat diff 1 3 --fail-on-slowdown >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
gpucompat results --list >> "$LOG" 2>&1

"$PY" - "$WORK" >> "$LOG" <<'PY'
import json, sys
work = sys.argv[1]
print("== the hidden cases' verdicts")
for case in ("hidden-index", "hidden-uuid"):
    try:
        data = json.load(open(f"{work}/{case}.json"))
    except (OSError, ValueError) as exc:
        print(f"   {case}: no results ({exc})")
        continue
    for row in data["valid"] + data["invalid"] + data["untested"]:
        print(f"   {case:<13} {row['framework']:<5} {row['code']:<10} {row['stage'] or '':<7} {row['reason']}")
print("== bf16 matmul: the plain loop against each case")
try:
    plain = json.load(open(f"{work}/plain.json"))
    print(f"   plain loop, alone: {plain['median_tflops']:.1f} TFLOP/s (min {plain['min_tflops']:.1f}, max {plain['max_tflops']:.1f})")
except (OSError, ValueError, KeyError) as exc:
    print(f"   plain loop: no figure ({exc})")
for case in ("alone", "contended", "memory"):
    try:
        rows = json.load(open(f"{work}/bench-{case}.json"))
    except (OSError, ValueError) as exc:
        print(f"   {case}: no bench figures ({exc})")
        continue
    for r in rows:
        if r["measurement"] == "matmul" and r["dtype"] == "bf16":
            print(f"   {case:<10} {r['value'] if r['value'] is None else round(r['value'], 1)} TFLOP/s; {r['condition'] or r['missing_reason']}")
    made = [r for r in rows if r["value"] is not None]
    print(f"   {case:<10} {len(made)} figures made, {sum(r['contended'] for r in made)} contended, {len(rows) - len(made)} not made: "
          + "; ".join(f"{r['measurement']} {r['dtype']}: {r['missing_reason']}" for r in rows if r["value"] is None))
PY

"$PY" - "$WORK" "$DIR" <<'PY'
import json, sys
work, out = sys.argv[1], sys.argv[2]
def read(path, parse=json.load):
    try:
        with open(path) as handle:
            return parse(handle)
    except (OSError, ValueError) as exc:
        return {"unreadable": f"{path}: {exc}"}
cases = {case: read(f"{work}/bench-{case}.json") for case in ("alone", "contended", "memory")}
cases["plain"] = read(f"{work}/plain.json")
json.dump(cases, open(f"{out}/bench.json", "w"), indent=1)
with open(f"{out}/prometheus.txt", "w") as handle:
    for case in ("alone", "contended", "memory"):
        text = read(f"{work}/{case}.prom", lambda h: h.read())
        handle.write(f"# case {case}\n" + (text if isinstance(text, str) else f"# {text['unreadable']}\n"))
PY
cp "$LOG" "$DIR/conditions.txt"
tar -czf "$DIR/extra.tar.gz" -C "$WORK" $(cd "$WORK" && ls bench-*.json *.prom hidden-*.json plain.json nvidia-smi.txt load.log hold.log 2>/dev/null) -C /tmp pip-install.txt
tail -c 11000 "$LOG"
