"""A release's real dependencies, read from its own metadata (issue 40 section 4): jax is judged by the jaxlib and
CUDA plugin its pins resolve to (jax_pins.csv, tools/build_jax_pins.py), and a jax version PyPI never listed is
"no such release", as for torch."""

from __future__ import annotations

import csv

import pytest

from conftest import REPO
from gpucompat.answers.explain import explain
from gpucompat.errors import UserError
from gpucompat.knowledge import pins

JAX_PINS = REPO / "src" / "gpucompat" / "knowledge" / "data" / "jax_pins.csv"


def test_the_jax_pins_table_is_each_wheels_metadata_with_its_source():
    rows = list(csv.DictReader(JAX_PINS.open(newline="", encoding="utf-8")))
    assert len({r["release"] for r in rows}) >= 100  # every jax release PyPI lists from 0.2.11
    assert all(r["source"] for r in rows)
    read = [r for r in rows if "Requires-Dist of jax-" in r["source"]]
    assert all(r["source"].startswith(f"Requires-Dist of jax-{r['release']}-py3-none-any.whl METADATA") for r in read)
    # jax 0.4.37 has no jaxlib of its number: its metadata pins 0.4.36, and the plugin range resolves there too
    cuda12 = pins.jax_pins("0.4.37", "cuda12")
    assert (cuda12.jaxlib, cuda12.jaxlib_resolves, cuda12.plugin_resolves) == ("==0.4.36", "0.4.36", "0.4.36")
    assert cuda12.moved and cuda12.judged_by == "0.4.36"
    assert not pins.jax_pins("0.4.36", "cuda12").moved
    assert pins.jax_pins("0.4.37", "cuda13") is None and "cuda13" not in pins.jax_extras("0.4.37")


def test_a_jax_version_pypi_never_listed_is_no_such_release():
    with pytest.raises(UserError, match=r"jax 0\.4\.99: no such release — PyPI's jax releases as read on [0-9-]+ go up to 0\.12\.0\.1\.$"):
        explain("jax[cuda12]==0.4.99", "NVIDIA H100 80GB HBM3", None, "550.54.15")
    with pytest.raises(UserError, match=r"jax 0\.13\.0: no such release .*gpucompat knowledge update"):  # newer: maybe since
        explain("jax==0.13.0", "NVIDIA H100 80GB HBM3", None, "550.54.15")
    explain("jax[cuda12]==0.4.37", "NVIDIA H100 80GB HBM3", None, "550.54.15")  # exists, though no jaxlib 0.4.37 does
