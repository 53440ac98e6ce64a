"""Signed bundles (issue 36 item 1): a site's key, the keys it trusts, and what every view shows of what it did not verify.

Real keys (`gpucompat key` in a config directory of each site's own), real bundles of a real GPU store (docs/evidence),
real SQLite stores, every step through the real command line. A bundle signed by a trusted key imports verified; one
edited and signed again by another key, or unsigned, is refused unless --untrusted, and then every view marks it; one
edited after signing (however re-hashed) is refused always and leaves the store as it was; a bundle nested 200,000 deep
is one sentence, not a RecursionError.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
import sqlite3
import stat

import pytest

from conftest import REPO, run_cli
from gpucompat import signing
from gpucompat.answers.observed import decide, matching
from gpucompat.store import SCHEMA_VERSION

EVIDENCE = REPO / "docs" / "evidence"
BENCH_DB = EVIDENCE / "bench-h100" / "bench.db"  # 2 sweeps, 10 cells on an H100, driver 580.159.04
TORCH = ("explain", "torch==2.11.0+cu130", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python", "3.12")


@pytest.fixture
def sites(tmp_path, monkeypatch):
    """Three sites, each with its own config directory: lab-a exports (with a key), here imports, mallory forges (with a key)."""
    monkeypatch.setenv("GPUCOMPAT_CACHE", str(tmp_path / "cache"))
    env = {name: {"XDG_CONFIG_HOME": str(tmp_path / name)} for name in ("lab-a", "here", "mallory")}
    for name in ("lab-a", "mallory"):
        run_cli("key", env=env[name], check=0)
    shutil.copyfile(BENCH_DB, tmp_path / "lab-a.db")
    return env


def _public(tmp_path, site: str):
    return tmp_path / site / "gpucompat" / "site-key.pub"


def _fingerprint(tmp_path, site: str) -> str:
    return signing.fingerprint(signing.public_key_of(_public(tmp_path, site)))


def _export(tmp_path, env: dict, name: str, *extra) -> object:
    out = tmp_path / name
    run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(out), "--site", "lab-a", *extra, env=env, check=0)
    return out


def _lines(path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def _dumps(record) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"


def _content(lines: list[bytes]) -> list[bytes]:
    return lines[:next(i for i, line in enumerate(lines) if line.startswith(b'{"sha256":'))]


def _edited(lines: list[bytes]) -> list[bytes]:
    """The bundle's content with one verdict changed: the first PASS a failure (what a forger does)."""
    body = _content(lines)
    number = next(i for i, line in enumerate(body) if line.startswith(b'{"cell":') and b'"code":"PASS"' in line)
    record = json.loads(body[number])
    record["cell"]["result"].update(code="ARCH_UNSUPPORTED", stage="compute", summary="no kernel image is available (forged)")
    return [*body[:number], _dumps(record), *body[number + 1:]]


def _seal(path, body: list[bytes], signature: bytes | dict | None = None) -> None:
    """body with the sha256 of its bytes, then a signature: a record made now (dict), a line kept as it was (bytes), or none."""
    content = b"".join(body)
    digest = hashlib.sha256(content).hexdigest()
    tail = _dumps({"signature": signature}) if isinstance(signature, dict) else signature or b""
    path.write_bytes(gzip.compress(content + _dumps({"sha256": digest}) + tail))


def _key_of(tmp_path, site: str, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / site))
    return signing.load_key()


def _dump(db) -> list[str]:
    with sqlite3.connect(db) as conn:
        return list(conn.iterdump())


def _refused(proc, *said: str) -> str:
    """Exit 2 and one sentence on stderr holding each of said, never a traceback."""
    text = proc.stderr.strip()
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert text.startswith("error: ") and "Traceback" not in text and "internal error" not in text and text.count("\n") == 0, text
    for part in said:
        assert part in text, (part, text)
    return text


def _rows(db, *extra) -> list[dict]:
    out = json.loads(run_cli("results", "--db", f"sqlite:///{db}", "--format", "json", *extra, check=0).stdout)
    return out["valid"] + out["invalid"] + out["untested"]


