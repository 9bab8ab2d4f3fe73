"""The inline SQLite connection: short statements run on the caller's thread, never waiting."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from agent_threads.stores._sqlite_steps import RefusalT, Steps, run

BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
"""SQLite's primary result codes that mean "another connection holds the lock"."""

CHECKPOINT_PAGES = 1000
"""WAL pages written inline after which the store checkpoints (SQLite's own default)."""

PAGE_BYTES = 4096
"""SQLite's default page size: what a commit's data costs in WAL pages, roughly."""

CACHE_KIB = 8192
"""The inline connection's page cache (`PRAGMA cache_size`), in KiB: 8 MiB at most,
against SQLite's default 2 MiB. It fills as pages are read and is held until the store
closes. A thread loaded again, with no write from another connection in between (which
empties it), reads its rows without going back to the file system: the rows of 10,000
messages (5.6 MB) took 1.2 ms instead of 2.2 on a bare connection, and a load of them
2-4% less, side by side with a store at the default. The store's aiosqlite connection,
which runs vacuum's scans, keeps the default."""

PAGES_PER_WRITE = 2
"""The pages a small commit changes besides its chunks' (the record's leaf; a new
segment's row and name; interior pages): each page a commit changes is written whole to
the WAL. 50 threads committing in turn, schema 5: 4.8 WAL frames a commit to a segment
written before, 5.45 one that makes its segment, against 5 counted."""

PAGES_PER_CHUNK = 3
"""The pages each chunk of a small commit changes besides its data's (its own leaf page,
its ids' in `unindexed`, and interior pages when threads interleave). Measured in WAL
frames per append of one ~500-byte message, one writer: 3.6, and 6.2 with a checkpoint
(two chunks); before schema 5, whose chunks hold their time, 4.5 and 7.2 (and 6.5 for
100 threads appending in turn, 10.7 with a checkpoint)."""


class Busy(Exception):
    """The statement would have had to wait for a lock: run it through the worker instead."""


class InlineConnection:
    """A second connection to a `SQLiteStore`'s file, for short statements that never wait.

    A statement sent through aiosqlite costs a round trip to its worker thread (a queue,
    a thread wake-up, a call back into the event loop: ~50-150 us, more than the SQL of
    an append); run here, on the caller's thread, it costs only its SQL (~20-60 us). So
    only what is short runs here: an append's commit, a record read, an id lookup, a
    few rows; the store sends everything else through aiosqlite.

    It never waits. Its busy timeout is 0, so a statement that finds the write lock
    taken (another process, or the store's own aiosqlite connection inside a
    transaction) raises `Busy` at once, having written nothing, and the store sends it
    through aiosqlite, which waits for the lock off the event loop. And it never
    checkpoints the WAL (a checkpoint writes pages back and syncs the file, which can
    take milliseconds): it counts the pages it wrote, and `checkpoint_due` tells the
    store when to run one on aiosqlite's thread, as often as SQLite's own
    auto-checkpoint would.
    """

    def __init__(self, path: str, *, busy_timeout: float) -> None:
        """Open the connection, waiting up to `busy_timeout` s for a lock while it opens.

        Its first statement reads the schema, which waits for a lock like any read (a
        connection opening or checkpointing the same file holds one for a moment), so it
        may block: call it off the event loop. The connection then never waits.
        """
        # check_same_thread off: the store may be used from one event loop, then from
        # another thread's (one at a time, as its aiosqlite connection already requires)
        self._connection = sqlite3.connect(
            path, timeout=busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._connection.execute("PRAGMA synchronous = NORMAL")
            self._connection.execute("PRAGMA wal_autocheckpoint = 0")
            self._connection.execute("PRAGMA busy_timeout = 0")
            self._connection.execute(f"PRAGMA cache_size = -{CACHE_KIB}")
        except BaseException:
            self._connection.close()
            raise
        self._pages = 0
        self._cursor = self._connection.cursor()  # for transactions (see `_sqlite_steps.run`)

    def fetch(self, sql: str, parameters: Sequence[Any]) -> list[Any]:
        """The rows of a query (its own read transaction, ended before this returns)."""
        try:
            return self._connection.execute(sql, parameters).fetchall()
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise Busy from exc
            raise

    def transaction(self, steps: Steps[RefusalT], *, chunks: int, data_bytes: int) -> RefusalT:
        """Run a write of several statements as one transaction (see `_sqlite_steps`).

        Committed if the steps went through; rolled back, with their refusal returned,
        if not, and on any error. `Busy` if the write lock is taken, nothing written.
        """
        cursor = self._cursor
        try:
            cursor.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if _is_busy(exc):
                raise Busy from exc
            raise
        try:
            refusal = run(cursor, steps)
            cursor.execute("COMMIT" if refusal is None else "ROLLBACK")
        except BaseException:
            if self._connection.in_transaction:
                self._connection.execute("ROLLBACK")
            raise
        if refusal is None:
            self._pages += PAGES_PER_WRITE + PAGES_PER_CHUNK * chunks + data_bytes // PAGE_BYTES
        return refusal

    @property
    def checkpoint_due(self) -> bool:
        """Whether this connection wrote enough to the WAL since the last checkpoint."""
        return self._pages >= CHECKPOINT_PAGES

    @property
    def written(self) -> bool:
        """Whether this connection wrote to the WAL since the last checkpoint."""
        return self._pages > 0

    def checkpointed(self) -> None:
        """Note that the store checkpointed the WAL."""
        self._pages = 0

    def close(self) -> None:
        self._connection.close()


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    """Whether SQLite's result code (extended codes such as BUSY_SNAPSHOT included) is busy."""
    return exc.sqlite_errorcode & 0xFF in BUSY_CODES


__all__ = ["Busy", "InlineConnection"]
