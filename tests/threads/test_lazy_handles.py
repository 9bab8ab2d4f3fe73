"""A lazy handle keeps only its newest messages in memory, and still reads every one."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import anyio
import pytest

from agent_threads import (
    ChatMessageThread,
    DuplicateMessageError,
    InvalidValueError,
    MemoryStore,
    Message,
    SQLiteStore,
)
from agent_threads.messages import claim_minted, note_minted, unclaimed
from agent_threads.stores.base import Record, RowWrite
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


def minted(text: str) -> Message:
    """A message validated from input without an id, as a request body's are, noted so."""
    message = Message.model_validate_json(
        f'{{"role": "user", "contents": [{{"type": "text", "text": "{text}"}}]}}'
    )
    note_minted([message])
    return message


async def test_a_lazy_handle_skips_the_lookup_of_ids_minted_for_the_batch_once() -> None:
    store = CountingStore()
    lazy = await lazy_thread_with(3, store)
    store.looked_up = 0
    fresh = minted("fresh")
    await lazy.on_new_messages([fresh, Message.user("made here")])
    assert store.looked_up == 1  # the message made here (ids are not noted) is looked up
    with pytest.raises(DuplicateMessageError, match=fresh.id):  # claimed once: looked up now
        await lazy.on_new_messages([fresh])
    with pytest.raises(DuplicateMessageError, match=fresh.id):  # a copy was never noted
        await lazy.on_new_messages([fresh.model_copy()])
    assert texts(await lazy.get_messages(-2)) == ["fresh", "made here"]


def test_only_plain_messages_validated_without_an_id_are_noted_and_claimed_once() -> None:
    class Note(Message):
        pass

    given = Message.model_validate({"role": "user", "id": "m-given"})
    subclassed = Note.model_validate({"role": "user"})  # its id may come from elsewhere
    note_minted([given, subclassed])
    assert not claim_minted(given)
    assert not claim_minted(subclassed)
    fresh = minted("y")
    assert claim_minted(fresh)
    assert not claim_minted(fresh)


def test_a_batch_keeps_the_messages_not_noted_in_order_and_claims_the_noted_ones() -> None:
    plain, noted, other = Message.user("a"), minted("b"), Message.user("c")
    batch = [plain, noted, other]
    assert unclaimed(batch) == [plain, other]
    assert unclaimed(batch) == batch  # claimed once: looked up from now on
    assert not claim_minted(noted)


class GatedStore(SQLiteStore):
    """A SQLiteStore whose next commit, once `armed`, waits for `gate` (as another process
    would, beside a store of its own on the same file)."""

    armed = False

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.gate = anyio.Event()
        self.waiting = anyio.Event()

    async def commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        if self.armed:
            self.armed = False
            self.waiting.set()
            await self.gate.wait()
        return await super().commit(writes, record, expected_version=expected_version)


async def test_a_minted_message_another_writer_appended_first_is_refused_on_retry(
    tmp_path: Path,
) -> None:
    async with GatedStore(tmp_path / "t.db") as store, SQLiteStore(tmp_path / "t.db") as beside:
        lazy = await lazy_thread_with(3, store)
        other = await ChatMessageThread.load(lazy.id, store=beside, lazy=True)
        fresh = minted("raced")
        store.armed = True
        outcome: list[BaseException] = []

        async def claimed_first() -> None:  # claims the id, then waits in its commit
            try:
                await lazy.on_new_messages([fresh])
            except DuplicateMessageError as exc:
                outcome.append(exc)

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(claimed_first)
                await store.waiting.wait()
                await other.on_new_messages([fresh])  # looks it up: not there yet, so it lands
                store.gate.set()  # the first commit loses the race; its retry looks the id up
        assert len(outcome) == 1
        await lazy.refresh()
        assert texts(await lazy.get_messages()).count("raced") == 1