def test_a_signed_bundle_imports_verified_on_a_store_that_trusts_its_key(tmp_path, sites):
    fingerprint = _fingerprint(tmp_path, "lab-a")
    bundle = tmp_path / "lab-a.gpucompat.gz"
    wrote = run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(bundle), "--site", "lab-a",
                    env=sites["lab-a"], check=0).stdout
    assert f"signed by the key {fingerprint}" in wrote
    last = json.loads(_lines(bundle)[-1])["signature"]
    assert last["fingerprint"] == fingerprint and last["algorithm"] == "ed25519"
    # at a site that does not trust lab-a's key yet: refused, the store not even created
    into = tmp_path / "here.db"
    _refused(run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["here"]),
             f"is signed by the key {fingerprint}, which this site does not trust", "`gpucompat trust add NAME KEYFILE`", "--untrusted",
             "nothing was imported.")
    assert not into.exists()
    run_cli("trust", "add", "lab-a", str(_public(tmp_path, "lab-a")), env=sites["here"], check=0)
    out = run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["here"], check=0).stdout
    assert f"signed with the key {fingerprint}, trusted as 'lab-a')" in out and "imported 2 sweep(s), 10 cells" in out
    assert out.count(f"stored verified, 5 cells: signed with the key {fingerprint}, trusted as 'lab-a', the site it comes from") == 2
    with sqlite3.connect(into) as conn:
        stored = conn.execute("SELECT site, signer, verified, data FROM sources ORDER BY id").fetchall()
    assert [(s, k, v) for s, k, v, _ in stored] == [("lab-a", fingerprint, 1)] * 2
    assert json.loads(stored[0][3])["signature"] == {"signer": fingerprint, "public_key": last["public_key"], "trusted_as": "lab-a",
                                                     "verified": True}
    rows = _rows(into, "--sweep", "2")
    assert rows and all(r["verified"] is True and r["signer"] == fingerprint and r["source"] == "lab-a" for r in rows)
    assert "UNVERIFIED" not in run_cli("results", "--db", f"sqlite:///{into}", "--sweep", "2", env={"COLUMNS": "200"}, check=0).stdout
    listed = json.loads(run_cli("results", "--db", f"sqlite:///{into}", "--list", "--json", check=0).stdout)
    assert [(s["source"], s["verified"], s["signer"]) for s in listed] == [("lab-a", True, fingerprint)] * 2
    # the site's own key is trusted as itself: lab-a imports its own bundle verified
    own = run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'own.db'}", env=sites["lab-a"], check=0).stdout
    assert f"stored verified, 5 cells: signed with this site's own key {fingerprint}" in own


def test_an_edited_bundle_signed_again_with_another_key_is_refused_unless_untrusted(tmp_path, sites, monkeypatch):
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    run_cli("trust", "add", "lab-a", str(_public(tmp_path, "lab-a")), env=sites["here"], check=0)
    forged, forger = tmp_path / "forged.gpucompat.gz", _fingerprint(tmp_path, "mallory")
    body = _edited(_lines(bundle))
    _seal(forged, body, signing.sign(_key_of(tmp_path, "mallory", monkeypatch), hashlib.sha256(b"".join(body)).hexdigest()))
    into = tmp_path / "here.db"
    shutil.copyfile(EVIDENCE / "verdicts-h100" / "verdicts.db", into)  # a store that holds this site's own sweeps
    before = _dump(into)
    _refused(run_cli("import", str(forged), "--db", f"sqlite:///{into}", env=sites["here"]),
             f"is signed by the key {forger}, which this site does not trust", "trust add", "--untrusted")
    assert _dump(into) == before
    out = run_cli("import", str(forged), "--untrusted", "--db", f"sqlite:///{into}", env=sites["here"], check=0).stdout
    assert f"signed with the key {forger}, not trusted here (--untrusted)" in out
    assert out.count(f"stored UNVERIFIED, 5 cells: signed with the key {forger}, which this site does not trust (--untrusted)") == 2
    imported = [s["id"] for s in json.loads(run_cli("results", "--db", f"sqlite:///{into}", "--list", "--json", "--source", "lab-a",
                                                    check=0).stdout)]
    rows = [r for sweep in imported for r in _rows(into, "--sweep", str(sweep))]
    assert len(imported) == 2 and rows and all(r["verified"] is False and r["signer"] == forger for r in rows)
    assert any(r["code"] == "ARCH_UNSUPPORTED" and "(forged)" in r["reason"] for r in rows)
    local = _rows(into, "--source", "local")
    assert local and all(r["verified"] is True and r["signer"] is None for r in local)  # this site's own sweeps stay its own
    with sqlite3.connect(into) as conn:
        assert conn.execute("SELECT DISTINCT signer, verified FROM sources").fetchall() == [(forger, 0)]
    # lab-a's genuine bundle: the edited sweep's identity differs, so the genuine one comes in beside it, verified; the sweep
    # the forger left as it was has the same identity, is held already, and this verified copy makes it verified
    again = run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["here"], check=0).stdout
    assert "imported 1 sweep(s), 5 cells" in again and "1 already held" in again and "stored verified, 5 cells" in again
    assert "held unverified, replaced by this verified copy: now verified" in again
    with sqlite3.connect(into) as conn:
        assert sorted(conn.execute("SELECT signer, verified FROM sources").fetchall()) == sorted(
            [(forger, 0), (_fingerprint(tmp_path, "lab-a"), 1), (_fingerprint(tmp_path, "lab-a"), 1)])


