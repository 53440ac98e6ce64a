#!/usr/bin/env bash
# Verdicts on a real, shared GPU (issue 22): the exact command run on the GPU machine (the workplace's
# device tool, repository root, no internet). .whl/ holds gpucompat's wheel and the dependencies the
# image lacks (sqlalchemy, greenlet, typer<0.29, uv). Results land in $OUT; nothing changes the card's
# settings (no compute-mode, clock, MIG or reset command): faults that cannot be caused are tested
# from records in tests/data/gpu_state/.
#
#   1. clean    the GPU to itself: torch, JAX and CuPy through every library rung, and doctor
#   2. plain    docs/evidence/library_ops_plain.py, the same library calls written apart from gpucompat
#   3. shared   another process computing on the GPU all the while (time-slicing): PASS, the other shown
#   4. busy     another process holding all but ~300 MiB of the GPU's memory: UNTESTED gpu-busy
#   5. hidden   CUDA_VISIBLE_DEVICES= : NO_DEVICE
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=160
PY=$(command -v python3)
# --force-reinstall of gpucompat alone: a warm machine may hold the wheel of an earlier call
"$PY" -m pip install --no-index --find-links .whl gpucompat > /tmp/pip-install.txt 2>&1 || { cat /tmp/pip-install.txt; exit 1; }
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/gpu-state.db"
LOG=/tmp/gpu-state.txt
rm -f "$LOG" /tmp/results-*.json /tmp/doctor-*.json /tmp/plain-*
note() { echo "== $*" | tee -a "$LOG"; }
{ nvidia-smi; nvidia-smi --query-gpu=index,uuid,name,compute_cap,memory.total,driver_version,compute_mode --format=csv,noheader; } > /tmp/nvidia-smi.txt 2>&1
cat /tmp/nvidia-smi.txt >> "$LOG"

check() {  # check NAME: torch, JAX and CuPy in the image's interpreter, one sweep
  note "check ($1)"
  gpucompat check torch jax cupy --env current --wide >> "$LOG" 2>&1
  echo "exit $?" >> "$LOG"
  gpucompat results --format json > "/tmp/results-$1.json"
  gpucompat doctor --json > "/tmp/doctor-$1.json" 2>&1
  "$PY" - "$1" >> "$LOG" <<'PY'
import json, sys
name = sys.argv[1]
data = json.load(open(f"/tmp/results-{name}.json"))
for row in data["valid"] + data["invalid"] + data["untested"]:
    print(f"   {row['framework']:<6} {row['code']:<10} {row.get('cause') or '':<9} {row['reason'][:230]}")
    for lib in row.get("libraries") or []:
        print(f"      rung {lib['rung']:<9} {lib['name']:<12} ok={lib['ok']} {lib['duration_s']} s  {[f['path'].rsplit('/', 1)[-1] for f in lib['files']][:3]}")
    if row.get("gpu_note"):
        print(f"      GPU: {row['gpu_note'][:300]}")
doctor = json.load(open(f"/tmp/doctor-{name}.json"))
state = doctor.get("gpu_state") or {}
print(f"   doctor: {doctor['summary'][:300]}")
print(f"   doctor gpu_state: testable={state.get('testable')} why={state.get('why')} note={state.get('note')}")
PY
}

# 1. clean
check clean

# 2. the plain loop, apart from gpucompat, in the same job
note "plain library calls (library_ops_plain.py)"
for fw in torch jax cupy; do
  "$PY" docs/evidence/library_ops_plain.py "$fw" > "/tmp/plain-$fw.json" 2>"/tmp/plain-$fw.err"; echo "$fw exit $?" >> "$LOG"
  cat "/tmp/plain-$fw.json" >> "$LOG"
done

# 3. shared: another process multiplies 4096x4096 matrices without pause
cat > /tmp/compute_loop.py <<'PY'
import sys, time, torch
a = torch.randn(4096, 4096, device="cuda")
open(sys.argv[1], "w").write("ready")
end = time.time() + 600
while time.time() < end:
    a = (a @ a).clamp_(-1, 1)
PY
rm -f /tmp/compute.ready; "$PY" /tmp/compute_loop.py /tmp/compute.ready > /tmp/compute.log 2>&1 & computer=$!
for _ in $(seq 60); do [ -f /tmp/compute.ready ] && break; sleep 1; done
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$LOG" 2>&1
check shared
kill $computer; wait $computer 2>/dev/null

# 4. busy: another process holds all but ~300 MiB of the GPU's memory
cat > /tmp/hog.py <<'PY'
import sys, time, torch
free, total = torch.cuda.mem_get_info()
held = torch.empty(free - (300 << 20), dtype=torch.uint8, device="cuda")
free_after, _ = torch.cuda.mem_get_info()
open(sys.argv[1], "w").write("holding %d MiB of %d; %d MiB free\n" % (held.numel() >> 20, total >> 20, free_after >> 20))
time.sleep(900)
PY
rm -f /tmp/hog.ready; "$PY" /tmp/hog.py /tmp/hog.ready > /tmp/hog.log 2>&1 & hog=$!
for _ in $(seq 60); do [ -f /tmp/hog.ready ] && break; sleep 1; done
cat /tmp/hog.ready /tmp/hog.log >> "$LOG" 2>&1
nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv >> "$LOG" 2>&1
check busy
gpucompat report -o "$OUT/report-busy.html" >> "$LOG" 2>&1
gpucompat results --cells --wide >> "$LOG" 2>&1
kill $hog; wait $hog 2>/dev/null

# 5. hidden
note "check (hidden: CUDA_VISIBLE_DEVICES=)"
CUDA_VISIBLE_DEVICES= gpucompat check torch cupy --env current --wide >> "$LOG" 2>&1; echo "exit $?" >> "$LOG"
CUDA_VISIBLE_DEVICES= gpucompat results --format json > /tmp/results-hidden.json

gpucompat results --list >> "$LOG" 2>&1
"$PY" - <<'PY' > "$OUT/results.json"
import glob, json
print(json.dumps({path.split("results-")[1][:-5]: json.load(open(path)) for path in sorted(glob.glob("/tmp/results-*.json"))}, indent=1))
PY
cp "$LOG" "$OUT/gpu-state.txt"
tar -czf "$OUT/extra.tar.gz" -C /tmp $(cd /tmp && ls doctor-*.json plain-*.json plain-*.err nvidia-smi.txt pip-install.txt hog.log compute.log 2>/dev/null)
cat "$LOG" | tail -c 11000
