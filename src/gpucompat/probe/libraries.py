"""The library rungs: after the framework's own elementwise kernel, one small operation in each CUDA
library the framework loads (cuBLAS, cuDNN, cuFFT, cuSOLVER, cuSPARSE, NCCL), one at a time, each
checked against a float64 reference on the CPU.

Each such rung records the library it exercised, as mapped into this process once the operation ran:

    rung["library"] = {"name": "libcufft", "files": [{"path": ".../libcufft.so.12", "version": "12"}]}

and, when the rung failed, what the library's own fat binaries hold (fatbin.py), so that gpucompat
decides from the binary, not from a status string, whether the library has no kernels for this GPU:

    rung["library"]["archs"] = {"sass": ["sm_75", ...], "ptx": ["compute_120"], "ptx_isa": ["8.8"]}

(or "archs_error" where no mapped file could be read). The probe reports; gpucompat decides.
"""

from .fatbin import Archs, PastBound, Truncated, read_file
from .ladder import RungSkipped
from .records import loaded_libraries

# The file-name prefix of each library's shared objects: cuBLAS's kernels are mostly in libcublasLt,
# cuDNN 9's in its sub-libraries (libcudnn_engines_precompiled, libcudnn_cnn, ...).
PREFIXES = {"cublas": ("libcublas",), "cudnn": ("libcudnn",), "cufft": ("libcufft",), "cusolver": ("libcusolver",),
            "cusparse": ("libcusparse",), "nccl": ("libnccl",)}


def mapped(library):
    """The files of `library` mapped into this process now, in map order."""
    prefixes = PREFIXES[library]
    return [{"path": entry["path"], "version": entry.get("version")} for entry in loaded_libraries()
            if entry["name"].startswith(prefixes)]


def archs(files):
    """What the fat binaries of these files hold together; an unreadable file is named, not fatal."""
    total, unread = Archs(), []
    for entry in files:
        try:
            total.merge(read_file(entry["path"]))
        except (OSError, ValueError, Truncated, PastBound) as exc:  # PastBound: far more entries than a real library
            unread.append("%s: %s" % (entry["path"], exc.__class__.__name__))
    found = {"sass": sorted(total.sass), "ptx": sorted(total.ptx), "ptx_isa": sorted(total.ptx_isa), "entries": total.entries}
    if unread:
        found["unread"] = unread
    return found


def uses(library, body):
    """A rung body that names the CUDA library it exercises (see the module's docstring)."""
    def rung_body(rung):
        try:
            body(rung)
        except RungSkipped:
            raise
        except BaseException:
            files = mapped(library)
            rung["library"] = {"name": PREFIXES[library][0], "files": files}
            if files:
                rung["library"]["archs"] = archs(files)
            else:
                rung["library"]["archs_error"] = "no %s file is mapped into this process" % PREFIXES[library][0]
            raise
        rung["library"] = {"name": PREFIXES[library][0], "files": mapped(library)}
    return rung_body


def conv_reference(np, x, w):
    """A 'valid' 2-D convolution (cross-correlation, as the frameworks compute it) in float64: NCHW x OIHW."""
    n, c, h, width = x.shape
    o, _, kh, kw = w.shape
    out = np.zeros((n, o, h - kh + 1, width - kw + 1))
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", x[:, :, i:i + h - kh + 1, j:j + width - kw + 1], w[:, :, i, j])
    return out


def conv_inputs(np):
    x = np.random.standard_normal((2, 4, 12, 12)).astype("float32")
    w = np.random.standard_normal((8, 4, 3, 3)).astype("float32")
    return x, w, conv_reference(np, x.astype("float64"), w.astype("float64"))


def solve_inputs(np, n=64):
    """A well-conditioned system: a random matrix plus n on its diagonal."""
    a = (np.random.standard_normal((n, n)) + n * np.eye(n)).astype("float32")
    b = np.random.standard_normal((n, 4)).astype("float32")
    return a, b, np.linalg.solve(a.astype("float64"), b.astype("float64"))


def sparse_inputs(np, n=128, density=0.05):
    """A sparse matrix as (rows, cols, values) and a dense one, with their float64 product."""
    mask = np.random.random_sample((n, n)) < density
    rows, cols = np.nonzero(mask)
    values = np.random.standard_normal(len(rows)).astype("float32")
    dense = np.random.standard_normal((n, 8)).astype("float32")
    full = np.zeros((n, n))
    full[rows, cols] = values
    return rows, cols, values, dense, full @ dense.astype("float64")


def fft_inputs(np, n=1024):
    signal = (np.random.standard_normal(n) + 1j * np.random.standard_normal(n)).astype("complex64")
    return signal, np.fft.fft(signal.astype("complex128"))
