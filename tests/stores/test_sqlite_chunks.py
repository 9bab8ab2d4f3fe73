"""SQLiteStore's schema 2: appends stored as chunks, a deferred message-id index, migration."""

from __future__ import annotations

import json
import sqlite3
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    DuplicateMessageError,
    InvalidIdError,
    MemoryStore,
    Message,
    Row,
    SQLiteStore,
    StoreCorruptedError,
)
from agent_threads.core.ids import MAX_ID_LENGTH
from agent_threads.stores import sqlite as sqlite_module

from .test_conformance import HOSTILE_IDS
from .test_sqlite import query


def rows(*ids: str) -> list[Row]:
    return [Row(i, json.dumps({"id": i})) for i in ids]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "threads.db"


# -- chunks -----------------------------------------------------------------------------


async def test_an_append_is_one_chunk_row(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, rows("a", "b", "c"))
        await store.append_rows("seg", 3, rows("d"))
    assert query(path, f"SELECT key % {sqlite_module.POSITIONS}, count FROM chunks") == [
        (0, 3),
        (3, 1),
    ]


async def test_any_range_reads_back_across_chunks(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 10, rows("a", "b", "c"))
        await store.append_rows("seg", 13, rows("d", "e"))
        await store.append_rows("seg", 15, rows("f"))
        data = [r.data for r in rows("a", "b", "c", "d", "e", "f")]
        for lo in range(10, 16):
            for hi in range(lo, 17):
                assert await store.read_rows("seg", lo, hi) == data[lo - 10 : hi - 10]


@pytest.mark.parametrize(
    ("start", "count", "position"),
    [(0, 1, 0), (1, 1, 1), (2, 5, 2), (3, 3, 5), (4, 2, 5)],
    ids=["same-start", "inside", "from-inside-on", "running-into-the-next", "ending-inside"],
)
async def test_an_append_overlapping_a_chunk_names_the_first_taken_position(
    path: Path, start: int, count: int, position: int
) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, rows("a", "b", "c"))
        await store.append_rows("seg", 5, rows("f", "g"))
        new = rows(*(f"x{i}" for i in range(count)))
        with pytest.raises(ConflictError, match=f"position {position} is already written"):
            await store.append_rows("seg", start, new)
        assert await store.locate_message("x0") == []
    assert query(path, "SELECT count(*) FROM chunks") == [(2,)]


async def test_appends_into_the_gap_between_chunks_fit(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, rows("a", "b"))
        await store.append_rows("seg", 4, rows("e"))
        await store.append_rows("seg", 2, rows("c", "d"))
        assert await store.read_rows("seg", 0, 5) == [r.data for r in rows(*"abcde")]


async def test_rows_holding_newlines_read_back_exactly(path: Path) -> None:
    texts = ["a", "b", "two\nlines", "c", "", "d", "\n", "trailing\n", "e"]
    batch = [Row(f"m{i}", text) for i, text in enumerate(texts)]
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, batch)
        for lo in range(len(texts)):
            assert await store.read_rows("seg", lo, len(texts)) == texts[lo:]
        assert await store.locate_message("m4") == [("seg", 4)]
    # newline-free rows (empty ones too) share chunks; a row holding one is a chunk alone
    chunks = query(path, f"SELECT key % {sqlite_module.POSITIONS}, count FROM chunks ORDER BY key")
    assert chunks == [(0, 2), (2, 1), (3, 3), (6, 1), (7, 1), (8, 1)]


async def test_rows_of_messages_share_one_chunk(path: Path) -> None:
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        await thread.on_new_messages([Message.user(f"line one\nline two {i}") for i in range(5)])
    assert query(path, "SELECT count FROM chunks") == [(5,)]  # JSON escapes newlines


async def test_a_long_append_is_split_and_still_all_or_nothing(path: Path) -> None:
    size = sqlite_module.CHUNK_CHARS // 4
    batch = [Row(f"m{i}", "x" * size) for i in range(10)]
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 8, rows("taken"))
        with pytest.raises(ConflictError, match="position 8"):
            await store.append_rows("seg", 0, batch)
        assert query(path, "SELECT count(*) FROM chunks") == [(1,)]
        await store.append_rows("other", 0, batch)
        assert await store.read_rows("other", 3, 7) == [r.data for r in batch[3:7]]
    lengths = query(path, "SELECT length(data) FROM chunks WHERE count > 1")
    assert len(lengths) > 1
    assert all(isinstance(n, int) and n <= sqlite_module.CHUNK_CHARS for (n,) in lengths)


