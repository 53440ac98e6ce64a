"""Storage: SQLAlchemy Core on SQLite by default (WAL), any SQLAlchemy URL for PostgreSQL.

One transaction per cell result, so a killed sweep loses nothing and `--resume`
finishes it; one transaction for a new sweep with all its cells and predictions, so
a sweep is stored whole or not at all. A `schema_version` row guards against a newer
schema: it is refused with a clear message, never silently rewritten, and a refused
or damaged file is never written to. Store(url, readonly=True) writes nothing at all.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from urllib.parse import unquote

import sqlalchemy as sa
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError, ProgrammingError

from .bench import figures as bench_figures
from .bench import missing as bench_missing
from .errors import UserError
from .paths import data_dir, default_url, open_user_file, sqlite_readonly  # noqa: F401 (the store's defaults, named where they live)
from .model import Cell, Observation, Outcome, ResolvedStack, Stack, Target
from .store_schema import (SCHEMA_VERSION, bench, cells, meta, metadata, old_voucher, predictions, results,  # noqa: F401 (named here too)
                           sources, stacks, sweep_identity, sweep_vouchers, sweeps, targets)


def runs_dir_for(sqlite_file: Path | None, shown_url: str) -> Path:
    """Where the job directories of a database's sweeps go: beside its file (results.db ->
    results-runs/), so two databases never share sweep-N directories; for a server database,
    under the data directory, named by its URL."""
    if sqlite_file is not None:
        path = sqlite_file.expanduser().absolute()
        return path.with_name(f"{path.stem}-runs")
    import hashlib

    return data_dir() / "runs" / hashlib.sha256(shown_url.encode()).hexdigest()[:12]




SQLITE_HEADER = b"SQLite format 3\x00"

# What SQLite (or the server) says -> the sentence the user gets; checked in this order.
_DB_ERRORS = (
    (("malformed", "not a database", "encrypted"), "the database {url} is damaged ({error}); restore it from a backup or give --db another file."),
    (("readonly", "read-only"), "the database {url} cannot be written here ({error}); give --db a writable database."),
    (("locked", "busy"), "the database {url} stayed locked by another process ({error}); retry when that process has finished."),
    (("disk i/o",), "the database {url} could not be read or written ({error}); check its disk and free space."),
)


def _is_uri(url: sa.engine.URL) -> bool:
    return str(url.query.get("uri", "")).lower() in ("true", "1", "yes", "on")


def _sqlite_file(url: sa.engine.URL) -> Path | None:
    """The file a SQLite URL names, as a plain path or a file: URI; None for a database in memory."""
    name = url.database or ""
    if _is_uri(url) and name.startswith("file:"):
        if url.query.get("mode") == "memory":
            return None
        name = unquote(name[5:].split("?")[0])
        if name.startswith("//"):  # file://localhost/path or file:///path
            name = name[name.find("/", 2):]
    return None if name in ("", ":memory:") else Path(name)


def _readonly_sqlite_url(path: Path) -> sa.engine.URL:
    """How to open a SQLite file for reading only, leaving no -wal/-shm behind (paths.sqlite_readonly says how)."""
    database, mode = sqlite_readonly(path)
    if not mode:
        return sa.engine.URL.create("sqlite", database=database)
    return sa.engine.URL.create("sqlite", database=database, query={**mode, "uri": "true"})


def _sqlite_on_connect(readonly: bool):
    def on_connect(dbapi_connection, _record) -> None:
        # pysqlite's own BEGIN comes late and is never IMMEDIATE; SQLAlchemy's "begin" event emits ours (_sqlite_begin)
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA busy_timeout=30000")
        if readonly:
            cursor.execute("PRAGMA query_only=ON")
        cursor.close()
    return on_connect


def _sqlite_begin(conn) -> None:
    # Writes say "BEGIN IMMEDIATE" (_immediate): it takes the write lock at the start, so writers queue
    # for it (busy_timeout) instead of failing when a read turns into a write after another commit.
    # None: no transaction, for the PRAGMA that SQLite refuses inside one.
    begin = conn.get_execution_options().get("gpucompat_begin", "BEGIN")
    if begin:
        conn.exec_driver_sql(begin)


def _racing(exc: DBAPIError) -> bool:
    """Another process is creating or changing the same new database right now."""
    text = str(exc.orig).lower()
    return any(s in text for s in ("already exists", "duplicate key", "locked", "busy"))


def _stack_from(data: dict) -> Stack:
    return Stack(**{**data, "requirements": tuple(data["requirements"]), "channels": tuple(data.get("channels", ()))})


def _target_from(data: dict) -> Target:
    tuples = {k: tuple(data[k]) for k in ("devices", "features", "selector", "nodes") if k in data}
    return Target(**{**data, **tuples})


def _from_source(query, source: str | None, bound: bool = False):
    """Only the sweeps of one source: "local" (run here), "imported" (from any bundle) or a site's name
    (bound: as the named parameter :site)."""
    if source is None:
        return query
    if source == "local":
        return query.where(sweeps.c.source_id.is_(None))
    site = sa.literal_column(":site") if bound else source
    return query.where(sweeps.c.source_id.in_(sa.select(sources.c.id).where(sa.true() if source == "imported" else sources.c.site == site)))


def _import_fact(name: str):
    return results.c.probe["stages"]["import"]["facts"][name].as_string()


def _bench_cell_columns() -> list:
    """What every bench row carries of its cell: the sweep, the stack, the GPU class, the version and Python the probe read."""
    return [cells.c.id.label("cell"), cells.c.sweep_id.label("sweep"), stacks.c.framework, stacks.c.version, stacks.c.variant,
            stacks.c.python, stacks.c.env, targets.c.name.label("gpu"), targets.c.cc, targets.c.driver,
            _import_fact("version").label("probe_version"), results.c.probe["system"]["python"].as_string().label("probe_python")]


class Store:
    def __init__(self, url: str | None = None, readonly: bool = False):
        """Open (and, unless readonly, create or migrate) the database at url.

        readonly: create, migrate and write nothing; a database that does not exist yet reads as
        empty. A SQLite URL with mode=ro is always opened this way.
        """
        self.url = url or default_url()
        try:
            parsed = sa.engine.make_url(self.url)
        except ArgumentError:
            raise UserError(f"{self.url!r} is not a database URL (e.g. sqlite:///path/results.db or postgresql+psycopg://host/db).") from None
        self.shown = parsed.render_as_string(hide_password=True)
        sqlite = parsed.get_backend_name() == "sqlite"
        self.readonly = readonly or (sqlite and parsed.query.get("mode") == "ro")
        path = _sqlite_file(parsed) if sqlite else None
        self.runs_dir = runs_dir_for(path, self.shown)
        if path is not None:
            if not self._check_file(path):
                self._in_memory()
                return
            if self.readonly and set(parsed.query) <= {"mode", "uri"}:  # a URL with other SQLite options is used as given
                parsed = _readonly_sqlite_url(path)
        try:
            self.engine = sa.create_engine(parsed)
        except NoSuchModuleError:
            raise UserError(f"no database driver for {parsed.drivername!r}; for PostgreSQL install gpucompat[postgres].") from None
        except ModuleNotFoundError as exc:
            raise UserError(f"the database driver for {parsed.drivername!r} is not installed ({exc.name}); for PostgreSQL install gpucompat[postgres].") from None
        if sqlite:
            sa.event.listen(self.engine, "connect", _sqlite_on_connect(self.readonly))
            sa.event.listen(self.engine, "begin", _sqlite_begin)
        elif self.readonly and parsed.get_backend_name() == "postgresql":
            self.engine = self.engine.execution_options(postgresql_readonly=True)
        try:
            with self._errors():
                self._open(sqlite_file=path is not None)
        except UserError:
            self.engine.dispose()  # close the check's connection: a refused file is left exactly as it was
            raise

    def connection(self, write: bool = False):
        """For a module that reads or writes the tables itself (bundle.py); write: one transaction holding the write lock."""
        return self._write() if write else self._read()

    def close(self) -> None:
        """Close the database's connections (SQLite removes its -wal and -shm files when the last one closes)."""
        self.engine.dispose()

    def _check_file(self, path: Path) -> bool:
        """Refuse what SQLite must not touch, before it touches it. False: readonly and nothing there."""
        if path.is_dir():
            raise UserError(f"{path} is a directory, not a database file; give --db a file, e.g. sqlite:///{path / 'gpucompat.db'}.")
        if path.exists():
            try:
                with open_user_file(path, "the database") as f:  # a named pipe or a device is refused, never waited on
                    header = f.read(len(SQLITE_HEADER))
            except OSError as exc:
                raise UserError(f"cannot read the database {path}: {exc.strerror}.") from None
            if header and header != SQLITE_HEADER:  # an empty file is a new database
                raise UserError(f"{path} is not a SQLite database; give --db a gpucompat database or the name of a new file.")
            # SQLite writes the file and creates -wal/-shm beside it; fail now, not after a sweep is resolved
            if not self.readonly and not (os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK)):
                raise UserError(f"cannot write the database {path}: it or its directory is not writable here; give --db a writable place.")
            return True
        if self.readonly:
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create the directory {path.parent} for the database: {exc.strerror}; give --db a writable place.") from None
        if not os.access(path.parent, os.W_OK | os.X_OK):
            raise UserError(f"cannot create the database {path}: its directory is not writable; give --db a writable place.")
        return True

    def _in_memory(self, older: sa.engine.Engine | None = None) -> None:
        """Read from memory, the file untouched: gpucompat's empty tables where there is no database yet,
        or a copy of an older SQLite schema, upgraded there (reading alone must not migrate the file)."""
        # one connection for every thread (each would otherwise get a memory database of its own)
        memory = sa.create_engine("sqlite://", poolclass=sa.pool.StaticPool, connect_args={"check_same_thread": False})
        if older is not None:
            source, copy = older.raw_connection(), memory.raw_connection()
            try:
                source.driver_connection.backup(copy.driver_connection)  # one consistent snapshot, even while a writer works
            finally:
                source.close()
                copy.close()
            older.dispose()
        with memory.begin() as conn:
            self._create_or_migrate(conn)
        with memory.connect() as conn:
            conn.exec_driver_sql("PRAGMA query_only=ON")
        self.engine = memory

    def _open(self, sqlite_file: bool) -> None:
        """Check the schema with a connection that writes nothing; only then switch to WAL, create or migrate."""
        started = time.monotonic()
        for attempt in range(6):
            try:
                with self.engine.connect() as conn:
                    found = self._schema_version(conn)
                if self.readonly:
                    if found is None:
                        self.engine.dispose()
                        self._in_memory()
                    elif found < SCHEMA_VERSION and sqlite_file:
                        self._in_memory(older=self.engine)
                    elif found < SCHEMA_VERSION:
                        raise UserError(
                            f"the database {self.shown} has the older schema version {found}, which reading alone cannot upgrade; "
                            f"run any `gpucompat sweep --db {self.shown}` on it once, then read it again."
                        )
                    return
                if sqlite_file:  # WAL only now that the store is accepted; the mode is kept in the file
                    with self.engine.connect() as conn:
                        conn.execution_options(gpucompat_begin=None).exec_driver_sql("PRAGMA journal_mode=WAL")
                if found != SCHEMA_VERSION:
                    with self._immediate() as conn:
                        self._create_or_migrate(conn)
                return
            except (OperationalError, IntegrityError, ProgrammingError) as exc:
                # several processes opening one new database: the losers see "already exists", or a lock SQLite
                # reports at once (switching to WAL); retry a few times, never once busy_timeout (30 s) is spent
                if attempt == 5 or not _racing(exc) or time.monotonic() - started > 30:
                    raise
                time.sleep(0.05 * (attempt + 1))

    def _schema_version(self, conn) -> int | None:
        """The stored schema version (None: no tables yet); refuses a newer schema and others' tables."""
        inspector = sa.inspect(conn)
        if not inspector.has_table("meta"):
            if inspector.get_table_names():
                raise UserError(f"the database {self.shown} holds tables that are not gpucompat's; use another --db.")
            return None
        row = conn.execute(sa.select(meta.c.value).where(meta.c.key == "schema_version")).first()
        if row is not None and not re.fullmatch(r"[0-9]{1,6}", str(row[0]), re.ASCII):
            raise UserError(f"the database {self.shown} is damaged (its schema version reads {str(row[0])[:20]!r}); use another --db.")
        found = int(row[0]) if row else 0
        if found > SCHEMA_VERSION:
            raise UserError(
                f"the database {self.shown} has schema version {found}, newer than this gpucompat understands ({SCHEMA_VERSION}); upgrade gpucompat or use another --db."
            )
        return found

    def _create_or_migrate(self, conn) -> None:
        found = self._schema_version(conn)  # again, under the write lock: another opener may have done it meanwhile
        if found == SCHEMA_VERSION:
            return
        if found == 1:  # 1 -> 2: a column on results (the predictions table comes with create_all)
            conn.execute(sa.text("ALTER TABLE results ADD COLUMN observed BOOLEAN NOT NULL DEFAULT TRUE"))
        if found in (1, 2):  # 2 -> 3: a column on stacks
            conn.execute(sa.text("ALTER TABLE stacks ADD COLUMN resolve_cause VARCHAR(32)"))
        if found == 5:  # 5 -> 6: who signed each imported sweep; those imported before signatures are unverified
            conn.execute(sa.text("ALTER TABLE sources ADD COLUMN signer VARCHAR(64)"))
            conn.execute(sa.text("ALTER TABLE sources ADD COLUMN verified BOOLEAN NOT NULL DEFAULT FALSE"))
        if found in (5, 6):  # 6 -> 7: the identity the importer computes (filled by the next import), each sweep's vouchers
            conn.execute(sa.text("ALTER TABLE sources ADD COLUMN identity VARCHAR(64)"))
            conn.execute(sa.text("CREATE INDEX ix_sources_identity ON sources (identity)"))
        metadata.create_all(conn)
        if found in (1, 2, 3, 4):  # 4 -> 5: a column on sweeps, once the sources table exists
            conn.execute(sa.text("ALTER TABLE sweeps ADD COLUMN source_id INTEGER REFERENCES sources(id)"))
        if found in (5, 6):  # each imported sweep's one voucher: the site and key its source names, as verified as it was
            held = conn.execute(sa.select(sweeps.c.id, sources.c.site, sources.c.signer, sources.c.verified, sources.c.data)
                                .join(sources, sources.c.id == sweeps.c.source_id)).all()
            if held:
                conn.execute(sweep_vouchers.insert(), [old_voucher(*row) for row in held])
        conn.execute(meta.delete().where(meta.c.key == "schema_version"))
        conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))

    def vouchers(self, sweep_id: int) -> list[dict]:
        """Every site that vouched for an imported sweep, first come first: {site (the site whose bundle carried it), signer (its
        key's fingerprint, None: unsigned), trusted_as (the name this site trusts that key under, None: not trusted), verified
        (signed by a key trusted as the sweep's own site), imported_at}. A sweep run here has none: [] (this site is its own)."""
        query = (sa.select(sweep_vouchers.c.site, sweep_vouchers.c.signer, sweep_vouchers.c.trusted_as, sweep_vouchers.c.verified,
                           sweep_vouchers.c.imported_at).where(sweep_vouchers.c.sweep_id == sweep_id).order_by(sweep_vouchers.c.id))
        with self._read() as conn:
            return [{**row, "verified": bool(row["verified"])} for row in conn.execute(query).mappings()]

    @contextmanager
    def _errors(self):
        """A database that fails under us (damaged, read-only, locked, unreachable) is the user's to fix: one sentence."""
        try:
            yield
        except DBAPIError as exc:
            error = str(exc.orig).strip().rstrip(".")
            for needles, sentence in _DB_ERRORS:
                if any(n in error.lower() for n in needles):
                    raise UserError(sentence.format(url=self.shown, error=error)) from None
            if isinstance(exc, OperationalError):
                raise UserError(f"cannot open the database {self.shown}: {error}.") from None
            raise

    @contextmanager
    def _read(self):
        with self._errors(), self.engine.connect() as conn:
            yield conn

    @contextmanager
    def _write(self):
        with self._errors(), self._immediate() as conn:
            yield conn

    @contextmanager
    def _immediate(self):
        """One transaction that holds the write lock from its start (BEGIN IMMEDIATE on SQLite)."""
        with self.engine.connect() as conn:
            conn.execution_options(gpucompat_begin="BEGIN IMMEDIATE")
            with conn.begin():
                yield conn

    # -- writing ---------------------------------------------------------------------------

    def create_sweep(self, name: str, kind: str, plan_text: str, plan_path: str | None, options: dict,
                     target_list: list[Target], resolved_list: list[ResolvedStack],
                     predict: Callable[[ResolvedStack, Target], dict]) -> int:
        """Store a sweep with every stack x target cell and its prediction, all in one transaction.

        A sweep is there whole or not at all: killed midway, nothing is left behind. predict(resolved,
        target) returns Prediction.to_dict(); every prediction is made before the transaction opens,
        so a slow or failing predictor holds no lock and leaves nothing half-written. Returns the id.
        """
        predicted = [[predict(resolved, t) for t in target_list] for resolved in resolved_list]
        with self._write() as conn:
            sweep_id = conn.execute(sweeps.insert().values(
                name=name, kind=kind, status="running", created_at=time.time(),
                plan_path=plan_path, plan_text=plan_text, options=options,
            )).inserted_primary_key[0]
            target_ids = [
                conn.execute(targets.insert().values(
                    sweep_id=sweep_id, key=t.key, name=t.name, cc=t.cc, driver=t.driver, data=asdict(t),
                )).inserted_primary_key[0]
                for t in target_list
            ]
            for resolved, row in zip(resolved_list, predicted):
                s = resolved.stack
                stack_id = conn.execute(stacks.insert().values(
                    sweep_id=sweep_id, key=s.key, framework=s.framework, version=s.version, variant=s.variant,
                    python=s.python, env=s.env, data=asdict(s), resolved_ok=resolved.ok, pins=list(resolved.pins),
                    cuda_runtime=resolved.cuda_runtime, cudnn=resolved.cudnn, resolve_error=resolved.error,
                    resolve_cause=resolved.cause,
                )).inserted_primary_key[0]
                for target_id, p in zip(target_ids, row):
                    cell_id = conn.execute(
                        cells.insert().values(sweep_id=sweep_id, stack_id=stack_id, target_id=target_id)
                    ).inserted_primary_key[0]
                    conn.execute(predictions.insert().values(
                        cell_id=cell_id, verdict=p["verdict"], code=p["code"], stage=p["stage"],
                        warnings=p["warnings"], reasons=p["reasons"],
                    ))
        return sweep_id

    def predictions_of(self, sweep_id: int) -> dict[int, dict]:
        query = (sa.select(predictions).select_from(predictions.join(cells, cells.c.id == predictions.c.cell_id))
                 .where(cells.c.sweep_id == sweep_id))
        with self._read() as conn:
            return {row["cell_id"]: dict(row) for row in conn.execute(query).mappings()}

    def record_result(self, cell_id: int, outcome: Outcome, observation: Observation | None, observed: bool = True) -> bool:
        """Store one verdict in its own transaction; False if the cell already had one."""
        try:
            with self._write() as conn:
                conn.execute(results.insert().values(
                    cell_id=cell_id, code=outcome.code, stage=outcome.stage, summary=outcome.summary,
                    warnings=list(outcome.warnings), evidence=outcome.evidence,
                    probe=observation.facts if observation else None,
                    duration_s=observation.duration_s if observation else None, finished_at=time.time(),
                    observed=observed,
                ))
                figures = bench_figures(observation.facts) if observation and outcome.code == "PASS" else []
                if figures:
                    conn.execute(bench.insert(), [{"cell_id": cell_id, **figure} for figure in figures])
            return True
        except IntegrityError:
            return False

    def retry_untested(self, sweep_id: int) -> int:
        """Forget the sweep's UNTESTED verdicts, so that its cells are pending again; how many."""
        mine = sa.select(cells.c.id).where(cells.c.sweep_id == sweep_id).scalar_subquery()
        with self._write() as conn:
            return conn.execute(results.delete().where(results.c.code == "UNTESTED", results.c.cell_id.in_(mine))).rowcount

    def update_resolution(self, sweep_id: int, resolved: ResolvedStack, predicted: dict[int, dict]) -> None:
        """A stack resolved again (its first try could not ask the index): its row, and the predictions
        of its cells (cell id -> Prediction.to_dict(), made before the transaction opens)."""
        with self._write() as conn:
            stack_id = conn.execute(sa.select(stacks.c.id).where(stacks.c.sweep_id == sweep_id, stacks.c.key == resolved.stack.key)).scalar_one()
            conn.execute(stacks.update().where(stacks.c.id == stack_id).values(
                resolved_ok=resolved.ok, pins=list(resolved.pins), cuda_runtime=resolved.cuda_runtime, cudnn=resolved.cudnn,
                resolve_error=resolved.error, resolve_cause=resolved.cause,
            ))
            for cell_id, p in predicted.items():
                conn.execute(predictions.update().where(predictions.c.cell_id == cell_id).values(
                    verdict=p["verdict"], code=p["code"], stage=p["stage"], warnings=p["warnings"], reasons=p["reasons"],
                ))

    def finish_sweep(self, sweep_id: int, status: str) -> None:
        with self._write() as conn:
            conn.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(status=status, finished_at=time.time()))

    def set_options(self, sweep_id: int, options: dict) -> None:
        """The run options a sweep is resumed with (a new --workdir), kept for the next --resume too."""
        with self._write() as conn:
            conn.execute(sweeps.update().where(sweeps.c.id == sweep_id).values(options=options))

    # -- reading ---------------------------------------------------------------------------

    def sweep(self, sweep_id: int) -> dict:
        if not 0 <= sweep_id < 2**63:  # beyond SQLite's integers: no such sweep, not an overflow
            raise UserError(f"there is no sweep {str(sweep_id)[:20]} in {self.shown}; `gpucompat results --list` shows the sweeps.")
        with self._read() as conn:
            row = conn.execute(sa.select(sweeps).where(sweeps.c.id == sweep_id)).mappings().first()
        if row is None:
            raise UserError(f"there is no sweep {sweep_id} in {self.shown}; `gpucompat results --list` shows the sweeps.")
        return dict(row)

    def list_sweeps(self, source: str | None = None) -> list[dict]:
        counts = (
            sa.select(cells.c.sweep_id, sa.func.count(cells.c.id).label("cells"), sa.func.count(results.c.id).label("done"),
                      sa.func.sum(sa.case((results.c.code == "PASS", 1), else_=0)).label("passed"),
                      # NO_MATCH: stored before the cause not-scheduled, read as it (analysis.as_read)
                      sa.func.sum(sa.case((results.c.code.in_(("UNTESTED", "NO_MATCH")), 1), else_=0)).label("untested"))
            .select_from(cells.outerjoin(results, results.c.cell_id == cells.c.id))
            .group_by(cells.c.sweep_id).subquery()
        )
        query = (
            sa.select(sweeps.c.id, sweeps.c.name, sweeps.c.kind, sweeps.c.status, sweeps.c.created_at,
                      counts.c.cells, counts.c.done, counts.c.passed, counts.c.untested, sa.func.coalesce(sources.c.site, "local").label("source"),
                      sa.func.coalesce(sources.c.verified, sa.true()).label("verified"), sources.c.signer)
            .select_from(sweeps.outerjoin(counts, counts.c.sweep_id == sweeps.c.id).outerjoin(sources, sources.c.id == sweeps.c.source_id))
            .order_by(sweeps.c.id)
        )
        query = _from_source(query, source)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def latest_sweep_id(self, source: str | None = None) -> int:
        """The newest sweep of kind "sweep" (of one source, if given; else run here before imported); the newest check where no sweep
        is stored, so `results` shows a check just run."""
        newest = _from_source(sa.select(sweeps.c.id), source).order_by(
            sweeps.c.source_id.is_(None).desc(), (sweeps.c.kind == "sweep").desc(), sweeps.c.id.desc()).limit(1)
        with self._read() as conn:
            found = conn.execute(newest).scalar()
        if found is None and source is not None:
            raise UserError(f"no sweep from the source {source!r} is stored in {self.shown}; `gpucompat results --list` shows each sweep's source.")
        if found is None:
            raise UserError(f"no sweeps stored in {self.shown} yet; run `gpucompat sweep PLAN` first.")
        return found

    def latest_bench_sweep_id(self) -> int | None:
        """The newest sweep or check that has bench figures (None if none has): what `results --bench` shows by default."""
        newest = (sa.select(cells.c.sweep_id).select_from(bench.join(cells, cells.c.id == bench.c.cell_id))
                  .order_by(cells.c.sweep_id.desc()).limit(1))
        with self._read() as conn:
            return conn.execute(newest).scalar()

    def cells_of(self, sweep_id: int, pending_only: bool = False) -> list[Cell]:
        query = (
            sa.select(cells.c.id, cells.c.stack_id, cells.c.target_id, stacks, targets.c.data.label("target_data"))
            .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                         .outerjoin(results, results.c.cell_id == cells.c.id))
            .where(cells.c.sweep_id == sweep_id)
            .order_by(cells.c.id)
        )
        if pending_only:
            query = query.where(results.c.id.is_(None))
        out, stacks_seen, targets_seen = [], {}, {}  # one object per stack and per target, shared by their cells
        with self._read() as conn:
            for row in conn.execute(query).mappings():
                resolved = stacks_seen.get(row["stack_id"])
                if resolved is None:
                    resolved = stacks_seen[row["stack_id"]] = ResolvedStack(
                        _stack_from(row["data"]), ok=row["resolved_ok"], pins=tuple(row["pins"]), cuda_runtime=row["cuda_runtime"],
                        cudnn=row["cudnn"], error=row["resolve_error"], cause=row["resolve_cause"],
                    )
                target = targets_seen.get(row["target_id"])
                if target is None:
                    target = targets_seen[row["target_id"]] = _target_from(row["target_data"])
                out.append(Cell(row["id"], resolved.stack, target, resolved))
        return out

    def bench_rows(self, sweep_id: int | None) -> list[dict]:
        """Every bench figure with its cell's stack and GPU class (a sweep's, or every sweep's if None)."""
        query = (
            sa.select(
                *_bench_cell_columns(),
                bench.c.measurement, bench.c.dtype, bench.c.value, bench.c.unit, bench.c.better, bench.c.spread,
                bench.c.repetitions, bench.c.data,
            )
            .select_from(bench.join(cells, cells.c.id == bench.c.cell_id).join(stacks, stacks.c.id == cells.c.stack_id)
                         .join(targets, targets.c.id == cells.c.target_id).join(results, results.c.cell_id == cells.c.id))
            .order_by(bench.c.id)
        )
        if sweep_id is not None:
            query = query.where(cells.c.sweep_id == sweep_id)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def missing_figures(self, sweep_id: int | None) -> list[dict]:
        """The bench figures each passed cell's probe could not make (bench.missing: out of memory, a data type the
        GPU lacks, an operation the framework lacks, not tried), shaped as bench_rows' rows with value None and
        data {"missing": kind, "reason": sentence, ...}: so that every view lists them with their reason."""
        query = (
            sa.select(
                *_bench_cell_columns(),
                results.c.probe["stages"]["bench"]["facts"]["figures"].label("figures"),
            )
            .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                         .join(results, results.c.cell_id == cells.c.id))
            .where(results.c.code == "PASS").order_by(cells.c.id)
        )
        if sweep_id is not None:
            query = query.where(cells.c.sweep_id == sweep_id)
        out = []
        with self._read() as conn:
            for row in conn.execute(query).mappings():
                tried = row["figures"]
                if not isinstance(tried, list):
                    continue
                base = {key: row[key] for key in row.keys() if key != "figures"}
                for figure in bench_missing(tried):
                    out.append({**base, "measurement": figure["measurement"], "dtype": figure["dtype"], "value": None, "unit": "",
                                "better": "higher", "spread": None, "repetitions": 0,
                                "data": {**figure["data"], "missing": figure["missing"], "reason": figure["reason"]}})
        return out

    def _bench_fact(self, sweep_id: int, fact: str) -> list[dict]:
        """One fact of each cell's bench stage (the database extracts it from the probe's JSON), with the cell's stack and GPU."""
        query = (
            sa.select(cells.c.id.label("cell"), stacks.c.framework, stacks.c.version, targets.c.name.label("gpu"),
                      _import_fact("version").label("probe_version"), results.c.probe["stages"]["bench"]["facts"][fact].label(fact))
            .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                         .join(results, results.c.cell_id == cells.c.id))
            .where(cells.c.sweep_id == sweep_id).order_by(cells.c.id)
        )
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]

    def telemetry(self, sweep_id: int) -> list[dict]:
        """NVML's samples taken while each cell's bench ran (cells without any are left out)."""
        return [{"cell": r["cell"], "framework": r["framework"], "gpu": r["gpu"], "version": r["version"], "probe_version": r["probe_version"],
                 "columns": r["telemetry"]["columns"], "samples": r["telemetry"]["samples"]}
                for r in self._bench_fact(sweep_id, "telemetry") if isinstance(r["telemetry"], dict) and r["telemetry"].get("samples")]

    def profiles(self, sweep_id: int) -> list[dict]:
        """Each cell's profiling window (the probe's record: step times, top kernels, the trace kept), where one ran."""
        return [r for r in self._bench_fact(sweep_id, "profile") if isinstance(r["profile"], dict)]

    def result_rows(self, sweep_id: int | None, source: str | None = None, framework: str | None = None) -> list[dict]:
        """One flat row per cell with its verdict (None where it has none yet); every sweep's if None; only one source's
        sweeps if given ("local", "imported" or a site's name); only one framework's stacks if given (explain asks one).
        Each row names its source: "local" or the site's name."""
        query = _result_rows_query(source, framework)
        if sweep_id is not None:
            query = query.where(cells.c.sweep_id == sweep_id)
        with self._read() as conn:
            return [dict(r) for r in conn.execute(query).mappings()]


