"""Outputs safe where they are opened (issue 41 item 6): an imported GPU name `=cmd|' /C calc'!A0` reaches no spreadsheet
as a formula, a sweep name's `<script>` no rendered Markdown as HTML, and a name with quotes, braces and a newline stays
one Prometheus label value. A forged bundle (tests/bundle_forge.py) imported with --untrusted through the real CLI, then
each format through the real `results`.
"""

from __future__ import annotations

import csv
import io

import pytest

from bundle_forge import export, records, rename_gpu, seal
from conftest import run_cli

FORMULA = "=cmd|' /C calc'!A0"
SCRIPT = "<script>alert(1)</script>"


@pytest.fixture
def forged_store(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    body = records(export(tmp_path, env))
    gpu = FORMULA + ' "} 1\nevil_metric{a="b'
    rename_gpu(body, gpu)
    for record in body:
        if "sweep" in record:
            record["sweep"]["name"] = SCRIPT
    bundle = seal(body, tmp_path / "forged.gz")
    db = f"sqlite:///{tmp_path / 'here.db'}"
    run_cli("import", str(bundle), "--db", db, "--untrusted", env=env, check=0)
    return db, env, gpu


def _results(db, env, fmt: str, *extra) -> str:
    return run_cli("results", "--db", db, "--sweep", "1", "--format", fmt, *extra, env=env, check=0).stdout


@pytest.mark.parametrize("extra", [(), ("--bench",)])
def test_csv_cells_that_begin_as_a_formula_are_neutralised(forged_store, extra):
    db, env, _ = forged_store
    rows = list(csv.DictReader(io.StringIO(_results(db, env, "csv", *extra))))
    assert rows and all(row["gpu"].startswith("'=cmd|") for row in rows), [row["gpu"] for row in rows][:3]
    starts = ("=", "+", "-", "@", "\t", "\r")
    assert not [value for row in rows for value in row.values() if value and value.startswith(starts)]


def test_markdown_escapes_html_in_the_heading_and_every_cell(forged_store):
    db, env, _ = forged_store
    text = _results(db, env, "md")
    assert "<script>" not in text and "&lt;script&gt;alert(1)&lt;/script&gt;" in text.splitlines()[0]
    assert "\nevil_metric" not in text


def test_prometheus_labels_keep_a_hostile_gpu_name_in_one_label(forged_store):
    from prometheus_client.parser import text_string_to_metric_families

    db, env, gpu = forged_store
    text = _results(db, env, "prometheus")
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert "evil_metric" not in families
    ups = families["gpucompat_cell_up"].samples
    assert ups and {s.labels["gpu"] for s in ups} == {gpu}
    info = families["gpucompat_sweep_info"].samples[0]
    assert info.labels["name"] == SCRIPT
