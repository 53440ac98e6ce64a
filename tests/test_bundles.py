"""Bundles that travel: `export --bundle` and `import`, on real GPU stores (docs/evidence), each through the real CLI.

Export, then import into an empty store: `results` reads the same (less what redaction takes out); a second import adds
nothing; a tampered byte, a newer schema or a malformed file is refused in one sentence (exit 2) with the store
untouched; `--source` picks what was run here, what was imported, or one site's sweeps. Every bundle here is signed with
the key of this module's own config directory (`site_key`), which the site trusts as its own: signatures, trust and
unverified imports are tests/test_signed_bundles.py's.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil
import sqlite3

import pytest

from conftest import REPO, run_cli
from test_postgres import postgres_url  # noqa: F401  (its PostgreSQL server, for the one test here that imports into one)
from gpucompat import signing
from gpucompat.bundle import SCHEMA
from gpucompat.store import SCHEMA_VERSION, Store
from gpucompat.sweep_refs import resolve

EVIDENCE = REPO / "docs" / "evidence"
BENCH_DB = EVIDENCE / "bench-h100" / "bench.db"  # schema 4: bench figures, probe JSON with the GPU's state
STATE_DB = EVIDENCE / "gpu-state-h100" / "gpu-state.db"  # host "vm", /opt/torch paths, cuda_env values, other processes
IDS = ("cell", "sweep", "created_at", "source", "signer")  # what differs between a store and the one a bundle was imported into


def _copy(tmp_path, source, name="src.db") -> str:
    path = tmp_path / name
    shutil.copyfile(source, path)
    return f"sqlite:///{path}"


def _results(db: str, sweep: int, *extra) -> dict:
    out = json.loads(run_cli("results", "--db", db, "--sweep", str(sweep), "--format", "json", *extra, check=0).stdout)
    for group in ("surprises", "valid", "invalid", "untested"):
        out[group] = [{k: v for k, v in row.items() if k not in IDS} for row in out[group]]
    out["sweep"] = {k: v for k, v in out["sweep"].items() if k != "id"}
    return out


def _dump(db: str) -> list[str]:
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        return list(conn.iterdump())


def _lines(path) -> list[bytes]:
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def _rewrite(path, lines: list[bytes], digest: bool = True) -> None:
    """Write lines back as a bundle (they end with the sha256 line and the signature); digest=True: with a trailer that
    matches, signed again with this site's key (what the site itself, not a flipped bit, does); False: the old trailer."""
    end = next(i for i, line in enumerate(lines) if line.startswith(b'{"sha256":'))
    body = b"".join(lines[:end])
    if not digest:
        path.write_bytes(gzip.compress(body + b"".join(lines[end:])))
        return
    sha = hashlib.sha256(body).hexdigest()
    trailer = json.dumps({"sha256": sha}).encode() + b"\n" + json.dumps({"signature": signing.sign(signing.load_key(), sha)}).encode() + b"\n"
    path.write_bytes(gzip.compress(body + trailer))


@pytest.fixture(scope="module", autouse=True)
def site_key(tmp_path_factory):
    """This module's config directory (XDG_CONFIG_HOME) with a site key: every export here is signed, and trusted here."""
    config = tmp_path_factory.mktemp("config")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CONFIG_HOME", str(config))
        run_cli("key", check=0)
        yield config


@pytest.fixture(scope="module")
def exported(tmp_path_factory, site_key):
    """The H100 bench store exported with --keep-hosts and without: (source db, kept bundle, redacted bundle); read only."""
    tmp_path = tmp_path_factory.mktemp("exported")
    db = _copy(tmp_path, BENCH_DB)
    kept, redacted = tmp_path / "kept.gpucompat.gz", tmp_path / "redacted.gpucompat.gz"
    out = run_cli("export", "--db", db, "--bundle", str(kept), "--site", "h100-lab", "--keep-hosts", check=0).stdout
    assert "2 sweep(s), 10 cells from the site 'h100-lab' (kept as they are" in out
    run_cli("export", "--db", db, "--bundle", str(redacted), "--site", "h100-lab", check=0)
    return db, kept, redacted


