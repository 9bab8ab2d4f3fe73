"""SQLiteStore: the embedded default store, one SQLite database file (aiosqlite, WAL)."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any, Self

import aiosqlite
import anyio
from pydantic import ValidationError

from agent_threads._ids import validate_digest, validate_id
from agent_threads.errors import ConflictError, SchemaVersionError, StoreCorruptedError
from agent_threads.stores.base import (
    Record,
    Row,
    StoreBase,
    digest_of,
    validate_record,
    validate_rows,
    validate_tag,
    version_conflict,
)

MIGRATIONS: list[tuple[str, ...]] = [
    (  # 1: records, segments and their rows, blobs
        "CREATE TABLE records ("
        " kind TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL, owner TEXT,"
        " body TEXT NOT NULL, PRIMARY KEY (kind, id)) WITHOUT ROWID",
        "CREATE INDEX records_by_owner ON records (owner) WHERE owner IS NOT NULL",
        "CREATE TABLE segments ("
        " id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, written_at REAL NOT NULL)",
        # key = segment * 2**32 + position: (segment, position) is unique, rows of a
        # segment are one key range, and an insert costs what a plain table's does
        "CREATE TABLE segment_rows ("
        " key INTEGER PRIMARY KEY, message_id TEXT NOT NULL, data TEXT NOT NULL)",
        "CREATE INDEX segment_rows_by_message ON segment_rows (message_id)",
        "CREATE TABLE blobs ("
        " digest TEXT PRIMARY KEY, data BLOB NOT NULL, written_at REAL NOT NULL) WITHOUT ROWID",
    ),
]
"""The schema, as an ordered list of migrations: the database's version is how many ran."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes (kept in the `schema_version` table)."""

POSITIONS = 1 << 32
"""Positions per segment: a row's key is `segment number * POSITIONS + position`."""

_BASE = f"(SELECT id * {POSITIONS} AS base FROM segments WHERE name = ?)"


