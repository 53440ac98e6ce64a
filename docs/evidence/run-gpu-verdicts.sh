#!/usr/bin/env bash
# Evidence for the probe's compute rungs, loaded libraries and CUDA environment (issue 9, items 3-5).
# Run on a GPU machine from the repository root, with no network (the workplace's device tool):
#
#     bash docs/evidence/run-gpu-verdicts.sh          # results in $OUT (default ./verdicts-out)
#
# It needs the image's python3 (PyTorch 2.11, JAX 0.11 and CuPy 14 installed in it, driver 580) and
# carries along, as ignored folders named in the tool's `carry`:
#
#   wheelhouse/  nvidia-cuda-runtime 13.0 and one or more nvidia-cuda-nvrtc 13.x wheels. Each nvrtc
#                wheel becomes a venv "runtime 13.0 + that NVRTC" in which the cuda-runtime probe runs.
#                Sizes: nvidia_cuda_runtime-13.0.96 2.1 MiB, nvidia_cuda_nvrtc-13.5.37 55.5 MiB,
#                nvidia_cuda_nvrtc-13.0.88 86.0 MiB: over the 64 MiB that may travel, so it cannot
#                come along. The "runtime 13.0 + NVRTC 13.0" venv is therefore built from the
#                nvidia-cuda-nvrtc the image's python already has, when that is a 13.0.x (checked
#                and logged; torch 2.11+cu130 brings one). Fetch, where there is network:
#                  pip download --no-deps --only-binary=:all: --python-version 3.12 \
#                    --platform manylinux2014_x86_64 -d wheelhouse \
#                    nvidia-cuda-runtime==13.0.96 nvidia-cuda-nvrtc==13.5.37
#   .whl/        (only if the image's python lacks them) wheels of gpucompat's own dependencies for
#                `gpucompat doctor`: typer, rich, packaging, nvidia-ml-py, jinja2 (the image has all
#                five); installed with pip --no-index --no-deps, as run-gpu-node.sh did.
#
# The probe itself needs nothing but the standard library: it is built from src/ into probe.pyz.
# What comes back in $OUT (the tool returns at most 8 files):
#   verdicts.txt    one line per stage and rung of every run, then `gpucompat doctor`
#   verdicts.json   {run name: the probe's result.json, ..., "doctor": doctor --json}
#   extra.tar.gz    each result.json on its own, pip and venv logs, nvidia-smi, pip show of the wheels
set -uo pipefail
export PYTHONUNBUFFERED=1 COLUMNS=200
OUT=${OUT:-$PWD/verdicts-out}
WHEELS=${WHEELS:-wheelhouse}
PY=${PY:-$(command -v python3)}
WORK=/tmp/verdicts
PROBE=$(PYTHONPATH=src "$PY" -m gpucompat.probe_build)  # probe.pyz, built with the standard library alone
TIMEOUTS=import=300,device=120,compute=300
rm -rf "$WORK" && mkdir -p "$WORK/results" "$OUT"
LOG=$WORK/log.txt
note() { echo "== $*" | tee -a "$LOG"; }

{ nvidia-smi; nvidia-smi --query-gpu=index,name,compute_cap,driver_version --format=csv,noheader; } > "$WORK/nvidia-smi.txt" 2>&1
"$PY" -m pip show nvidia-cuda-runtime nvidia-cuda-nvrtc torch jax jaxlib cupy-cuda13x > "$WORK/pip-show.txt" 2>&1

