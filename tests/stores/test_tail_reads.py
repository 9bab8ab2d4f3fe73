"""Lazy handles read only what they need, on every store: counted at the store's read_rows."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent_threads import ChatMessageThread, Message, ThreadStore
from agent_threads.stores.base import RowArray


class ReadCounter:
    """Wraps a store's `read_rows` and `read_row_arrays` and counts the rows they return.

    Rows `read_row_arrays` reads through `read_rows` (its default) count once.
    """

    def __init__(self, store: ThreadStore, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows = 0
        self._in_arrays = False
        original_rows, original_arrays = store.read_rows, store.read_row_arrays

        async def read_rows(segment_id: str, start: int, end: int) -> list[str]:
            found = await original_rows(segment_id, start, end)
            self.rows += 0 if self._in_arrays else len(found)
            return found

        async def read_row_arrays(segment_id: str, start: int, end: int) -> list[RowArray]:
            self._in_arrays = True
            try:
                found = await original_arrays(segment_id, start, end)
            finally:
                self._in_arrays = False
            self.rows += sum(array.length for array in found)
            return found

        monkeypatch.setattr(store, "read_rows", read_rows)
        monkeypatch.setattr(store, "read_row_arrays", read_row_arrays)


async def stored_thread(store: ThreadStore, length: int) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store)
    for start in range(0, length, 250):
        batch = [Message.user(str(i)) for i in range(start, min(length, start + 250))]
        await thread.on_new_messages(batch)
    return thread


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


@pytest.mark.parametrize("length", [100, 1_000])
async def test_reading_the_tail_of_a_lazy_thread_reads_only_the_tail(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch, length: int
) -> None:
    thread = await stored_thread(store, length)
    counter = ReadCounter(store, monkeypatch)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    assert counter.rows == 0
    assert texts(await lazy.get_messages(-5)) == [str(i) for i in range(length - 5, length)]
    assert counter.rows == 5
    assert texts(await lazy.get_messages(-8, -5)) == [str(i) for i in range(length - 8, length - 5)]
    assert counter.rows == 8


async def test_appends_and_forks_on_a_lazy_handle_read_no_history(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = await stored_thread(store, 600)
    counter = ReadCounter(store, monkeypatch)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    await lazy.on_new_messages([Message.user("600"), Message.user("601")])
    assert counter.rows == 0
    fork = await lazy.fork()  # reads nothing: the fork point was just written
    await fork.on_new_messages([Message.user("fork")])
    assert counter.rows == 0
    assert texts(await fork.get_messages(-3)) == ["600", "601", "fork"]
    assert counter.rows == 0
    assert texts(await lazy.get_messages(-3)) == ["599", "600", "601"]
    assert counter.rows == 1


async def test_a_full_load_reads_every_row_once(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    thread = await stored_thread(store, 600)
    counter = ReadCounter(store, monkeypatch)
    loaded = await ChatMessageThread.load(thread.id, store=store)
    assert counter.rows == 600
    assert texts(await loaded.get_messages(-2)) == ["598", "599"]
    assert counter.rows == 600