def test_a_bundle_edited_and_rehashed_without_the_key_is_refused_always(tmp_path, sites):
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    run_cli("trust", "add", "lab-a", str(_public(tmp_path, "lab-a")), env=sites["here"], check=0)
    lines = _lines(bundle)
    signature = lines[-1]
    into = tmp_path / "here.db"
    shutil.copyfile(EVIDENCE / "verdicts-h100" / "verdicts.db", into)
    before = _dump(into)
    forged = tmp_path / "rehashed.gpucompat.gz"
    _seal(forged, _edited(lines), signature)  # a matching sha256, lab-a's signature kept: it covers the old sha256
    for extra in ([], ["--untrusted"]):
        _refused(run_cli("import", str(forged), "--db", f"sqlite:///{into}", *extra, env=sites["here"]),
                 "carries a signature that does not verify (the signature does not match the content)",
                 "it was changed after it was signed, so it is refused whatever is trusted; nothing was imported.")
        assert _dump(into) == before
    fresh = tmp_path / "fresh.db"
    assert run_cli("import", str(forged), "--untrusted", "--db", f"sqlite:///{fresh}", env=sites["here"]).returncode == 2 and not fresh.exists()
    # a signature record that is not one, or names another fingerprint than its key's: refused as well
    record = json.loads(signature)["signature"]
    for broken, why in (({**record, "value": "not base64!"}, "its key or its value is not base64"),
                        ({**record, "fingerprint": "0000-0000-0000-0000"}, "the fingerprint it names is not its key's"),
                        ({**record, "algorithm": "rsa"}, "it is not an Ed25519 signature")):
        _seal(forged, _content(lines), broken)
        _refused(run_cli("import", str(forged), "--untrusted", "--db", f"sqlite:///{into}", env=sites["here"]), why)
    # the signature line taken away: an unsigned bundle, refused unless --untrusted
    _seal(forged, _edited(lines))
    _refused(run_cli("import", str(forged), "--db", f"sqlite:///{into}", env=sites["here"]), "is not signed", "--untrusted")
    assert _dump(into) == before
    # anything after the signature line: refused
    forged.write_bytes(gzip.compress(b"".join(lines) + lines[1]))
    _refused(run_cli("import", str(forged), "--untrusted", "--db", f"sqlite:///{into}", env=sites["here"]), "goes on after its signature")


