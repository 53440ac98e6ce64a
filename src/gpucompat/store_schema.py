"""The store's tables (SQLAlchemy Core) and their schema version: what store.py reads and writes, and what
explain's observation lookup compiles once for SQLite (answers/observed.py)."""

from __future__ import annotations

import sqlalchemy as sa

SCHEMA_VERSION = 6  # 2: predictions table, results.observed; 3: stacks.resolve_cause; 4: bench table; 5: sources, sweeps.source_id;
# 6: sources.signer, sources.verified

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
    sa.Column("origin", sa.String(64), nullable=False, unique=True),  # the sweep's digest: each is imported once
    sa.Column("data", sa.JSON, nullable=False),  # the bundle's provenance: gpucompat version, plan digest, times, its id there
    sa.Column("signer", sa.String(64)),  # the fingerprint of the key that signed the bundle (signing.py); None: unsigned
    # True: signed by a key this site trusted when it imported the sweep; False: imported with --untrusted (or before signatures)
    sa.Column("verified", sa.Boolean, nullable=False, server_default=sa.false()),
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
