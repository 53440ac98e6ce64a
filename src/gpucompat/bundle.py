"""`gpucompat export --bundle FILE` and `gpucompat import FILE`: a store's sweeps as one file that travels.

A bundle is gzip-compressed JSON lines, one object of one key per line, keys sorted:

    {"bundle": {"format": "gpucompat-bundle", "schema": 1, "site": ..., "gpucompat": ..., "exported_at": ..., "redacted": ..., "sweeps": N}}
    {"sweep": {"ref": 12, "site": ..., "plan_sha256": ..., "name": ..., ...}}     then, for that sweep,
    {"target": {"ref": ..., ...}}  {"stack": {"ref": ..., ...}}                      its GPU classes and stacks, and
    {"cell": {"ref": ..., "stack": ..., "target": ..., "result": {...}, "prediction": {...}, "bench": [...]}}  one line per cell
    ...
    {"sha256": "..."}                                                                the sha256 of every byte above it
    {"signature": {"algorithm": "ed25519", "fingerprint": ..., "public_key": ..., "value": ...}}   the site's key over that sha256


Each row carries every column the store keeps (verdict, evidence, the probe's raw JSON, bench figures), so an
imported sweep reads exactly as it did where it ran, less what redact.py takes out (host and user names,
paths, environment values) unless exported with keep_hosts. Export signs with the site's key (signing.py; without
one, only `--unsigned` writes a bundle, and it has no signature line). Import checks the whole file before it opens the
store (format, schema, every line's JSON nesting, digest, then the signature: one that does not verify is refused
always, and an unsigned bundle or one signed by a key this site does not trust is refused unless `--untrusted`), then
adds every sweep it does not hold yet in one transaction, each with its provenance in the sources table, with the key
that signed it and whether it was verified: a sweep is known by its digest, so importing a bundle twice, or two
bundles that share sweeps, adds nothing the second time. A refused bundle leaves the store as it was.
"""

from __future__ import annotations

import datetime
import gzip
import hashlib
import json
import os
import re
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import sqlalchemy as sa

from . import __version__, signing
from .errors import UserError
from .knowledge.overlay import json_too_deep
from .paths import config_dir, open_user_file, size_words
from .redact import Redactor
from .signing import check_name, is_site_name
from .store import Store, bench, cells, predictions, results, sources, stacks, sweep_vouchers, sweeps, targets

FORMAT = "gpucompat-bundle"
SCHEMA = 2  # the bundle's own schema: a bundle of a newer one is refused, never half-read (2: a signature line may end it)
_REFS = frozenset({"id", "sweep_id", "cell_id", "stack_id", "target_id", "source_id"})  # the store's own ids, remapped on import
_BATCH = 2000
# What import reads at most, uncompressed: a bundle of a year of a large site's sweeps is far smaller (a cell's
# line, with the probe's whole record, is a few KiB to a few hundred). The bounds are counted while it is read.
MAX_LINE_BYTES = 64 << 20
MAX_BUNDLE_BYTES = 4 << 30
MAX_RECORDS = 1_000_000
# How deep a line's JSON may nest: a cell's line, with the probe's whole record, nests at most 12 deep in every GPU store
# kept in docs/evidence; the parser recurses once a level, and a line nested 200,000 deep ended it in RecursionError.
MAX_DEPTH = 64


def config_file() -> Path:
    return config_dir() / "config.toml"


def site_name(given: str | None) -> str:
    """The site a bundle says it comes from: --site, else $GPUCOMPAT_SITE, else `site = "..."` in the config file."""
    name, where = given, "--site"
    if not name and os.environ.get("GPUCOMPAT_SITE"):
        name, where = os.environ["GPUCOMPAT_SITE"], "GPUCOMPAT_SITE"
    path = config_file()
    if not name and path.is_file():
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib
        try:
            name, where = tomllib.loads(path.read_text(encoding="utf-8")).get("site"), str(path)
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise UserError(f"cannot read the config file {path}: {exc}; fix it or give --site NAME.") from None
    if not name:
        raise UserError(f'a bundle names the site it comes from: give --site NAME, set GPUCOMPAT_SITE, or write site = "NAME" in {path}.')
    return check_name(name, where)


