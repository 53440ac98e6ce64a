"""One sweep is one sweep (issue 41 items 1 and 2): its identity is computed by the importer from its observations, never
taken from the bundle; every site that vouched for it is kept beside it; a verified copy always wins; the import line says
exactly which sweeps were stored verified and which not.

Real keys (`gpucompat key` in each site's own config directory), real bundles of a real GPU store (docs/evidence), real
SQLite stores, every step through the real command line, as tests/test_signed_bundles.py does.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3

import pytest

from conftest import REPO, run_cli
from gpucompat import signing
from gpucompat.store import SCHEMA_VERSION, Store, sweep_identity

EVIDENCE = REPO / "docs" / "evidence"
BENCH_DB = EVIDENCE / "bench-h100" / "bench.db"  # 2 sweeps, 10 cells on an H100
STATE_DB = EVIDENCE / "gpu-state-h100" / "gpu-state.db"  # host names, paths and environment values that redaction takes out


@pytest.fixture
def sites(tmp_path, monkeypatch):
    """Each site with its own config directory and key: lab-a runs the sweeps, here and relay import, mallory forges."""
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    env = {name: {"XDG_CONFIG_HOME": str(tmp_path / name)} for name in ("lab-a", "here", "relay", "mallory")}
    for name in env:
        run_cli("key", env=env[name], check=0)
    shutil.copyfile(BENCH_DB, tmp_path / "lab-a.db")
    return env


def _public(tmp_path, site: str):
    return tmp_path / site / "gpucompat" / "site-key.pub"


def _fingerprint(tmp_path, site: str) -> str:
    return signing.fingerprint(signing.public_key_of(_public(tmp_path, site)))


def _trust(tmp_path, env: dict, *names: str) -> None:
    for name in names:
        run_cli("trust", "add", name, str(_public(tmp_path, name)), env=env, check=0)


def _export(tmp_path, env: dict, name: str, db: str = "lab-a.db", site: str = "lab-a", *extra) -> object:
    out = tmp_path / name
    run_cli("export", "--db", f"sqlite:///{tmp_path / db}", "--bundle", str(out), "--site", site, *extra, env=env, check=0)
    return out


def _import(tmp_path, env: dict, bundle, db: str = "here.db", *extra) -> dict:
    proc = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / db}", "--json", *extra, env=env, check=0)
    return json.loads(proc.stdout)


def _sources(tmp_path, db: str = "here.db") -> list[tuple]:
    with sqlite3.connect(tmp_path / db) as conn:
        return conn.execute("SELECT s.id, src.site, src.signer, src.verified FROM sweeps s JOIN sources src ON src.id = s.source_id "
                            "ORDER BY s.id").fetchall()


def test_a_store_of_schema_6_is_upgraded_with_one_voucher_per_imported_sweep(tmp_path, sites):
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    into = tmp_path / "old.db"
    run_cli("import", str(bundle), "--db", f"sqlite:///{into}", "--untrusted", env=sites["here"], check=0)
    with sqlite3.connect(into) as conn:  # as schema 6 had it: no identity, no vouchers
        conn.execute("DROP INDEX ix_sources_identity")
        conn.execute("ALTER TABLE sources DROP COLUMN identity")
        conn.execute("DROP TABLE sweep_vouchers")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema_version'")
    read = Store(f"sqlite:///{into}", readonly=True)  # reading upgrades a copy in memory, never the file
    lab_a = _fingerprint(tmp_path, "lab-a")
    assert read.vouchers(1) == [{"site": "lab-a", "signer": lab_a, "trusted_as": None, "verified": False, "imported_at": read.vouchers(1)[0]["imported_at"]}]
    assert read.vouchers(1)[0]["imported_at"] > 0
    read.close()
    with sqlite3.connect(into) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == ("6",)
    Store(f"sqlite:///{into}").close()  # a writer upgrades the file
    with sqlite3.connect(into) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        assert conn.execute("SELECT sweep_id, site, signer, verified FROM sweep_vouchers ORDER BY id").fetchall() == \
            [(1, "lab-a", lab_a, 0), (2, "lab-a", lab_a, 0)]
    assert Store(f"sqlite:///{into}", readonly=True).vouchers(99) == []