def result_rows_sqlite(source: str | None, framework: str | None, schema: int = SCHEMA_VERSION) -> str:
    """Store.result_rows(None, source, framework) as SQLite's SQL, with a site's name and the framework as the
    named parameters :site and :framework: explain runs it through the standard library's sqlite3, without
    importing SQLAlchemy (answers/observed.py keeps it, compiled once per gpucompat version, store schema and kind
    of question). For a schema-5 store, which reading alone does not upgrade, the columns it lacks are read as the
    upgrade would write them: no signer, and an imported sweep unverified."""
    from sqlalchemy.dialects import sqlite

    query = _result_rows_query(source, framework, bound=True, signed=schema >= 6)
    return str(query.compile(dialect=sqlite.dialect(), compile_kwargs={"literal_binds": True}))


def _result_rows_query(source: str | None, framework: str | None, bound: bool = False, signed: bool = True):
    """bound: a site's name and the framework as the named parameters :site and :framework instead of values;
    signed=False: a schema-5 store's, whose sources have no signer or verified column yet."""
    verified = (sa.func.coalesce(sources.c.verified, sa.true()) if signed
                else sa.case((sweeps.c.source_id.is_(None), sa.true()), else_=sa.false()))
    query = (
        sa.select(
            cells.c.id.label("cell_id"), cells.c.sweep_id, sweeps.c.created_at, stacks.c.framework, stacks.c.version, stacks.c.variant, stacks.c.python,
            stacks.c.env, stacks.c.data["image"].as_string().label("image"),  # env "container": the image tested
            stacks.c.cuda_runtime, stacks.c.cudnn, targets.c.name.label("gpu"), targets.c.cc,
            targets.c.driver, results.c.code, results.c.stage, results.c.summary, results.c.warnings,
            results.c.evidence, results.c.duration_s, results.c.observed,
            # only what reports show from the raw probe JSON, extracted by the database
            _import_fact("version").label("probe_version"), _import_fact("cuda_runtime").label("probe_cuda_runtime"),
            _import_fact("cudnn").label("probe_cudnn"), results.c.probe["system"]["python"].as_string().label("probe_python"),
            results.c.probe["system"]["proc_driver_version"].as_string().label("probe_driver"),  # the driver the probe read
            predictions.c.verdict.label("predicted"), predictions.c.code.label("predicted_code"),
            predictions.c.reasons.label("predicted_reasons"), sa.func.coalesce(sources.c.site, "local").label("source"),
            # a sweep run here is this site's own; an imported one is verified where a key this site trusts signed it
            verified.label("verified"), (sources.c.signer if signed else sa.null()).label("signer"),
        )
        .select_from(cells.join(stacks, stacks.c.id == cells.c.stack_id).join(targets, targets.c.id == cells.c.target_id)
                     .join(sweeps, sweeps.c.id == cells.c.sweep_id).outerjoin(sources, sources.c.id == sweeps.c.source_id)
                     .outerjoin(results, results.c.cell_id == cells.c.id)
                     .outerjoin(predictions, predictions.c.cell_id == cells.c.id))
        .order_by(cells.c.id)
    )
    query = _from_source(query, source, bound)
    if framework is not None:
        query = query.where(stacks.c.framework == (sa.literal_column(":framework") if bound else framework))
        # a question about one framework reads which build a cell of an installed JAX was from the CUDA libraries it
        # loaded (answers/observed.stored_build); the list is left out of every other query, which shows no build
        query = query.add_columns(results.c.probe["loaded_libraries"].label("probe_libraries"))
    return query

