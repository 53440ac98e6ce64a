"""Imported data is plausible or refused (issue 41 item 4). Each forgery is built from a real store's bundle
(tests/bundle_forge.py), sealed again, and imported through the real CLI: one sentence, exit 2, the store as it was
(not even created). Then explain and advise name the site an imported observation came from.
"""

from __future__ import annotations

import json
import sqlite3

import pytest

from bundle_forge import export, records, rename_gpu, seal
from conftest import run_cli


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    return env, records(export(tmp_path, env))


def _first(body: list[dict], kind: str, where=lambda r: True) -> dict:
    return next(r[kind] for r in body if kind in r and where(r[kind]))


def _pass(cell: dict) -> bool:
    return (cell.get("result") or {}).get("code") == "PASS"


def _stack_framework(body, framework):
    _first(body, "stack")["framework"] = framework


def _stack_version(body, version):
    _first(body, "stack", lambda s: s["version"] != "installed")["version"] = version


def _pass_without_version(body, _):
    facts = _first(body, "cell", _pass)["result"]["probe"]["stages"]["import"]["facts"]
    facts.pop("version"), facts.pop("cuda_runtime", None)


def _pass_with_bad_version(body, _):
    _first(body, "cell", _pass)["result"]["probe"]["stages"]["import"]["facts"]["version"] = "; rm -rf /"


def _bad_code(body, _):
    _first(body, "cell", _pass)["result"]["code"] = "TOTALLY_FINE"


def _gpu_disagrees(body, _):
    rename_gpu(body, "NVIDIA B200", probe_too=False)


def _cell_twice(body, _):
    at = next(i for i, r in enumerate(body) if "cell" in r)
    body.insert(at + 1, json.loads(json.dumps(body[at])))


@pytest.mark.parametrize("forge, said", [
    (lambda b: _stack_framework(b, "evilflow"), "names a framework gpucompat does not know, 'evilflow', in sweep 1 of the bundle"),
    (lambda b: _stack_version(b, "latest and greatest"), "the version 'latest and greatest' in sweep 1 of the bundle, which is not a version"),
    (lambda b: _pass_without_version(b, None), "holds a PASS of torch in sweep 1 of the bundle whose probe recorded no installed version"),
    (lambda b: _pass_with_bad_version(b, None), "whose probe recorded no installed version (it says '; rm -rf /')"),
    (lambda b: _bad_code(b, None), "holds a verdict gpucompat does not have, 'TOTALLY_FINE'"),
    (lambda b: _gpu_disagrees(b, None), "names a GPU class 'NVIDIA B200' in sweep 1 of the bundle that its own probe contradicts: the probe saw "
                                        "'NVIDIA H100 80GB HBM3'"),
    (lambda b: _cell_twice(b, None), "holds one cell twice in sweep 1 of the bundle: stack '1' on GPU class '1'"),
    (lambda b: _first(b, "sweep").update(name="x\ud800y"), "holds text that is not Unicode in line 2 (half a UTF-16 pair"),
], ids=["framework", "stack version", "pass without version", "pass with a non-version", "code", "gpu name", "cell twice", "lone surrogate"])
def test_an_implausible_bundle_is_one_sentence_and_stores_nothing(tmp_path, lab, forge, said):
    env, body = lab
    forge(body)
    bundle = seal(body, tmp_path / "forged.gz")
    into = tmp_path / "here.db"
    proc = run_cli("import", str(bundle), "--db", f"sqlite:///{into}", "--untrusted", env=env)
    text = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert text.startswith("error: ") and text.endswith("nothing was imported.") and "Traceback" not in text and "internal error" not in text
    assert said in text, text
    assert not into.exists()
    # into a store that holds something: left exactly as it was
    genuine = seal(records(tmp_path / "genuine.gz"), tmp_path / "resealed.gz")
    run_cli("import", str(genuine), "--db", f"sqlite:///{into}", "--untrusted", env=env, check=0)
    with sqlite3.connect(into) as conn:
        before = list(conn.iterdump())
    assert run_cli("import", str(bundle), "--db", f"sqlite:///{into}", "--untrusted", env=env).returncode == 2
    with sqlite3.connect(into) as conn:
        assert list(conn.iterdump()) == before


def test_a_consistent_gpu_name_and_a_mig_slice_are_plausible(tmp_path, lab):
    env, body = lab
    rename_gpu(body, "NVIDIA H100 80GB HBM3", probe_too=False)
    for record in body:  # the class named shorter than the card the probe saw: one holds the other
        if "target" in record:
            record["target"]["name"] = "nvidia  H100"
    bundle = seal(body, tmp_path / "short.gz")
    run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", "--untrusted", env=env, check=0)


def test_explain_and_advise_name_the_site_an_imported_observation_came_from(tmp_path, lab):
    env, body = lab
    bundle = seal(body, tmp_path / "siteb.gz")
    for record in body:
        if "sweep" in record:
            record["sweep"]["site"] = "siteb"
    record = body[0]["bundle"]
    record["site"] = "siteb"
    bundle = seal(body, tmp_path / "siteb.gz")
    db = f"sqlite:///{tmp_path / 'here.db'}"
    run_cli("import", str(bundle), "--db", db, "--untrusted", env=env, check=0)
    answer = json.loads(run_cli("explain", "torch==2.11.0+cu130", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python",
                                "3.12", "--db", db, "--json", env=env, check=0).stdout)
    assert answer["source"] == "observed", answer["decided_by"]
    assert answer["decided_by"].startswith("observed at siteb: torch 2.11.0+cu130"), answer["decided_by"]
    assert "(imported from siteb) on " in answer["decided_by"]
    text = run_cli("advise", "torch", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python", "3.12", "--db", db,
                   env={**env, "COLUMNS": "250"}, check=0).stdout
    assert "(imported from siteb)" in text, text
    assert not [line for line in text.splitlines() if "sweep 1," in line and "siteb" not in line], text
