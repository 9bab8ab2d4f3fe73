"""A lazy handle keeps only its newest messages in memory, and still reads every one."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_threads import ChatMessageThread, InvalidValueError, MemoryStore, Message, SQLiteStore
from agent_threads.threads import chat
from tests.counting_store import CountingStore


@pytest.fixture
def small_cache(monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(chat, "LAZY_CACHE_LIMIT", 20)
    return 20


def texts(messages: object) -> list[str]:
    assert isinstance(messages, list | tuple)
    return [m.text for m in messages]


async def lazy_thread_with(count: int, store: MemoryStore | SQLiteStore) -> ChatMessageThread:
    created = await ChatMessageThread.create(store)
    lazy = await ChatMessageThread.load(created.id, store=store, lazy=True)
    for i in range(0, count, 7):
        await lazy.on_new_messages([Message.user(f"m{j}") for j in range(i, min(count, i + 7))])
    return lazy


async def test_a_lazy_handle_reads_back_every_message_past_its_cache_limit(
    small_cache: int,
) -> None:
    lazy = await lazy_thread_with(200, MemoryStore())
    assert texts(await lazy.get_messages()) == [f"m{i}" for i in range(200)]
    assert texts(await lazy.get_messages(0, 3)) == ["m0", "m1", "m2"]
    assert texts(await lazy.get_messages(-2)) == ["m198", "m199"]


async def test_a_lazy_handle_finds_forks_and_travels_to_messages_it_let_go(
    small_cache: int, tmp_path: Path
) -> None:
    async with SQLiteStore(tmp_path / "lazy.db") as store:
        lazy = await lazy_thread_with(100, store)
        first = (await lazy.get_messages(0, 1))[0]
        assert await lazy.index_of(first.id) == 0
        fork = await lazy.fork(message_id=first.id)
        assert texts(await fork.get_messages()) == ["m0"]
        snapshot = await lazy.at(message_id=(await lazy.get_messages(49, 50))[0].id)
        assert texts(await snapshot.get_messages()) == [f"m{i}" for i in range(50)]
        checkpoint = await lazy.checkpoint("late")
        assert (await lazy.at(checkpoint)).message_count == 100


async def test_a_lazy_handle_refuses_a_duplicate_of_a_message_it_let_go(
    small_cache: int,
) -> None:
    lazy = await lazy_thread_with(60, MemoryStore())
    old = (await lazy.get_messages(0, 1))[0]
    with pytest.raises(ValueError, match=old.id):
        await lazy.on_new_messages([old])


async def test_a_lazy_handle_with_default_settings_keeps_its_views_whole() -> None:
    lazy = await lazy_thread_with(300, MemoryStore())
    view = await lazy.view(max_messages=250)
    assert texts(view.messages) == [f"m{i}" for i in range(50, 300)]


async def test_a_lazy_handle_keeps_about_cache_limit_of_its_newest_messages() -> None:
    store = CountingStore()
    thread = await ChatMessageThread.create(store)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True, cache_limit=3)
    for i in range(10):
        await lazy.on_new_messages([Message.user(f"m{i}")])
    assert texts(await lazy.get_messages(7, 10)) == ["m7", "m8", "m9"]
    assert store.rows_read == 0  # the newest are held
    assert texts(await lazy.get_messages(0, 1)) == ["m0"]
    assert store.rows_read > 0  # the oldest were let go


@pytest.mark.parametrize("limit", [0, -1, 1.5, True])
async def test_a_cache_limit_that_is_not_a_positive_count_is_refused(limit: object) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    with pytest.raises(InvalidValueError, match="cache_limit"):
        await ChatMessageThread.load(thread.id, store=store, lazy=True, cache_limit=limit)  # type: ignore[arg-type]
