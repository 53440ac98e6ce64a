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


def _lines(path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def _dumps(record) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _forged(bundle, into, key=None) -> list[dict]:
    """lab-a's bundle with every PASS of its first sweep made a failure, that sweep's origin field set to what the importer
    before schema 7 took as the genuine sweep's (the sha256 of its site and lines), sealed again (signed with key, if
    given); the genuine sweep's records as they were."""
    lines = _lines(bundle)
    end = next(i for i, line in enumerate(lines) if line.startswith(b'{"sha256":'))
    body, first, genuine = [lines[0]], True, hashlib.sha256(b"lab-a\n")
    for number, line in enumerate(lines[1:end], start=1):
        record = json.loads(line)
        if "sweep" in record and number > 1:
            first = False
        if first:
            genuine.update(line)
        if first and "cell" in record and (record["cell"]["result"] or {}).get("code") == "PASS":
            record["cell"]["result"].update(code="ARCH_UNSUPPORTED", stage="compute", summary="no kernel image is available (forged)")
        body.append(_dumps(record) if first else line)
    sweep = json.loads(body[1])
    sweep["sweep"]["origin"] = genuine.hexdigest()
    body[1] = _dumps(sweep)
    digest = hashlib.sha256(b"".join(body)).hexdigest()
    tail = _dumps({"signature": signing.sign(key, digest)}) if key is not None else b""
    into.write_bytes(gzip.compress(b"".join(body) + _dumps({"sha256": digest}) + tail))
    return into


def _key_of(tmp_path, site: str, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / site))
    return signing.load_key()


def _rows(tmp_path, sweep: int, db: str = "here.db") -> list[dict]:
    out = json.loads(run_cli("results", "--db", f"sqlite:///{tmp_path / db}", "--sweep", str(sweep), "--format", "json", check=0).stdout)
    return out["valid"] + out["invalid"] + out["untested"]


@pytest.mark.parametrize("forger", ["untrusted", "a trusted site"])
def test_a_forged_copy_of_a_sweep_imported_first_never_blocks_the_genuine_one(tmp_path, sites, monkeypatch, forger):
    """Mallory copies the genuine sweep's origin into a sweep whose verdicts it changed, and gets it imported first:
    --untrusted, or signed by mallory's own key, which this site trusts as 'mallory'. The genuine bundle then imports its
    sweep beside the forgery, verified; the sweep the forger left as it was is one sweep, now verified."""
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    _trust(tmp_path, sites["here"], "lab-a", *(["mallory"] if forger == "a trusted site" else []))
    forged = _forged(bundle, tmp_path / "forged.gpucompat.gz", _key_of(tmp_path, "mallory", monkeypatch))
    first = _import(tmp_path, sites["here"], forged, "here.db", *(["--untrusted"] if forger == "untrusted" else []))
    assert [(s["outcome"], s["verified"]) for s in first["sweeps"]] == [("added", False)] * 2
    why = first["sweeps"][0]["why"]
    assert why == (f"signed with the key {_fingerprint(tmp_path, 'mallory')}, which this site does not trust (--untrusted)" if forger == "untrusted"
                   else f"signed with the key {_fingerprint(tmp_path, 'mallory')}, trusted as 'mallory', but the sweep says it comes from "
                        "'lab-a': a key vouches only for its own site's sweeps")
    proc = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", env=sites["here"], check=0)
    lab_a = _fingerprint(tmp_path, "lab-a")
    said = proc.stdout.splitlines()
    assert said[0].startswith("imported 1 sweep(s), 5 cells, from the site 'lab-a'") and said[0].endswith("; 1 already held")
    assert f"signed with the key {lab_a}, trusted as 'lab-a')" in said[0] and "verified" not in said[0]
    assert said[1] == (f"  sweep 3 (was 1 at lab-a): stored verified, 5 cells: signed with the key {lab_a}, trusted as 'lab-a', the site it "
                       "comes from")
    assert said[2] == (f"  sweep 2 (was 2 at lab-a): held unverified, replaced by this verified copy: now verified (signed with the key "
                       f"{lab_a}, trusted as 'lab-a', the site it comes from)")
    # the genuine sweep reads as lab-a ran it, verified; the forgery stays apart and marked
    genuine, forgery = _rows(tmp_path, 3), _rows(tmp_path, 1)
    assert genuine and all(r["verified"] is True and r["signer"] == lab_a and "(forged)" not in r["reason"] for r in genuine)
    assert any(r["code"] == "PASS" for r in genuine)
    assert forgery and all(r["verified"] is False for r in forgery) and any("(forged)" in r["reason"] for r in forgery)
    assert [(s, v) for _, s, _, v in _sources(tmp_path)] == [("lab-a", 0), ("lab-a", 1), ("lab-a", 1)]
    store = Store(f"sqlite:///{tmp_path / 'here.db'}", readonly=True)
    forger_voucher = ("lab-a" if forger == "untrusted" else "mallory", _fingerprint(tmp_path, "mallory"), False)
    assert [(v["site"], v["signer"], v["verified"]) for v in store.vouchers(2)] == [forger_voucher, ("lab-a", lab_a, True)]
    assert [(v["site"], v["signer"], v["verified"]) for v in store.vouchers(3)] == [("lab-a", lab_a, True)]
    assert [(v["site"], v["verified"]) for v in store.vouchers(1)] == [forger_voucher[::2]]
    # explain decides by lab-a's verified observation, not the forgery
    answer = json.loads(run_cli("explain", "torch==2.11.0+cu130", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python",
                                "3.12", "--db", f"sqlite:///{tmp_path / 'here.db'}", "--json", check=0).stdout)
    assert answer["observed"]["verified"] is True and answer["observed"]["site"] == "lab-a" and "(forged)" not in json.dumps(answer)


