"""The journal's one SQLite connection, shared by every store: schema, transactions, read-only opening.

Each store (``events``, ``jobs``, ...) declares the tables it owns; :class:`JournalDb` creates them all on a
writable open and checks they exist on a read-only one. All stores write through the same connection, so a
tick's state, decisions and intents commit together in one :meth:`JournalDb.transaction`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

import sqlite_utils

from slurmplan.domain import ValidationError

BUSY_TIMEOUT_MS = 15_000
MEMORY = ":memory:"


@dataclass(frozen=True)
class Table:
    """One table a store owns: its columns, primary key and indexes."""

    name: str
    columns: Mapping[str, type]
    pk: str | None = None
    indexes: Sequence[Sequence[str]] = ()


class JournalDb:
    """One SQLite file (WAL) opened for writing (schema created) or read-only (``file:...?mode=ro``)."""

    def __init__(self, path: str | os.PathLike[str], tables: Sequence[Table], *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self.tables = tuple(tables)
        memory = str(path) == MEMORY
        if readonly:
            conn = self._connect_readonly(memory)
        else:
            if not memory:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self.db = sqlite_utils.Database(conn)
        if readonly:
            self._check_schema()
            return
        if not memory:
            self.db.enable_wal()
        conn.execute("PRAGMA synchronous=NORMAL")
        self._create_schema()

    @property
    def conn(self) -> sqlite3.Connection:
        return self.db.conn

    def _connect_readonly(self, memory: bool) -> sqlite3.Connection:
        """Open an existing journal without ever creating one (a typo'd path is an error, not a new file).

        SQLite may add its WAL index (``-shm``/``-wal``) beside an existing WAL journal so that the read sees
        a tick's writes consistently; the journal file itself is never created or changed.
        """
        where = f"journal {self.path}"
        if memory or not self.path.is_file():
            allowed = "an existing journal file (the daemon creates it on its first tick; check --database/--config)"
            raise ValidationError("database", str(self.path), allowed, where)
        uri = f"file:{quote(str(self.path.resolve()))}?mode=ro"
        try:
            return self._probe(uri)
        except sqlite3.OperationalError:
            # A WAL journal whose directory this user cannot write (no -shm to share): read the file as it is.
            pass
        except sqlite3.DatabaseError as exc:
            raise ValidationError("database", str(self.path), f"a readable SQLite journal ({exc})", where) from None
        try:
            return self._probe(uri + "&immutable=1")
        except sqlite3.DatabaseError as exc:
            raise ValidationError("database", str(self.path), f"a readable SQLite journal ({exc})", where) from None

    @staticmethod
    def _probe(uri: str) -> sqlite3.Connection:
        conn = sqlite3.connect(uri, uri=True, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except BaseException:
            conn.close()
            raise
        return conn

    def _check_schema(self) -> None:
        have = set(self.db.table_names())
        missing = [t.name for t in self.tables if t.name not in have]
        if missing:
            allowed = f"a slurmplan journal (tables missing: {', '.join(missing)})"
            raise ValidationError("database", str(self.path), allowed, f"journal {self.path}")

    def _create_schema(self) -> None:
        with self.transaction():
            for t in self.tables:
                self.db[t.name].create(dict(t.columns), pk=t.pk, if_not_exists=True)  # type: ignore[union-attr]
                for cols in t.indexes:
                    self.db[t.name].create_index(list(cols), if_not_exists=True)  # type: ignore[union-attr]

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One atomic write (``BEGIN IMMEDIATE`` so a concurrent hook waits instead of failing midway)."""
        conn = self.conn
        if conn.in_transaction:
            yield
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")


class Store:
    """Base of the stores: the shared database, and the tables this store owns (``TABLES``)."""

    TABLES: tuple[Table, ...] = ()

    def __init__(self, jdb: JournalDb) -> None:
        self._jdb = jdb
        self.db = jdb.db

    def transaction(self) -> AbstractContextManager[None]:
        return self._jdb.transaction()