def test_an_unsigned_bundle_imports_only_with_untrusted_and_every_view_marks_it(tmp_path, sites):
    bundle = tmp_path / "unsigned.gpucompat.gz"
    wrote = run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(bundle), "--site", "lab-a", "--unsigned",
                    env=sites["lab-a"], check=0).stdout
    assert "unsigned (--unsigned)" in wrote and _lines(bundle)[-1].startswith(b'{"sha256":')
    into = tmp_path / "here.db"
    db = f"sqlite:///{into}"
    _refused(run_cli("import", str(bundle), "--db", db, env=sites["here"]),
             "is not signed, so nothing says which site wrote it: import it with --untrusted to keep its sweeps marked unverified")
    assert not into.exists()
    assert "stored UNVERIFIED, 5 cells: unsigned (--untrusted)" in run_cli("import", str(bundle), "--untrusted", "--db", db, env=sites["here"],
                                                                          check=0).stdout
    # results: --json, the table, CSV and Markdown
    rows = _rows(into, "--sweep", "2")
    assert rows and all(r["verified"] is False and r["signer"] is None and r["source"] == "lab-a" for r in rows)
    table = run_cli("results", "--db", db, "--sweep", "2", "--cells", env={"COLUMNS": "200"}, check=0).stdout
    assert "Valid combinations (5) — 5 UNVERIFIED" in table and table.count("UNVERIFIED") >= 7
    assert "UNVERIFIED: 5 cells were imported from 'lab-a' without a signature from a key this site trusts" in table
    assert run_cli("results", "--db", db, "--list", env={"COLUMNS": "200"}, check=0).stdout.count("lab-a (UNVERIFIED)") == 2
    csv_lines = run_cli("results", "--db", db, "--sweep", "2", "--format", "csv", check=0).stdout.splitlines()
    assert ",source,verified," in csv_lines[0] and all(",lab-a,False," in line for line in csv_lines[1:])
    markdown = run_cli("results", "--db", db, "--sweep", "2", "--format", "md", check=0).stdout
    assert "**UNVERIFIED: 5 cells were imported" in markdown
    cells = markdown.split("## Cells", 1)[1].strip().splitlines()[2:]  # each cell names the site it came from
    assert len(cells) == 5 and all(line.endswith("| lab-a (UNVERIFIED) |") for line in cells)
    # explain's observed rows: the observation still answers, and says it is unverified
    answer = json.loads(run_cli(*TORCH, "--db", db, "--json", check=0).stdout)
    assert answer["source"] == "observed" and answer["observed"]["verified"] is False and answer["observed"]["site"] == "lab-a"
    assert "at lab-a (UNVERIFIED: imported without a signature from a key this site trusts as that site's own)" in answer["decided_by"]
    assert "UNVERIFIED" in run_cli(*TORCH, "--db", db, env={"COLUMNS": "200"}, check=0).stdout
    # advise: its observed entries
    advice = json.loads(run_cli("advise", "torch", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python", "3.12",
                                "--db", db, "--json", check=0).stdout)
    assert advice["observed"] and all(i["verified"] is False and i["site"] == "lab-a" for i in advice["observed"])
    shown = run_cli("advise", "torch", "--gpu", "NVIDIA H100 80GB HBM3", "--driver", "580.159.04", "--python", "3.12", "--db", db,
                    env={"COLUMNS": "200"}, check=0).stdout
    assert "UNVERIFIED (imported from lab-a)" in shown
    # history, and explain --pool's observed cells
    history = run_cli("history", "torch==2.11.0", "--gpu", "NVIDIA H100 80GB HBM3", "--db", db, env={"COLUMNS": "250"}, check=0).stdout
    assert "UNVERIFIED (lab-a)" in history
    plan = tmp_path / "pool.toml"
    plan.write_text('name = "p"\n[[targets]]\nname = "NVIDIA H100 80GB HBM3"\ncc = "9.0"\ndriver = "580.159.04"\n'
                    '[[stacks]]\nframework = "torch"\nenv = "current"\n')
    pooled = json.loads(run_cli("explain", "torch==2.11.0", "--pool", str(plan), "--python", "3.12", "--db", db, "--json", check=0).stdout)
    assert "UNVERIFIED" in pooled["classes"][0]["observed_summary"]
    # report --site: each row, and each page's sources
    site = tmp_path / "site"
    run_cli("report", "--db", db, "--site", str(site), "--pool", str(plan), check=0)  # this site's class: the H100 lab-a's sweeps ran on
    pages = {p.name: p.read_text(encoding="utf-8") for p in site.glob("*.html")}
    gpu = next(text for name, text in pages.items() if name.startswith("gpu-"))
    assert '<p class="meta sources">Sources: <span class="unverified-mark">lab-a (UNVERIFIED: unsigned)</span>, 5 cells</p>' in gpu
    assert gpu.count('class="valid unverified"') == 5 and gpu.count('<b class="unverified-mark">UNVERIFIED</b>') == 5 + 2 + 1  # the rows, the
    # two sweeps observed at lab-a (named with their vouchers), and the footer's legend
    assert ('observed at lab-a on NVIDIA H100 80GB HBM3, driver 580.159.04, <b class="unverified-mark">UNVERIFIED</b> (sweep 1, 5 cells); '
            'vouched for by lab-a (unverified)') in gpu
    assert all("lab-a (UNVERIFIED: unsigned)" in text for name, text in pages.items() if name.startswith("stack-"))
    # the one-sweep HTML report too
    report = tmp_path / "report.html"
    run_cli("report", "--db", db, "--sweep", "2", "-o", str(report), check=0)
    assert "UNVERIFIED: 5 cells were imported from &#39;lab-a&#39;" in report.read_text(encoding="utf-8")