def test_export_then_import_into_an_empty_store_reads_the_same(tmp_path, exported):
    db, kept, redacted = exported
    for bundle, name in ((kept, "kept.db"), (redacted, "redacted.db")):
        into = f"sqlite:///{tmp_path / name}"
        out = run_cli("import", str(bundle), "--db", into, check=0).stdout
        assert "imported 2 sweep(s), 10 cells, from the site 'h100-lab'" in out
        assert "\n  sweep 1 (was 1 at h100-lab): stored verified, 5 cells" in out and "\n  sweep 2 (was 2 at h100-lab): stored verified" in out
        for sweep in (1, 2):
            before, after = _results(db, sweep), _results(into, sweep)
            if bundle is kept:
                assert after == before
            else:  # the same cells and verdicts; only texts that held a path or a host differ
                for group in ("valid", "invalid", "untested"):
                    assert len(after[group]) == len(before[group])
                    for a, b in zip(after[group], before[group]):
                        same = {k: v for k, v in a.items() if k not in ("reason", "warnings", "gpu_state", "libraries")}
                        assert same == {k: v for k, v in b.items() if k not in ("reason", "warnings", "gpu_state", "libraries")}
                        assert a["reason"] == b["reason"] or "/" in b["reason"]
            bench_before = json.loads(run_cli("results", "--db", db, "--sweep", str(sweep), "--bench", "--format", "json", check=0).stdout)
            bench_after = json.loads(run_cli("results", "--db", into, "--sweep", str(sweep), "--bench", "--format", "json", check=0).stdout)
            strip = lambda rows: [{k: v for k, v in r.items() if k not in IDS} for r in rows]  # noqa: E731
            assert strip(bench_after) == strip(bench_before) and bench_before
    # with --keep-hosts the probe's raw JSON arrives byte for byte
    with sqlite3.connect(db.removeprefix("sqlite:///")) as a, sqlite3.connect(tmp_path / "kept.db") as b:
        query = "SELECT r.probe, r.evidence, r.summary FROM results r ORDER BY r.cell_id"
        assert [tuple(map(lambda v: json.loads(v) if v and v[:1] in "{[" else v, row)) for row in a.execute(query)] == \
               [tuple(map(lambda v: json.loads(v) if v and v[:1] in "{[" else v, row)) for row in b.execute(query)]


def test_the_provenance_is_kept_with_each_imported_sweep(tmp_path, exported):
    _db, kept, _redacted = exported
    into = f"sqlite:///{tmp_path / 'into.db'}"
    run_cli("import", str(kept), "--db", into, check=0)
    with sqlite3.connect(tmp_path / "into.db") as conn:
        rows = conn.execute("SELECT s.id, src.site, src.origin, src.data FROM sweeps s JOIN sources src ON src.id = s.source_id ORDER BY s.id").fetchall()
    assert [(r[0], r[1]) for r in rows] == [(1, "h100-lab"), (2, "h100-lab")]
    data = json.loads(rows[0][3])
    assert data["gpucompat"] and data["sweep"] == 1 and len(data["plan_sha256"]) == 64 and len(data["bundle_sha256"]) == 64
    assert data["exported_at"] <= data["imported_at"] and data["redacted"] is False


def test_importing_twice_adds_nothing(tmp_path, exported):
    db, kept, redacted = exported
    into = f"sqlite:///{tmp_path / 'into.db'}"
    run_cli("import", str(kept), "--db", into, check=0)
    once = _dump(into)
    again = run_cli("import", str(kept), "--db", into, check=0).stdout
    assert "nothing new: the 2 sweep(s) of" in again
    assert _dump(into) == once
    # a second export of the same sweeps (another time in its header) is still the same sweeps
    later = tmp_path / "later.gpucompat.gz"
    run_cli("export", "--db", db, "--bundle", str(later), "--site", "h100-lab", "--keep-hosts", check=0)
    assert later.read_bytes() != kept.read_bytes()
    assert "nothing new" in run_cli("import", str(later), "--db", into, check=0).stdout and _dump(into) == once


