"""A bundle as an adversary makes one: a real store exported through the real CLI, its records edited, sealed again
(unsigned, or signed with a key given). Shared by the tests of issue 41 (what import accepts, what outputs carry)."""

from __future__ import annotations

import gzip
import hashlib
import json
import shutil

from conftest import REPO, run_cli
from gpucompat import signing

BENCH_DB = REPO / "docs" / "evidence" / "bench-h100" / "bench.db"  # 2 sweeps, 10 cells on an H100, driver 580.159.04


def export(tmp_path, env: dict, name: str = "genuine.gz", site: str = "lab-a", db=BENCH_DB) -> object:
    """The store's bundle, exported from a copy (SQLite leaves a -shm beside a WAL store even when it only reads)."""
    out, copy = tmp_path / name, tmp_path / f"{name}.db"
    shutil.copyfile(db, copy)
    run_cli("export", "--db", f"sqlite:///{copy}", "--bundle", str(out), "--site", site, "--unsigned", env=env, check=0)
    return out


def records(bundle) -> list[dict]:
    """The bundle's records up to (not including) its sha256 line."""
    out = []
    for line in gzip.decompress(bundle.read_bytes()).splitlines():
        record = json.loads(line)
        if "sha256" in record:
            return out
        out.append(record)
    return out


def seal(records_: list[dict], into, key=None):
    body = b"".join(json.dumps(r, sort_keys=True, separators=(",", ":")).encode() + b"\n" for r in records_)
    digest = hashlib.sha256(body).hexdigest()
    tail = json.dumps({"signature": signing.sign(key, digest)}).encode() + b"\n" if key is not None else b""
    into.write_bytes(gzip.compress(body + json.dumps({"sha256": digest}).encode() + b"\n" + tail))
    return into


def rename_gpu(records_: list[dict], name: str, probe_too: bool = True) -> list[dict]:
    """Every GPU class named `name`; probe_too: the probe's own device records say so too (a consistent forgery)."""
    for record in records_:
        if "target" in record:
            record["target"]["name"] = name
            record["target"]["data"]["name"] = name
        if "cell" in record and probe_too and (record["cell"].get("result") or {}).get("probe"):
            stages = record["cell"]["result"]["probe"].get("stages") or {}
            for device in ((stages.get("device") or {}).get("facts") or {}).get("devices") or []:
                device["name"] = name
            if (stages.get("compute") or {}).get("facts", {}).get("device"):
                stages["compute"]["facts"]["device"] = name
    return records_