def test_a_verified_observation_outranks_a_newer_unverified_one():
    """explain decides by the newest observation, but never by an unverified one where a verified one is there."""
    row = {"framework": "torch", "version": "2.11.0+cu130", "variant": "cu130", "python": "3.12.3", "gpu": "NVIDIA H100 80GB HBM3",
           "cc": "9.0", "driver": "580.159.04", "observed": True, "reason": "", "build": "cu130", "build_from": "the sweep's stack"}
    ours = {**row, "cell": 1, "sweep": 1, "created_at": 1000.0, "code": "PASS", "source": "local", "verified": True}
    forged = {**row, "cell": 2, "sweep": 2, "created_at": 2000.0, "code": "ARCH_UNSUPPORTED", "source": "lab-x", "verified": False}
    seen = matching([forged, ours], "torch", "2.11.0+cu130", "cu130", "3.12", "NVIDIA H100 80GB HBM3", "9.0", "580.159.04")
    assert [r["cell"] for r in seen] == [1, 2]
    result = decide({"verdict": "pass", "code": None, "stage": None}, seen)
    assert result["observed"]["verified"] is True and result["verdict"] == "pass" and "UNVERIFIED" not in result["decided_by"]
    alone = decide({"verdict": "pass", "code": None, "stage": None}, seen[1:])
    assert alone["observed"]["verified"] is False and "UNVERIFIED" in alone["decided_by"] and alone["code"] == "ARCH_UNSUPPORTED"


def test_the_key_is_made_once_private_and_never_overwritten(tmp_path):
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    umask = os.umask(0)  # whatever the umask, the private key is 0600 and its directory 0700
    try:
        made = run_cli("key", env=env, check=0).stdout
    finally:
        os.umask(umask)
    folder = tmp_path / "config" / "gpucompat"
    private, public = folder / "site-key.pem", folder / "site-key.pub"
    fingerprint = signing.fingerprint(signing.public_key_of(public))
    assert made.startswith(f"made a new signing key {fingerprint}: private {private} (0600") and str(public) in made
    assert stat.S_IMODE(private.stat().st_mode) == 0o600 and stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----") and public.read_text().startswith("gpucompat-ed25519 ")
    kept = private.read_bytes()
    again = run_cli("key", env=env, check=0).stdout
    assert again.startswith(f"this site has a signing key {fingerprint}") and private.read_bytes() == kept
    public.unlink()  # the public file follows the private key
    shown = json.loads(run_cli("key", "--json", env=env, check=0).stdout)
    assert shown["fingerprint"] == fingerprint and shown["created"] is False and signing.public_key_of(public)
    # --new: another key; the old pair set aside under its fingerprint, still 0600
    renewed = run_cli("key", "--new", env=env, check=0).stdout
    retired = folder / f"site-key.{fingerprint}.pem"
    assert f"the old key was set aside as {retired}" in renewed and "made a new signing key" in renewed
    assert retired.read_bytes() == kept and stat.S_IMODE(retired.stat().st_mode) == 0o600 and (folder / f"site-key.{fingerprint}.pub").exists()
    assert signing.fingerprint(signing.public_key_of(public)) != fingerprint and stat.S_IMODE(private.stat().st_mode) == 0o600
    # a private key others may read is refused, by export as by key; a damaged one is one sentence
    private.chmod(0o644)
    shutil.copyfile(BENCH_DB, tmp_path / "src.db")
    export = ("export", "--db", f"sqlite:///{tmp_path / 'src.db'}", "--bundle", str(tmp_path / "b.gz"), "--site", "lab")
    _refused(run_cli(*export, env=env), f"the site's private key {private} may be read by others (mode 0644); `chmod 600")
    _refused(run_cli("key", env=env), "may be read by others")
    private.chmod(0o600)
    private.write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
    _refused(run_cli(*export, env=env), "is damaged or not one gpucompat wrote; move it away and run `gpucompat key`")
    assert not (tmp_path / "b.gz").exists()


