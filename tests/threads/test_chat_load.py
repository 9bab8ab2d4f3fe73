"""Loading a thread reads its rows in pages, each validated in one call, on every store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_threads import (
    ChatMessageThread,
    MemoryStore,
    Message,
    SQLiteStore,
    StoreCorruptedError,
    ThreadStore,
    Usage,
    tool_call,
)
from agent_threads.stores.base import Row
from agent_threads.threads import chat
from tests.stores.conftest import STORES


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    async with request.param(tmp_path) as opened:
        yield opened


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(chat, "READ_PAGE", 16)
    return 16


def varied(i: int) -> Message:
    """Message `i`, of every shape a row holds: parts, usage, metadata, authors."""
    if i % 4 == 0:
        return Message.user(f"question {i}", author="ann", metadata={"n": i, "tags": ["a"]})
    if i % 4 == 1:
        call = tool_call("lookup", {"q": i, "deep": {"x": [1, 2.5, None]}}, call_id=f"c{i}")
        return Message.assistant(f"answer {i}", tool_calls=[call], usage=Usage(output_tokens=i))
    if i % 4 == 2:
        return Message.tool_result(f"c{i - 1}", {"rows": [i]}, is_error=i % 8 == 2)
    return Message.system(f"note {i}")


async def stored(store: ThreadStore, messages: Sequence[Message]) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store)
    for start in range(0, len(messages), 23):  # appends that straddle the read pages
        await thread.on_new_messages(messages[start : start + 23])
    return thread


async def with_rows(store: ThreadStore, rows: list[str]) -> str:
    """A thread whose content is `rows`, written as they are (not through a thread)."""
    thread = await ChatMessageThread.create(store)
    await store.append_rows("raw-seg", 0, [Row(f"m{i}", row) for i, row in enumerate(rows)])
    record = await store.get_record("thread", thread.id)
    assert record is not None
    data: dict[str, Any] = {**record.data, "ranges": [["raw-seg", 0, len(rows)]]}
    data["head"] = len(rows)
    await store.put_record(
        record.model_copy(update={"data": data}), expected_version=record.version
    )
    return thread.id


async def test_a_thread_longer_than_a_page_loads_back_equal_eager_and_lazy(
    store: ThreadStore, small_pages: int
) -> None:
    messages = [varied(i) for i in range(5 * small_pages + 3)]
    thread = await stored(store, messages)
    eager = await ChatMessageThread.load(thread.id, store=store)
    assert list(eager.messages) == messages
    assert [m.model_dump_json() for m in eager.messages] == [m.model_dump_json() for m in messages]
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    assert await lazy.get_messages() == messages
    assert (
        await lazy.get_messages(small_pages - 2, 3 * small_pages + 1)
        == messages[small_pages - 2 : 3 * small_pages + 1]
    )


async def test_loaded_messages_are_usable_as_the_written_ones(store: ThreadStore) -> None:
    messages = [varied(i) for i in range(8)]
    thread = await stored(store, messages)
    loaded = list((await ChatMessageThread.load(thread.id, store=store)).messages)
    for original, again in zip(messages, loaded, strict=True):
        one_by_one = Message.model_validate_json(original.model_dump_json())
        assert again.model_fields_set == one_by_one.model_fields_set == set(Message.model_fields)
        assert [p.model_fields_set for p in again.contents] == [
            p.model_fields_set for p in one_by_one.contents
        ]
        assert again.created_at.utcoffset() == timedelta(0)
    changed = loaded[0].model_copy(update={"author": "bob"})
    assert changed.author == "bob"
    assert loaded[1].author is None and loaded[0].author == "ann"
    assert loaded[1].model_fields_set == set(Message.model_fields)


async def test_a_stored_time_with_another_offset_loads_as_utc(store: ThreadStore) -> None:
    row = json.loads(Message.user("hi").model_dump_json())
    row["created_at"] = "2026-01-01T12:00:00+02:00"
    thread_id = await with_rows(store, [json.dumps(row)])
    (message,) = (await ChatMessageThread.load(thread_id, store=store)).messages
    assert message.created_at == datetime(2026, 1, 1, 10, tzinfo=UTC)
    assert message.created_at.utcoffset() == timedelta(0)
    lazy = await ChatMessageThread.load(thread_id, store=store, lazy=True)
    assert (await lazy.get_messages())[0].created_at.utcoffset() == timedelta(0)


def test_a_time_given_in_json_with_another_offset_comes_out_as_utc() -> None:
    row = json.loads(Message.user("hi").model_dump_json())
    row["created_at"] = "2026-01-01T12:00:00-05:30"
    message = Message.model_validate_json(json.dumps(row))
    assert message.created_at == datetime(2026, 1, 1, 17, 30, tzinfo=UTC)
    assert message.created_at.utcoffset() == timedelta(0)
    row["created_at"] = "2026-01-01T12:00:00"
    with pytest.raises(ValueError, match="timezone"):
        Message.model_validate_json(json.dumps(row))


@pytest.mark.parametrize(
    "bad",
    [
        '{"role": "robot"}',
        "not json",
        "",
        '{"role": "user"}, {"role": "user"}',  # two messages in one row
        '{"role": "user", "created_at": "2026-01-01T12:00:00"}',
    ],
)
async def test_an_undecodable_row_past_the_first_page_is_named_by_its_position(
    store: ThreadStore, small_pages: int, bad: str
) -> None:
    rows = [varied(i).model_dump_json() for i in range(3 * small_pages)]
    position = 2 * small_pages + 5
    rows[position] = bad
    thread_id = await with_rows(store, rows)
    with pytest.raises(StoreCorruptedError, match=f"raw-seg.*position {position}"):
        await ChatMessageThread.load(thread_id, store=store)
    lazy = await ChatMessageThread.load(thread_id, store=store, lazy=True)
    with pytest.raises(StoreCorruptedError, match=f"raw-seg.*position {position}"):
        await lazy.get_messages()
    assert len(await lazy.get_messages(0, position)) == position


async def test_two_rows_that_only_decode_together_are_refused() -> None:
    row = Message.user("a, b").model_dump_json()
    cut = row.index("a, b") + 1  # the joining comma would close the text again
    store = MemoryStore()
    thread_id = await with_rows(store, [row[:cut], row[cut + 1 :]])
    with pytest.raises(StoreCorruptedError, match=r"raw-seg.*position 0"):
        await ChatMessageThread.load(thread_id, store=store)


@pytest.mark.parametrize(("start", "end"), [(0, 60), (7, 33), (23, 24), (0, 0), (59, 60)])
async def test_row_arrays_hold_the_rows_of_any_range(
    store: ThreadStore, start: int, end: int
) -> None:
    rows = [varied(i).model_dump_json() for i in range(60)]
    for first in range(0, 60, 23):  # appends of 23: a range cuts some of them
        batch = [Row(f"m{i}", rows[i]) for i in range(first, min(60, first + 23))]
        await store.append_rows("seg", first, batch)
    arrays = await store.read_row_arrays("seg", start, end)
    assert sum(array.length for array in arrays) == end - start
    assert [row for array in arrays for row in json.loads(array.data)] == [
        json.loads(row) for row in await store.read_rows("seg", start, end)
    ]
    with pytest.raises(StoreCorruptedError):
        await store.read_row_arrays("seg", 55, 61)


async def test_a_sqlite_chunk_holding_another_number_of_rows_is_named(tmp_path: Path) -> None:
    path = tmp_path / "chunks.db"
    async with SQLiteStore(path) as store:
        thread = await stored(store, [varied(i) for i in range(46)])
    connection = sqlite3.connect(path)
    connection.execute("UPDATE chunks SET count = 22 WHERE key % 4294967296 = 23")
    connection.commit()
    connection.close()
    async with SQLiteStore(path) as store:
        with pytest.raises(StoreCorruptedError, match="position 23"):
            await ChatMessageThread.load(thread.id, store=store)
