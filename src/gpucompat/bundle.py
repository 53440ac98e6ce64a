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
always, and an unsigned bundle or one signed by a key this site does not trust is refused unless `--untrusted`; every
record plausible, bundle_checks.py; no site named as a look-alike of a trusted one), then
adds every sweep it does not hold yet in one transaction, each with its provenance in the sources table.

A sweep is known by its identity, which the importer computes from its observations (store_schema.SweepIdentity: its
GPU classes, stacks, cells, results, predictions and bench figures; never the site, origin field or signature a bundle
writes), so importing a bundle twice, or the same sweep exported again by another site, adds nothing the second time:
the sweep is kept once, with every site that vouched for it (sweep_vouchers: the site, the key that signed, whether
that key is trusted here as the sweep's own site). A sweep is verified where one voucher is; a verified copy of a sweep
held unverified makes it verified (its sweep row, site and provenance replace the held one's); a forged copy, with other
observations, is another sweep, so it can neither block nor stand in for the genuine one. An imported sweep that came
redacted is exported again as it came, so that it keeps its identity wherever it travels. A refused bundle leaves the
store as it was.
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
from dataclasses import asdict, dataclass
from pathlib import Path

import sqlalchemy as sa

from . import __version__, signing
from .bundle_checks import SURROGATE_ESCAPE, SweepChecks, has_lone_surrogate
from .errors import UserError
from .knowledge.overlay import json_too_deep
from .paths import config_dir, open_user_file, size_words
from .redact import Redactor
from .signing import check_name, is_site_name
from .store import Store, bench, cells, predictions, results, sources, stacks, sweep_identity, sweep_vouchers, sweeps, targets
from .store_schema import IDS, SweepIdentity

FORMAT = "gpucompat-bundle"
SCHEMA = 2  # the bundle's own schema: a bundle of a newer one is refused, never half-read (2: a signature line may end it)
_REFS = IDS  # the store's own ids, remapped on import
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


def _redacted(redactor: Redactor | None, record: dict, as_imported: bool = False) -> dict:
    """record as the bundle carries it; as_imported: a sweep imported redacted already, whose observations are written
    as they came (redacting them again could only take out this site's own names, and would change the sweep's identity:
    the same sweep exported again by this site must be known as the same wherever it goes)."""
    if redactor is None or as_imported and "sweep" not in record:
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
    digest, counts, identities = hashlib.sha256(), {"sweeps": 0, "cells": 0}, []
    with store.connection() as conn:
        as_imported = {i for i, data in conn.execute(sa.select(sweeps.c.id, sources.c.data).join(sources, sources.c.id == sweeps.c.source_id)
                                                     .where(sweeps.c.id.in_(chosen))) if isinstance(data, dict) and data.get("redacted")}
    header = {"bundle": {"format": FORMAT, "schema": SCHEMA, "site": site, "gpucompat": __version__, "exported_at": time.time(),
                         "redacted": redactor is not None, "sweeps": len(chosen)}}
    try:
        with open(temporary, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as out, store.connection() as conn:
            line = _dumps(header)
            digest.update(line)
            out.write(line)
            for sweep_id in chosen:
                identity = None
                for record in _sweep_records(conn, sweep_id, site):
                    kind = next(iter(record))
                    counts[f"{kind}s"] = counts.get(f"{kind}s", 0) + 1
                    shown = _redacted(redactor, record, sweep_id in as_imported)
                    identity = _identify(identity, kind, shown[kind])
                    line = _dumps(shown)
                    digest.update(line)
                    out.write(line)
                identities.append(identity.hexdigest())
            out.write(_dumps({"sha256": digest.hexdigest()}))
            signature = signing.sign(key, digest.hexdigest()) if key is not None else None
            if signature is not None:
                out.write(_dumps({"signature": signature}))
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UserError(f"cannot write the bundle {str(path)!r}: {exc.strerror or exc}.") from None
    return {"path": str(path), "site": site, "sweeps": counts["sweeps"], "cells": counts["cells"], "sha256": digest.hexdigest(),
            "bytes": path.stat().st_size, "redacted": redactor is not None, "signed_by": signature["fingerprint"] if signature else None,
            "identities": identities}


def _identify(identity: SweepIdentity | None, kind: str, body: dict) -> SweepIdentity:
    """A sweep's identity fed one more record as the bundle carries it (a "sweep" record starts a new one): the identity
    the importer will compute from that bundle."""
    if kind == "sweep":
        return SweepIdentity(body)
    if kind in ("target", "stack"):
        identity.part(kind, body.get("ref"), body)
    elif kind == "cell":
        identity.cell(body.get("stack"), body.get("target"), body.get("result"), body.get("prediction"), body.get("bench"))
    return identity


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


@dataclass(frozen=True)
class SweepSeen:
    """One sweep of a bundle as verify() read it: the site it says it comes from, its id there, its name, and its identity
    (computed here from its observations: store_schema.SweepIdentity)."""

    site: str
    ref: object
    name: object
    identity: str


@dataclass(frozen=True)
class Verified:
    """A bundle read whole and checked by verify(): its header, the sha256 of its content, its sweeps, and who signed it:
    signer (the key's fingerprint; None: unsigned) and trusted_as (the name this site trusts that key under; None: not
    trusted, or unsigned)."""

    path: Path
    header: dict
    sha256: str
    sweeps: tuple[SweepSeen, ...]
    signer: str | None
    public_key: str | None
    trusted_as: str | None

    @property
    def trusted(self) -> bool:
        """Signed by a key this site trusts (under some name)."""
        return self.trusted_as is not None

    def vouches_for(self, site: str) -> bool:
        """Whether this bundle's signature makes a sweep of this site verified: a key this site trusts under that site's
        name (or this site's own key). A trusted key vouches for its own site's sweeps, never for a name it merely writes."""
        return self.trusted and (self.trusted_as == signing.OWN or str(site).casefold() == str(self.trusted_as).casefold())

    @property
    def voucher(self) -> str:
        """The site this bundle vouches as: the name this site trusts its key under, else the site its header names."""
        return self.trusted_as if self.trusted and self.trusted_as != signing.OWN else self.header["site"]

    def why(self, site: str) -> str:
        """In words, why a sweep of this site is verified or not by this bundle."""
        if self.trusted_as == signing.OWN:
            return f"signed with this site's own key {self.signer}"
        if self.vouches_for(site):
            return f"signed with the key {self.signer}, trusted as {self.trusted_as!r}, the site it comes from"
        if self.trusted:
            return (f"signed with the key {self.signer}, trusted as {self.trusted_as!r}, but the sweep says it comes from {site!r}: "
                    "a key vouches only for its own site's sweeps")
        if self.signer:
            return f"signed with the key {self.signer}, which this site does not trust (--untrusted)"
        return "unsigned (--untrusted)"


def verify(path: Path, untrusted: bool = False) -> Verified:
    """Read the whole bundle once: its header, the schema, every line's nesting, the sha256 it carries against its content,
    the signature over that sha256 and whether this site trusts its key, and each sweep's identity, computed from its
    observations (what makes an import happen once; the bundle's own `origin` field is never read). Refused with one
    sentence if any of it is wrong; nothing is opened. A signature that does not verify is refused always; an unsigned
    bundle, or one signed by a key not trusted here, unless `untrusted` (then its sweeps are imported marked unverified)."""
    path = Path(path)
    digest, header, found, trailer, signature = hashlib.sha256(), None, [], None, None
    identity, checks, implausible = None, None, None  # the sweep being read; why its content is implausible
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
            continue
        if line.startswith(b'{"sweep":'):
            record = _json(path, line, "a sweep's line")
        else:  # bounded now; one that is not JSON is refused after the digest (a damaged bundle is said to be changed), by merge()
            _bounded(path, line.decode("utf-8", "replace"), f"line {number}")
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                record = None
        kind, body = next(iter(record.items())) if isinstance(record, dict) and len(record) == 1 else (None, None)
        if SURROGATE_ESCAPE.search(line) and has_lone_surrogate(record):
            implausible = implausible or f"holds text that is not Unicode in line {number} (half a UTF-16 pair, such as \\ud800 alone)"
        if kind == "sweep":
            site = body.get("site") if isinstance(body, dict) else None
            if not is_site_name(site):
                raise _refused(path, "is not a gpucompat bundle (a sweep names no valid site)")
            identity = _identify(None, kind, body)
            found.append([site, body.get("ref"), body.get("name"), identity])
            checks = SweepChecks(len(found))
        elif identity is not None and kind in ("target", "stack", "cell") and isinstance(body, dict):
            _identify(identity, kind, body)
            implausible = implausible or checks.check(kind, body)  # said once the digest and signature hold (bundle_checks.py)
        # anything else is refused by merge(), which reads every line again
    if header is None:
        raise _refused(path, "is not a gpucompat bundle (it is empty)")
    if not isinstance(trailer, dict) or set(trailer) != {"sha256"}:
        raise _refused(path, "is not a whole gpucompat bundle (it does not end with its sha256: cut short?)")
    if trailer["sha256"] != digest.hexdigest():
        raise _refused(path, "was changed after it was written (the sha256 of its content does not match the one it carries)")
    sweeps_seen = tuple(SweepSeen(site, ref, name, seen.hexdigest()) for site, ref, name, seen in found)
    checked = Verified(path, header, digest.hexdigest(), sweeps_seen, *_signer(path, signature, digest.hexdigest()))
    if implausible:  # whoever signed it: a signature says who sealed it, never that it is plausible
        raise _refused(path, implausible)
    for site in dict.fromkeys([header["site"], *(seen.site for seen in sweeps_seen)]):
        resembled = signing.looks_like_trusted(site)
        if resembled is not None:
            raise _refused(path, f"names the site {site!r}, which reads as the trusted site {resembled!r} but is not it (a look-alike name)")
    if not checked.trusted and not untrusted:
        if checked.signer is None:
            raise _refused(path, "is not signed, so nothing says which site wrote it: import it with --untrusted to keep its sweeps marked "
                                 "unverified in every view")
        raise _refused(path, f"is signed by the key {checked.signer}, which this site does not trust: `gpucompat trust add NAME KEYFILE` "
                             "with that site's public key file trusts it, or --untrusted imports it marked unverified")
    return checked


def _signer(path: Path, signature, digest: str) -> tuple[str | None, str | None, str | None]:
    """Who signed the bundle and whether this site trusts that key: (fingerprint, None: unsigned; public key; the trusted
    key's name, None: not trusted); a signature that does not verify is refused."""
    if signature is None:
        return None, None, None
    try:
        signer = signing.check(signature, digest)
    except signing.BadSignature as exc:
        raise _refused(path, f"carries a signature that does not verify ({exc}): it was changed after it was signed, so it is refused "
                             "whatever is trusted") from None
    name = next((k["name"] for k in signing.trusted() if k["key"] == signer["public_key"]), None)
    return signer["fingerprint"], signer["public_key"], name


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


ADDED, HELD, VOUCHED, UPGRADED = "added", "held", "vouched", "upgraded"  # what import did with each sweep of a bundle


@dataclass(frozen=True)
class SweepImported:
    """What import did with one sweep of a bundle. outcome: ADDED (stored), HELD (held already, with this voucher: nothing
    changed), VOUCHED (held already; this bundle's site is kept as one more voucher), UPGRADED (held unverified; this
    copy, verified, replaced its sweep row, site and provenance, and made it verified). verified: the sweep as stored now;
    why: this bundle's word on it (verified or not, and why)."""

    id: int  # here
    was: object  # its id in the bundle
    site: str  # the site it says it comes from
    name: object
    identity: str
    outcome: str
    verified: bool
    why: str
    cells: int  # cells stored (ADDED only)


@dataclass(frozen=True)
class Imported:
    """What `import` did: the bundle (its site, version, digest, signer) and each of its sweeps."""

    path: str
    site: str  # the site its header names
    voucher: str  # the site it vouches as (Verified.voucher)
    gpucompat: object
    sha256: str
    exported_at: str | None
    signer: str | None
    trusted_as: str | None
    sweeps: tuple[SweepImported, ...]

    def count(self, *outcomes: str) -> int:
        return sum(1 for s in self.sweeps if s.outcome in outcomes)

    @property
    def cells(self) -> int:
        return sum(s.cells for s in self.sweeps)

    def to_json(self) -> dict:
        return {**asdict(self), "sweeps": [asdict(s) for s in self.sweeps], "cells": self.cells,
                **{outcome: self.count(outcome) for outcome in (ADDED, HELD, VOUCHED, UPGRADED)}}

    def signature(self) -> str:
        """Who signed the bundle, in words (whether that makes a sweep verified is each sweep's own line)."""
        if self.trusted_as == signing.OWN:
            return f"signed with this site's own key {self.signer}"
        if self.trusted_as is not None:
            return f"signed with the key {self.signer}, trusted as {self.trusted_as!r}"
        if self.signer:
            return f"signed with the key {self.signer}, not trusted here (--untrusted)"
        return "unsigned (--untrusted)"

    def lines(self, shown: str) -> list[str]:
        """What `import` says: one line for the bundle, then one per sweep, saying exactly how it was stored."""
        origin = f"the site {self.site!r} (gpucompat {self.gpucompat}, exported {self.exported_at}, {self.signature()})"
        added, held = self.count(ADDED), len(self.sweeps) - self.count(ADDED)
        if added:
            head = f"imported {added} sweep(s), {self.cells} cells, from {origin} into {shown}" + (f"; {held} already held" if held else "")
        elif self.count(VOUCHED, UPGRADED):
            head = f"no new sweep: the {held} sweep(s) of {self.path} from {origin} are already in {shown}"
        else:
            head = f"nothing new: the {held} sweep(s) of {self.path} from {origin} are already in {shown}"
        out = [head]
        for s in self.sweeps:
            mark = "verified" if s.verified else "UNVERIFIED"
            said = {ADDED: f"stored {mark}, {s.cells} cells: {s.why}",
                    UPGRADED: f"held unverified, replaced by this verified copy: now verified ({s.why})",
                    VOUCHED: f"already held, {mark}; now also vouched for by {self.voucher!r} ({s.why})",
                    HELD: f"already held, {mark}, and vouched for by {self.voucher!r} already ({s.why})"}[s.outcome]
            out.append(f"  sweep {s.id} (was {s.was} at {s.site}): {said}")
        return out


def _fill_identities(conn) -> None:
    """Sweeps imported before schema 7 have no identity yet: computed from what the store holds of them, once."""
    for source_id, sweep_id in conn.execute(sa.select(sources.c.id, sweeps.c.id).join(sweeps, sweeps.c.source_id == sources.c.id)
                                            .where(sources.c.identity.is_(None))).all():
        conn.execute(sources.update().where(sources.c.id == source_id).values(identity=sweep_identity(conn, sweep_id)))


def _held(conn, identities: list[str]) -> dict[str, dict]:
    """The sweeps held of these identities: identity -> {sweep, source, verified}; where a store from before schema 7 holds
    one twice, the verified one, else the first."""
    held: dict[str, dict] = {}
    if not identities:
        return held
    query = (sa.select(sources.c.identity, sweeps.c.id.label("sweep"), sources.c.id.label("source"), sources.c.verified)
             .join(sweeps, sweeps.c.source_id == sources.c.id).where(sources.c.identity.in_(set(identities)))
             .order_by(sources.c.verified.desc(), sweeps.c.id))
    for row in conn.execute(query).mappings():
        held.setdefault(row["identity"], {**row, "verified": bool(row["verified"])})
    return held


def _vouch(conn, sweep_id: int, checked: Verified, verified: bool, at: float) -> bool:
    """Keep this bundle's site and key as a voucher of the sweep, or bring the one kept of that key (of that site, unsigned)
    up to date: verified once its key is trusted as the sweep's site; False: kept already, as it is."""
    site, signer = checked.voucher, checked.signer
    same = sweep_vouchers.c.signer == signer if signer is not None else sa.and_(sweep_vouchers.c.signer.is_(None), sweep_vouchers.c.site == site)
    kept = conn.execute(sa.select(sweep_vouchers.c.id, sweep_vouchers.c.site, sweep_vouchers.c.verified, sweep_vouchers.c.trusted_as)
                        .where(sweep_vouchers.c.sweep_id == sweep_id, same).order_by(sweep_vouchers.c.id)).first()
    if kept is None:
        conn.execute(sweep_vouchers.insert().values(sweep_id=sweep_id, site=site, signer=signer, trusted_as=checked.trusted_as,
                                                    verified=verified, imported_at=at))
        return True
    if (kept.site, bool(kept.verified), kept.trusted_as) == (site, verified, checked.trusted_as) or bool(kept.verified) and not verified:
        return False  # what a key once vouched for stays vouched (trust remove: sweeps imported before keep their mark)
    conn.execute(sweep_vouchers.update().where(sweep_vouchers.c.id == kept.id).values(site=site, trusted_as=checked.trusted_as,
                                                                                      verified=verified, imported_at=at))
    return True


def _origin(conn, identity: str) -> str:
    """A new source row's unique origin: its identity, unless a row from before schema 7 holds that value (a bundle then
    named its own origin, which a forger could copy)."""
    taken = conn.execute(sa.select(sources.c.id).where(sources.c.origin == identity)).first()
    return identity if taken is None else hashlib.sha256(f"{identity}\n{time.time_ns()}\n{os.getpid()}".encode()).hexdigest()


def merge(store: Store, checked: Verified) -> Imported:
    """Merge a bundle (verify() first) in one transaction. Each sweep is known by the identity verify() computed from its
    observations: one not held yet is added, with its provenance and its first voucher (this bundle's site and key); one
    held already gains this bundle's site as a voucher, and where it was held unverified and this copy is verified, this
    copy's sweep row, site and provenance replace the held one's (its observations are the same: the identity says so). A
    sweep is verified where one of its vouchers is: signed by a key this site trusts as the sweep's own site."""
    path, header = checked.path, checked.header
    done: list[SweepImported] = []
    with store.connection(write=True) as conn:
        _fill_identities(conn)
        held = _held(conn, [s.identity for s in checked.sweeps])
        order, sweep_id, maps, batch, skip = iter(checked.sweeps), None, {}, [], False
        again = hashlib.sha256()  # the content once more: a file changed since verify() is refused here too
        counted = 0

        def flush() -> None:
            nonlocal counted
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
            counted += len(batch)
            batch.clear()

        def finish() -> None:  # the sweep being added: its cells counted
            nonlocal counted
            flush()
            if done and done[-1].outcome == ADDED:
                done[-1] = SweepImported(**{**asdict(done[-1]), "cells": counted})
            counted = 0

        lines = _lines(path)
        again.update(next(lines, b""))  # the header, checked by verify()
        ended = False
        for number, line in enumerate(lines, start=2):
            record = _json(path, line, f"line {number}", bounded=True)
            if not isinstance(record, dict) or len(record) != 1:
                raise _refused(path, f"is not a gpucompat bundle (line {number} is not one record)")
            (kind, body), = record.items()
            if kind == "sha256":
                if again.hexdigest() != checked.sha256:
                    raise _refused(path, "changed while it was imported")
                ended = True
                break
            again.update(line)
            if kind == "sweep":
                finish()
                seen = next(order)
                now = time.time()
                verified = checked.vouches_for(seen.site)
                provenance = {"site": seen.site, "gpucompat": header.get("gpucompat"), "exported_at": header.get("exported_at"),
                              "imported_at": now, "sweep": body.get("ref"), "plan_sha256": body.get("plan_sha256"),
                              "redacted": header.get("redacted"), "bundle_sha256": checked.sha256, "bundle_site": header["site"],
                              "first": body.get("provenance"),  # where an imported sweep was exported again: its first provenance
                              "signature": {"signer": checked.signer, "public_key": checked.public_key, "trusted_as": checked.trusted_as,
                                            "verified": verified}}
                found = held.get(seen.identity)
                skip = found is not None
                if skip:
                    vouched = _vouch(conn, found["sweep"], checked, verified, now)
                    outcome = VOUCHED if vouched else HELD
                    if verified and not found["verified"]:  # the verified copy wins: its sweep row, site and provenance
                        conn.execute(sweeps.update().where(sweeps.c.id == found["sweep"]).values(**_row(sweeps, body, path, "sweep")))
                        conn.execute(sources.update().where(sources.c.id == found["source"]).values(
                            site=seen.site, data=provenance, signer=checked.signer, verified=True))
                        found["verified"], outcome = True, UPGRADED
                    done.append(SweepImported(found["sweep"], body.get("ref"), seen.site, body.get("name"), seen.identity, outcome,
                                              found["verified"], checked.why(seen.site), 0))
                    continue
                source_id = conn.execute(sources.insert().values(site=seen.site, origin=_origin(conn, seen.identity), identity=seen.identity,
                                                                 data=provenance, signer=checked.signer, verified=verified)).inserted_primary_key[0]
                sweep_id = conn.execute(sweeps.insert().values(**_row(sweeps, body, path, "sweep"), source_id=source_id)).inserted_primary_key[0]
                _vouch(conn, sweep_id, checked, verified, now)
                held[seen.identity] = {"sweep": sweep_id, "source": source_id, "verified": verified}  # the same sweep twice in one bundle
                done.append(SweepImported(sweep_id, body.get("ref"), seen.site, body.get("name"), seen.identity, ADDED, verified,
                                          checked.why(seen.site), 0))
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
        finish()
    exported = header.get("exported_at")
    return Imported(str(path), header["site"], checked.voucher, header.get("gpucompat"), checked.sha256,
                    datetime.datetime.fromtimestamp(exported).isoformat(timespec="seconds") if isinstance(exported, (int, float)) else None,
                    checked.signer, checked.trusted_as, tuple(done))
