"""The environment variables that change which CUDA kernels load, how, and on which GPUs: each with
when it matters, what it does in one sentence, and its source. doctor warns of them; the classification
names them where a job failed under one (cuda_start.py), never the stack.
"""

from __future__ import annotations

import glob
import os

GUIDE = "https://docs.nvidia.com/cuda/cuda-programming-guide/05-appendices/environment-variables.html"
LD_SO = "https://man7.org/linux/man-pages/man8/ld.so.8.html"

# The environment variables that change which kernels load, how, and on which GPUs.
# (name, when it warns, what it does: one sentence, source). "when": "1" = set to 1;
# "set" = present, even empty; "value" = set and not empty; "lib-dirs" = an entry holds a libcuda/libcudart;
# "no-gpu" = names no GPU platform; any other text = the value contains it.
LOADING_VARIABLES = (
    ("CUDA_FORCE_PTX_JIT", "1", "the driver ignores the SASS in every binary and JIT-compiles its PTX instead: kernels "
     "shipped without PTX fail to load, and the rest are compiled at start-up", GUIDE + "#cuda-force-ptx-jit"),
    ("CUDA_DISABLE_PTX_JIT", "1", "the driver never JIT-compiles PTX: a binary with no SASS for this GPU fails to load "
     "instead of being compiled for it (no kernel image is available)", GUIDE + "#cuda-disable-ptx-jit"),
    ("CUDA_CACHE_DISABLE", "1", "the JIT cache is off: every process compiles the PTX it runs again, so code that runs by "
     "PTX JIT starts slowly every time", GUIDE + "#cuda-cache-disable"),
    ("CUDA_CACHE_MAXSIZE", "value", "(minor) sets the JIT cache's size in bytes: too small, and kernels compiled from PTX "
     "are compiled again in later processes", GUIDE + "#cuda-cache-maxsize"),
    ("CUDA_MODULE_LOADING", "value", "chooses when kernels load: EAGER loads every kernel of every library when CUDA starts "
     "(slower, more memory), LAZY (the default since CUDA 12.2) only at first use, so a missing kernel image "
     "shows up only then", GUIDE + "#cuda-module-loading"),
    ("CUDA_VISIBLE_DEVICES", "set", "hides GPUs: CUDA sees only the devices listed, in that order; an empty value "
     "hides every GPU and an invalid entry ends the list", GUIDE + "#cuda-visible-devices"),
    ("CUDA_DEVICE_ORDER", "value", "changes how CUDA numbers the GPUs (FASTEST_FIRST by default, PCI_BUS_ID as "
     "nvidia-smi does), so device 0 may be another GPU than you expect", GUIDE + "#cuda-device-order"),
    ("LD_PRELOAD", "value", "these libraries load before all others and can replace any CUDA function (interposers, "
     "profilers, shims), changing what every CUDA call does", LD_SO),
    ("LD_LIBRARY_PATH", "lib-dirs", "the loader searches these directories before a library's RUNPATH and the system's, "
     "so the libcuda/libcudart in them is taken first: a stub or a copy from another CUDA release breaks CUDA", LD_SO),
    ("XLA_FLAGS", "--xla_gpu_cuda_data_dir", "points XLA (JAX, TensorFlow) at another CUDA installation for ptxas and "
     "libdevice, so its kernels are compiled by that toolkit, not the one installed with the framework",
     "https://github.com/jax-ml/jax/issues/4452 (XLA's own message: set XLA_FLAGS=--xla_gpu_cuda_data_dir=/path/to/cuda)"),
    ("TF_CUDA_COMPUTE_CAPABILITIES", "value", "sets the GPU architectures a TensorFlow built from source carries kernels "
     "for; an installed wheel ignores it, and a build without this GPU's fails with no kernel image",
     "https://www.tensorflow.org/install/source#gpu_support"),
    ("TORCH_CUDA_ARCH_LIST", "value", "sets the GPU architectures PyTorch extensions are compiled for (also those built "
     "at import): a list without this GPU's gives 'no kernel image is available' in them",
     "https://pytorch.org/docs/stable/cpp_extension.html"),
    ("JAX_PLATFORMS", "no-gpu", "JAX uses only the platforms listed: without cuda (or gpu) it never uses a GPU",
     "https://docs.jax.dev/en/latest/config_options.html#jax-platforms"),
)


def _cuda_library_dirs(value: str) -> list[str]:
    """The LD_LIBRARY_PATH entries that hold a libcuda or libcudart."""
    found = []
    for entry in value.split(":"):
        names = sorted(os.path.basename(p) for pattern in ("libcuda.so*", "libcudart.so*")
                       for p in glob.glob(os.path.join(entry or ".", pattern)))
        if names:
            found.append(f"{entry or '.'} ({', '.join(names[:4])}{' (a stub)' if 'stub' in entry else ''})")
    return found


def loading_findings(env: dict, here: bool = True) -> list[dict]:
    """Each variable of LOADING_VARIABLES that is set in `env` in a way that matters:
    {variable, value, text, source}. A library path matters by what its directories hold, which can be looked at
    only on the machine whose environment it is: with here=False (a job's recorded environment, judged elsewhere)
    it is left out, its effect judged from the libraries the job recorded."""
    findings = []
    for name, when, text, source in LOADING_VARIABLES:
        if name not in env or (when == "lib-dirs" and not here):
            continue
        value = env[name]
        if when == "1":
            hit = value.strip() == "1"
        elif when == "set":
            hit = True
        elif when == "value":
            hit = bool(value.strip())
        elif when == "lib-dirs":
            dirs = _cuda_library_dirs(value)
            hit, text = bool(dirs), f"{text}: {'; '.join(dirs)}" if dirs else text
        elif when == "no-gpu":
            hit = not any(word in value.lower() for word in ("cuda", "gpu"))
        else:
            hit = when in value
        if hit:
            findings.append({"variable": name, "value": value, "text": text, "source": source})
    return findings


def loading_warnings(env: dict) -> list[str]:
    """One line per variable in `env` that changes how CUDA loads kernels or which GPUs it sees,
    each with why and its source: the findings as text."""
    return [f"{f['variable']}={f['value'][:200]!r}: {f['text']} (source: {f['source']})" for f in loading_findings(env)]