def test_a_bundle_imported_untrusted_becomes_verified_once_its_key_is_trusted_and_it_is_imported_again(tmp_path, sites):
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    lab_a = _fingerprint(tmp_path, "lab-a")
    first = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", "--untrusted", env=sites["here"], check=0).stdout
    assert f"  sweep 1 (was 1 at lab-a): stored UNVERIFIED, 5 cells: signed with the key {lab_a}, which this site does not trust (--untrusted)" in first
    assert "verified:" not in first and ": verified" not in first  # the line no longer says "verified" of what it stored unverified
    _trust(tmp_path, sites["here"], "lab-a")
    again = _import(tmp_path, sites["here"], bundle)
    assert [(s["id"], s["outcome"], s["verified"]) for s in again["sweeps"]] == [(1, "upgraded", True), (2, "upgraded", True)]
    assert (again["added"], again["upgraded"], again["cells"], again["voucher"], again["trusted_as"]) == (0, 2, 0, "lab-a", "lab-a")
    assert _sources(tmp_path) == [(1, "lab-a", lab_a, 1), (2, "lab-a", lab_a, 1)]
    assert all(r["verified"] is True for sweep in (1, 2) for r in _rows(tmp_path, sweep))
    listed = json.loads(run_cli("results", "--db", f"sqlite:///{tmp_path / 'here.db'}", "--list", "--json", check=0).stdout)
    assert [(s["id"], s["verified"]) for s in listed] == [(1, True), (2, True)]
    store = Store(f"sqlite:///{tmp_path / 'here.db'}", readonly=True)
    assert [(v["site"], v["signer"], v["trusted_as"], v["verified"]) for v in store.vouchers(1)] == [("lab-a", lab_a, "lab-a", True)]
    store.close()
    # a third time: nothing changes, and it says so
    third = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", env=sites["here"], check=0).stdout
    assert third.startswith("nothing new: the 2 sweep(s) of") and "already held, verified, and vouched for by 'lab-a' already" in third


