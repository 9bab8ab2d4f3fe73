"""SQLiteStore: the embedded default store, one SQLite database file (aiosqlite, WAL)."""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, TypeAlias

import aiosqlite
import anyio
import anyio.to_thread
from pydantic import ValidationError

from agent_threads.core.copies import replaced
from agent_threads.errors import (
    ConflictError,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores._sqlite_inline import Busy, InlineConnection
from agent_threads.stores._sqlite_steps import Step, Steps, run_async
from agent_threads.stores.base import (
    CONNECTION_ERRORS,
    ErrorRule,
    Record,
    Row,
    RowArray,
    RowWrite,
    StoreBase,
    digest_of,
    record_json,
    stored_version,
    version_conflict,
)

POSITIONS = 1 << 32
"""Positions per segment: a row's key is `segment number * POSITIONS + position`."""

_TAKEN = "segment positions already written"
"""The message of the append trigger's ABORT."""

_STALE = "record version changed"
"""The message of the commit trigger's ABORT when the record moved on."""

_UNFOLDED = "chunk written after the time of its segment: vacuum from an upgraded process"
"""The message of the chunk deletion trigger's ABORT (schema 5, for a vacuum of before)."""

_COMMIT_CHUNK = (  # a chunk row of a commit: an append (the `appends` trigger checks it)
    "CREATE TRIGGER commit_chunk INSTEAD OF INSERT ON commits WHEN NEW.kind IS NULL BEGIN"
    " INSERT INTO appends (segment, start, count, message_ids, data, written_at)"
    "  VALUES (NEW.segment, NEW.start, NEW.count, NEW.message_ids, NEW.data, NEW.written_at);"
    " END"
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
    (  # 2: an append is one chunk row; the message-id index is built when first read
        # a chunk holds `count` rows from position key % 2**32 on, joined by newlines
        "CREATE TABLE chunks (key INTEGER PRIMARY KEY, count INTEGER NOT NULL, data TEXT NOT NULL)",
        # the message ids of chunks not in message_index yet, newline-joined, by chunk key
        "CREATE TABLE unindexed (key INTEGER PRIMARY KEY, message_ids TEXT NOT NULL)",
        "CREATE TABLE message_index ("
        " message_id TEXT NOT NULL, key INTEGER NOT NULL, PRIMARY KEY (message_id, key))"
        " WITHOUT ROWID",
        # an append is one INSERT into this view, so one statement (its own transaction,
        # one round trip to the driver's thread) upserts the segment, refuses positions
        # already written (ABORT rolls the statement back) and writes the chunk
        "CREATE VIEW appends (segment, start, count, message_ids, data, written_at)"
        " AS SELECT NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
        "CREATE TRIGGER append_chunk INSTEAD OF INSERT ON appends BEGIN"
        " INSERT INTO segments (name, written_at) VALUES (NEW.segment, NEW.written_at)"
        "  ON CONFLICT (name) DO UPDATE SET written_at = excluded.written_at;"
        f" SELECT RAISE(ABORT, '{_TAKEN}') FROM"
        f"  (SELECT id * {POSITIONS} + NEW.start AS first FROM segments WHERE name = NEW.segment)"
        "  WHERE EXISTS (SELECT 1 FROM chunks WHERE key >= first AND key < first + NEW.count)"
        "  OR EXISTS (SELECT 1 FROM (SELECT key, count FROM chunks WHERE key < first"
        "   ORDER BY key DESC LIMIT 1) WHERE key + count > first);"
        f" INSERT INTO chunks (key, count, data) SELECT id * {POSITIONS} + NEW.start,"
        "  NEW.count, NEW.data FROM segments WHERE name = NEW.segment;"
        f" INSERT INTO unindexed (key, message_ids) SELECT id * {POSITIONS} + NEW.start,"
        "  NEW.message_ids FROM segments WHERE name = NEW.segment;"
        " END",
        "INSERT INTO chunks (key, count, data) SELECT key, 1, data FROM segment_rows",
        "INSERT INTO message_index (message_id, key) SELECT message_id, key FROM segment_rows",
        "DROP TABLE segment_rows",
    ),
    (  # 3: a thread's turn (rows of several segments and its record) is one statement
        "CREATE VIEW commits (segment, start, count, message_ids, data, written_at,"
        " kind, id, version, owner, body)"
        " AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL WHERE 0",
        _COMMIT_CHUNK,
        # the record row: stored as `version` if the stored one is `version - 1` (0: none)
        "CREATE TRIGGER commit_record INSTEAD OF INSERT ON commits WHEN NEW.kind IS NOT NULL"
        " BEGIN"
        f" SELECT RAISE(ABORT, '{_STALE}') WHERE COALESCE((SELECT version FROM records"
        "  WHERE kind = NEW.kind AND id = NEW.id), 0) != NEW.version - 1;"
        " INSERT INTO records (kind, id, version, owner, body)"
        "  VALUES (NEW.kind, NEW.id, NEW.version, NEW.owner, NEW.body)"
        "  ON CONFLICT (kind, id) DO UPDATE"
        "  SET version = excluded.version, owner = excluded.owner, body = excluded.body;"
        " END",
    ),
    (  # 4: the record row says which version it expects, so a new record's may be any
        "DROP VIEW commits",  # and its triggers
        "CREATE VIEW commits (segment, start, count, message_ids, data, written_at,"
        " kind, id, version, owner, body, expected)"
        " AS SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL"
        " WHERE 0",
        _COMMIT_CHUNK,  # as in 3: the view's triggers went with it
        # the record row: stored as `version` if the stored one is `expected` (0: none);
        # without `expected` (a process of schema 3 still running), if it is `version - 1`
        "CREATE TRIGGER commit_record INSTEAD OF INSERT ON commits WHEN NEW.kind IS NOT NULL"
        " BEGIN"
        f" SELECT RAISE(ABORT, '{_STALE}') WHERE COALESCE((SELECT version FROM records"
        "  WHERE kind = NEW.kind AND id = NEW.id), 0) != COALESCE(NEW.expected, NEW.version - 1);"
        " INSERT INTO records (kind, id, version, owner, body)"
        "  VALUES (NEW.kind, NEW.id, NEW.version, NEW.owner, NEW.body)"
        "  ON CONFLICT (kind, id) DO UPDATE"
        "  SET version = excluded.version, owner = excluded.owner, body = excluded.body;"
        " END",
    ),
    (  # 5: a chunk holds its time of writing, so a commit does not rewrite its segment's row
        # a segment's time of last write is the latest of its own (set when it is made,
        # touched or marked) and its chunks'; NULL: a chunk of schema 4 or before, whose
        # writer set its segment's time instead
        "ALTER TABLE chunks ADD COLUMN written_at REAL",
        # a vacuum of schema 4 (a process still running) reads only the segment's time,
        # so it could delete a segment written since its cutoff: it is refused (its whole
        # deletion, which writes nothing) whenever a chunk is newer than its segment's
        # time, as it cannot tell which are. This code marks the segments it deletes as
        # written last first (see `_do_delete_segments`)
        "CREATE TRIGGER chunk_deleted BEFORE DELETE ON chunks WHEN OLD.written_at >"
        f" (SELECT written_at FROM segments WHERE id = OLD.key / {POSITIONS})"
        f" BEGIN SELECT RAISE(ABORT, '{_UNFOLDED}'); END",
    ),
]
"""The schema, as an ordered list of migrations: the database's version is how many ran."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes (kept in the `schema_version` table)."""

CHUNK_CHARS = 1 << 16
"""An append longer than this (rows plus newlines) is split into several chunks.

It bounds what reading one row costs: the whole chunk holding it is read.
"""

_BASE = f"(SELECT id * {POSITIONS} AS base FROM segments WHERE name = ?)"

_RESTART_WAIT = 1.0
"""Seconds a WAL checkpoint that starts the WAL over waits for readers and writers."""

_INCREMENTAL = 2
"""`PRAGMA auto_vacuum`'s answer for incremental auto-vacuum."""

_RECLAIM_AFTER = 64
"""Chunks an index catch-up must move before it gives freed pages back (fewer free too few
pages to be worth one more statement)."""

_BACKLOG = 256
"""Chunks a lookup searches unindexed, read-only, before it brings the index up to date.

A lazy handle looks up each id it appends, so an index write per append would double
its cost; searching a few hundred chunks' id lists costs less than that write, and the
catch-up then moves them all in one transaction.
"""

_DRIVER_ERRORS = (
    # another connection held the write lock for the whole busy timeout
    ErrorRule(sqlite3.OperationalError, StoreUnavailableError, "locked"),
    ErrorRule(sqlite3.IntegrityError, ConflictError, "UNIQUE"),
    ErrorRule(sqlite3.DatabaseError, StoreCorruptedError, "not a database"),
    ErrorRule(sqlite3.DatabaseError, StoreCorruptedError, "malformed"),
    *CONNECTION_ERRORS,
)
"""What SQLite's errors mean here (see `StoreBase`)."""

INLINE_BYTES = 1 << 17
"""The most data a write runs inline (on the event loop's thread, see `InlineConnection`);
a larger one goes through aiosqlite's thread, so the event loop is never held long."""

INLINE_TURN = 0.001
"""Seconds of inline statements (see `InlineConnection`) after which the next one first
lets the event loop's other tasks run. Yielding before each statement cost ~10 us of an
append's ~160 (6%) and made writers in one process take turns statement by statement
(each turn a lost race for a handle whose view another writer made stale); every
millisecond costs ~1% of that and keeps a loop of appends from holding the loop longer."""

INLINE_ROWS = 1024
"""The most rows a read runs inline (a page of an eager load: ~0.5 ms of SQLite for rows of
~550 bytes, beside ~3 ms to validate them on the same thread); a longer one goes through
aiosqlite's thread."""


_TOUCH = (
    "INSERT INTO segments (name, written_at) VALUES (?, ?)"
    " ON CONFLICT (name) DO UPDATE SET written_at = excluded.written_at"
)

_FIND_SEGMENT = (
    "SELECT s.id,"
    # the last chunk before the end of the positions wanted: it holds one of them if it
    # reaches past the first (chunks never overlap, and one of an earlier segment ends
    # at its own segment's end at the latest)
    " COALESCE((SELECT c.key + c.count FROM chunks AS c"
    f"  WHERE c.key < s.id * {POSITIONS} + ?2 + ?3 ORDER BY c.key DESC LIMIT 1), 0)"
    f"  > s.id * {POSITIONS} + ?2"
    " FROM segments AS s WHERE s.name = ?1"
)
"""Segment `?1`'s number and whether a chunk holds a position of `?2 <= p < ?2 + ?3`
(no row: no such segment)."""

_NEW_SEGMENT = "INSERT INTO segments (name, written_at) VALUES (?, ?)"
_NEW_CHUNK = "INSERT INTO chunks (key, count, data, written_at) VALUES (?, ?, ?, ?)"
_UNINDEXED = "INSERT INTO unindexed (key, message_ids) VALUES (?, ?)"


class _Chunk(NamedTuple):
    """Rows written as one chunk: `count` rows from `start` on, joined by newlines."""

    segment_id: str
    start: int
    length: int
    message_ids: str
    data: str


_new_chunk = functools.partial(tuple.__new__, _Chunk)
"""`_Chunk(...)` of a tuple of its fields, made in C (without its Python `__new__`)."""


@dataclass(frozen=True, slots=True)
class _Taken:
    """A write refused: a chunk already holds a position of this one's chunk."""

    segment_id: str
    start: int
    length: int


@dataclass(frozen=True, slots=True)
class _Stale:
    """A write refused: the record's stored version is not the one expected."""


_Refusal: TypeAlias = _Taken | _Stale


class _Refused(Exception):
    """Rolls back a transaction run through aiosqlite whose steps refused to go on."""

    def __init__(self, refusal: _Refusal) -> None:
        super().__init__(refusal)
        self.refusal = refusal


def _write_steps(
    chunks: Sequence[_Chunk], record: Step | None, now: float
) -> Steps[_Refusal | None]:
    """The statements of a write: its chunks, then the record's compare-and-set.

    Run in one transaction (see `_sqlite_steps`). Each chunk first looks its segment
    up, with whether its positions are free, in one read; the segment is created if
    it is new. The chunk holds `now`, its time of writing: its segment's time of last
    write (what a vacuum running meanwhile checks before it deletes the segment) is
    the latest of its chunks' and its own, so the segment's row is not written again
    (one page fewer a commit: 32 against 39 us on a bare connection, schema 4 and 5,
    messages of ~550 bytes). Plain statements, no triggers: through the
    `commits` view and its triggers (schema 3 and 4; kept for processes of that code
    still running), an append of one ~550-byte message cost 163k instructions in the
    sqlite3 module, these 104k (callgrind).
    """
    for chunk in chunks:
        wanted = (chunk.segment_id, chunk.start, chunk.length)
        found = yield (_FIND_SEGMENT, wanted, True)
        if not found:
            yield (_NEW_SEGMENT, (chunk.segment_id, now), False)
            found = yield (_FIND_SEGMENT, wanted, True)
        number, taken = found[0]
        if taken:
            return _Taken(*wanted)
        key = number * POSITIONS + chunk.start
        yield (_NEW_CHUNK, (key, chunk.length, chunk.data, now), False)
        yield (_UNINDEXED, (key, chunk.message_ids), False)
    if record is not None and (yield record) != 1:
        return _Stale()
    return None


def _record_step(record: Record, body: str, expected_version: int) -> Step:
    """The record's compare-and-set.

    It changes one row if the stored version is `expected_version` (0: no record
    stored), none otherwise.
    """
    statement = _record_statement(new=expected_version == 0, owner=record.owner is not None)
    owner = () if record.owner is None else (record.owner,)
    if expected_version == 0:
        return (statement, (record.kind, record.id, record.version, *owner, body), False)
    parameters = (record.version, *owner, body, record.kind, record.id, expected_version)
    return (statement, parameters, False)


@functools.cache
def _record_statement(*, new: bool, owner: bool) -> str:
    """The statement of `_record_step`.

    The owner is NULL in its text when the record has none: the sqlite3 module binds a
    None only after looking for an adapter for it, which fails through two attribute
    lookups and a formatted AttributeError (~3,400 instructions).
    """
    value = "?" if owner else "NULL"
    if new:
        return (
            "INSERT INTO records (kind, id, version, owner, body)"
            f" VALUES (?, ?, ?, {value}, ?) ON CONFLICT (kind, id) DO NOTHING"
        )
    return (
        f"UPDATE records SET version = ?, owner = {value}, body = ?"
        " WHERE kind = ? AND id = ? AND version = ?"
    )


_OVERLAPPING = (
    f" FROM {_BASE} AS s, chunks AS c"
    # from the chunk holding the first position wanted (it may begin before it)
    " WHERE c.key >= (SELECT COALESCE(MAX(key), s.base) FROM chunks"
    "  WHERE key <= s.base + ? AND key >= s.base)"
    " AND c.key < s.base + ? ORDER BY c.key"
)
"""The chunks of segment `?` holding positions `? <= p < ?`, in order."""

_READ = "SELECT c.key - s.base, c.count, c.data" + _OVERLAPPING
_HELD = "SELECT c.key - s.base, c.count" + _OVERLAPPING

_LOCATE = (
    "WITH wanted (id) AS (SELECT value FROM json_each(?1))"
    # places in the index (no id list) ...
    f" SELECT w.id, s.name, i.key % {POSITIONS}, NULL FROM wanted AS w"
    " JOIN message_index AS i ON i.message_id = w.id"
    f" JOIN segments AS s ON s.id = i.key / {POSITIONS}"
    # ... chunks not indexed yet whose id list holds the text (the caller splits it) ...
    f" UNION ALL SELECT w.id, s.name, u.key % {POSITIONS}, u.message_ids FROM wanted AS w"
    " JOIN unindexed AS u ON instr(u.message_ids, w.id)"
    f" JOIN segments AS s ON s.id = u.key / {POSITIONS}"
    f" WHERE (SELECT count(*) FROM unindexed) <= {_BACKLOG}"
    # ... or, past the backlog, a row of NULLs: bring the index up to date first
    f" UNION ALL SELECT NULL, NULL, NULL, NULL WHERE (SELECT count(*) FROM unindexed) > {_BACKLOG}"
)
"""The places of the message ids in the JSON array `?1`: `(id, segment, position, NULL)`
from the index, `(id, segment, first position, newline-joined ids)` of a chunk not indexed
yet, or one row of NULLs when too many chunks wait to be indexed."""


class SQLiteStore(StoreBase):
    """A store in one SQLite database file; the embedded default.

    WAL mode (readers never wait for the writer), `synchronous=NORMAL` (a committed
    write survives a crash of the process; on power loss the last commits may be lost,
    never the database), one transaction per store operation (multi-statement ones
    begin IMMEDIATE, so concurrent processes queue on the busy timeout instead of
    failing), parameterized SQL only.

    An append is one *chunk*: a row holding the appended rows joined by newlines (a row
    that holds a newline gets a chunk of its own, so no row is ever escaped), keyed by
    `(segment, first position)`; appends longer than `CHUNK_CHARS` are split. So an
    append writes one table entry rather than one per row plus one per index entry, and
    reading a row reads its chunk. A chunk overlapping one already written is refused,
    so two appenders at the same position collide instead of overwriting. A commit (an
    append's chunks and the record that publishes them) is one transaction of plain
    statements, run on the event loop's thread without an await in between (below).

    The message-id index (`locate_message`) is deferred: an append only notes its
    chunk's message ids, and the next `locate_message`, from any process, first moves
    every noted id into the index (one transaction, then lookups are an index search).
    So the first lookup after many appends pays for them, once. Appends through handles
    that hold their messages (the default `load`, `create`) never look ids up; those of
    a `lazy=True` handle do (duplicate checks), as does finding a checkpoint by id.

    Short statements (an append's commit, a record read, an id lookup, a read of a few
    rows) run on the event loop's thread through a second connection that never waits
    (`InlineConnection`): an aiosqlite round trip costs more than their SQL. One that
    would wait for the write lock, and every long one, goes through aiosqlite's thread.
    The WAL checkpoint, as often as SQLite's auto-checkpoint would run it, runs on a
    thread of its own while the appends that made it due go on.

    `SQLiteStore(":memory:")` keeps a private in-memory database (one connection, every
    statement through aiosqlite). aiosqlite runs on asyncio, so this store needs the
    asyncio backend.
    """

    driver_errors = _DRIVER_ERRORS

    def __init__(self, path: str | os.PathLike[str], *, busy_timeout: float = 30.0) -> None:
        self._path = os.fspath(path)
        self._busy_timeout = busy_timeout
        self._lock = _connection_lock()
        self._connection: aiosqlite.Connection | None = None
        self._inline: InlineConnection | None = None
        self._checkpointer: threading.Thread | None = None  # its last WAL checkpoint
        self._yielded_at = 0.0  # when an inline statement last let other tasks run
        # the file for the checkpoint's own connection (absolute: the working directory
        # may change), opened read-write only
        self._file_uri = f"{Path(self._path).resolve().as_uri()}?mode=rw"

    @property
    def path(self) -> str:
        """The database file (or `":memory:"`)."""
        return self._path

    def __repr__(self) -> str:
        return f"SQLiteStore({self._path!r})"

    async def _do_open(self) -> None:
        async with self._lock:
            if self._connection is None:
                connection = await self._connect()
                try:  # a private database has one connection
                    if self._path not in ("", ":memory:"):
                        # the worker is not abandoned when the open is cancelled: the open
                        # completes (after at most the busy timeout, if another connection
                        # holds a lock), and the cancellation lands on the caller's next
                        # await, with both connections held here to be closed
                        self._inline = await anyio.to_thread.run_sync(
                            functools.partial(
                                InlineConnection, self._path, busy_timeout=self._busy_timeout
                            )
                        )
                except BaseException:  # open whole or not at all
                    with anyio.CancelScope(shield=True):
                        await connection.close()
                    raise
                self._connection = connection

    async def _do_close(self) -> None:
        # shielded whole: a task cancelled on its way out (an anyio cancel scope, as
        # `move_on_after` around `async with store`) still closes both connections; each
        # wait here is bounded (the lock by the busy timeout of what holds it)
        with anyio.CancelScope(shield=True):
            async with self._lock:
                # no write runs inline from here on, so none starts a WAL checkpoint
                inline, self._inline = self._inline, None
                checkpointer, self._checkpointer = self._checkpointer, None
                if checkpointer is not None and checkpointer.is_alive():
                    # its connection is closed first (bounded: see `_checkpoint_file`)
                    await anyio.to_thread.run_sync(checkpointer.join)
                if inline is not None:  # first: the last connection closed checkpoints
                    if inline.written and self._connection is not None:
                        # another connection may stay open (a service while commands
                        # come and go): only a checkpoint keeps the WAL from growing
                        await _checkpoint_wal(self._connection)
                    inline.close()
                if self._connection is not None:
                    connection, self._connection = self._connection, None
                    await connection.close()

    async def _connect(self) -> aiosqlite.Connection:
        connection = await aiosqlite.connect(
            self._path, timeout=self._busy_timeout, isolation_level=None
        )
        try:
            # takes effect in a new database (before its first table): freed pages can
            # then go back to the file system (see `_reclaim`); only there, since on an
            # existing one it is a write (and would switch a FULL one to INCREMENTAL)
            # before the schema version is even read
            if not _first(await connection.execute_fetchall("PRAGMA page_count")):
                await connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
            await connection.execute("PRAGMA journal_mode = WAL")
            await connection.execute("PRAGMA synchronous = NORMAL")
            if await self._migrate(connection):
                await _compact(connection)
        except BaseException:  # StoreBase reports a file that is no database as corrupted
            await connection.close()
            raise
        return connection

    async def _migrate(self, connection: aiosqlite.Connection) -> bool:
        """Run the migrations this database has not seen yet, in one transaction.

        Returns whether it upgraded a database that held a schema already.
        """
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
        return 0 < version < supported

    async def _reclaim(self) -> None:
        """Give the pages a bulk delete freed back to the file system.

        Indexing a backlog of appends empties `unindexed`; without this the file would
        keep those pages free (SQLite reuses them, but the file does not shrink).
        """
        async with self._statement() as connection:
            # best effort: the operation that freed the pages has committed already, and
            # pages left free (another process holding the lock) are reused by SQLite
            with contextlib.suppress(sqlite3.OperationalError):
                # a script runs the pragma to completion (one `execute` step frees one page)
                await connection.executescript("PRAGMA incremental_vacuum;")

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
            try:
                # inside the try: cancelled while it waits for the write lock, the BEGIN
                # still runs in aiosqlite's thread, and the ROLLBACK queued behind it
                # must end that transaction (else the connection stays in it)
                await connection.execute("BEGIN IMMEDIATE")
                yield connection
            except BaseException:
                with anyio.CancelScope(shield=True):
                    await _rollback(connection)
                raise
            with anyio.CancelScope(shield=True):
                await connection.execute("COMMIT")

    async def _query(
        self, sql: str, parameters: Sequence[Any], *, inline: bool = True
    ) -> list[Any]:
        """The rows of one read-only statement: inline when short and the file allows it.

        Inline or not, a cancellation lands before the statement, as at any other await
        on the database, and other tasks run (inline: when due, see `_take_turn`).
        """
        if inline and self._inline is not None:
            await self._take_turn()
            inline_connection = self._inline  # closed meanwhile: `_statement` says so
            if inline_connection is not None:
                with contextlib.suppress(Busy):  # a lock in the way: aiosqlite's thread waits
                    return inline_connection.fetch(sql, parameters)
        async with self._statement() as connection:
            return list(await connection.execute_fetchall(sql, parameters))

    async def _take_turn(self) -> None:
        """Before an inline statement: land a cancellation, let other tasks run if due.

        Other tasks run if inline statements held the event loop `INLINE_TURN` s since
        they last did. So a loop of appends never keeps other tasks (a run's lease
        renewal, a service's requests) waiting more than about a millisecond, and a
        cancellation still finds the statement unwritten.
        """
        now = time.monotonic()
        if now - self._yielded_at < INLINE_TURN:
            await anyio.lowlevel.checkpoint_if_cancelled()
            return
        await anyio.lowlevel.checkpoint()
        self._yielded_at = time.monotonic()

    def _checkpoint_if_due(self, inline: InlineConnection) -> None:
        """Copy the WAL back into the database off the event loop, as SQLite would.

        After a write that committed (it never fails that write: best effort, as
        SQLite's auto-checkpoint). Its page copies and syncs take milliseconds, so it
        runs on a thread of its own, through a connection of its own, and the write
        returns at once: nothing on the event loop waits for it or is called back by it
        (an event loop may end while it runs). See `_checkpoint_file`.
        """
        if not inline.checkpoint_due:
            return
        if self._checkpointer is not None and self._checkpointer.is_alive():
            return  # a later write starts the next one
        inline.checkpointed()
        checkpointer = threading.Thread(
            target=_checkpoint_file,
            args=(self._file_uri,),
            name=f"checkpoint {self._path}",
            daemon=True,  # a checkpoint cut short by the process's exit is harmless
        )
        try:
            checkpointer.start()
        except RuntimeError:  # no thread to be had now: a later write tries again
            return
        self._checkpointer = checkpointer

    # -- records --------------------------------------------------------------------

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        found = await self._query(
            "SELECT body FROM records WHERE kind = ? AND id = ?", (kind, record_id)
        )
        return None if not found else _parse_record(_first(found), kind, record_id)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        return await self._do_commit((), record, expected_version=expected_version)

    @staticmethod
    async def _version(connection: aiosqlite.Connection, kind: str, record_id: str) -> int:
        found = await connection.execute_fetchall(
            "SELECT version FROM records WHERE kind = ? AND id = ?", (kind, record_id)
        )
        return int(_first(found)) if found else 0

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
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

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        query = "SELECT kind, id, body FROM records WHERE (? IS NULL OR kind = ?)"
        query += " AND (? IS NULL OR owner = ?) ORDER BY kind, id"
        async with self._statement() as connection:
            found = await connection.execute_fetchall(query, (kind, kind, owner, owner))
        records = [_parse_record(body, k, i) for k, i, body in found]
        return [r for r in records if tags <= set(r.tags)]

    # -- segments -------------------------------------------------------------------

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        """Write `rows` in one transaction, all or nothing (see `_write_steps`).

        A chunk overlapping one already written is refused: that is what makes two
        appenders at the same position collide. No rows still record the segment as
        written, as every store does.
        """
        now = time.time()
        chunks = _chunks(segment_id, start, rows)
        if not chunks:
            async with self._statement() as connection:
                await connection.execute(_TOUCH, (segment_id, now))
            return
        size = sum(_size(chunk.data) for chunk in chunks)
        steps = functools.partial(_write_steps, chunks, None, now)
        refusal = await self._transact(steps, chunks=len(chunks), data_bytes=size)
        if refusal is not None:
            raise await self._refused(refusal, None, 0)

    async def _held(self, segment_id: str, start: int, count: int) -> int | None:
        """The first position of `[start, start + count)` that some chunk holds, if any."""
        found = await self._query(_HELD, (segment_id, start, start + count))
        for first, held in found:
            if first + held > start:
                return max(int(first), start)
        return None

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        """Write every chunk and the record in one transaction (see `_write_steps`).

        A chunk overlapping one already written, or a record whose stored version is
        not `expected_version`, rolls it all back.
        """
        stored = replaced(record, {"version": stored_version(expected_version)})
        now = time.time()
        chunks: list[_Chunk] = []
        for write in writes:
            chunks += _chunks(write.segment_id, write.start, write.rows)
        body = record_json(stored)
        size = _size(body) + sum(_size(chunk.data) for chunk in chunks)
        steps = functools.partial(
            _write_steps, chunks, _record_step(stored, body, expected_version), now
        )
        refusal = await self._transact(steps, chunks=len(chunks), data_bytes=size)
        if refusal is not None:
            raise await self._refused(refusal, record, expected_version)
        return stored

    async def _transact(
        self, steps: Callable[[], Steps[_Refusal | None]], *, chunks: int, data_bytes: int
    ) -> _Refusal | None:
        """Run a write of several statements in one transaction: inline unless large or busy.

        As `_query`, a cancellation lands before the transaction, writing nothing, and
        a loop of appends never keeps other tasks from running (see `_take_turn`).
        Inline, the whole transaction runs without an await, so nothing can cancel it
        half-way; through aiosqlite, `_transaction` rolls back what a cancellation cut.
        """
        if self._inline is not None and data_bytes <= INLINE_BYTES:
            await self._take_turn()
            inline = self._inline  # closed meanwhile: `_statement` says so
            if inline is not None:
                try:
                    refusal = inline.transaction(steps(), chunks=chunks, data_bytes=data_bytes)
                except Busy:
                    pass  # another writer holds the lock: wait for it off the event loop
                else:
                    self._checkpoint_if_due(inline)
                    return refusal
        try:
            async with self._transaction() as connection:
                refusal = await run_async(connection, steps())
                if refusal is not None:
                    raise _Refused(refusal)  # rolls the transaction back
        except _Refused as refused:
            return refused.refusal
        return None

    async def _refused(
        self, refusal: _Refusal, record: Record | None, expected_version: int
    ) -> ConflictError:
        """The ConflictError that says why a write was refused."""
        if isinstance(refusal, _Taken):
            held = await self._held(refusal.segment_id, refusal.start, refusal.length)
            position = refusal.start if held is None else held  # None: vacuumed meanwhile
            return ConflictError(
                f"segment {refusal.segment_id!r}", detail=f"position {position} is already written"
            )
        assert record is not None  # only a write with a record is refused as stale
        async with self._statement() as connection:
            found = await self._version(connection, record.kind, record.id)
        return version_conflict(record.kind, record.id, expected_version, found)

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        lo, hi = min(max(start, 0), POSITIONS), min(end, POSITIONS)  # bindable
        found = await self._query(_READ, (segment_id, lo, hi), inline=hi - lo <= INLINE_ROWS)
        data: list[str] = []
        for first, count, text in found:
            rows = _split_chunk(segment_id, first, count, text)
            data += rows[max(lo - first, 0) : hi - first]
        if len(data) != max(0, end - start):  # chunks never overlap: a short count is a gap
            raise StoreCorruptedError(
                f"segment {segment_id!r} in {self._path}",
                detail=f"positions {start}..{end - 1} requested, {len(data)} rows found",
            )
        return data

    async def _do_read_row_arrays(self, segment_id: str, start: int, end: int) -> list[RowArray]:
        """A chunk read whole is one array: its text with commas for newlines, uncut."""
        lo, hi = min(max(start, 0), POSITIONS), min(end, POSITIONS)  # bindable
        found = await self._query(_READ, (segment_id, lo, hi), inline=hi - lo <= INLINE_ROWS)
        arrays = [
            _chunk_array(segment_id, first, count, text, lo, hi) for first, count, text in found
        ]
        held = sum(array.length for array in arrays)
        if held != max(0, end - start):  # a gap, or a chunk's count its text does not match
            await self._do_read_rows(segment_id, start, end)  # names such a chunk
            raise StoreCorruptedError(
                f"segment {segment_id!r} in {self._path}",
                detail=f"positions {start}..{end - 1} requested, {held} rows found",
            )
        return arrays

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        return (await self._do_locate_messages([message_id]))[message_id]

    async def _do_locate_messages(self, message_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
        """The message-id index is brought up to date here, not by appends.

        A lookup searches the id lists of chunks not indexed yet (read-only) while they
        are at most `_BACKLOG`; past that, it indexes them all in one transaction first.
        """
        wanted = (json.dumps(message_ids),)
        found = await self._query(_LOCATE, wanted)
        if any(message_id is None for message_id, _, _, _ in found):
            async with self._transaction() as connection:
                indexed = await _index_chunks(connection)
                found = list(await connection.execute_fetchall(_LOCATE, wanted))
            if indexed >= _RECLAIM_AFTER:  # a few freed pages are soon reused by appends
                await self._reclaim()
        places: dict[str, set[tuple[str, int]]] = {m: set() for m in message_ids}
        for message_id, name, position, ids in found:
            if ids is None:
                places[message_id].add((str(name), int(position)))
                continue
            for offset, held in enumerate(str(ids).split("\n")):
                if held == message_id:  # instr matched text: keep whole ids only
                    places[message_id].add((str(name), int(position) + offset))
        return {m: sorted(held) for m, held in places.items()}

    async def _do_list_segments(self) -> dict[str, float]:
        async with self._statement() as connection:
            found = await connection.execute_fetchall(_LIST_SEGMENTS)
        return {str(name): float(written) for name, written in found}

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        async with self._transaction() as connection:
            names = [
                (name,)
                for name in await _present(
                    connection,
                    "segments",
                    "name",
                    segment_ids,
                    not_written_since,
                    unless=_CHUNK_SINCE,  # schema 5: a chunk holds its own time
                )
            ]
            # written last, so the chunks' trigger lets their chunks go (in this transaction)
            await connection.executemany(_DOOMED, names)
            for table in ("chunks", "unindexed"):
                await connection.executemany(
                    f"DELETE FROM {table} WHERE key IN (SELECT key FROM {table}, {_BASE}"
                    f" WHERE key >= base AND key < base + {POSITIONS})",
                    names,
                )
            await connection.executemany("DELETE FROM segments WHERE name = ?", names)
            # one pass over the index for all of them (its key is the message id)
            await connection.execute(
                f"DELETE FROM message_index WHERE key / {POSITIONS}"
                " NOT IN (SELECT id FROM segments)"
            )
        await self._reclaim()
        return len(names)

    # -- blobs ----------------------------------------------------------------------

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        async with self._statement() as connection:
            await connection.execute(
                "INSERT INTO blobs (digest, data, written_at) VALUES (?, ?, ?)"
                " ON CONFLICT (digest) DO UPDATE SET written_at = excluded.written_at",
                (digest, bytes(data), time.time()),
            )

    async def _do_get_blob(self, digest: str) -> bytes | None:
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

    async def _do_list_blobs(self) -> dict[str, float]:
        async with self._statement() as connection:
            found = await connection.execute_fetchall("SELECT digest, written_at FROM blobs")
        return {str(digest): float(written) for digest, written in found}

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        async with self._transaction() as connection:
            keys = [
                (digest,)
                for digest in await _present(
                    connection, "blobs", "digest", digests, not_written_since
                )
            ]
            await connection.executemany("DELETE FROM blobs WHERE digest = ?", keys)
        await self._reclaim()
        return len(keys)

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        """One UPDATE a table, each its own transaction; a lookup only if some row is missing.

        A row the UPDATE marked cannot be deleted by a vacuum running meanwhile (it
        spares what was written since its cutoff), so the lookup after it is exact.
        """
        async with self._statement() as connection:
            gone_segments = await _mark(connection, "segments", "name", segment_ids, now)
            gone_blobs = await _mark(connection, "blobs", "digest", digests, now)
        return gone_segments, gone_blobs


_SEGMENT_CHUNKS = f"c.key >= s.id * {POSITIONS} AND c.key < (s.id + 1) * {POSITIONS}"
"""The condition of a chunk `c` that it is one of segment row `s`'s."""

_LIST_SEGMENTS = (
    "SELECT s.name, max(s.written_at, COALESCE((SELECT c.written_at FROM chunks AS c"
    f"  WHERE {_SEGMENT_CHUNKS} ORDER BY c.key DESC LIMIT 1), 0))"
    " FROM segments AS s"
)
"""Each segment with its time of last write: its own, or its last chunk's if later.

Rows are written in order of position, so the last chunk is the latest written (one
read a segment, not one a chunk; `_present` checks every chunk before a deletion).
"""

_CHUNK_SINCE = f"SELECT 1 FROM chunks AS c WHERE {_SEGMENT_CHUNKS} AND c.written_at > ?1"
"""The chunks of segment `s` written after `?1`: a segment holding one was written since."""

_DOOMED = "UPDATE segments SET written_at = 9e999 WHERE name = ?"
"""Segment `?`, about to be deleted, gets an infinite time: later than any chunk's, which
the chunk deletion trigger (schema 5) asks of every chunk it lets go."""

_KEYS_PER_QUERY = 500
"""Keys one `IN (...)` lists: under SQLite's lowest limit of parameters (999)."""


async def _present(
    connection: aiosqlite.Connection,
    table: str,
    column: str,
    keys: list[str],
    not_written_since: float | None,
    *,
    unless: str = "",
) -> list[str]:
    """Those of `keys` in `table` (by `column`), not written after `not_written_since`.

    `unless`: a fixed condition on row `s`, with `?1` the cutoff, that also counts as
    written since (`_CHUNK_SINCE`); only checked when a cutoff is given.
    """
    found: list[str] = []
    cutoff = math.inf if not_written_since is None else not_written_since
    since = f" AND NOT EXISTS ({unless})" if unless and not_written_since is not None else ""
    for lo in range(0, len(keys), _KEYS_PER_QUERY):
        batch = keys[lo : lo + _KEYS_PER_QUERY]
        rows = await connection.execute_fetchall(
            f"SELECT {column} FROM {table} AS s WHERE written_at <= ?1{since}"  # fixed text
            f" AND {column} IN ({', '.join('?' * len(batch))})",
            (cutoff, *batch),
        )
        found += [str(key) for (key,) in rows]
    return found


async def _mark(
    connection: aiosqlite.Connection, table: str, column: str, keys: list[str], now: float
) -> set[str]:
    """Set `written_at` of the rows of `keys` in `table` to `now`; the keys with no row."""
    marked = 0
    for lo in range(0, len(keys), _KEYS_PER_QUERY):
        batch = keys[lo : lo + _KEYS_PER_QUERY]
        cursor = await connection.execute(
            f"UPDATE {table} SET written_at = ?"  # fixed names only
            f" WHERE {column} IN ({', '.join('?' * len(batch))})",
            (now, *batch),
        )
        marked += cursor.rowcount
    if marked == len(keys):  # the usual case: every one is there
        return set()
    return set(keys) - set(await _present(connection, table, column, keys, None))


def _connection_lock() -> anyio.Lock:
    """The lock taken around each use of the connection.

    Uncontended, it need not yield to the event loop first (`fast_acquire`):
    every holder awaits the database anyway, and an append takes it twice.
    """
    return anyio.Lock(fast_acquire=True)


def _checkpoint_file(uri: str) -> None:
    """Checkpoint the WAL through a connection of its own, best effort (on its own thread).

    A passive checkpoint first: it waits for no reader nor writer, which keep going
    while it copies. But SQLite starts the WAL over only after a checkpoint that copied
    all of it, and writers going on meanwhile (other tasks, other stores, other
    processes) would leave some behind every time, the WAL growing without end: so a
    RESTART one follows, which holds writers back while it copies what is left (the
    store's inline writes then go through aiosqlite's thread, which waits for it) and
    lets the next write start the WAL over. It waits at most `_RESTART_WAIT` s for a
    reader or writer in its way, then gives up (a later one tries again).
    """
    with contextlib.suppress(Exception):
        # mode=rw: never creates the file (the store may be gone by now)
        connection = sqlite3.connect(uri, uri=True, timeout=_RESTART_WAIT, isolation_level=None)
        try:
            connection.execute("PRAGMA synchronous = NORMAL")  # as the store's own
            busy, _, _ = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
            if not busy:  # not another connection's checkpoint under way
                connection.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
        finally:
            connection.close()


async def _checkpoint_wal(connection: aiosqlite.Connection) -> None:
    """A passive WAL checkpoint (it waits for no reader or writer), best effort."""
    with contextlib.suppress(sqlite3.OperationalError):
        await connection.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")


async def _rollback(connection: aiosqlite.Connection) -> None:
    with contextlib.suppress(sqlite3.OperationalError):  # no transaction left to roll back
        await connection.execute("ROLLBACK")


def _size(text: str) -> int:
    """The UTF-8 bytes of `text` (its length when it is ASCII, which Python knows at once)."""
    return len(text) if text.isascii() else len(text.encode())


def _chunks(segment_id: str, start: int, rows: Sequence[Row]) -> list[_Chunk]:
    """The chunks of `rows` written at `start`: one, unless long or holding newlines.

    No chunk for no rows. ValueError if they would pass the segment's last position.
    """
    if start + len(rows) > POSITIONS:
        raise ValueError(f"segment {segment_id!r}: positions end at {POSITIONS - 1}")
    if not rows:
        return []
    message_ids, data = zip(*rows, strict=True)
    joined = "\n".join(data)
    if len(joined) <= CHUNK_CHARS and joined.count("\n") == len(data) - 1:  # the usual append
        ids = "\n".join(message_ids)
        return [_new_chunk((segment_id, start, len(data), ids, joined))]
    return [
        _Chunk(
            segment_id,
            start + lo,
            hi - lo,
            "\n".join(message_ids[lo:hi]),
            "\n".join(data[lo:hi]),
        )
        for lo, hi in _runs(data)
    ]


def _runs(data: Sequence[str]) -> Iterator[tuple[int, int]]:
    """The runs `[lo, hi)` of rows stored as one chunk each.

    A run joins its rows by newlines, so a row holding a newline is a run of its own (a
    chunk of one row is that row, whatever it holds): no row is ever escaped. A run
    stops before it would pass `CHUNK_CHARS`.
    """
    lo, size = 0, -1
    for i, row in enumerate(data):
        if "\n" in row:
            if lo < i:
                yield lo, i
            yield i, i + 1
            lo, size = i + 1, -1
        elif lo < i and size + 1 + len(row) > CHUNK_CHARS:
            yield lo, i
            lo, size = i, len(row)
        else:
            size += 1 + len(row)
    if lo < len(data):
        yield lo, len(data)


def _chunk_array(segment_id: str, first: int, count: Any, text: Any, lo: int, hi: int) -> RowArray:
    """The rows of a chunk at positions `lo <= p < hi` as one JSON array.

    A chunk of several rows, all wanted, is its text with its newlines turned into
    commas (its rows hold none: see `_runs`), unchecked: an array that does not hold
    `count` rows is found by the reader decoding it, and `read_rows` then says which
    chunk is wrong. Otherwise its rows are cut out (checked) and joined.
    """
    if lo <= first and first + count <= hi and count > 1 and isinstance(text, str):
        return RowArray(count, "[" + text.replace("\n", ",") + "]")
    rows = _split_chunk(segment_id, first, count, text)[max(lo - first, 0) : hi - first]
    return RowArray(len(rows), "[" + ",".join(rows) + "]")


def _split_chunk(segment_id: str, first: int, count: Any, text: Any) -> list[str]:
    """The rows of a chunk (StoreCorruptedError if it does not hold `count` of them)."""
    if not isinstance(text, str):
        raise StoreCorruptedError(
            f"segment {segment_id!r} position {first}", detail="row data is not text"
        )
    rows = [text] if count == 1 else text.split("\n")
    if len(rows) != count:
        raise StoreCorruptedError(
            f"segment {segment_id!r} position {first}",
            detail=f"a chunk of {count} rows holds {len(rows)}",
        )
    return rows


async def _compact(connection: aiosqlite.Connection) -> None:
    """Give the pages an upgrade left free back to the file system.

    A database in incremental auto-vacuum mode already (created by a release that sets
    it) gives them back at once: rewriting it would copy the whole file for nothing (an
    upgrade that only replaces views and triggers frees a few pages at most). Another
    is rewritten by one VACUUM, once, which also turns that mode on. Skipped (the pages
    stay free, for SQLite to reuse) when other connections keep it busy.
    """
    incremental = _first(await connection.execute_fetchall("PRAGMA auto_vacuum")) == _INCREMENTAL
    (timeout,) = next(iter(await connection.execute_fetchall("PRAGMA busy_timeout")))
    await connection.execute("PRAGMA busy_timeout = 1000")  # do not hold up the open
    try:
        with contextlib.suppress(sqlite3.OperationalError):
            if incremental:
                await connection.executescript("PRAGMA incremental_vacuum;")
            else:
                await connection.execute("PRAGMA auto_vacuum = INCREMENTAL")
                await connection.execute("VACUUM")
    finally:
        await connection.execute(f"PRAGMA busy_timeout = {int(timeout)}")


async def _index_chunks(connection: aiosqlite.Connection) -> int:
    """Move the message ids of every unindexed chunk into the message-id index.

    Returns how many chunks that was.
    """
    pending = list(await connection.execute_fetchall("SELECT key, message_ids FROM unindexed"))
    entries = [
        (message_id, key + offset)
        for key, message_ids in pending
        for offset, message_id in enumerate(str(message_ids).split("\n"))
    ]
    await connection.executemany(
        "INSERT INTO message_index (message_id, key) VALUES (?, ?)", entries
    )
    await connection.executemany(
        "DELETE FROM unindexed WHERE key = ?", [(key,) for key, _ in pending]
    )
    return len(pending)


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