@pytest.mark.parametrize("damage", ["compressed byte", "content byte", "cut short", "not gzip", "not a bundle", "no trailer"])
def test_a_damaged_bundle_is_refused_and_the_store_left_untouched(tmp_path, exported, state_bundle, damage):
    _db, kept, _redacted = exported
    into = f"sqlite:///{tmp_path / 'into.db'}"
    run_cli("import", str(state_bundle), "--db", into, check=0)  # a store that holds something
    before = _dump(into)
    bad = tmp_path / "bad.gpucompat.gz"
    raw = kept.read_bytes()
    if damage == "compressed byte":
        data = bytearray(raw)
        data[len(data) // 2] ^= 0x01
        bad.write_bytes(bytes(data))
    elif damage == "content byte":  # the JSON still parses; only the digest tells
        lines = _lines(kept)
        lines[3] = lines[3].replace(b'"PASS"', b'"PASs"', 1) if b'"PASS"' in lines[3] else lines[3].replace(b"1", b"2", 1)
        _rewrite(bad, lines, digest=False)
    elif damage == "cut short":
        bad.write_bytes(raw[: len(raw) * 2 // 3])
    elif damage == "not gzip":
        bad.write_bytes(b"SQLite format 3\x00" + b"\x00" * 100)
    elif damage == "not a bundle":
        bad.write_bytes(gzip.compress(b'{"hello": "world"}\n'))
    else:  # without its sha256 and signature lines
        bad.write_bytes(gzip.compress(b"".join(_lines(kept)[:-2])))
    proc = run_cli("import", str(bad), "--db", into)
    assert proc.returncode == 2, proc.stderr
    sentence = proc.stderr.strip()
    assert sentence.startswith("error: ") and sentence.endswith("nothing was imported.") and "Traceback" not in sentence
    assert sentence.count("\n") == 0 or len(sentence.splitlines()) <= 3  # one sentence, wrapped at most by the terminal
    if damage == "content byte":
        assert "was changed after it was written" in sentence
    assert _dump(into) == before
    # into a store that does not exist yet: refused before it is created
    fresh = tmp_path / "fresh.db"
    assert run_cli("import", str(bad), "--db", f"sqlite:///{fresh}").returncode == 2 and not fresh.exists()


@pytest.fixture(scope="module")
def state_bundle(tmp_path_factory, site_key):
    """The GPU-state store's checks as a bundle of another site: what the stores below hold before a refused import."""
    tmp_path = tmp_path_factory.mktemp("state")
    db = _copy(tmp_path, STATE_DB, "other.db")
    out = tmp_path / "other.gpucompat.gz"
    run_cli("export", "--db", db, "--bundle", str(out), "--site", "state-lab", check=0)
    return out


def test_a_bundle_of_a_newer_schema_is_refused(tmp_path, exported, state_bundle):
    _db, kept, _redacted = exported
    lines = _lines(kept)
    header = json.loads(lines[0])
    header["bundle"]["schema"] = SCHEMA + 1
    lines[0] = json.dumps(header, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    # a digest that matches, signed: only the schema is wrong
    _refused_leaving_the_store_as_it_was(tmp_path, state_bundle, lines,
                                         f"is a bundle of schema {SCHEMA + 1}, newer than this gpucompat reads ({SCHEMA}): upgrade gpucompat")


def test_a_well_sealed_bundle_with_a_bad_record_rolls_back_whole(tmp_path, exported, state_bundle):
    """The digest matches and the signature verifies (whoever wrote it sealed it), but a cell's result lacks its code: refused
    in the transaction, after earlier sweeps were added, and none of them stays."""
    _db, kept, _redacted = exported
    lines = _lines(kept)
    last_cell = max(i for i, line in enumerate(lines) if line.startswith(b'{"cell":'))
    record = json.loads(lines[last_cell])
    record["cell"]["result"]["code"] = None
    lines[last_cell] = json.dumps(record, sort_keys=True, separators=(",", ":")).encode() + b"\n"
    _refused_leaving_the_store_as_it_was(tmp_path, state_bundle, lines, "a result's code is missing")


def _refused_leaving_the_store_as_it_was(tmp_path, state_bundle, lines: list[bytes], sentence: str) -> None:
    """A store that already holds another bundle imports these lines (sealed with a matching digest and signed): exit 2,
    the sentence on stderr, and the store exactly as it was."""
    bad = tmp_path / "rewritten.gpucompat.gz"
    _rewrite(bad, lines)
    into = f"sqlite:///{tmp_path / 'into.db'}"
    run_cli("import", str(state_bundle), "--db", into, check=0)
    before = _dump(into)
    proc = run_cli("import", str(bad), "--db", into)
    assert proc.returncode == 2 and sentence in proc.stderr
    assert _dump(into) == before


def test_hosts_users_paths_and_environment_values_are_redacted_by_default(tmp_path):
    db = _copy(tmp_path, STATE_DB)
    redacted, kept = tmp_path / "r.gpucompat.gz", tmp_path / "k.gpucompat.gz"
    run_cli("export", "--db", db, "--bundle", str(redacted), "--site", "state-lab", check=0)
    run_cli("export", "--db", db, "--bundle", str(kept), "--site", "state-lab", "--keep-hosts", check=0)
    plain, text = gzip.decompress(kept.read_bytes()).decode(), gzip.decompress(redacted.read_bytes()).decode()
    assert '"hostname":"vm"' in plain and "/opt/torch/.venv" in plain and '"LD_LIBRARY_PATH":"/usr/local/nvidia' in plain
    assert '"vm"' not in text and "node vm" not in text and "/opt/" not in text and "/root/" not in text and "/usr/local" not in text
    assert '"hostname":"<host>"' in text and '"LD_LIBRARY_PATH":"<redacted>"' in text and "node <host>" in text
    assert '"path":"<path>/libcublas.so.13"' in text  # the library and its version still say what was loaded
    records = [json.loads(line) for line in text.splitlines()]
    processes = [p for r in records if "cell" in r and r["cell"]["result"] and r["cell"]["result"]["probe"]
                 for when in ("before", "after") for p in ((r["cell"]["result"]["probe"].get("gpu_state") or {}).get(when) or {}).get("processes") or []]
    assert processes and all(p["pid"] is None and p["name"].startswith("<path>/") for p in processes)
    assert records[0]["bundle"]["redacted"] is True and records[0]["bundle"]["site"] == "state-lab"


def test_the_site_name_comes_from_the_flag_the_environment_or_the_config(tmp_path):
    db = _copy(tmp_path, STATE_DB)
    out = tmp_path / "b.gpucompat.gz"
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "GPUCOMPAT_SITE": ""}  # a config directory without a key: --unsigned
    proc = run_cli("export", "--db", db, "--bundle", str(out), "--unsigned", env=env)
    assert proc.returncode == 2 and "give --site NAME, set GPUCOMPAT_SITE" in proc.stderr and not out.exists()
    (tmp_path / "config" / "gpucompat").mkdir(parents=True)
    (tmp_path / "config" / "gpucompat" / "config.toml").write_text('site = "from-config"\n')
    assert "the site 'from-config'" in run_cli("export", "--db", db, "--bundle", str(out), "--unsigned", env=env, check=0).stdout
    assert "the site 'from-env'" in run_cli("export", "--db", db, "--bundle", str(out), "--unsigned", env={**env, "GPUCOMPAT_SITE": "from-env"},
                                            check=0).stdout
    for bad in ("local", "imported", "a/b", "<script>", ""):
        proc = run_cli("export", "--db", db, "--bundle", str(out), "--unsigned", "--site", bad, env={**env, "GPUCOMPAT_SITE": "x"} if not bad else env)
        if bad:
            assert proc.returncode == 2 and "is not a site name" in proc.stderr, bad
    assert run_cli("export", "--db", db, "--bundle", str(tmp_path), "--site", "x").returncode == 2
    assert "there is no sweep 99" in run_cli("export", "--db", db, "--bundle", str(out), "--site", "x", "--sweep", "99").stderr


def test_source_filters_results_and_the_report(tmp_path, exported):
    _db, kept, _redacted = exported
    into = _copy(tmp_path, EVIDENCE / "verdicts-h100" / "verdicts.db", "mixed.db")  # a sweep and a check run here (schema 3)
    run_cli("import", str(kept), "--db", into, check=0)  # then two sweeps imported from h100-lab
    listed = json.loads(run_cli("results", "--db", into, "--list", "--json", check=0).stdout)
    assert [(s["id"], s["kind"], s["source"]) for s in listed] == [(1, "sweep", "local"), (2, "check", "local"), (3, "sweep", "h100-lab"),
                                                                     (4, "sweep", "h100-lab")]
    for source, ids in (("h100-lab", [3, 4]), ("imported", [3, 4]), ("local", [1, 2])):
        assert [s["id"] for s in json.loads(run_cli("results", "--db", into, "--list", "--json", "--source", source, check=0).stdout)] == ids
    shown = lambda *extra: json.loads(run_cli("results", "--db", into, "--format", "json", *extra, check=0).stdout)["sweep"]["id"]  # noqa: E731
    assert shown() == 1  # an import does not change what `results` and `latest` mean: the newest sweep run here
    assert shown("--source", "local") == 1 and shown("--source", "h100-lab") == 4 and shown("--source", "imported") == 4
    rows = json.loads(run_cli("results", "--db", into, "--format", "json", "--source", "h100-lab", check=0).stdout)
    assert {r["source"] for group in ("valid", "invalid", "untested") for r in rows[group]} == {"h100-lab"}
    wrong = run_cli("results", "--db", into, "--sweep", "3", "--source", "local")
    assert wrong.returncode == 2 and "sweep 3 is not from the source 'local'" in wrong.stderr
    none = run_cli("results", "--db", into, "--source", "elsewhere")
    assert none.returncode == 2 and "no sweep from the source 'elsewhere'" in none.stderr
    report = tmp_path / "report.html"
    assert "(sweep 4)" in run_cli("report", "--db", into, "--source", "h100-lab", "-o", str(report), check=0).stderr
    assert "(sweep 1)" in run_cli("report", "--db", into, "--source", "local", "-o", str(report), check=0).stderr
    store = Store(into, readonly=True)
    assert {r["source"] for r in store.result_rows(None)} == {"local", "h100-lab"}
    assert {r["source"] for r in store.result_rows(None, "imported")} == {"h100-lab"}
    assert resolve(store, "latest") == 1 and run_cli("diff", "latest", "latest", "--db", into, "--json").returncode == 0


def test_an_older_store_is_upgraded_and_a_newer_one_refused(tmp_path, exported):
    _db, kept, _redacted = exported
    into = _copy(tmp_path, EVIDENCE / "knowledge-h200" / "knowledge.db", "old.db")  # schema 2
    assert json.loads(run_cli("results", "--db", into, "--list", "--json", check=0).stdout)[0]["source"] == "local"  # read in memory
    run_cli("import", str(kept), "--db", into, check=0)  # a writer upgrades it
    with sqlite3.connect(into.removeprefix("sqlite:///")) as conn:
        assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()[0] == str(SCHEMA_VERSION) == "7"
        assert {r[1] for r in conn.execute("PRAGMA table_info(sweeps)")} >= {"source_id"}
        assert {r[1] for r in conn.execute("PRAGMA table_info(sources)")} >= {"signer", "verified"}
        conn.execute("UPDATE meta SET value=? WHERE key='schema_version'", (str(SCHEMA_VERSION + 1),))
    before = _dump(into)
    proc = run_cli("import", str(kept), "--db", into)
    assert proc.returncode == 2 and f"schema version {SCHEMA_VERSION + 1}, newer than this gpucompat understands" in proc.stderr
    assert _dump(into) == before



@pytest.mark.integration
def test_a_bundle_into_postgresql(postgres_url, exported):
    """The same import into Debian's PostgreSQL (started as tests/test_postgres.py does): the same results, and once only."""
    db, kept, _redacted = exported
    first = run_cli("import", str(kept), "--db", postgres_url, check=0).stdout
    assert "imported 2 sweep(s), 10 cells" in first
    listed = lambda: [s["id"] for s in json.loads(run_cli("results", "--db", postgres_url, "--list", "--json", "--source", "h100-lab", check=0).stdout)]  # noqa: E731
    ids = listed()
    assert len(ids) == 2 and _results(postgres_url, ids[-1]) == _results(db, 2)
    assert "nothing new" in run_cli("import", str(kept), "--db", postgres_url, check=0).stdout and listed() == ids


def test_an_imported_sweep_is_never_resumed_here(tmp_path, exported):
    _db, kept, _redacted = exported
    into = f"sqlite:///{tmp_path / 'into.db'}"
    run_cli("import", str(kept), "--db", into, check=0)
    before = _dump(into)
    proc = run_cli("sweep", "--resume", "2", "--db", into)
    assert proc.returncode == 2 and "sweep 2 was imported from 'h100-lab'" in proc.stderr and "never resumed" in proc.stderr
    assert _dump(into) == before


def test_a_node_named_like_a_stage_leaves_the_verdict_alone():
    from gpucompat.redact import Redactor

    redactor = Redactor()
    redactor.learn({"probe": {"system": {"hostname": "compute"}}, "evidence": {"gpu": {"node": "gpu01.cluster.example"}}})
    record = {"code": "COMPUTE_ERROR", "stage": "compute", "summary": "failed at compute on gpu01 (node gpu01.cluster.example)",
              "evidence": {"stderr_tail": "File /home/alice/train.py, line 3", "gpu": {"node": "gpu01", "where": "node gpu01, GPU-1"}},
              "probe": {"system": {"hostname": "compute", "cuda_env": {"CUDA_HOME": "/opt/cuda"}, "executable": "/home/alice/.venv/bin/python"}},
              "warnings": ["alice's job shared the GPU"]}
    redactor.learn(record)
    shown = redactor.apply(record)
    assert shown["stage"] == "compute" and shown["code"] == "COMPUTE_ERROR"
    assert shown["summary"] == "failed at <host> on <host> (node <host>)"
    assert shown["evidence"] == {"stderr_tail": "File <path>/train.py, line 3", "gpu": {"node": "<host>", "where": "node <host>, GPU-1"}}
    assert shown["probe"]["system"] == {"hostname": "<host>", "cuda_env": {"CUDA_HOME": "<redacted>"}, "executable": "<path>/python"}
    assert shown["warnings"] == ["<user>'s job shared the GPU"]  # a user learned from a home directory, as a word
    assert record["stage"] == "compute" and record["probe"]["system"]["hostname"] == "compute"  # the input is not changed
