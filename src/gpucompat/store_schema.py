"""The store's tables (SQLAlchemy Core) and their schema version: what store.py reads and writes, and what
explain's observation lookup compiles once for SQLite (answers/observed.py); and a sweep's identity, computed from
its observations as a bundle carries them or as the store holds them (bundle.py's import and export)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import sqlalchemy as sa

SCHEMA_VERSION = 7  # 2: predictions table, results.observed; 3: stacks.resolve_cause; 4: bench table; 5: sources, sweeps.source_id;
# 6: sources.signer, sources.verified; 7: sources.identity, sweep_vouchers

metadata = sa.MetaData()

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
)
sources = sa.Table(  # where an imported sweep came from (bundle.py); a sweep run here has none
    "sources", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("site", sa.Text, nullable=False, index=True),
    # a token unique to the row (before schema 7: the digest a bundle named, which a forger could copy); never read as the sweep's identity
    sa.Column("origin", sa.String(64), nullable=False, unique=True),
    # the sweep's identity, computed by the importer from its observations (sweep_identity); None: imported before schema 7,
    # computed by the next import (bundle.merge)
    sa.Column("identity", sa.String(64), index=True),
    sa.Column("data", sa.JSON, nullable=False),  # the bundle's provenance: gpucompat version, plan digest, times, its id there
    sa.Column("signer", sa.String(64)),  # the fingerprint of the key that signed the bundle (signing.py); None: unsigned
    # True: one of its vouchers is verified (sweep_vouchers); False: none is (--untrusted, another site's key, before signatures)
    sa.Column("verified", sa.Boolean, nullable=False, server_default=sa.false()),
)
sweep_vouchers = sa.Table(  # each site that vouched for an imported sweep: one row per bundle's site and signing key
    "sweep_vouchers", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False, index=True),
    # the site that vouched: the name this site trusts the bundle's key under, else the site its header names
    sa.Column("site", sa.Text, nullable=False),
    sa.Column("signer", sa.String(64)),  # the fingerprint of the key that signed that bundle; None: unsigned
    sa.Column("trusted_as", sa.Text),  # the name this site trusts that key under; None: not trusted
    # True: signed by a key this site trusts under the name of the site the sweep says it comes from (a key vouches for its own
    # site's sweeps); False: unsigned, a key not trusted here, or another site's key
    sa.Column("verified", sa.Boolean, nullable=False),
    sa.Column("imported_at", sa.Float),  # None: carried over from before schema 7 with no time
)
sweeps = sa.Table(
    "sweeps", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),  # "sweep" or "check"
    sa.Column("status", sa.String(16), nullable=False),  # running, done, interrupted
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("finished_at", sa.Float),
    sa.Column("plan_path", sa.Text),
    sa.Column("plan_text", sa.Text, nullable=False),
    sa.Column("options", sa.JSON, nullable=False),
    sa.Column("source_id", sa.Integer, sa.ForeignKey("sources.id")),  # None: run here; else imported (sources)
)
targets = sa.Table(
    "targets", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False, index=True),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("cc", sa.String(8)),
    sa.Column("driver", sa.String(32)),
    sa.Column("data", sa.JSON, nullable=False),
)
stacks = sa.Table(
    "stacks", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False, index=True),
    sa.Column("key", sa.Text, nullable=False),
    sa.Column("framework", sa.String(32), nullable=False),
    sa.Column("version", sa.String(64), nullable=False),
    sa.Column("variant", sa.String(32), nullable=False),
    sa.Column("python", sa.Text, nullable=False),
    sa.Column("env", sa.String(16), nullable=False),
    sa.Column("data", sa.JSON, nullable=False),
    sa.Column("resolved_ok", sa.Boolean, nullable=False),
    sa.Column("pins", sa.JSON, nullable=False),
    sa.Column("cuda_runtime", sa.String(16)),
    sa.Column("cudnn", sa.String(16)),
    sa.Column("resolve_error", sa.Text),
    sa.Column("resolve_cause", sa.String(32)),  # uv could not ask (network, index...): the stack is untested, not impossible
)
cells = sa.Table(
    "cells", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("sweep_id", sa.Integer, sa.ForeignKey("sweeps.id"), nullable=False, index=True),
    sa.Column("stack_id", sa.Integer, sa.ForeignKey("stacks.id"), nullable=False),
    sa.Column("target_id", sa.Integer, sa.ForeignKey("targets.id"), nullable=False),
    sa.UniqueConstraint("sweep_id", "stack_id", "target_id"),
)
results = sa.Table(
    "results", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cell_id", sa.Integer, sa.ForeignKey("cells.id"), nullable=False, unique=True),
    sa.Column("code", sa.String(32), nullable=False, index=True),
    sa.Column("stage", sa.String(16), nullable=False),
    sa.Column("summary", sa.Text, nullable=False),
    sa.Column("warnings", sa.JSON, nullable=False),
    sa.Column("evidence", sa.JSON, nullable=False),
    sa.Column("probe", sa.JSON),  # the raw result.json
    sa.Column("duration_s", sa.Float),
    sa.Column("finished_at", sa.Float, nullable=False),
    # False: the verdict is the prediction, the cell was not run (--skip-predicted-failures)
    sa.Column("observed", sa.Boolean, nullable=False, server_default=sa.true()),
)
predictions = sa.Table(
    "predictions", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cell_id", sa.Integer, sa.ForeignKey("cells.id"), nullable=False, unique=True),
    sa.Column("verdict", sa.String(16), nullable=False),  # pass, fail, uncertain
    sa.Column("code", sa.String(32)),
    sa.Column("stage", sa.String(16)),
    sa.Column("warnings", sa.JSON, nullable=False),
    sa.Column("reasons", sa.JSON, nullable=False),
)

bench = sa.Table(  # the bench rung's figures: one row per measurement (and data type) of a cell
    "bench", metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("cell_id", sa.Integer, sa.ForeignKey("cells.id"), nullable=False, index=True),
    sa.Column("measurement", sa.String(32), nullable=False),
    sa.Column("dtype", sa.String(16), nullable=False),
    sa.Column("value", sa.Float, nullable=False),
    sa.Column("unit", sa.String(16), nullable=False),
    sa.Column("better", sa.String(8), nullable=False),  # higher or lower
    sa.Column("spread", sa.Float),  # interquartile range of the repetitions, in the same unit
    sa.Column("repetitions", sa.Integer, nullable=False),
    sa.Column("data", sa.JSON, nullable=False),  # NVML clocks before and after, size, note, the samples
)


# -- a sweep's identity --------------------------------------------------------------------------------------------------

IDS = frozenset({"id", "sweep_id", "cell_id", "stack_id", "target_id", "source_id"})  # the store's own ids: no part of a sweep's content


def _canonical(table: sa.Table, body) -> str:
    """A row's content as one JSON text: every column of table but the store's ids, as the store gives it back (a float
    column's 3 reads 3.0), keys sorted; what a bundle carries beyond the columns is never stored, so never counted."""
    body = body if isinstance(body, Mapping) else {}
    row = {}
    for column in table.columns:
        if column.name in IDS:
            continue
        value = body.get(column.name)
        if isinstance(column.type, sa.Float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        row[column.name] = value
    return json.dumps(row, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class SweepIdentity:
    """A sweep's identity: the sha256 of its observations, fed as a bundle carries them or as the store reads them back
    (the same for both): its kind and start time, its GPU classes, its stacks, and each cell's stack, GPU class, result,
    prediction and bench figures, each part sorted. Not the site a bundle names, its origin field, its signature, the
    store's ids, nor the sweep's name, plan or options: the same observations exported by two sites are one sweep."""

    def __init__(self, sweep) -> None:
        sweep = sweep if isinstance(sweep, Mapping) else {}
        started = sweep.get("created_at")
        self._head = json.dumps({"kind": sweep.get("kind"), "created_at": float(started) if isinstance(started, int) and
                                 not isinstance(started, bool) else started}, sort_keys=True, default=str)
        self._parts: dict[str, dict] = {"target": {}, "stack": {}}
        self._cells: list[str] = []

    def part(self, kind: str, ref, body) -> None:
        """A target or stack record (ref: what the sweep's cells name it by)."""
        self._parts[kind][json.dumps(ref, default=str)] = _digest(_canonical(targets if kind == "target" else stacks, body))

    def cell(self, stack_ref, target_ref, result, prediction, figures) -> None:
        found = [self._parts[k].get(json.dumps(r, default=str)) for k, r in (("stack", stack_ref), ("target", target_ref))]
        figures = sorted(_canonical(bench, f) for f in (figures if isinstance(figures, list) else []))
        self._cells.append(_digest(json.dumps([*found, None if result is None else _canonical(results, result),
                                               None if prediction is None else _canonical(predictions, prediction), figures])))

    def hexdigest(self) -> str:
        text = "\n".join([self._head, *sorted(self._parts["target"].values()), "", *sorted(self._parts["stack"].values()), "",
                           *sorted(self._cells)])
        return _digest("gpucompat-sweep-identity-1\n" + text)


def old_voucher(sweep_id: int, site: str, signer: str | None, verified, data) -> dict:
    """The voucher a sweep imported before schema 7 gets: its source's site, key and mark, as its provenance recorded them."""
    data = data if isinstance(data, dict) else {}
    signature = data.get("signature") if isinstance(data.get("signature"), dict) else {}
    imported_at = data.get("imported_at")
    return {"sweep_id": sweep_id, "site": site, "signer": signer, "trusted_as": signature.get("trusted_as") if signer else None,
            "verified": bool(verified), "imported_at": float(imported_at) if isinstance(imported_at, (int, float)) else None}


def sweep_identity(conn, sweep_id: int) -> str:
    """A stored sweep's identity (store_schema.SweepIdentity), read from what the store holds of it: for a sweep imported
    from a bundle, the identity the importer computed from that bundle."""
    identity = SweepIdentity(conn.execute(sa.select(sweeps.c.kind, sweeps.c.created_at).where(sweeps.c.id == sweep_id)).mappings().one())
    for kind, table in (("target", targets), ("stack", stacks)):
        for row in conn.execute(sa.select(table).where(table.c.sweep_id == sweep_id)).mappings():
            identity.part(kind, row["id"], row)
    figures: dict[int, list] = {}
    for row in conn.execute(sa.select(bench).join(cells, cells.c.id == bench.c.cell_id).where(cells.c.sweep_id == sweep_id)).mappings():
        figures.setdefault(row["cell_id"], []).append(row)
    query = (sa.select(cells.c.id, cells.c.stack_id, cells.c.target_id, *[c.label(f"r_{c.name}") for c in results.c],
                       *[c.label(f"p_{c.name}") for c in predictions.c])
             .select_from(cells.outerjoin(results, results.c.cell_id == cells.c.id).outerjoin(predictions, predictions.c.cell_id == cells.c.id))
             .where(cells.c.sweep_id == sweep_id))
    for row in conn.execute(query).mappings():
        result = {k[2:]: v for k, v in row.items() if k.startswith("r_")} if row["r_id"] is not None else None
        prediction = {k[2:]: v for k, v in row.items() if k.startswith("p_")} if row["p_id"] is not None else None
        identity.cell(row["stack_id"], row["target_id"], result, prediction, figures.get(row["id"], []))
    return identity.hexdigest()
