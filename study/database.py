"""Where a study's data live: one small interface (`Database`: a transaction that runs SQL) and two back-ends.

- `SqliteDatabase` (the default): a file under the data folder (``$GLASS_DATA_DIR``, default ``data/`` beside the
  app; ``data/studies.sqlite3``), in WAL mode with ``synchronous=FULL`` (a transaction that returned is on disk: a
  crash or a restart loses no answer already sent) and a busy timeout, one connection per transaction: several app
  processes on one machine write to it safely, each write transaction taking SQLite's write lock at its start
  (``BEGIN IMMEDIATE``). Nothing to install: Python's own sqlite3.
- `PostgresDatabase`, when ``GLASS_DATABASE_URL=postgresql://...`` is set (several machines): psycopg 3 with a
  small connection pool per process; the rows a transaction must serialise on are locked with ``FOR UPDATE``.

Both run the same SQL (written with ``?`` placeholders; PostgreSQL's are ``%s``), create their tables on first use
and differ only in the few words below (`Dialect`). The SQL itself is in study/store.py.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator
from pathlib import Path

from study.errors import Unavailable

ROOT = Path(__file__).resolve().parents[1]
DATA_DIR_ENV, URL_ENV = "GLASS_DATA_DIR", "GLASS_DATABASE_URL"

TABLES = (
    """CREATE TABLE IF NOT EXISTS studies (
        code TEXT PRIMARY KEY, secret_hash TEXT NOT NULL, actor_key TEXT NOT NULL, settings TEXT NOT NULL,
        instrument TEXT NOT NULL, created BIGINT NOT NULL, expires BIGINT NOT NULL, closed INTEGER NOT NULL,
        owner TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS participants (
        study TEXT NOT NULL, actor TEXT NOT NULL, condition TEXT NOT NULL, first_form TEXT NOT NULL,
        phase TEXT NOT NULL, delete_hash TEXT NOT NULL, consent TEXT NOT NULL, joined BIGINT NOT NULL,
        phase_at BIGINT NOT NULL, PRIMARY KEY (study, actor))""",
    """CREATE TABLE IF NOT EXISTS events (
        id {serial}, study TEXT NOT NULL, actor TEXT NOT NULL, verb TEXT NOT NULL, object TEXT NOT NULL,
        result TEXT NOT NULL, context TEXT NOT NULL, ts BIGINT NOT NULL, once TEXT)""",
    "CREATE UNIQUE INDEX IF NOT EXISTS events_once ON events (study, actor, once)",
    "CREATE INDEX IF NOT EXISTS events_by_actor ON events (study, actor, ts)",
    "CREATE INDEX IF NOT EXISTS participants_by_delete ON participants (study, delete_hash)",
    "CREATE TABLE IF NOT EXISTS attempts (kind TEXT NOT NULL, client TEXT NOT NULL, ts BIGINT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS attempts_by_client ON attempts (kind, client, ts)",
)


class Database(ABC):
    """A transaction: ``with db.transaction() as tx: tx.execute(sql, params)``; `execute` returns the rows (a list
    of tuples) of a query, or the number of rows changed. `lock` is what a SELECT adds to lock its rows;
    `write=False` promises only reads (SQLite then takes no write lock: readers never wait for a writer)."""

    lock = ""
    name = "database"

    @abstractmethod
    def transaction(self, write: bool = True) -> contextlib.AbstractContextManager: ...

    def close(self) -> None:  # noqa: B027 - optional
        pass


class _Tx:
    def __init__(self, cursor, placeholder: str):
        self.cursor, self.placeholder = cursor, placeholder

    def execute(self, sql: str, params: tuple = ()) -> list[tuple] | int:
        if self.placeholder != "?":
            sql = sql.replace("?", self.placeholder)
        self.cursor.execute(sql, params)
        if self.cursor.description is not None:
            return [tuple(r) for r in self.cursor.fetchall()]
        return self.cursor.rowcount


def data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV) or ROOT / "data")


class SqliteDatabase(Database):
    name = "SQLite"

    def __init__(self, path: str | Path | None = None, timeout: float = 30.0):
        self.path = Path(path) if path is not None else data_dir() / "studies.sqlite3"
        self.timeout = timeout
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self._connect() as conn:
                conn.execute("PRAGMA journal_mode=WAL")
                for sql in TABLES:
                    conn.execute(sql.format(serial="INTEGER PRIMARY KEY AUTOINCREMENT"))
            conn.close()
        except (OSError, sqlite3.Error) as e:
            raise Unavailable(
                f"The study database cannot be opened ({type(e).__name__}): whoever runs the server "
                f"can set {DATA_DIR_ENV} to a folder the app may write to."
            ) from e

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
        conn.execute("PRAGMA synchronous=FULL")
        return conn

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[_Tx]:
        try:
            conn = self._connect()
        except sqlite3.Error as e:
            raise Unavailable(f"The study database cannot be opened ({type(e).__name__}).") from e
        try:
            # a write takes the write lock now: no two processes interleave a read-then-write
            conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield _Tx(conn.cursor(), "?")
            conn.execute("COMMIT")
        except BaseException:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()


class PostgresDatabase(Database):
    name = "PostgreSQL"
    lock = " FOR UPDATE"

    def __init__(self, url: str, max_size: int = 8, timeout: float = 30.0):
        from psycopg_pool import ConnectionPool

        self.url = url
        self.pool = ConnectionPool(
            url, min_size=1, max_size=max_size, timeout=timeout, open=False, kwargs={"connect_timeout": int(timeout)}
        )
        self._lock = threading.Lock()
        try:
            self.pool.open(wait=True, timeout=timeout)
            with self.transaction() as tx:
                tx.execute("SELECT pg_advisory_xact_lock(4040)")  # one process creates the tables at a time
                for sql in TABLES:
                    tx.execute(sql.format(serial="BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY"))
        except Exception as e:
            self.pool.close()
            raise Unavailable(f"The study database cannot be reached ({type(e).__name__}).") from e

    @contextlib.contextmanager
    def transaction(self, write: bool = True) -> Iterator[_Tx]:
        import psycopg
        from psycopg_pool import PoolTimeout

        try:
            with self.pool.connection() as conn, conn.transaction(), conn.cursor() as cur:
                yield _Tx(cur, "%s")
        except (psycopg.OperationalError, PoolTimeout) as e:
            raise Unavailable(f"The study database cannot be reached ({type(e).__name__}).") from e

    def close(self) -> None:
        self.pool.close()


def open_database(url: str | None = None) -> Database:
    """PostgreSQL when `url` (default: $GLASS_DATABASE_URL) is set, else the SQLite file under the data folder."""
    url = os.environ.get(URL_ENV, "").strip() if url is None else url
    if url:
        if not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("GLASS_DATABASE_URL must be a postgresql:// URL")
        return PostgresDatabase(url)
    return SqliteDatabase()
