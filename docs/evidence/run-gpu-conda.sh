#!/usr/bin/env bash
# A conda stack on a GPU: the tests' local channel (tests/conda_channel.py: cuda-version and
# cuda-cudart 12.4/12.6 carrying NVIDIA's libcudart, python linked to this machine's), solved by
# py-rattler into a lock, installed from it and probed, with the local executor and SQLite. Also
# which container runtimes this machine has. .whl/ holds gpucompat's wheel, its dependencies,
# py-rattler and the two nvidia-cuda-runtime-cu12 wheels (no network on the GPU machine).
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
PY=$(command -v python3)
"$PY" -m pip install --no-index --find-links .whl --force-reinstall --no-deps gpucompat > /tmp/pip-install.txt 2>&1  # a warm machine keeps an older build
"$PY" -m pip install --no-index --find-links .whl gpucompat py-rattler >> /tmp/pip-install.txt 2>&1
export PATH="$(dirname "$PY"):$PATH" GPUCOMPAT_DB="sqlite:///$OUT/conda.db" XDG_CACHE_HOME=/tmp/xdg
mkdir -p /tmp/xdg/gpucompat-tests/wheels && cp .whl/nvidia_cuda_runtime_cu12-*.whl /tmp/xdg/gpucompat-tests/wheels/
rm -rf /tmp/channel
"$PY" -c "import sys; sys.path.insert(0, 'tests'); from pathlib import Path; import conda_channel; conda_channel.build_channel(Path('/tmp/channel'))"
cat > /tmp/conda-gpu.toml <<TOML
name = "conda-gpu"
targets = "local"
offline = true

[[stacks]]
framework = "cuda-runtime"
env = "conda"
versions = "latest:2"
variants = ["cuda-version=12.6", "cuda-version=12.4"]
channels = ["file:///tmp/channel"]
python = ["$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"]
TOML
cp /tmp/conda-gpu.toml "$OUT/conda-gpu.toml"
{ echo "== gpucompat sweep /tmp/conda-gpu.toml"; gpucompat sweep /tmp/conda-gpu.toml --workdir /tmp/work; echo "sweep exit: $?"
  gpucompat results; echo "== environment.yml and lock of one cell"; cat /tmp/work/sweep-1/cell-*/environment.yml | head -20; cat /tmp/work/sweep-1/cell-*/conda-lock.txt | head -12
  echo "== container runtimes on this machine"; gpucompat discover --runtimes; for c in podman apptainer singularity docker nvidia-ctk nvidia-container-cli; do echo "$c: $(command -v $c || echo absent)"; done
  ls /etc/cdi /var/run/cdi 2>&1; } > "$OUT/terminal.txt" 2>&1
gpucompat results --format json > "$OUT/results.json"
gpucompat report -o "$OUT/report.html"
cat "$OUT/terminal.txt" | grep -v "━━━" | tail -60