def test_a_key_vouches_for_its_own_sites_sweeps_and_the_import_line_says_which_were_stored_verified(tmp_path, sites):
    """lab-a's key, trusted as 'lab-a', signs a bundle whose sweeps say they come from 'NERSC': imported without --untrusted,
    each sweep's line and --json say it was stored UNVERIFIED and why; results no longer blames an --untrusted never given."""
    bundle = _export(tmp_path, sites["lab-a"], "claims.gpucompat.gz", "lab-a.db", "NERSC")
    _trust(tmp_path, sites["here"], "lab-a")
    lab_a = _fingerprint(tmp_path, "lab-a")
    proc = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'here.db'}", env=sites["here"], check=0)
    said = proc.stdout.splitlines()
    assert said[0].startswith("imported 2 sweep(s), 10 cells, from the site 'NERSC'") and "verified" not in said[0]
    why = f"signed with the key {lab_a}, trusted as 'lab-a', but the sweep says it comes from 'NERSC': a key vouches only for its own site's sweeps"
    assert said[1:] == [f"  sweep 1 (was 1 at NERSC): stored UNVERIFIED, 5 cells: {why}", f"  sweep 2 (was 2 at NERSC): stored UNVERIFIED, 5 cells: {why}"]
    assert _sources(tmp_path) == [(1, "NERSC", lab_a, 0), (2, "NERSC", lab_a, 0)]
    table = run_cli("results", "--db", f"sqlite:///{tmp_path / 'here.db'}", "--sweep", "2", env={"COLUMNS": "200"}, check=0).stdout
    assert "UNVERIFIED: 5 cells were imported from 'NERSC' without a signature from a key this site trusts as that site's own" in table
    assert "--untrusted" not in table
    # the same sweeps in a bundle lab-a signs as itself: one sweep each, now verified, under the truth
    truth = _import(tmp_path, sites["here"], _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz"))
    assert [(s["outcome"], s["verified"], s["site"]) for s in truth["sweeps"]] == [("upgraded", True, "lab-a")] * 2
    assert _sources(tmp_path) == [(1, "lab-a", lab_a, 1), (2, "lab-a", lab_a, 1)]


def test_a_sweep_exported_again_by_a_third_site_is_one_sweep_with_two_vouchers(tmp_path, sites):
    """lab-a's sweeps (redacted by default) imported at relay, which exports them again with its own sweep; here imports
    relay's bundle, then lab-a's own: each of lab-a's sweeps is held once, vouched for by both sites, verified by lab-a's."""
    original = json.loads(run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(tmp_path / "lab-a.gz"),
                                  "--site", "lab-a", "--json", env=sites["lab-a"], check=0).stdout)
    _trust(tmp_path, sites["relay"], "lab-a")
    shutil.copyfile(STATE_DB, tmp_path / "relay.db")  # relay's own sweeps: 4 checks, with host names and paths
    _import(tmp_path, sites["relay"], tmp_path / "lab-a.gz", "relay.db")
    again = json.loads(run_cli("export", "--db", f"sqlite:///{tmp_path / 'relay.db'}", "--bundle", str(tmp_path / "relay.gz"), "--site",
                               "relay", *[a for i in range(1, 7) for a in ("--sweep", str(i))], "--json", env=sites["relay"], check=0).stdout)
    assert again["identities"][4:] == original["identities"]  # redacted once at lab-a, carried as they came: the same sweeps
    _trust(tmp_path, sites["here"], "lab-a", "relay")
    via = _import(tmp_path, sites["here"], tmp_path / "relay.gz")
    assert [(s["site"], s["verified"]) for s in via["sweeps"]] == [("relay", True)] * 4 + [("lab-a", False)] * 2
    assert [s["identity"] for s in via["sweeps"]] == again["identities"]
    direct = _import(tmp_path, sites["here"], tmp_path / "lab-a.gz")
    assert [(s["id"], s["outcome"], s["verified"]) for s in direct["sweeps"]] == [(5, "upgraded", True), (6, "upgraded", True)]
    listed = json.loads(run_cli("results", "--db", f"sqlite:///{tmp_path / 'here.db'}", "--list", "--json", check=0).stdout)
    assert len(listed) == 6 and all(s["verified"] for s in listed)
    store = Store(f"sqlite:///{tmp_path / 'here.db'}", readonly=True)
    relay, lab_a = _fingerprint(tmp_path, "relay"), _fingerprint(tmp_path, "lab-a")
    for sweep in (5, 6):
        assert [(v["site"], v["signer"], v["verified"]) for v in store.vouchers(sweep)] == [("relay", relay, False), ("lab-a", lab_a, True)]
    assert [(v["site"], v["verified"]) for v in store.vouchers(1)] == [("relay", True)]
    with store.connection() as conn:  # the identity the store reads back is the one the importer computed
        assert [sweep_identity(conn, i) for i in (5, 6)] == original["identities"]
    store.close()
    # and the other way round: lab-a's own first, relay's copy after is one more voucher, nothing added
    _import(tmp_path, sites["here"], tmp_path / "lab-a.gz", "other.db")
    later = run_cli("import", str(tmp_path / "relay.gz"), "--db", f"sqlite:///{tmp_path / 'other.db'}", env=sites["here"], check=0).stdout
    assert "imported 4 sweep(s)" in later and "; 2 already held" in later
    assert "  sweep 1 (was 5 at lab-a): already held, verified; now also vouched for by 'relay' (signed with the key " in later


def test_the_identity_is_the_observations_not_the_labels(tmp_path, sites, monkeypatch):
    """The site, origin, name and plan a bundle writes leave a sweep's identity as it is; any verdict changes it."""
    from gpucompat.bundle import verify

    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz", "lab-a.db", "lab-a", "--unsigned")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "here"))
    lines = _lines(bundle)
    end = next(i for i, line in enumerate(lines) if line.startswith(b'{"sha256":'))

    def identities(edit) -> list[str]:
        body = [_dumps(edit(json.loads(line))) for line in lines[:end]]
        path = tmp_path / "edited.gz"
        path.write_bytes(gzip.compress(b"".join(body) + _dumps({"sha256": hashlib.sha256(b"".join(body)).hexdigest()})))
        return [s.identity for s in verify(path, untrusted=True).sweeps]

    same = identities(lambda r: r)
    relabelled = identities(lambda r: {"sweep": {**r["sweep"], "site": "elsewhere", "origin": "0" * 64, "name": "other", "plan_text": "x",
                                                 "provenance": {"site": "nowhere"}}} if "sweep" in r else r)
    assert relabelled == same and len(set(same)) == 2

    def flip(r):
        if "cell" in r and r["cell"]["result"] and r["cell"]["result"]["code"] == "PASS":
            r["cell"]["result"]["code"] = "CRASHED"
        return r
    assert identities(flip)[1] != same[1]