def _dumps(record: dict) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode() + b"\n"


def _plain(row, prefix: str = "") -> dict:
    """A stored row's columns (those starting with prefix, without it), less the store's own ids."""
    return {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix) and k[len(prefix):] not in _REFS}


# -- export ------------------------------------------------------------------------------------


def _sweep_records(conn, sweep_id: int, site: str) -> Iterator[dict]:
    """One sweep as bundle records: the sweep, its targets and stacks, then its cells (with results, predictions, bench)."""
    row = conn.execute(sa.select(sweeps, sources.c.site.label("from_site"), sources.c.origin, sources.c.data.label("provenance"))
                       .select_from(sweeps.outerjoin(sources, sources.c.id == sweeps.c.source_id))
                       .where(sweeps.c.id == sweep_id)).mappings().one()
    provenance = row["provenance"] or {}
    plan_digest = provenance.get("plan_sha256") or hashlib.sha256((row["plan_text"] or "").encode()).hexdigest()
    yield {"sweep": {**{c.name: row[c.name] for c in sweeps.c if c.name not in _REFS}, "ref": sweep_id, "site": row["from_site"] or site,
                     "plan_sha256": plan_digest, "origin": row["origin"], "provenance": row["provenance"]}}
    for kind, table in (("target", targets), ("stack", stacks)):
        for r in conn.execute(sa.select(table).where(table.c.sweep_id == sweep_id).order_by(table.c.id)).mappings():
            yield {kind: {**_plain(r), "ref": r["id"]}}
    figures: dict[int, list] = {}
    for r in conn.execute(sa.select(bench).join(cells, cells.c.id == bench.c.cell_id).where(cells.c.sweep_id == sweep_id)
                          .order_by(bench.c.id)).mappings():
        figures.setdefault(r["cell_id"], []).append(_plain(r))
    query = (sa.select(cells, *[c.label(f"r_{c.name}") for c in results.c], *[c.label(f"p_{c.name}") for c in predictions.c])
             .select_from(cells.outerjoin(results, results.c.cell_id == cells.c.id).outerjoin(predictions, predictions.c.cell_id == cells.c.id))
             .where(cells.c.sweep_id == sweep_id).order_by(cells.c.id))
    for r in conn.execute(query).mappings():
        yield {"cell": {"ref": r["id"], "stack": r["stack_id"], "target": r["target_id"],
                        "result": _plain(r, "r_") if r["r_id"] is not None else None,
                        "prediction": _plain(r, "p_") if r["p_id"] is not None else None, "bench": figures.get(r["id"], [])}}


def _redacted(redactor: Redactor | None, record: dict) -> dict:
    if redactor is None:
        return record
    shown = redactor.apply(record)
    if "sweep" in record:  # what names the sweep's provenance stays as it is (a site may be named like a host)
        shown["sweep"].update({k: record["sweep"][k] for k in ("site", "origin", "plan_sha256")})
    return shown