async def test_an_append_of_many_chunks_is_all_or_nothing(path: Path) -> None:
    count = 105
    batch = [Row(f"m{i}", f"row\n{i}") for i in range(count)]  # a chunk each
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", count - 1, rows("taken"))
        with pytest.raises(ConflictError, match=f"position {count - 1}"):
            await store.append_rows("seg", 0, batch)
        assert await store.locate_message("m0") == []
        await store.append_rows("other", 0, batch)
        assert await store.read_rows("other", 0, count) == [r.data for r in batch]
    assert query(path, "SELECT count(*) FROM chunks") == [(count + 1,)]


async def test_an_empty_append_still_records_the_segment(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("empty", 0, [])
        assert set(await store.list_segments()) == {"empty"}
        assert await store.read_rows("empty", 0, 0) == []


async def test_a_chunk_holding_the_wrong_number_of_rows_is_reported(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, rows("a", "b", "c"))
        connection = sqlite3.connect(path)
        connection.execute("UPDATE chunks SET count = 4")
        connection.commit()
        connection.close()
        with pytest.raises(StoreCorruptedError, match="segment 'seg' position 0"):
            await store.read_rows("seg", 0, 1)


@pytest.mark.parametrize("bad", [*HOSTILE_IDS, "a" * (MAX_ID_LENGTH + 1), "ok\n"])
async def test_a_bad_message_id_anywhere_in_a_batch_is_named(path: Path, bad: str) -> None:
    async with SQLiteStore(path) as store:
        with pytest.raises(InvalidIdError) as caught:
            await store.append_rows("seg", 0, [*rows("ok", "fine"), Row(bad, "{}"), *rows("z")])
        assert caught.value.value == bad
        assert await store.list_segments() == {}


async def test_the_longest_valid_message_id_is_accepted(path: Path) -> None:
    longest = "a" * MAX_ID_LENGTH
    async with SQLiteStore(path) as store:
        await store.append_rows("seg", 0, rows("b", longest))
        assert await store.locate_message(longest) == [("seg", 1)]


# -- the deferred message-id index ----------------------------------------------------------


async def test_appends_through_an_eager_handle_leave_the_index_for_later(path: Path) -> None:
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        first = Message.user("first")
        await thread.on_new_messages([first, Message.assistant("second")])
        await thread.on_new_messages([Message.user("third")])
        assert query(path, "SELECT count(*) FROM message_index") == [(0,)]
        assert query(path, "SELECT count(*) FROM unindexed") == [(2,)]
        segment_id = thread.ranges[0].segment_id
        assert await store.locate_message(first.id) == [(segment_id, 0)]
        # a short backlog is searched as it is: a lookup writes nothing
        assert query(path, "SELECT count(*) FROM unindexed") == [(2,)]
        for i in range(sqlite_module._BACKLOG):
            await thread.on_new_messages([Message.user(f"more {i}")])
        assert await store.locate_message(first.id) == [(segment_id, 0)]
    # past it, the lookup indexed every chunk first
    assert query(path, "SELECT count(*) FROM message_index") == [(3 + sqlite_module._BACKLOG,)]
    assert query(path, "SELECT count(*) FROM unindexed") == [(0,)]


async def test_a_lookup_in_the_backlog_matches_whole_ids_only(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("s", 0, rows("ab", "abc", "x.y", "abc"))
        assert await store.locate_message("abc") == [("s", 1), ("s", 3)]
        assert await store.locate_message("b") == []
        assert await store.locate_message("ab") == [("s", 0)]
        assert await store.locate_message("x.y") == [("s", 2)]
        assert query(path, "SELECT count(*) FROM message_index") == [(0,)]


async def test_a_lazy_handle_finds_duplicates_the_index_has_not_seen_yet(path: Path) -> None:
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        message = Message.user("once")
        await thread.on_new_messages([message])
        lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
        with pytest.raises(DuplicateMessageError, match=message.id):
            await lazy.on_new_messages([Message.user("new"), message])
        fork = await lazy.fork(message_id=message.id)
        assert fork.head == 1


async def test_the_index_catches_up_on_appends_made_by_another_process(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("mine", 0, rows("m0"))
        assert await store.locate_message("m0") == [("mine", 0)]  # indexes what is there
        script = textwrap.dedent(
            f"""
            import anyio
            from agent_threads import Row, SQLiteStore

            async def main() -> None:
                async with SQLiteStore({str(path)!r}) as store:
                    await store.append_rows("theirs", 0, [Row("t0", "{{}}"), Row("t1", "{{}}")])
                    await store.append_rows("theirs", 2, [Row("m0", "{{}}")])

            anyio.run(main)
            """
        )
        await anyio.run_process([sys.executable, "-c", script])
        assert await store.locate_message("t1") == [("theirs", 1)]
        assert await store.locate_message("m0") == [("mine", 0), ("theirs", 2)]


async def test_indexing_a_backlog_gives_its_pages_back_to_the_file_system(path: Path) -> None:
    async with SQLiteStore(path) as store:
        for n in range(300):
            await store.append_rows("log", n, rows(f"id{n}-" + "x" * 100))
        ((before,),) = query(path, "PRAGMA page_count")
        assert await store.locate_message("id7-" + "x" * 100) == [("log", 7)]
        assert query(path, "PRAGMA freelist_count") == [(0,)]
        await store.delete_segments(["log"])
        assert query(path, "PRAGMA freelist_count") == [(0,)]
    assert query(path, "PRAGMA auto_vacuum") == [(2,)]  # incremental
    ((after,),) = query(path, "PRAGMA page_count")
    assert isinstance(after, int) and isinstance(before, int) and after < before


async def test_deleting_segments_drops_their_chunks_and_index_entries(path: Path) -> None:
    async with SQLiteStore(path) as store:
        await store.append_rows("indexed", 0, rows("a", "b"))
        await store.append_rows("kept", 0, rows("a"))
        for position in range(sqlite_module._BACKLOG):  # past the backlog: a lookup indexes
            await store.append_rows("filler", position, rows(f"f{position}"))
        assert len(await store.locate_message("a")) == 2
        assert query(path, "SELECT count(*) FROM unindexed") == [(0,)]
        await store.append_rows("pending", 0, rows("c"))
        await store.delete_segments(["indexed", "pending", "filler"])
        assert await store.locate_message("a") == [("kept", 0)]
        assert await store.locate_message("b") == []
        assert await store.locate_message("c") == []
    assert query(path, "SELECT count(*) FROM chunks") == [(1,)]
    assert query(path, "SELECT count(*) FROM message_index") == [(1,)]


# -- migration from schema 1 ------------------------------------------------------------------


def write_schema_1(
    path: Path,
    records: list[tuple[str, str, int, str]],
    segments: dict[str, dict[int, tuple[str, str]]],
) -> None:
    """A database as SQLiteStore wrote it at schema version 1."""
    connection = sqlite3.connect(path)
    for statement in sqlite_module.MIGRATIONS[0]:
        connection.execute(statement)
    connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO schema_version VALUES (1)")
    connection.executemany("INSERT INTO records VALUES (?, ?, ?, NULL, ?)", records)
    for number, (name, written) in enumerate(segments.items(), start=1):
        connection.execute("INSERT INTO segments VALUES (?, ?, 0)", (number, name))
        connection.executemany(
            "INSERT INTO segment_rows VALUES (?, ?, ?)",
            [(number * sqlite_module.POSITIONS + p, m, d) for p, (m, d) in written.items()],
        )
    connection.commit()
    connection.close()


async def test_a_schema_1_database_is_migrated_with_its_threads(path: Path) -> None:
    memory = MemoryStore()
    thread = await ChatMessageThread.create(memory, title="old")
    texts = ["one", "two\nlines", "three"]
    await thread.on_new_messages([Message.user(t) for t in texts])
    record = await memory.get_record("thread", thread.id)
    assert record is not None
    (segment_id, start, end) = thread.ranges[0].to_json()
    stored = await memory.read_rows(segment_id, start, end)
    ids = [m.id for m in thread.messages]
    write_schema_1(
        path,
        [("thread", thread.id, record.version, record.model_dump_json())],
        {segment_id: {p: (ids[p], stored[p]) for p in range(start, end)}},
    )
    async with SQLiteStore(path) as store:
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in loaded.messages] == texts
        assert await store.locate_message(ids[1]) == [(segment_id, 1)]
        lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
        assert [m.text for m in await lazy.get_messages(-2)] == texts[1:]
        await loaded.on_new_messages([Message.user("four")])
        with pytest.raises(ConflictError, match="position 2"):
            await store.append_rows(segment_id, 2, rows("intruder"))
    async with SQLiteStore(path) as store:
        again = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in again.messages] == [*texts, "four"]
    assert query(path, "SELECT version FROM schema_version") == [(sqlite_module.SCHEMA_VERSION,)]
    assert query(path, "SELECT name FROM sqlite_master WHERE name = 'segment_rows'") == []
    # the upgrade rewrote the file once: no pages of the dropped table are left free
    assert query(path, "PRAGMA auto_vacuum") == [(2,)]
    assert query(path, "PRAGMA freelist_count") == [(0,)]