def test_export_without_a_key_says_run_gpucompat_key(tmp_path):
    shutil.copyfile(BENCH_DB, tmp_path / "src.db")
    out = tmp_path / "b.gz"
    proc = run_cli("export", "--db", f"sqlite:///{tmp_path / 'src.db'}", "--bundle", str(out), "--site", "lab",
                   env={"XDG_CONFIG_HOME": str(tmp_path / "empty")})
    _refused(proc, "this site has no signing key in", "run `gpucompat key` once to make one, or give --unsigned")
    assert not out.exists()


def test_trust_add_list_remove_and_what_they_refuse(tmp_path, sites):
    here = sites["here"]
    assert "no key is trusted yet" in run_cli("trust", "list", env=here, check=0).stdout
    lab_a, fingerprint = _public(tmp_path, "lab-a"), _fingerprint(tmp_path, "lab-a")
    assert f"trusted 'lab a', key {fingerprint}" in run_cli("trust", "add", "lab a", str(lab_a), env=here, check=0).stdout
    trusted = tmp_path / "here" / "gpucompat" / "trusted-keys.json"
    assert stat.S_IMODE(trusted.stat().st_mode) == 0o600 and stat.S_IMODE(trusted.parent.stat().st_mode) == 0o700
    run_cli("key", env=here, check=0)
    own = _fingerprint(tmp_path, "here")
    listed = run_cli("trust", "list", env=here, check=0).stdout.splitlines()
    assert listed == [f"{own}  this site", f"{fingerprint}  lab a"]
    assert [k["name"] for k in json.loads(run_cli("trust", "list", "--json", env=here, check=0).stdout)] == ["this site", "lab a"]
    # bad names and bad files: one sentence each, nothing changed
    kept = trusted.read_bytes()
    (tmp_path / "garbage.pub").write_text("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIFake user@host\n")
    (tmp_path / "short.pub").write_text("gpucompat-ed25519 c2hvcnQ=\n")
    (tmp_path / "big.pub").write_text("x" * 5000)
    for args, said in ((("local", lab_a), "'local' is not a site name"), (("a/b", lab_a), "'a/b' is not a site name"),
                       (("<script>", lab_a), "is not a site name"),
                       (("lab-b", tmp_path / "missing.pub"), f"the key file {str(tmp_path / 'missing.pub')!r} does not exist."),
                       (("lab-b", tmp_path), "is a directory, not a regular file."),
                       (("lab-b", tmp_path / "mallory" / "gpucompat" / "site-key.pem"), "holds a private key: give the other site's public key file"),
                       (("lab-b", tmp_path / "garbage.pub"), "is not a gpucompat public key (one line `gpucompat-ed25519 KEY ...`"),
                       (("lab-b", tmp_path / "short.pub"), "is not a gpucompat public key"),
                       (("lab-b", tmp_path / "big.pub"), "is larger than 4 KiB; a public key file `gpucompat key` writes is one short line."),
                       (("LAB A", _public(tmp_path, "mallory")), f"a key named 'lab a' is trusted already ({fingerprint}); `gpucompat trust remove 'lab a'` first"),
                       (("lab-b", lab_a), f"that key ({fingerprint}) is trusted already, as 'lab a'."),
                       (("lab-b", _public(tmp_path, "here")), f"is this site's own public key ({own}), which is trusted already.")):
        _refused(run_cli("trust", "add", args[0], str(args[1]), env=here), said)
        assert trusted.read_bytes() == kept
    _refused(run_cli("trust", "remove", "lab-z", env=here), "no key named 'lab-z' is trusted; `gpucompat trust list` shows the trusted keys.")
    assert f"no longer trusted: 'lab a', key {fingerprint}" in run_cli("trust", "remove", "Lab A", env=here, check=0).stdout
    assert run_cli("trust", "list", env=here, check=0).stdout.splitlines() == [f"{own}  this site"]
    # a bundle of a key no longer trusted is refused again
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    _refused(run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'x.db'}", env=here), f"is signed by the key {fingerprint}")
    trusted.write_text('{"keys": [{"name": "x", "key": "!!"}]}')
    _refused(run_cli("trust", "list", env=here), f"the trusted keys file {trusted} is damaged; remove it and `gpucompat trust add`")
    _refused(run_cli("import", str(bundle), "--db", f"sqlite:///{tmp_path / 'x.db'}", env=here), "is damaged")


