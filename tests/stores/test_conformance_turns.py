"""Conformance: a turn (an append with its checkpoint) is one store write, on every store."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import pytest

from agent_threads import (
    ChatMessageThread,
    InvalidIdError,
    Message,
    Row,
    ThreadStore,
)

from .conftest import ReopenStore


def texts(messages: Sequence[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_append_with_checkpoint_returns_it_and_reads_back(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store=store)
    assert await thread.on_new_messages([Message.user("a")]) is None
    first = await thread.on_new_messages([Message.user("b")], checkpoint=True)
    second = await thread.on_new_messages([Message.assistant("c")], checkpoint="turn-2")
    assert first is not None and second is not None
    assert (first.message_count, first.label, first.reason) == (2, None, "manual")
    assert (second.message_count, second.label) == (3, "turn-2")
    assert second.last_message_id == thread.messages[-1].id
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert [c.id for c in await reloaded.checkpoints()] == [first.id, second.id]
    assert texts((await reloaded.at(first.id)).messages) == ["a", "b"]
    assert texts((await reloaded.at("turn-2")).messages) == ["a", "b", "c"]
    assert (await reloaded.get_checkpoint(first.id)).stats == first.stats


async def test_a_bad_label_refuses_the_append_too(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store=store)
    with pytest.raises(InvalidIdError, match="checkpoint label"):
        await thread.on_new_messages([Message.user("a")], checkpoint="bad\nlabel")
    assert (await ChatMessageThread.load(thread.id, store=store)).head == 0


async def test_auto_checkpoint_threads_checkpoint_each_append_in_the_same_write(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store=store, auto_checkpoint=True)
    made = await thread.on_new_messages([Message.user("a")])
    asked = await thread.on_new_messages([Message.user("b")], checkpoint="mine")
    assert made is not None and made.reason == "auto"
    assert asked is not None and (asked.reason, asked.label) == ("manual", "mine")
    assert [c.message_count for c in await thread.checkpoints()] == [1, 2]


async def test_turns_after_a_crash_left_rows_at_the_log_end_keep_everything(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store=store)
    kept = await thread.on_new_messages([Message.user("a")], checkpoint=True)
    assert kept is not None
    log = thread.record_data.logs
    assert log is not None
    segment_id, _, end = log[-1]
    # a writer that crashed after writing the log's next row, before its record
    await store.append_rows(segment_id, end, [Row("orphan", '{"not": "a checkpoint"}')])
    segment = thread.ranges[-1].segment_id
    await store.append_rows(segment, thread.head, [Row("orphan-message", "{}")])
    again = await thread.on_new_messages([Message.user("b")], checkpoint=True)
    assert again is not None
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert texts(reloaded.messages) == ["a", "b"]
    assert [c.id for c in await reloaded.checkpoints()] == [kept.id, again.id]
    assert texts((await reloaded.at(kept.id)).messages) == ["a"]


async def test_two_clients_taking_turns_on_one_thread_lose_nothing(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store=store)
    async with another_client(store) as second:
        other = await ChatMessageThread.load(thread.id, store=second)

        async def turns(handle: ChatMessageThread, tag: str) -> None:
            for i in range(15):
                await handle.on_new_messages([Message.user(f"{tag}{i}")], checkpoint=f"{tag}{i}")

        async with anyio.create_task_group() as group:
            group.start_soon(turns, thread, "a")
            group.start_soon(turns, other, "b")
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    found = texts(reloaded.messages)
    assert [t for t in found if t[0] == "a"] == [f"a{i}" for i in range(15)]
    assert [t for t in found if t[0] == "b"] == [f"b{i}" for i in range(15)]
    checkpoints = await reloaded.checkpoints()
    assert len(checkpoints) == 30
    for checkpoint in checkpoints:  # each records the thread right after its own turn
        assert checkpoint.label is not None
        at = texts((await reloaded.at(checkpoint.id)).messages)
        assert at[-1] == checkpoint.label and at == found[: len(at)]


@pytest.mark.parametrize("checkpoint", [False, True])
async def test_an_append_begun_in_a_cancelled_scope_writes_nothing(
    store: ThreadStore, checkpoint: bool
) -> None:
    thread = await ChatMessageThread.create(store=store)
    await thread.on_new_messages([Message.user("kept")])
    with anyio.CancelScope() as scope:
        scope.cancel()  # as a deadline passed, or a task group cancelled, before the call
        await thread.on_new_messages([Message.user("never")], checkpoint=checkpoint)
    assert scope.cancelled_caught
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert texts(reloaded.messages) == ["kept"]
    assert await reloaded.checkpoints() == []