class SQLiteStore(StoreBase):
    """A store in one SQLite database file; the embedded default.

    WAL mode (readers never wait for the writer), `synchronous=NORMAL` (a committed
    write survives a crash of the process; on power loss the last commits may be lost,
    never the database), one transaction per store operation (multi-statement ones
    begin IMMEDIATE, so concurrent processes queue on the busy timeout instead of
    failing), parameterized SQL only. Rows are keyed by `(segment, position)`, so two
    appenders at the same position collide instead of overwriting.

    `SQLiteStore(":memory:")` keeps a private in-memory database. aiosqlite runs on
    asyncio, so this store needs the asyncio backend.
    """

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._lock = anyio.Lock()
        self._connection: aiosqlite.Connection | None = None

    @property
    def path(self) -> str:
        """The database file (or `":memory:"`)."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    async def __aenter__(self) -> Self:
        async with self._lock:
            if self._connection is None:
                self._connection = await self._connect()
        return self

    async def aclose(self) -> None:
        async with self._lock:
            if self._connection is not None:
                connection, self._connection = self._connection, None
                with anyio.CancelScope(shield=True):
                    await connection.close()

    async def _connect(self) -> aiosqlite.Connection:
        connection = await aiosqlite.connect(
            self._path, timeout=self._busy_timeout, isolation_level=None
        )
        try:
            await connection.execute("PRAGMA journal_mode = WAL")
            await connection.execute("PRAGMA synchronous = NORMAL")
            await self._migrate(connection)
        except sqlite3.OperationalError:
            await connection.close()
            raise
        except sqlite3.DatabaseError as exc:
            await connection.close()
            raise StoreCorruptedError(self._path, detail=f"not a usable database: {exc}") from exc
        except BaseException:
            await connection.close()
            raise
        return connection

    async def _migrate(self, connection: aiosqlite.Connection) -> None:
        """Run the migrations this database has not seen yet, in one transaction."""
        await connection.execute("BEGIN IMMEDIATE")
        try:
            await connection.execute(
                "CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)"
            )
            found = await connection.execute_fetchall("SELECT version FROM schema_version")
            version, supported = int(_first(found)) if found else 0, len(MIGRATIONS)
            if version > supported:
                raise SchemaVersionError(
                    f"SQLite database {self._path}", found=version, supported=supported
                )
            for statements in MIGRATIONS[version:]:
                for statement in statements:
                    await connection.execute(statement)
            if version < supported:
                await connection.execute("DELETE FROM schema_version")
                await connection.execute(
                    "INSERT INTO schema_version (version) VALUES (?)", (supported,)
                )
            await connection.execute("COMMIT")
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _rollback(connection)
            raise

    def _open(self) -> aiosqlite.Connection:
        if self._connection is None:
            raise RuntimeError(
                f"{self!r} is not open: use `async with SQLiteStore(path) as store:`"
            )
        return self._connection

    @asynccontextmanager
    async def _statement(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection, for one statement (a statement is its own transaction)."""
        async with self._lock:
            yield self._open()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """The connection inside BEGIN IMMEDIATE ... COMMIT (ROLLBACK on any error)."""
        async with self._lock:
            connection = self._open()
            await connection.execute("BEGIN IMMEDIATE")
            try:
                yield connection
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _rollback(connection)
                raise
            with anyio.CancelScope(shield=True):
                await connection.execute("COMMIT")

    # -- records --------------------------------------------------------------------

    async def get_record(self, kind: str, record_id: str) -> Record | None:
        validate_id(kind, what="record kind")
        validate_id(record_id, what=f"{kind} id")
        async with self._statement() as connection:
            found = await connection.execute_fetchall(
                "SELECT body FROM records WHERE kind = ? AND id = ?", (kind, record_id)
            )
        return None if not found else _parse_record(_first(found), kind, record_id)

    async def put_record(self, record: Record, *, expected_version: int) -> Record:
        validate_record(record)
        stored = record.model_copy(update={"version": expected_version + 1})
        values = (stored.version, stored.owner, stored.model_dump_json())
        async with self._statement() as connection:
            if expected_version == 0:
                cursor = await connection.execute(
                    "INSERT INTO records (version, owner, body, kind, id) VALUES (?, ?, ?, ?, ?)"
                    " ON CONFLICT (kind, id) DO NOTHING",
                    (*values, record.kind, record.id),
                )
            else:
                cursor = await connection.execute(
                    "UPDATE records SET version = ?, owner = ?, body = ?"
                    " WHERE kind = ? AND id = ? AND version = ?",
                    (*values, record.kind, record.id, expected_version),
                )
            if cursor.rowcount != 1:
                found = await self._version(connection, record.kind, record.id)
                raise version_conflict(record.kind, record.id, expected_version, found)
        return stored

    @staticmethod
    async def _version(connection: aiosqlite.Connection, kind: str, record_id: str) -> int:
        found = await connection.execute_fetchall(
            "SELECT version FROM records WHERE kind = ? AND id = ?", (kind, record_id)
        )
        return int(_first(found)) if found else 0

    async def delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None = None
    ) -> bool:
        validate_id(kind, what="record kind")
        validate_id(record_id, what=f"{kind} id")
        async with self._transaction() as connection:
            found = await self._version(connection, kind, record_id)
            if found == 0:
                return False
            if expected_version is not None and found != expected_version:
                raise version_conflict(kind, record_id, expected_version, found)
            await connection.execute(
                "DELETE FROM records WHERE kind = ? AND id = ?", (kind, record_id)
            )
        return True

    async def list_records(
        self,
        kind: str | None = None,
        *,
        tags: Collection[str] = (),
        owner: str | None = None,
    ) -> list[Record]:
        if kind is not None:
            validate_id(kind, what="record kind")
        wanted = {validate_tag(t) for t in tags}
        query = "SELECT kind, id, body FROM records WHERE (? IS NULL OR kind = ?)"
        query += " AND (? IS NULL OR owner = ?) ORDER BY kind, id"
        async with self._statement() as connection:
            found = await connection.execute_fetchall(query, (kind, kind, owner, owner))
        records = [_parse_record(body, k, i) for k, i, body in found]
        return [r for r in records if wanted <= set(r.tags)]

    # -- segments -------------------------------------------------------------------

    async def append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        validate_rows(segment_id, start, rows)
        if start + len(rows) > POSITIONS:
            raise ValueError(f"segment {segment_id!r}: positions end at {POSITIONS - 1}")
        async with self._transaction() as connection:
            found = await connection.execute_fetchall(
                "INSERT INTO segments (name, written_at) VALUES (?, ?) ON CONFLICT (name)"
                " DO UPDATE SET written_at = excluded.written_at RETURNING id",
                (segment_id, time.time()),
            )
            first = _first(found) * POSITIONS + start
            values = [(first + i, row.message_id, row.data) for i, row in enumerate(rows)]
            try:
                await connection.executemany(
                    "INSERT INTO segment_rows (key, message_id, data) VALUES (?, ?, ?)", values
                )
            except sqlite3.IntegrityError as exc:
                taken = await connection.execute_fetchall(
                    "SELECT MIN(key) FROM segment_rows WHERE key >= ? AND key < ?",
                    (first, first + len(rows)),
                )
                position = _first(taken) - first + start
                raise ConflictError(
                    f"segment {segment_id!r}", detail=f"position {position} is already written"
                ) from exc

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        validate_id(segment_id, what="segment id")
        lo, hi = max(start, 0), min(end, POSITIONS)
        async with self._statement() as connection:
            found = await connection.execute_fetchall(
                f"SELECT key - base, data FROM segment_rows, {_BASE}"
                " WHERE key >= base + ? AND key < base + ? ORDER BY key",
                (segment_id, lo, hi),
            )
        data = []
        for position, text in found:
            if not isinstance(text, str):
                raise StoreCorruptedError(
                    f"segment {segment_id!r} position {position}", detail="row data is not text"
                )
            data.append(text)
        if len(data) != max(0, end - start):
            raise StoreCorruptedError(
                f"segment {segment_id!r} in {self._path}",
                detail=f"positions {start}..{end - 1} requested, {len(data)} rows found",
            )
        return data

    async def locate_message(self, message_id: str) -> list[tuple[str, int]]:
        validate_id(message_id, what="message id")
        async with self._statement() as connection:
            found = await connection.execute_fetchall(
                f"SELECT s.name, r.key % {POSITIONS} FROM segment_rows AS r"
                f" JOIN segments AS s ON s.id = r.key / {POSITIONS}"
                " WHERE r.message_id = ? ORDER BY s.name, r.key",
                (message_id,),
            )
        return [(str(name), int(position)) for name, position in found]

    async def list_segments(self) -> dict[str, float]:
        async with self._statement() as connection:
            found = await connection.execute_fetchall("SELECT name, written_at FROM segments")
        return {str(name): float(written) for name, written in found}

    async def delete_segments(self, segment_ids: Collection[str]) -> None:
        names = [(validate_id(s, what="segment id"),) for s in segment_ids]
        async with self._transaction() as connection:
            await connection.executemany(
                f"DELETE FROM segment_rows WHERE key IN (SELECT key FROM segment_rows, {_BASE}"
                f" WHERE key >= base AND key < base + {POSITIONS})",
                names,
            )
            await connection.executemany("DELETE FROM segments WHERE name = ?", names)

    # -- blobs ----------------------------------------------------------------------

    async def put_blob(self, data: bytes) -> str:
        digest = digest_of(data)
        async with self._statement() as connection:
            await connection.execute(
                "INSERT INTO blobs (digest, data, written_at) VALUES (?, ?, ?)"
                " ON CONFLICT (digest) DO UPDATE SET written_at = excluded.written_at",
                (digest, bytes(data), time.time()),
            )
        return digest

    async def get_blob(self, digest: str) -> bytes | None:
        validate_digest(digest)
        async with self._statement() as connection:
            found = await connection.execute_fetchall(
                "SELECT data FROM blobs WHERE digest = ?", (digest,)
            )
        if not found:
            return None
        data = _first(found)
        if not isinstance(data, bytes) or digest_of(data) != digest:
            raise StoreCorruptedError(f"blob {digest}", detail="content does not match its digest")
        return data

    async def list_blobs(self) -> dict[str, float]:
        async with self._statement() as connection:
            found = await connection.execute_fetchall("SELECT digest, written_at FROM blobs")
        return {str(digest): float(written) for digest, written in found}

    async def delete_blobs(self, digests: Collection[str]) -> None:
        keys = [(validate_digest(d),) for d in digests]
        async with self._transaction() as connection:
            await connection.executemany("DELETE FROM blobs WHERE digest = ?", keys)


async def _rollback(connection: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.OperationalError):  # no transaction left to roll back
        await connection.execute("ROLLBACK")


def _parse_record(body: Any, kind: str, record_id: str) -> Record:
    try:
        record = Record.model_validate_json(body)
    except ValidationError as exc:
        raise StoreCorruptedError(f"record {kind}/{record_id}", detail=str(exc)) from exc
    if (record.kind, record.id) != (kind, record_id):
        raise StoreCorruptedError(
            f"record {kind}/{record_id}", detail=f"holds {record.kind}/{record.id}"
        )
    return record


def _first(found: Iterable[Any]) -> Any:
    """The first column of the first row of a query result."""
    return next(iter(found))[0]


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "SQLiteStore"]
