"""Checkpoint logs on every store: vacuum beside other vacuums, ids shared with messages."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any, cast

import anyio
from pydantic import JsonValue

from agent_threads import ChatMessageThread, Checkpoint, ConflictError, Message, ThreadStore
from agent_threads.core.ids import new_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.stores.base import LOGS_KEY, Row, collect_garbage
from agent_threads.timetravel.checkpoints import log_ranges

from .conftest import ReopenStore


class _MovedBeforeRead:
    """A store whose first read of one segment runs another process's step first (one
    that deletes the segment, between vacuum's listing of records and its reading)."""

    def __init__(
        self, store: ThreadStore, segment_id: str, step: Callable[[], Awaitable[object]]
    ) -> None:
        self._store, self._segment_id, self._step = store, segment_id, step

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        if segment_id == self._segment_id:
            self._segment_id = ""
            await self._step()
            await self._store.delete_segments([segment_id])
        return await self._store.read_rows(segment_id, start, end)


async def _thread_with_checkpoint(store: ThreadStore, text: str) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user(text)])
    await thread.update_state({"text": text})
    await thread.checkpoint(text)
    await thread.on_new_messages([Message.user("later")])
    await thread.update_state({"text": "later"})
    return thread


async def test_vacuum_skips_the_log_of_a_thread_deleted_and_vacuumed_meanwhile(
    store: ThreadStore,
) -> None:
    kept = await _thread_with_checkpoint(store, "kept")
    gone = await _thread_with_checkpoint(store, "gone")
    (log,) = log_ranges(gone.record_data)
    racing = _MovedBeforeRead(store, log.segment_id, gone.delete)
    await collect_garbage(cast(ThreadStore, racing), grace=0)
    assert (await (await ChatMessageThread.load(kept.id, store=store)).at("kept")).state == {
        "text": "kept"
    }


async def test_vacuum_reads_a_log_moved_to_another_segment_meanwhile(store: ThreadStore) -> None:
    thread = await _thread_with_checkpoint(store, "first")
    (log,) = log_ranges(thread.record_data)

    async def move_log() -> None:  # as when a log of too many ranges is copied
        rows = await store.read_rows(log.segment_id, log.start, log.end)
        moved = new_id()
        await store.append_rows(moved, 0, [Row(new_id(), row) for row in rows])
        record = await store.get_record(THREAD_KIND, thread.id)
        assert record is not None
        logs: list[JsonValue] = [[moved, 0, len(rows)]]
        data = {**record.data, LOGS_KEY: logs}
        await store.put_record(
            record.model_copy(update={"data": data}), expected_version=record.version
        )

    racing = _MovedBeforeRead(store, log.segment_id, move_log)
    await collect_garbage(cast(ThreadStore, racing), grace=0)
    fresh = await ChatMessageThread.load(thread.id, store=store)
    snapshot = await fresh.at("first")
    assert [m.text for m in snapshot.messages] == ["first"]
    assert snapshot.state == {"text": "first"}


async def test_a_message_with_a_checkpoints_id_is_told_apart_from_it(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    checkpoint = await thread.checkpoint("first")
    twin = Message.user("b", id=checkpoint.id)
    await thread.on_new_messages([twin])
    other = await ChatMessageThread.create(store)
    await other.on_new_messages([Message.user("c", id=checkpoint.id)])
    for lazy in (False, True):
        handle = await ChatMessageThread.load(thread.id, store=store, lazy=lazy)
        assert await handle.get_checkpoint(checkpoint.id) == checkpoint
        assert await handle.index_of(checkpoint.id) == 1
        snapshot = await handle.at(message_id=checkpoint.id)
        assert [m.text for m in await snapshot.get_messages()] == ["a", "b"]
        assert [m.text for m in await (await handle.at(checkpoint)).get_messages()] == ["a"]
    assert await other.checkpoints() == []
    assert (await other.rollback(message_id=checkpoint.id)).message_count == 1


async def test_clients_racing_checkpoints_and_rollbacks_publish_each_exactly_once(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("start")])
    made: list[Checkpoint] = []

    async def work(tag: str) -> None:
        async with another_client(store) as client:
            handle = await ChatMessageThread.load(thread.id, store=client)
            for i in range(6):
                await handle.on_new_messages([Message.user(f"{tag}{i}")])
                with suppress(ConflictError):  # others kept winning: it changed nothing
                    await handle.update_state({tag: i})
                made.append(mine := await handle.checkpoint(f"{tag}{i}"))
                if i % 3 == 2:
                    with suppress(ConflictError):  # others kept moving it: documented
                        made.append(await handle.rollback(mine.id))

    async with anyio.create_task_group() as group:
        for tag in "abc":
            group.start_soon(work, tag)
    fresh = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    listed = await fresh.checkpoints()
    assert sorted(c.id for c in listed) == sorted(c.id for c in made)
    by_id = {c.id: c for c in listed}
    for checkpoint in made:
        assert by_id[checkpoint.id] == checkpoint
        snapshot = await fresh.at(checkpoint)
        messages = await snapshot.get_messages()
        assert len(messages) == checkpoint.message_count
        assert (messages[-1].id if messages else None) == checkpoint.last_message_id
    await store.vacuum(grace=0)
    for checkpoint in made:
        assert len(await (await fresh.at(checkpoint)).get_messages()) == checkpoint.message_count