def export(store: Store, path: Path, sweep_ids: list[int] | None, site: str | None, keep_hosts: bool, unsigned: bool = False) -> dict:
    """Write the sweeps (default: every sweep run here) into a bundle at path, signed with the site's key (unless unsigned);
    what was written."""
    site = site_name(site)
    key = None if unsigned else signing.load_key()
    if key is None and not unsigned:
        raise UserError(f"this site has no signing key in {config_dir()}, so the bundle cannot be signed: run `gpucompat key` once to make "
                        "one, or give --unsigned to write a bundle other sites import only with --untrusted.")
    chosen = list(dict.fromkeys(sweep_ids)) if sweep_ids else [s["id"] for s in store.list_sweeps("local")]
    if not chosen:
        raise UserError(f"no sweep run here is stored in {store.shown}, so there is nothing to export; run `gpucompat sweep PLAN` first.")
    for sweep_id in chosen:
        store.sweep(sweep_id)  # a clear error if there is no such sweep
    with store.connection() as conn:
        unverified = conn.execute(sa.select(sweeps.c.id, sources.c.site).join(sources, sources.c.id == sweeps.c.source_id)
                                  .where(sweeps.c.id.in_(chosen), sa.not_(sa.func.coalesce(sources.c.verified, False)))).first()
    if unverified is not None and key is not None:
        raise UserError(f"sweep {unverified[0]} was imported from {unverified[1]!r} unverified: signing it would vouch for what this site "
                        "did not verify; leave it out (--sweep), or write the bundle with --unsigned.")
    redactor = None if keep_hosts else Redactor()
    if redactor is not None:  # every name first, so that a host named late is also taken out of earlier text
        with store.connection() as conn:
            for sweep_id in chosen:
                for record in _sweep_records(conn, sweep_id, site):
                    redactor.learn(record)
    path = Path(path)
    if path.is_dir():
        raise UserError(f"--bundle {path} is a directory; give a file name, e.g. {path / 'results.gpucompat.gz'}.")
    temporary = path.with_name(f".{path.name}.{os.getpid()}.part")
    digest, counts = hashlib.sha256(), {"sweeps": 0, "cells": 0}
    header = {"bundle": {"format": FORMAT, "schema": SCHEMA, "site": site, "gpucompat": __version__, "exported_at": time.time(),
                         "redacted": redactor is not None, "sweeps": len(chosen)}}
    try:
        with open(temporary, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out, store.connection() as conn:
            line = _dumps(header)
            digest.update(line)
            out.write(line)
            for sweep_id in chosen:
                for record in _sweep_records(conn, sweep_id, site):
                    kind = next(iter(record))
                    counts[f"{kind}s"] = counts.get(f"{kind}s", 0) + 1
                    line = _dumps(_redacted(redactor, record))
                    digest.update(line)
                    out.write(line)
            out.write(_dumps({"sha256": digest.hexdigest()}))
            signature = signing.sign(key, digest.hexdigest()) if key is not None else None
            if signature is not None:
                out.write(_dumps({"signature": signature}))
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write the bundle {str(path)!r}: {exc.strerror or exc}.") from None
    return {"path": str(path), "site": site, "sweeps": counts["sweeps"], "cells": counts["cells"], "sha256": digest.hexdigest(),
            "bytes": path.stat().st_size, "redacted": redactor is not None, "signed_by": signature["fingerprint"] if signature else None}


# -- import ------------------------------------------------------------------------------------


def _refused(path: Path, why: str) -> UserError:
    return UserError(f"{path} {why}; nothing was imported.")


def _lines(path: Path) -> Iterator[bytes]:
    """The bundle's lines, uncompressed and bounded (a gzip bomb is refused, not read to its end); a file that is
    not gzip, or a damaged one, is refused."""
    total = records = 0
    try:
        with open_user_file(path, "the bundle") as raw, gzip.GzipFile(fileobj=raw, mode="rb") as f:
            while True:
                line = f.readline(MAX_LINE_BYTES + 1)  # bounded: a line is never read whole before it is counted
                if not line:
                    return
                total, records = total + len(line), records + 1
                if len(line) > MAX_LINE_BYTES:
                    raise _refused(path, f"holds a line longer than {size_words(MAX_LINE_BYTES)} uncompressed, more than any record "
                                         "gpucompat writes (a gzip bomb?)")
                if total > MAX_BUNDLE_BYTES:
                    raise _refused(path, f"is larger than {size_words(MAX_BUNDLE_BYTES)} uncompressed, the most a bundle may hold")
                if records > MAX_RECORDS:
                    raise _refused(path, f"holds more than {MAX_RECORDS:,} records, the most a bundle may hold")
                yield line
    except gzip.BadGzipFile as exc:
        if "Not a gzipped file" in str(exc):
            raise _refused(path, "is not a gpucompat bundle (not a gzip-compressed file)") from None
        raise _refused(path, f"is damaged (its compressed data does not check: {exc})") from None
    except (EOFError, zlib.error, OSError) as exc:
        raise _refused(path, f"is damaged or cut short (its compressed data ends early or does not check: {exc})") from None


def _json(path: Path, line: bytes, what: str, bounded: bool = False):
    """A line's record; refused where it is not JSON, or nests deeper than MAX_DEPTH (before the parser recurses into it;
    `bounded`: verify() already counted it, and a line changed since fails the digest, the parser's RecursionError too)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise _refused(path, f"is not a gpucompat bundle ({what} is not JSON)") from None
    if not bounded:
        _bounded(path, text, what)
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise _refused(path, f"is not a gpucompat bundle ({what} is not JSON)") from None


def _bounded(path: Path, text: str, what: str) -> None:
    if json_too_deep(text, MAX_DEPTH):
        raise _refused(path, f"nests JSON deeper than {MAX_DEPTH} levels in {what}, deeper than any record gpucompat writes")


def verify(path: Path, untrusted: bool = False) -> dict:
    """Read the whole bundle once: its header, the schema, every line's nesting, the sha256 it carries against its content,
    the signature over that sha256 and whether this site trusts its key, and each sweep's digest (what makes an import
    happen once). Refused with one sentence if any of it is wrong; nothing is opened. A signature that does not verify is
    refused always; an unsigned bundle, or one signed by a key not trusted here, unless `untrusted` (then its sweeps are
    imported marked unverified)."""
    path = Path(path)
    digest, header, found, trailer, signature = hashlib.sha256(), None, [], None, None
    for number, line in enumerate(_lines(path), start=1):
        if signature is not None:
            raise _refused(path, "is not a gpucompat bundle (it goes on after its signature)")
        if trailer is not None:  # after the sha256, only the signature
            record = _json(path, line, "its signature line")
            if not isinstance(record, dict) or set(record) != {"signature"}:
                raise _refused(path, "is not a gpucompat bundle (it goes on after its sha256 with something other than a signature)")
            signature = record["signature"]
            continue
        if line.startswith(b'{"sha256":'):
            trailer = _json(path, line, "its sha256 line")
            continue
        digest.update(line)
        if header is None:
            record = _json(path, line, "its first line")
            header = record.get("bundle") if isinstance(record, dict) else None
            if not isinstance(header, dict) or header.get("format") != FORMAT:
                raise _refused(path, "is not a gpucompat bundle (its first line does not say so)")
            if not isinstance(header.get("schema"), int) or header["schema"] < 1:
                raise _refused(path, "is not a gpucompat bundle (its schema version is not a number)")
            if header["schema"] > SCHEMA:
                raise _refused(path, f"is a bundle of schema {header['schema']}, newer than this gpucompat reads ({SCHEMA}): upgrade gpucompat to import it")
            if not is_site_name(header.get("site")):
                raise _refused(path, "is not a gpucompat bundle (it names no valid site)")
        elif line.startswith(b'{"sweep":'):
            sweep = (_json(path, line, "a sweep's line") or {}).get("sweep")
            site = sweep.get("site") if isinstance(sweep, dict) else None
            if not is_site_name(site):
                raise _refused(path, "is not a gpucompat bundle (a sweep names no valid site)")
            found.append({"site": site, "origin": sweep.get("origin"), "hash": hashlib.sha256(site.encode() + b"\n")})
        else:  # read again, and parsed, by merge(): here only bounded, so that a line nested too deep is refused before the store opens
            _bounded(path, line.decode("utf-8", "replace"), f"line {number}")
        if found:
            found[-1]["hash"].update(line)
    if header is None:
        raise _refused(path, "is not a gpucompat bundle (it is empty)")
    if not isinstance(trailer, dict) or set(trailer) != {"sha256"}:
        raise _refused(path, "is not a whole gpucompat bundle (it does not end with its sha256: cut short?)")
    if trailer["sha256"] != digest.hexdigest():
        raise _refused(path, "was changed after it was written (the sha256 of its content does not match the one it carries)")
    for sweep in found:
        origin = sweep.pop("hash").hexdigest()
        sweep["origin"] = sweep["origin"] if isinstance(sweep["origin"], str) and re.fullmatch(r"[0-9a-f]{64}", sweep["origin"]) else origin
    checked = {"path": path, "header": header, "sha256": digest.hexdigest(), "sweeps": found, **_signer(path, signature, digest.hexdigest())}
    if not checked["verified"] and not untrusted:
        if checked["signer"] is None:
            raise _refused(path, "is not signed, so nothing says which site wrote it: import it with --untrusted to keep its sweeps marked "
                                 "unverified in every view")
        raise _refused(path, f"is signed by the key {checked['signer']}, which this site does not trust: `gpucompat trust add NAME KEYFILE` "
                             "with that site's public key file trusts it, or --untrusted imports it marked unverified")
    return checked


def _signer(path: Path, signature, digest: str) -> dict:
    """Who signed the bundle and whether this site trusts that key: {signer (fingerprint, None: unsigned), public_key,
    trusted_as (the trusted key's name), verified}; a signature that does not verify is refused."""
    if signature is None:
        return {"signer": None, "public_key": None, "trusted_as": None, "verified": False}
    try:
        signer = signing.check(signature, digest)
    except signing.BadSignature as exc:
        raise _refused(path, f"carries a signature that does not verify ({exc}): it was changed after it was signed, so it is refused "
                             "whatever is trusted") from None
    name = next((k["name"] for k in signing.trusted() if k["key"] == signer["public_key"]), None)
    return {"signer": signer["fingerprint"], "public_key": signer["public_key"], "trusted_as": name, "verified": name is not None}


def _vouched(checked: dict, site: str) -> bool:
    """Whether a sweep is verified: signed by a key this site trusts under the name of the site the sweep says it comes
    from (or by this site's own key). A trusted key vouches for its own site's sweeps, never for a name it merely writes."""
    trusted_as = checked["trusted_as"]
    return bool(checked["verified"]) and (trusted_as == signing.OWN or str(site).casefold() == str(trusted_as).casefold())


def _fits(kind, value) -> bool:
    if isinstance(kind, sa.JSON):
        return True
    if isinstance(kind, sa.Boolean):
        return isinstance(value, bool)
    if isinstance(kind, sa.Integer):
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(kind, sa.Float):
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, str) and (getattr(kind, "length", None) is None or len(value) <= kind.length)


def _row(table: sa.Table, body, path: Path, what: str) -> dict:
    """A record's columns for table, each checked against the column's type; a bundle that lacks one is refused."""
    if not isinstance(body, dict):
        raise _refused(path, f"is not a gpucompat bundle (a {what} is not an object)")
    row = {}
    for column in table.columns:
        if column.name in _REFS:
            continue
        value = body.get(column.name)
        if value is None and not column.nullable or value is not None and not _fits(column.type, value):
            raise _refused(path, f"is not a gpucompat bundle (a {what}'s {column.name} is {'missing' if value is None else 'of the wrong type'})")
        row[column.name] = value
    return row


def merge(store: Store, checked: dict) -> dict:
    """Add the bundle's sweeps that the store does not hold yet (verify() first), in one transaction, each with its provenance
    and the key that signed it (verified: a key this site trusts)."""
    path, header = checked["path"], checked["header"]
    origins = [s["origin"] for s in checked["sweeps"]]
    added, known, cell_count = [], 0, 0
    with store.connection(write=True) as conn:
        held = set(conn.execute(sa.select(sources.c.origin).where(sources.c.origin.in_(origins))).scalars()) if origins else set()
        order, sweep_id, maps, batch, skip = iter(checked["sweeps"]), None, {}, [], False
        again = hashlib.sha256()  # the content once more: a file changed since verify() is refused here too

        def flush() -> None:
            nonlocal cell_count
            if not batch:
                return
            try:
                rows = [{"sweep_id": sweep_id, "stack_id": maps["stack"][c["stack"]], "target_id": maps["target"][c["target"]]} for c in batch]
            except (KeyError, TypeError):
                raise _refused(path, "is not a gpucompat bundle (a cell names a stack or GPU class it does not hold)") from None
            ids = conn.execute(cells.insert().returning(cells.c.id, sort_by_parameter_order=True), rows).scalars().all()
            for table, key in ((results, "result"), (predictions, "prediction")):
                values = [{**_row(table, c[key], path, key), "cell_id": i} for i, c in zip(ids, batch) if c.get(key) is not None]
                if values:
                    conn.execute(table.insert(), values)
            figures = [{**_row(bench, f, path, "bench figure"), "cell_id": i} for i, c in zip(ids, batch)
                       for f in (c.get("bench") if isinstance(c.get("bench"), list) else [])]
            if figures:
                conn.execute(bench.insert(), figures)
            cell_count += len(batch)
            batch.clear()

        lines = _lines(path)
        again.update(next(lines, b""))  # the header, checked by verify()
        ended = False
        for number, line in enumerate(lines, start=2):
            record = _json(path, line, f"line {number}", bounded=True)
            if not isinstance(record, dict) or len(record) != 1:
                raise _refused(path, f"is not a gpucompat bundle (line {number} is not one record)")
            (kind, body), = record.items()
            if kind == "sha256":
                if again.hexdigest() != checked["sha256"]:
                    raise _refused(path, "changed while it was imported")
                ended = True
                break
            again.update(line)
            if kind == "sweep":
                flush()
                origin = next(order)["origin"]
                skip = origin in held
                known += skip
                if skip:
                    continue
                held.add(origin)
                provenance = {"site": body.get("site"), "gpucompat": header.get("gpucompat"), "exported_at": header.get("exported_at"),
                              "imported_at": time.time(), "sweep": body.get("ref"), "plan_sha256": body.get("plan_sha256"),
                              "redacted": header.get("redacted"), "bundle_sha256": checked["sha256"],
                              "first": body.get("provenance"),  # where an imported sweep was exported again: its first provenance
                              "signature": {k: checked[k] for k in ("signer", "public_key", "trusted_as", "verified")}}
                verified = _vouched(checked, body["site"])
                provenance["signature"]["verified"] = verified
                source_id = conn.execute(sources.insert().values(site=body["site"], origin=origin, data=provenance, signer=checked["signer"],
                                                                 verified=verified)).inserted_primary_key[0]
                sweep_id = conn.execute(sweeps.insert().values(**_row(sweeps, body, path, "sweep"), source_id=source_id)).inserted_primary_key[0]
                conn.execute(sweep_vouchers.insert().values(sweep_id=sweep_id, site=header["site"], signer=checked["signer"],
                                                            trusted_as=checked["trusted_as"], verified=verified, imported_at=provenance["imported_at"]))
                added.append({"id": sweep_id, "site": body["site"], "was": body.get("ref"), "name": body.get("name")})
                maps = {"target": {}, "stack": {}}
            elif skip:
                continue
            elif kind in ("target", "stack") and sweep_id is not None:
                table = targets if kind == "target" else stacks
                maps[kind][body.get("ref") if isinstance(body, dict) else None] = conn.execute(
                    table.insert().values(**_row(table, body, path, kind), sweep_id=sweep_id)).inserted_primary_key[0]
            elif kind == "cell" and sweep_id is not None and isinstance(body, dict):
                batch.append(body)
                if len(batch) >= _BATCH:
                    flush()
            else:
                raise _refused(path, f"is not a gpucompat bundle (line {number} holds an unknown record {str(kind)[:20]!r})")
        if not ended:  # cut short, or swapped for one without its sha256, since verify(): nothing is committed
            raise _refused(path, "changed while it was imported")
        flush()
    return {"path": str(path), "site": header["site"], "gpucompat": header.get("gpucompat"), "sha256": checked["sha256"],
            "exported_at": datetime.datetime.fromtimestamp(header["exported_at"]).isoformat(timespec="seconds")
            if isinstance(header.get("exported_at"), (int, float)) else None,
            "added": added, "known": known, "cells": cell_count,
            **{k: checked[k] for k in ("signer", "trusted_as", "verified")}}
