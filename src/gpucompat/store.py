"""Storage: SQLAlchemy Core on SQLite by default (WAL), any SQLAlchemy URL for PostgreSQL.

One transaction per cell result, so a killed sweep loses nothing and `--resume`
finishes it. A `schema_version` row guards against a newer schema: it is refused
with a clear message, never silently rewritten.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, OperationalError

from .errors import UserError
from .model import Cell, Observation, Outcome, ResolvedStack, Stack, Target

SCHEMA_VERSION = 2  # 2: predictions table, results.observed

metadata = sa.MetaData()

meta = sa.Table(
    "meta", metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
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


def data_dir() -> Path:
    """Where gpucompat keeps its database and job directories by default."""
    return Path(os.environ.get("XDG_DATA_HOME") or os.path.expanduser("~/.local/share")) / "gpucompat"


def default_url() -> str:
    return os.environ.get("GPUCOMPAT_DB") or f"sqlite:///{data_dir() / 'gpucompat.db'}"


def _sqlite_pragmas(dbapi_connection, _record) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _stack_from(data: dict) -> Stack:
    return Stack(**{**data, "requirements": tuple(data["requirements"])})


def _target_from(data: dict) -> Target:
    tuples = {k: tuple(data[k]) for k in ("devices", "features", "selector", "nodes") if k in data}
    return Target(**{**data, **tuples})


def _import_fact(name: str):
    return results.c.probe["stages"]["import"]["facts"][name].as_string()


class Store:
    def __init__(self, url: str | None = None):
        self.url = url or default_url()
        try:
            parsed = sa.engine.make_url(self.url)
        except ArgumentError:
            raise UserError(f"{self.url!r} is not a database URL (e.g. sqlite:///path/results.db or postgresql+psycopg://host/db).") from None
        if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
            Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        try:
            self.engine = sa.create_engine(parsed)
        except NoSuchModuleError:
            raise UserError(f"no database driver for {parsed.drivername!r}; for PostgreSQL install gpucompat[postgres].") from None
        except ModuleNotFoundError as exc:
            raise UserError(f"the database driver for {parsed.drivername!r} is not installed ({exc.name}); for PostgreSQL install gpucompat[postgres].") from None
        if parsed.get_backend_name() == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
        self._migrate()

    def _migrate(self) -> None:
        try:
            with self.engine.begin() as conn:
                inspector = sa.inspect(conn)
                if inspector.has_table("meta"):
                    row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
                    found = int(row[0]) if row else 0
                    if found > SCHEMA_VERSION:
                        raise UserError(
                            f"the database {self.url} has schema version {found}, newer than this gpucompat understands ({SCHEMA_VERSION}); upgrade gpucompat or use another --db."
                        )
                    if found == 1:  # 1 -> 2: a column on results (the predictions table comes with create_all)
                        conn.execute(sa.text("ALTER TABLE results ADD COLUMN observed BOOLEAN NOT NULL DEFAULT TRUE"))
                elif inspector.get_table_names():
                    raise UserError(f"the database {self.url} holds tables that are not gpucompat's; use another --db.")
                metadata.create_all(conn)
                conn.execute(meta.delete().where(meta.c.key == "schema_version"))
                conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        except OperationalError as exc:
            raise UserError(f"cannot open the database {self.url}: {exc.orig}.") from None

    # -- writing ---------------------------------------------------------------------------

    def create_sweep(self, name: str, kind: str, plan_text: str, plan_path: str | None, options: dict) -> int:
        with self.engine.begin() as conn:
            return conn.execute(
                sweeps.insert().values(
                    name=name, kind=kind, status="running", created_at=time.time(),
                    plan_path=plan_path, plan_text=plan_text, options=options,
                )
            ).inserted_primary_key[0]

    def add_cells(self, sweep_id: int, target_list: list[Target], resolved_list: list[ResolvedStack]) -> None:
        """Every stack x target, in one transaction: the sweep's cells exist before any runs."""
        with self.engine.begin() as conn:
            target_ids = [
                conn.execute(targets.insert().values(
                    sweep_id=sweep_id, key=t.key, name=t.name, cc=t.cc, driver=t.driver, data=asdict(t),
                )).inserted_primary_key[0]
                for t in target_list
            ]
            for resolved in resolved_list:
                s = resolved.stack
                stack_id = conn.execute(stacks.insert().values(
                    sweep_id=sweep_id, key=s.key, framework=s.framework, version=s.version, variant=s.variant,
                    python=s.python, env=s.env, data=asdict(s), resolved_ok=resolved.ok, pins=list(resolved.pins),
                    cuda_runtime=resolved.cuda_runtime, cudnn=resolved.cudnn, resolve_error=resolved.error,
                )).inserted_primary_key[0]
                for target_id in target_ids:
                    conn.execute(cells.insert().values(sweep_id=sweep_id, stack_id=stack_id, target_id=target_id))

    def add_predictions(self, predicted: dict[int, dict]) -> None:
        """Cell id -> Prediction.to_dict(), in one transaction."""
        with self.engine.begin() as conn:
            for cell_id, p in predicted.items():
                conn.execute(predictions.insert().values(
                    cell_id=cell_id, verdict=p["verdict"], code=p["code"], stage=p["stage"],
                    warnings=p["warnings"], reasons=p["reasons"],
                ))

    def predictions_of(self, sweep_id: int) -> dict[int, dict]:
        query = (sa.select(predictions).select_from(predictions.join(cells, cells.c.id == predictions.c.cell_id))
                 .where(cells.c.sweep_id == sweep_id))
        with self.engine.connect() as conn:
            return {row["cell_id"]: dict(row) for row in conn.execute(query).mappings()}

    def record_result(self, cell_id: int, outcome: Outcome, observation: Observation | None, observed: bool = True) -> bool:
        """Store one verdict in its own transaction; False if the cell already had one."""
        try:
            with self.engine.begin() as conn:
                conn.execute(results.insert().values(
                    cell_id=cell_id, code=outcome.code, stage=outcome.stage, summary=outcome.summary,
                    warnings=list(outcome.warnings), evidence=outcome.evidence,
                    probe=observation.facts if observation else None,
                    duration_s=observation.duration_s if observation else None, finished_at=time.time(),
                    observed=observed,
                ))
            return True
        except IntegrityError:
            return False

    def finish_sweep(self, sweep_id: int, status: str) -> None:
        with self.engine.begin() as conn:
            conn.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(status=status, finished_at=time.time()))

    # -- reading ---------------------------------------------------------------------------

    def sweep(self, sweep_id: int) -> dict:
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(sweeps).where(sweeps.c.id == sweep_id)).mappings().first()
        if row is None:
            raise UserError(f"there is no sweep {sweep_id} in {self.url}; `gpucompat results --list` shows the sweeps.")
        return dict(row)

    def list_sweeps(self) -> list[dict]:
        counts = (
            sa.select(cells.c.sweep_id, sa.func.count(cells.c.id).label("cells"), sa.func.count(results.c.id).label("done"),
                      sa.func.sum(sa.case((results.c.code == "PASS", 1), else_=0)).label("passed"))
            .select_from(cells.outerjoin(results, results.c.cell_id == cells.c.id))
            .group_by(cells.c.sweep_id).subquery()
        )
        query = (
            sa.select(sweeps.c.id, sweeps.c.name, sweeps.c.kind, sweeps.c.status, sweeps.c.created_at,
                      counts.c.cells, counts.c.done, counts.c.passed)
            .select_from(sweeps.outerjoin(counts, counts.c.sweep_id == sweeps.c.id))
            .order_by(sweeps.c.id)
        )
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def latest_sweep_id(self) -> int:
        with self.engine.connect() as conn:
            found = conn.execute(sa.select(sa.func.max(sweeps.c.id))).scalar()
        if found is None:
            raise UserError(f"no sweeps stored in {self.url} yet; run `gpucompat sweep PLAN` first.")
        return found

    def sweep_ref(self, ref: str) -> int:
        """A sweep id, 'latest', or 'latest~N' (the Nth sweep before the latest) -> its id."""
        with self.engine.connect() as conn:
            ids = [row[0] for row in conn.execute(sa.select(sweeps.c.id).order_by(sweeps.c.id.desc()))]
        text = ref.strip()
        if text.isdigit():
            if int(text) not in ids:
                raise UserError(f"there is no sweep {text} in {self.url}; `gpucompat results --list` shows the sweeps.")
            return int(text)
        if text == "latest" or (text.startswith("latest~") and text[7:].isdigit()):
            back = int(text[7:]) if "~" in text else 0
            if back >= len(ids):
                raise UserError(f"{ref!r}: only {len(ids)} sweep(s) are stored in {self.url}.")
            return ids[back]
        raise UserError(f"{ref!r} is not a sweep: give an id, 'latest' or 'latest~N'.")

    def cells_of(self, sweep_id: int, pending_only: bool = False) -> list[Cell]:
        query = (
            sa.select(cells.c.id, stacks, targets.c.data.label("target_data"))
            .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                         .outerjoin(results, results.c.cell_id == cells.c.id))
            .where(cells.c.sweep_id == sweep_id)
            .order_by(cells.c.id)
        )
        if pending_only:
            query = query.where(results.c.id.is_(None))
        out = []
        with self.engine.connect() as conn:
            for row in conn.execute(query).mappings():
                stack = _stack_from(row["data"])
                resolved = ResolvedStack(
                    stack, ok=row["resolved_ok"], pins=tuple(row["pins"]), cuda_runtime=row["cuda_runtime"],
                    cudnn=row["cudnn"], error=row["resolve_error"],
                )
                out.append(Cell(row["id"], stack, _target_from(row["target_data"]), resolved))
        return out

    def result_rows(self, sweep_id: int | None) -> list[dict]:
        """One flat row per cell with its verdict (None where it has none yet); every sweep's if None."""
        query = (
            sa.select(
                cells.c.id.label("cell_id"), cells.c.sweep_id, sweeps.c.created_at, stacks.c.framework, stacks.c.version, stacks.c.variant, stacks.c.python,
                stacks.c.env, stacks.c.cuda_runtime, stacks.c.cudnn, targets.c.name.label("gpu"), targets.c.cc,
                targets.c.driver, results.c.code, results.c.stage, results.c.summary, results.c.warnings,
                results.c.evidence, results.c.duration_s, results.c.observed,
                # only what reports show from the raw probe JSON, extracted by the database
                _import_fact("version").label("probe_version"), _import_fact("cuda_runtime").label("probe_cuda_runtime"),
                _import_fact("cudnn").label("probe_cudnn"), results.c.probe["system"]["python"].as_string().label("probe_python"),
                predictions.c.verdict.label("predicted"), predictions.c.code.label("predicted_code"),
                predictions.c.reasons.label("predicted_reasons"),
            )
            .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                         .join(sweeps, sweeps.c.id == cells.c.sweep_id)
                         .outerjoin(results, results.c.cell_id == cells.c.id)
                         .outerjoin(predictions, predictions.c.cell_id == cells.c.id))
            .order_by(cells.c.id)
        )
        if sweep_id is not None:
            query = query.where(cells.c.sweep_id == sweep_id)
        with self.engine.connect() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

