"""SQLiteStore's writes as one transaction of plain statements (`stores._sqlite_steps`)."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_threads import ConflictError, Record, Row, RowWrite, SQLiteStore
from agent_threads.stores import sqlite as sqlite_module

from .test_sqlite import execute, query


def rows(first: int, count: int, tag: str = "m") -> list[Row]:
    return [Row(f"{tag}{p}", json.dumps({"p": p})) for p in range(first, first + count)]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


_SPANS = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 6)), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(written=_SPANS, tried=st.tuples(st.integers(0, 45), st.integers(1, 8)))
def test_a_write_is_refused_exactly_when_a_chunk_holds_one_of_its_positions(
    written: list[tuple[int, int]], tried: tuple[int, int]
) -> None:
    """Chunks of neighbouring segments too: the check of positions stays in its segment."""

    async def check() -> None:
        held: set[int] = set()
        with tempfile.TemporaryDirectory() as directory:
            async with SQLiteStore(Path(directory) / "t.db") as store:
                await store.append_rows("before", 0, rows(0, 50, "b"))  # segment number - 1
                for start, count in written:
                    span = set(range(start, start + count))
                    if not span & held:
                        await store.append_rows("seg", start, rows(start, count))
                        held |= span
                await store.append_rows("after", 0, rows(0, 50, "a"))  # segment number + 1
                start, count = tried
                overlap = set(range(start, start + count)) & held
                record = Record(kind="thread", id="t")
                write = RowWrite("seg", start, rows(start, count, "new"))
                if overlap:
                    with pytest.raises(ConflictError, match=f"position {min(overlap)} is already"):
                        await store.commit([write], record, expected_version=0)
                    assert await store.get_record("thread", "t") is None
                else:
                    await store.commit([write], record, expected_version=0)
                    texts = await store.read_rows("seg", start, start + count)
                    assert texts == [r.data for r in write.rows]

    anyio.run(check)


async def test_a_stale_record_keeps_none_of_the_rows_of_its_commit(path: Path) -> None:
    async with SQLiteStore(path) as store:
        stored = await store.put_record(Record(kind="thread", id="t"), expected_version=0)
        writes = [RowWrite("seg", 0, rows(0, 2)), RowWrite("log", 0, rows(0, 1, "c"))]
        with pytest.raises(ConflictError, match=f"stored version {stored.version}"):
            await store.commit(writes, stored, expected_version=stored.version + 5)
        assert await store.list_segments() == {}
        assert query(path, "SELECT count(*) FROM chunks") == [(0,)]
        assert query(path, "SELECT count(*) FROM unindexed") == [(0,)]
        again = await store.commit(writes, stored, expected_version=stored.version)
        assert again.version == stored.version + 1
        assert await store.read_rows("seg", 0, 2) == [r.data for r in rows(0, 2)]


async def test_a_statement_failing_half_way_rolls_back_and_the_store_writes_on(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with SQLiteStore(path) as store:
        monkeypatch.setattr(sqlite_module, "_UNINDEXED", "INSERT INTO no_such_table VALUES (?, ?)")
        with pytest.raises(Exception, match="no_such_table"):
            await store.commit(
                [RowWrite("seg", 0, rows(0, 1))], Record(kind="thread", id="t"), expected_version=0
            )
        assert query(path, "SELECT count(*) FROM chunks") == [(0,)]
        monkeypatch.undo()
        await store.commit(
            [RowWrite("seg", 0, rows(0, 1))], Record(kind="thread", id="t"), expected_version=0
        )
        assert await store.read_rows("seg", 0, 1) == [rows(0, 1)[0].data]


def set_back(path: Path, seconds: float) -> None:
    """Every segment's and chunk's time of writing, `seconds` earlier."""
    execute(path, f"UPDATE segments SET written_at = written_at - {seconds}")
    execute(path, f"UPDATE chunks SET written_at = written_at - {seconds}")


async def test_each_write_marks_its_segment_written_now(path: Path) -> None:
    """Through its chunk's time: the segment's row is not written again."""
    async with SQLiteStore(path) as store:
        record = await store.commit(
            [RowWrite("seg", 0, rows(0, 1))], Record(kind="thread", id="t"), expected_version=0
        )
        set_back(path, 2)
        (segment_time,) = query(path, "SELECT written_at FROM segments")
        before = time.time()
        await store.commit(
            [RowWrite("seg", 1, rows(1, 1))], record, expected_version=record.version
        )
        assert (await store.list_segments())["seg"] >= before
        assert query(path, "SELECT written_at FROM segments") == [segment_time]
        set_back(path, 2)
        before = time.time()
        await store.append_rows("seg", 2, rows(2, 1))
        assert (await store.list_segments())["seg"] >= before
        assert await store.delete_segments(["seg"], not_written_since=before - 1) == 0


async def test_a_chunk_written_since_the_cutoff_below_the_last_one_keeps_its_segment(
    path: Path,
) -> None:
    """The listed time is the last chunk's; the deletion checks every chunk's."""
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 5, rows(5, 1))
        set_back(path, 100)
        cutoff = time.time() - 50
        await store.append_rows("seg", 0, rows(0, 1))  # a gap filled: a lower position
        assert (await store.list_segments())["seg"] < cutoff
        assert await store.delete_segments(["seg"], not_written_since=cutoff) == 0
        assert await store.read_rows("seg", 0, 1) == [rows(0, 1)[0].data]
        set_back(path, 100)
        assert await store.delete_segments(["seg"], not_written_since=cutoff) == 1
        assert query(path, "SELECT count(*) FROM chunks") == [(0,)]


async def test_a_segment_whose_chunks_hold_no_time_is_deleted_by_its_own(path: Path) -> None:
    """Touched only (no chunk), or chunks written before schema 5 (no time)."""
    async with SQLiteStore(path) as store:
        await store.append_rows("touched", 0, [])
        await store.append_rows("older", 0, rows(0, 2))
        execute(path, "UPDATE chunks SET written_at = NULL")  # as a writer of schema 4
        times = await store.list_segments()
        cutoff = max(times.values())
        assert await store.delete_segments(["touched", "older"], not_written_since=cutoff) == 2
        assert query(path, "SELECT count(*) FROM chunks") == [(0,)]


async def _holding_the_lock(path: Path, seconds: float) -> None:
    """Hold the database's write lock through another connection for `seconds`."""
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN IMMEDIATE")
        await anyio.sleep(seconds)
        holder.execute("COMMIT")
    finally:
        holder.close()


async def test_a_commit_finding_the_write_lock_taken_waits_for_it_then_refuses_alike(
    path: Path,
) -> None:
    """Through aiosqlite's thread: the same statements, the same refusals."""
    async with SQLiteStore(path) as store:
        record = await store.put_record(Record(kind="thread", id="t"), expected_version=0)
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_holding_the_lock, path, 0.3)
            await anyio.sleep(0.05)
            record = await store.commit(
                [RowWrite("seg", 0, rows(0, 3))], record, expected_version=record.version
            )
        assert await store.read_rows("seg", 0, 3) == [r.data for r in rows(0, 3)]
        for write, version, error in [
            (RowWrite("seg", 2, rows(2, 1, "x")), record.version, "position 2 is already"),
            (RowWrite("seg", 3, rows(3, 1, "x")), record.version - 1, "expected version"),
        ]:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_holding_the_lock, path, 0.3)
                await anyio.sleep(0.05)
                with pytest.raises(ConflictError, match=error):
                    await store.commit([write], record, expected_version=version)
        assert query(path, "SELECT count(*) FROM chunks") == [(1,)]
        assert (await store.get_record("thread", "t")) == record
