"""What a release's own metadata pins: the package where a framework's GPU code really lives.

A jax release is pure Python: its CUDA builds are jaxlib and the jax-cudaNN-plugin, which each release's Requires-Dist
pins per extra by a range (knowledge/data/jax_pins.csv, read from each jax wheel's METADATA by tools/build_jax_pins.py).
jax 0.4.37[cuda12] pins jaxlib==0.4.36: there is no jaxlib 0.4.37, so the release is judged by the jaxlib and plugin
its pins resolve to (the newest PyPI release inside the range, what uv picks), never by a same-number guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from packaging.version import Version

from . import tables

JAX_PINS = "knowledge/data/jax_pins.csv"


@dataclass(frozen=True)
class JaxPins:
    release: str  # the jax release asked for
    extra: str  # the extra whose pins these are ('' for plain jax)
    jaxlib: str  # its jaxlib range as written ('==0.4.36')
    jaxlib_resolves: str  # the jaxlib that range resolves to on PyPI ('0.4.36'; '0.4.16+cuda11.cudnn86' from Google's page)
    plugin: str  # 'jax-cuda12-plugin<=0.4.37,>=0.4.36', or ''
    plugin_resolves: str
    source: str

    @property
    def judged_by(self) -> str | None:
        """The release number whose builds decide (the plugin's where there is one: it carries the CUDA kernels)."""
        chosen = self.plugin_resolves or self.jaxlib_resolves
        return chosen.split("+")[0] or None

    @property
    def moved(self) -> bool:
        """Whether the pins lead away from the release's own number."""
        judged = self.judged_by
        return judged is not None and tables.version(judged) != tables.version(self.release.split("+")[0])

    def facts(self) -> dict:
        """For the resolved facts: the jaxlib and plugin the pins resolve to (a rule reads `jaxlib` for PyPI's wheel list)."""
        return {"jaxlib": self.jaxlib_resolves.split("+")[0] or None, "jax_plugin": self.plugin_resolves or None}

    def sentence(self) -> str:
        what = f"jax[{self.extra}] {self.release}" if self.extra else f"jax {self.release}"
        said = f"{what} requires jaxlib{self.jaxlib} (resolves to jaxlib {self.jaxlib_resolves})"
        if self.plugin:
            said += f" and {self.plugin} (resolves to {self.plugin_resolves or 'no release on PyPI'})"
        return said


@lru_cache(maxsize=1)
def _jax_rows() -> dict[tuple[Version, str], dict]:
    found = {}
    for row in tables.table("jax_pins"):
        want = tables.version(row["release"])
        if want is not None:
            found.setdefault((want, row["extra"]), row)
    return found


def jax_releases() -> frozenset:
    """Every jax release PyPI listed when the table was built (yanked ones too: pip installs them when pinned)."""
    return frozenset(release for release, _extra in _jax_rows())


def jax_pins(release: str, variant: str) -> JaxPins | None:
    """The pins of jax `release` with the extra `variant` (cuda12, cuda12_pip, ...); None where its wheel's metadata
    was not read (a source archive only, or a release newer than the table) or the extra does not exist."""
    want = tables.version(release.split("+")[0])
    row = _jax_rows().get((want, variant.replace("-", "_"))) if want is not None and variant != "cpu" else None
    if row is None or not (row["jaxlib_resolves"] or row["plugin_resolves"]):
        return None
    return JaxPins(row["release"], row["extra"], row["jaxlib"], row["jaxlib_resolves"], row["plugin"], row["plugin_resolves"],
                   f"{row['source']} ; {JAX_PINS}")


def jax_extras(release: str) -> tuple[list[str], str] | None:
    """(the CUDA extras the release's metadata declares, where that was read); None where its metadata was not read."""
    want = tables.version(release.split("+")[0])
    rows = _jax_rows()
    base = rows.get((want, "")) if want is not None else None
    if base is None or "Requires-Dist" not in base["source"]:
        return None
    return sorted(extra for (release_, extra) in rows if release_ == want and extra), f"{base['source']} ; {JAX_PINS}"


TORCH_TRITON = "knowledge/data/torch_triton_pins.csv"
# torch's inductor refuses a GPU older than 7.0 for triton (torch/_inductor/scheduler.py create_backend, later exc.py GPUTooOldForTriton)
TRITON_TOO_OLD = ("https://github.com/karpathy/nanoGPT/issues/157 (GeForce GTX 1080: 'Found NVIDIA GeForce GTX 1080 which is too old "
                  "to be supported by the triton GPU compiler, which is used as the backend. Triton only supports devices of CUDA "
                  "Capability >= 7.0'; compile = False runs) ; https://github.com/MIC-DKFZ/nnUNet/issues/2188 (GTX 1080 Ti, the same; "
                  "training runs with torch.compile off)")


def torch_triton(release: str) -> dict | None:
    """The triton PyPI's Linux x86_64 torch wheel of this release pins (torch.compile's GPU kernels), or None."""
    want = tables.version(release.split("+")[0])
    return next((r for r in tables.table("torch_triton_pins") if want is not None and tables.version(r["release"]) == want and r["triton"]),
                None)


TENSORFLOW_CUDA = "knowledge/data/tensorflow_cuda_pins.csv"


def tensorflow_cuda(release: str) -> list[dict]:
    """The nvidia-* wheels tensorflow[and-cuda] pins: the release's own rows, else its series' newest release's (a
    series shares its pins: 2.16.1 to 2.17.1 pin the same CUDA 12.3 wheels); none before 2.14."""
    rows = tables.table("tensorflow_cuda_pins")
    want = tables.version(release.split("+")[0])
    if want is None:
        return []
    own = [r for r in rows if tables.version(r["release"]) == want]
    if own:
        return own
    series = [r for r in rows if tables.minor_series(r["release"]) == tables.minor_series(release)]
    newest = max((tables.version(r["release"]) for r in series), default=None)
    return [r for r in series if tables.version(r["release"]) == newest]