# gpucompat's own dependencies, for doctor only, if the image lacks one
if ! "$PY" -c "import typer, rich, packaging, pynvml, jinja2" 2>/dev/null; then
  if ls .whl/*.whl > /dev/null 2>&1; then
    note "installing gpucompat's dependencies from .whl/"
    "$PY" -m pip install --no-index --no-deps $(ls .whl/*.whl | grep -v '/gpucompat-') >> "$WORK/pip-install.txt" 2>&1
  else
    note "gpucompat's dependencies are missing and no .whl/ was carried: doctor will not run"
  fi
fi

# 1. the frameworks the image has, in its own python
for framework in torch jax cupy; do
  note "probe $framework in $PY"
  "$PY" "$PROBE" --framework "$framework" --result "$WORK/results/$framework.json" --stage-timeouts "$TIMEOUTS" \
    > "$WORK/$framework.log" 2>&1
  echo "exit $?" >> "$WORK/$framework.log"
done
note "probe cuda-runtime in $PY (the nvidia-cuda-runtime and -nvrtc the frameworks brought)"
"$PY" "$PROBE" --framework cuda-runtime --result "$WORK/results/cuda-runtime-system.json" --stage-timeouts "$TIMEOUTS" \
  > "$WORK/cuda-runtime-system.log" 2>&1

# 2. cuda-runtime in venvs: runtime 13.0 + each NVRTC. A venv with no pip (the image's python may
#    lack ensurepip); the wheels go into its site-packages with the image's pip, offline.
make_venv() {  # name -> prints the venv's site-packages
  local venv=$WORK/venv-$1
  "$PY" -m venv --without-pip "$venv" >> "$LOG" 2>&1 || return 1
  "$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])"
}
probe_venv() {  # name
  note "probe cuda-runtime in venv $1"
  "$WORK/venv-$1/bin/python" "$PROBE" --framework cuda-runtime --result "$WORK/results/cuda-runtime-$1.json" \
    --stage-timeouts "$TIMEOUTS" > "$WORK/cuda-runtime-$1.log" 2>&1
}
runtime=$(ls "$WHEELS"/nvidia_cuda_runtime-13.0.*.whl 2>/dev/null | tail -1)
[ -n "$runtime" ] || note "no nvidia_cuda_runtime-13.0 wheel in $WHEELS/: the venvs take the image's runtime files instead"
for nvrtc in "$WHEELS"/nvidia_cuda_nvrtc-13.*.whl; do
  [ -e "$nvrtc" ] || continue
  name=runtime13.0-nvrtc$(basename "$nvrtc" | cut -d- -f2)
  site=$(make_venv "$name") || { note "venv $name could not be made"; continue; }
  "$PY" -m pip install --no-index --no-deps --no-compile --upgrade --target "$site" ${runtime:+"$runtime"} "$nvrtc" \
    >> "$WORK/pip-install.txt" 2>&1 || { note "installing into $name failed"; continue; }
  probe_venv "$name"
done

# The image's own NVRTC, if it is 13.0.x (no 13.0 nvrtc wheel can travel): its files, with the 13.0
# runtime wheel (or the image's runtime files), copied into a venv of their own.
installed=$("$PY" -c "from importlib.metadata import version; print(version('nvidia-cuda-nvrtc'))" 2>/dev/null)
if [[ "$installed" == 13.0.* ]] && ! ls "$WHEELS"/nvidia_cuda_nvrtc-13.0.*.whl > /dev/null 2>&1; then
  name=runtime13.0-nvrtc$installed-installed
  libs=$("$PY" -c "import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], 'cu13', 'lib'))")
  if site=$(make_venv "$name"); then
    if [ -n "$runtime" ]; then  # the wheel first: pip --target will not merge into an existing nvidia/
      "$PY" -m pip install --no-index --no-deps --no-compile --target "$site" "$runtime" >> "$WORK/pip-install.txt" 2>&1
    else
      mkdir -p "$site/nvidia/cu13/lib" && cp -a "$libs"/libcudart.so* "$site/nvidia/cu13/lib/"
    fi
    mkdir -p "$site/nvidia/cu13/lib" && cp -a "$libs"/libnvrtc*.so* "$site/nvidia/cu13/lib/"
    ls -la "$site/nvidia/cu13/lib" >> "$LOG"
    probe_venv "$name"
  fi
else
  note "the image's nvidia-cuda-nvrtc is '${installed:-not installed}': no venv made from it"
fi

# 3. doctor, with the source tree first on the path
if PYTHONPATH=src "$PY" -c "import gpucompat.cli" 2>/dev/null; then
  PYTHONPATH=src "$PY" -m gpucompat doctor --json > "$WORK/results/doctor.json" 2> "$WORK/doctor.err"
  PYTHONPATH=src "$PY" -m gpucompat doctor > "$WORK/doctor.txt" 2>&1
fi

# 4. gpucompat itself, stored and exported: the plan's env-current stacks (the image's frameworks, and
#    the CUDA runtime and NVRTC they brought), then cuda-runtime again with runtime 13.0 + NVRTC 13.5
#    first on the path. Needs SQLAlchemy (and greenlet) from $WHEELS; gpucompat runs from src/.
SITE=$WORK/site
"$PY" -m pip install --no-index --no-deps --no-compile --target "$SITE" $(ls "$WHEELS"/sqlalchemy-*.whl "$WHEELS"/greenlet-*.whl 2>/dev/null) \
  >> "$WORK/pip-install.txt" 2>&1  # SQLAlchemy's pure-Python wheel is enough (greenlet only serves asyncio)
export GPUCOMPAT_DB="sqlite:///$WORK/verdicts.db" GPUCOMPAT_CACHE="$WORK/cache" XDG_DATA_HOME="$WORK/data"
gpucompat() { PYTHONPATH="${FIRST:+$FIRST:}src:$SITE" "$PY" -m gpucompat "$@"; }
note "gpucompat sweep docs/evidence/verdicts-plan.toml"
gpucompat sweep docs/evidence/verdicts-plan.toml > "$WORK/sweep-terminal.txt" 2>&1; echo "sweep exit: $?" >> "$WORK/sweep-terminal.txt"
nvrtc135=$(ls "$WHEELS"/nvidia_cuda_nvrtc-13.5.*.whl 2>/dev/null | tail -1)
if [ -n "$nvrtc135" ] && [ -n "$runtime" ]; then
  FIRST=$WORK/cuda-13.0-nvrtc-13.5
  "$PY" -m pip install --no-index --no-deps --no-compile --target "$FIRST" "$runtime" "$nvrtc135" >> "$WORK/pip-install.txt" 2>&1
  note "gpucompat check cuda-runtime --env current, with runtime 13.0 + NVRTC 13.5 first on the path"
  FIRST=$FIRST gpucompat check cuda-runtime --env current --json > "$OUT/check-nvrtc-13.5.json" 2> "$WORK/check-nvrtc-13.5.err"
  echo "check exit: $?" >> "$WORK/check-nvrtc-13.5.err"
fi
gpucompat results --sweep 1 --format json > "$OUT/results.json" 2>> "$LOG"
gpucompat results --sweep 1 --cells > "$WORK/results-cells.txt" 2>> "$LOG"
gpucompat results --sweep 1 --format md > "$WORK/results.md" 2>> "$LOG"
gpucompat report --sweep 1 -o "$OUT/report.html" >> "$LOG" 2>&1
"$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('PRAGMA journal_mode=DELETE'); c.close()" "$WORK/verdicts.db" \
  && cp "$WORK/verdicts.db" "$OUT/verdicts.db"  # one file, no -wal beside it

# 5. one summary line per stage and rung, one JSON with everything
"$PY" - "$WORK/results" "$OUT/verdicts.json" > "$OUT/verdicts.txt" <<'EOF'
import json, os, sys
folder, combined = sys.argv[1], {}
for name in sorted(os.listdir(folder)):
    with open(os.path.join(folder, name)) as handle:
        try:
            combined[name[:-5]] = json.load(handle)
        except ValueError as exc:
            combined[name[:-5]] = {"unreadable": str(exc)}
json.dump(combined, open(sys.argv[2], "w"), indent=1, default=str)
for name, result in combined.items():
    if name == "doctor" or "stages" not in result:
        continue
    print("%s  (python %s, finished=%s)" % (name, result.get("system", {}).get("python"), result.get("finished")))
    for stage, record in result["stages"].items():
        why = record.get("reason") or (record.get("error") or {}).get("message", "")
        print("  %-8s %-5s %s" % (stage, "ok" if record.get("ok") else "FAIL", why.splitlines()[0][:160] if why else ""))
        facts = record.get("facts", {})
        for key in ("library", "cuda_runtime", "nvrtc_library", "nvrtc_version", "driver_cuda_version", "ptx_isa", "failed_rung"):
            if facts.get(key):
                print("      %s: %s" % (key, facts[key]))
        for rung in facts.get("rungs", []):
            state = "skipped" if rung.get("skipped") else ("ok" if rung.get("ok") else "FAIL")
            detail = rung.get("found") or rung.get("reason") or (rung.get("error") or {}).get("message", "")
            extra = " ".join("%s=%s" % (k, rung[k]) for k in ("target", "ptx_isa", "loaded", "ran", "tolerated") if k in rung)
            print("      rung %-11s %-7s %s %s" % (rung["name"], state, (detail or "").splitlines()[0][:140] if detail else "", extra))
        for warning in record.get("warnings", []):
            print("      warning: %s" % warning[:400])
    for lib in result.get("loaded_libraries", []):
        print("    mapped %-26s %-12s %s" % (lib["name"], lib["version"] or "", lib["path"]))
    print("    cuda_env: %s" % json.dumps(result.get("system", {}).get("cuda_env", {})))
EOF
{ echo; echo "== gpucompat sweep"; cat "$WORK/sweep-terminal.txt" 2>/dev/null; echo; echo "== gpucompat results --cells"; cat "$WORK/results-cells.txt" 2>/dev/null
  echo; echo "== check with NVRTC 13.5 (stderr)"; cat "$WORK/check-nvrtc-13.5.err" 2>/dev/null
  echo; echo "== gpucompat doctor"; cat "$WORK/doctor.txt" 2>/dev/null || echo "(not run)"; echo; echo "== log"; cat "$LOG"; } >> "$OUT/verdicts.txt"
tar -czf "$OUT/extra.tar.gz" -C "$WORK" --exclude='venv-*' --exclude=site --exclude=cache --exclude='cuda-13.0-*' .
cat "$OUT/verdicts.txt"