@pytest.mark.parametrize("where", ["a cell", "a sweep", "the header"])
def test_a_bundle_nested_200000_deep_is_refused_in_one_sentence(tmp_path, sites, where):
    """Before the bound, json.loads recursed until RecursionError: "internal error" and exit 3."""
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz", "--unsigned")
    body = _content(_lines(bundle))
    deep = b"[" * 200_000 + b"]" * 200_000
    number = {"a cell": next(i for i, line in enumerate(body) if line.startswith(b'{"cell":')),
              "a sweep": next(i for i, line in enumerate(body) if line.startswith(b'{"sweep":')), "the header": 0}[where]
    record = json.loads(body[number])
    next(iter(record.values()))["nested"] = "@DEEP@"  # a value nested 200,000 deep in the record, still valid JSON
    body[number] = _dumps(record).replace(b'"@DEEP@"', deep)
    forged = tmp_path / "deep.gpucompat.gz"
    _seal(forged, body)
    into = tmp_path / "here.db"
    shutil.copyfile(EVIDENCE / "verdicts-h100" / "verdicts.db", into)
    before = _dump(into)
    what = {"a cell": f"line {number + 1}", "a sweep": "a sweep's line", "the header": "its first line"}[where]
    _refused(run_cli("import", str(forged), "--untrusted", "--db", f"sqlite:///{into}", env=sites["here"]),
             f"{forged} nests JSON deeper than 64 levels in {what}, deeper than any record gpucompat writes; nothing was imported.")
    assert _dump(into) == before


def test_an_older_store_keeps_its_imported_sweeps_as_unverified(tmp_path, sites):
    """A store of schema 5 (sources without signer and verified) is upgraded; what it imported before signatures is unverified,
    until a verified copy of it is imported again."""
    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    into = tmp_path / "old.db"
    run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["lab-a"], check=0)  # verified: lab-a's own key
    with sqlite3.connect(into) as conn:  # as schema 5 had it
        conn.execute("DROP INDEX ix_sources_identity")
        conn.execute("ALTER TABLE sources DROP COLUMN identity")
        conn.execute("DROP TABLE sweep_vouchers")
        conn.execute("ALTER TABLE sources DROP COLUMN signer")
        conn.execute("ALTER TABLE sources DROP COLUMN verified")
        conn.execute("UPDATE meta SET value = '5' WHERE key = 'schema_version'")
    before = _dump(into)
    listed = json.loads(run_cli("results", "--db", f"sqlite:///{into}", "--list", "--json", check=0).stdout)
    assert [(s["source"], s["verified"]) for s in listed] == [("lab-a", False)] * 2 and _dump(into) == before  # read in memory
    assert all(r["verified"] is False for r in _rows(into, "--sweep", "1"))
    upgraded = run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["lab-a"], check=0).stdout  # a writer upgrades it
    assert upgraded.count("held unverified, replaced by this verified copy: now verified") == 2  # the same sweeps, signed by lab-a itself
    with sqlite3.connect(into) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone() == (str(SCHEMA_VERSION),)
        fingerprint = _fingerprint(tmp_path, "lab-a")
        assert conn.execute("SELECT signer, verified FROM sources").fetchall() == [(fingerprint, 1), (fingerprint, 1)]
        assert conn.execute("SELECT sweep_id, site, signer, verified FROM sweep_vouchers ORDER BY id").fetchall() == [
            (1, "lab-a", None, 0), (2, "lab-a", None, 0), (1, "lab-a", fingerprint, 1), (2, "lab-a", fingerprint, 1)]


