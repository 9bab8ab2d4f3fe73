"""SQLiteStore: cases found in review (cancellation, opening a database it must not touch)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import anyio
import pytest

from agent_threads import Record, Row, SchemaVersionError, SQLiteStore, StoreCorruptedError

from .test_sqlite import execute, query


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


async def test_a_transaction_cancelled_while_it_waits_to_begin_leaves_nothing_open(
    path: Path,
) -> None:
    async with SQLiteStore(path, busy_timeout=10) as store:
        await store.put_record(Record(kind="thread", id="t1"), expected_version=0)
        other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # the store's BEGIN IMMEDIATE waits for this
        release = threading.Timer(0.5, other.execute, ("COMMIT",))
        release.start()
        try:
            with anyio.move_on_after(0.1):
                await store.delete_record("thread", "t1")
        finally:
            release.join()
            other.close()
        # the BEGIN that went on after the cancellation must not stay open: the next
        # append is its own committed transaction, seen by every other connection
        await store.append_rows("seg", 0, [Row("m1", "{}")])
        assert query(path, "SELECT count(*) FROM chunks") == [(1,)]
        assert await store.delete_record("thread", "t1")
    assert query(path, "SELECT count(*) FROM records") == [(0,)]


async def test_a_newer_database_is_refused_before_its_auto_vacuum_mode_is_changed(
    path: Path,
) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, [Row("m1", "{}")])
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA auto_vacuum = FULL")  # as a newer version might choose
    connection.execute("VACUUM")
    connection.close()
    execute(path, "UPDATE schema_version SET version = 99")
    assert query(path, "PRAGMA auto_vacuum") == [(1,)]
    with pytest.raises(SchemaVersionError):
        async with SQLiteStore(path):
            pass
    assert query(path, "PRAGMA auto_vacuum") == [(1,)]


async def test_a_read_beyond_the_key_space_is_answered_like_any_missing_range(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, [Row("m1", "{}")])
        far = 1 << 64  # past what SQLite can bind: no OverflowError from the driver
        assert await store.read_rows("seg", far, far) == []
        with pytest.raises(StoreCorruptedError, match="seg"):
            await store.read_rows("seg", far, far + 1)
