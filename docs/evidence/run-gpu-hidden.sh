#!/usr/bin/env bash
# Third GPU run: what gpucompat observes when the GPU is there but hidden, and how doctor
# reads CUDA_VISIBLE_DEVICES in its forms on a real machine. Same set-up as run-gpu-node.sh.
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1
"$PY" -m pip install --no-index --find-links .whl gpucompat >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/hidden.db"

CUDA_VISIBLE_DEVICES= gpucompat sweep examples/plans/gpu-node.toml --wheelhouse .wheelhouse > /tmp/sweep-hidden.txt 2>&1
echo "sweep exit: $?" >> /tmp/sweep-hidden.txt
gpucompat results --format json --cells > "$OUT/hidden.json"

uuid=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | head -n 1)
for value in UNSET "0" "${uuid:0:12}" "7" "" "0,7"; do
  if [ "$value" = UNSET ]; then
    gpucompat doctor --json > "/tmp/doctor-unset.json" 2>&1
  else
    CUDA_VISIBLE_DEVICES="$value" gpucompat doctor --json > "/tmp/doctor-cvd-${value//[^A-Za-z0-9]/_}.json" 2>&1
  fi
done
"$PY" - <<'PY' > "$OUT/doctor-visible-devices.txt"
import glob, json
for path in sorted(glob.glob("/tmp/doctor-*.json")):
    data = json.load(open(path))
    seen = data["cuda_visible_devices"]
    print(f"{path.split('/')[-1]:<36} CUDA_VISIBLE_DEVICES={seen['value']!r:<18} form={seen['form']:<8} visible={seen['visible']} -> {data['summary']}")
    for v in data["verdicts"]:
        print(f"    {v['framework']:<13} {v['verdict']:<9} {v['code'] or ''}")
PY
tar -czf "$OUT/extra.tar.gz" -C /tmp sweep-hidden.txt $(cd /tmp && ls doctor-*.json)
cat "$OUT/doctor-visible-devices.txt"; tail -22 /tmp/sweep-hidden.txt