def test_json_too_deep_tells_depth_without_parsing():
    from gpucompat.knowledge.overlay import json_too_deep

    assert not json_too_deep('{"a": [1, {"b": "[[[[[[[["}]}', 3) and json_too_deep('{"a": [1, {"b": []}]}', 3)
    assert json_too_deep("[" * 200_000, 64)  # unclosed: the parser recurses all the same
    assert not json_too_deep("[]" * 100_000, 1) and not json_too_deep(r'["\"[[[[[["]', 1)
    assert re.fullmatch(r"[0-9a-f]{4}(-[0-9a-f]{4}){3}", signing.fingerprint(b"\0" * 32))


def test_a_trusted_key_vouches_only_for_its_own_sites_sweeps(tmp_path, sites):
    """lab-a's key, trusted as 'lab-a', signs a bundle whose sweeps say they come from 'NERSC': imported, but unverified
    (a key vouches for its own site's sweeps, never for a name it merely writes); 'this site' is no name a key may take."""
    bundle = tmp_path / "claims.gpucompat.gz"
    run_cli("export", "--db", f"sqlite:///{tmp_path / 'lab-a.db'}", "--bundle", str(bundle), "--site", "NERSC", env=sites["lab-a"], check=0)
    run_cli("trust", "add", "lab-a", str(_public(tmp_path, "lab-a")), env=sites["here"], check=0)
    into = tmp_path / "here.db"
    run_cli("import", str(bundle), "--db", f"sqlite:///{into}", env=sites["here"], check=0)
    with sqlite3.connect(into) as conn:
        assert conn.execute("SELECT site, verified FROM sources").fetchall() == [("NERSC", 0)] * 2
    _refused(run_cli("trust", "add", "This Site", str(_public(tmp_path, "mallory")), env=sites["here"]), "is not a site name")


def test_an_unverified_sweep_is_never_signed_again_on_export(tmp_path, sites):
    """A sweep imported with --untrusted, exported again with this site's key, would come out vouched for: refused."""
    unsigned = _export(tmp_path, sites["lab-a"], "unsigned.gpucompat.gz", "--unsigned")
    here = tmp_path / "here.db"
    run_cli("import", str(unsigned), "--db", f"sqlite:///{here}", "--untrusted", env=sites["here"], check=0)
    run_cli("key", env=sites["here"], check=0)
    again = run_cli("export", "--db", f"sqlite:///{here}", "--bundle", str(tmp_path / "again.gz"), "--site", "here", "--sweep", "1",
                    env=sites["here"])
    _refused(again, "sweep 1 was imported from 'lab-a' unverified", "--unsigned")
    assert not (tmp_path / "again.gz").exists()


def test_a_bundle_swapped_after_its_check_for_one_without_its_sha256_is_refused(tmp_path, sites, monkeypatch):
    """merge() hashes the content again and needs the sha256 line it was checked against: a file cut short (or swapped)
    between verify() and merge() commits nothing."""
    from gpucompat.bundle import merge, verify
    from gpucompat.errors import UserError
    from gpucompat.store import Store

    bundle = _export(tmp_path, sites["lab-a"], "lab-a.gpucompat.gz")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "lab-a"))
    checked = verify(bundle)
    bundle.write_bytes(gzip.compress(b"".join(_content(_lines(bundle)))))  # the same content, its sha256 and signature gone
    store = Store(f"sqlite:///{tmp_path / 'into.db'}")
    with pytest.raises(UserError, match="changed while it was imported"):
        merge(store, checked)
    assert store.list_sweeps(None) == []


def test_json_too_deep_is_linear_on_escaped_quotes():
    """The depth check runs on every line of a bundle before anything else: a line of escaped quotes (no string ever
    closing) once made the string pattern backtrack quadratically (32 KB: 3.8 s); 2 MB is now one pass."""
    from gpucompat.knowledge.overlay import json_too_deep

    assert not json_too_deep('"' + '\\"' * 1_000_000, 64)
    assert json_too_deep('"\\\\"' + "[" * 65, 64) and not json_too_deep('{"x": "\\"[[[[[["}', 3)
