"""Conformance: after each write, a handle's typed record data is what a read of it gives.

An append updates the handle's typed data (`record_data`) from the values it wrote
instead of validating the whole record again (`publish(typed=...)`); these tests hold
that shortcut to a full read of the record written, and of the record stored, through
every path an append takes (first segment, extending it, a fork, after a rollback, the
newest ranges consolidated, a lost race, checkpoints in the log) on every store.
"""

from __future__ import annotations

from agent_threads import ChatMessageThread, Message, ThreadStore, Usage
from agent_threads.core.pieces import MAX_RANGES
from agent_threads.core.records import read_thread_data
from agent_threads.threads.chat import ChatData


async def assert_typed_data_is_the_records(thread: ChatMessageThread) -> None:
    read = read_thread_data(thread.record, ChatData)
    assert thread.record_data == read
    assert thread.record_data.model_dump() == read.model_dump()
    stored = await ChatMessageThread.load(thread.id, store=thread.store)
    assert stored.record_data == read
    assert stored.ranges == thread.ranges
    assert stored.version == thread.version


def turn(i: int) -> list[Message]:
    return [
        Message.user(f"question {i}"),
        Message.assistant(f"answer {i}", usage=Usage(input_tokens=i, output_tokens=2, cost=0.5)),
    ]


async def test_appends_and_checkpoints_keep_the_typed_data_exact(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store=store, tags={"env": "test"})
    await assert_typed_data_is_the_records(thread)
    await thread.on_new_messages(turn(0))
    await assert_typed_data_is_the_records(thread)
    await thread.on_new_messages(turn(1), checkpoint=True)
    await assert_typed_data_is_the_records(thread)
    await thread.on_new_messages(turn(2), checkpoint="labelled", checkpoint_metadata={"k": [1]})
    await assert_typed_data_is_the_records(thread)
    await thread.rollback(message_id=thread.messages[1].id)
    await thread.on_new_messages(turn(3), checkpoint=True)  # a new segment after a rollback
    await assert_typed_data_is_the_records(thread)
    fork = await thread.fork(thread.messages[2].id, reset_stats=False)
    await fork.on_new_messages(turn(4))  # a fork's first segment
    await assert_typed_data_is_the_records(fork)
    assert fork.stats.message_count == 5
    await thread.pop()
    await thread.on_new_messages(turn(5))
    await assert_typed_data_is_the_records(thread)
    assert [m.text for m in (await thread.at("labelled")).messages][-1] == "answer 2"


async def test_auto_checkpoints_and_consolidation_keep_the_typed_data_exact(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store=store, auto_checkpoint=True)
    for i in range(MAX_RANGES + 2):  # each turn after a pop opens a range: they consolidate
        await thread.on_new_messages(turn(i))
        await thread.pop()
    assert len(thread.ranges) <= MAX_RANGES
    await assert_typed_data_is_the_records(thread)
    assert len(await thread.checkpoints()) == 2 * (MAX_RANGES + 2)


async def test_a_lost_race_keeps_the_typed_data_exact(store: ThreadStore) -> None:
    first = await ChatMessageThread.create(store=store)
    second = await ChatMessageThread.load(first.id, store=store)
    await first.on_new_messages(turn(0), checkpoint=True)
    await second.on_new_messages(turn(1), checkpoint=True)  # re-reads the thread, then appends
    await assert_typed_data_is_the_records(second)
    await first.refresh()
    await first.on_new_messages(turn(2))
    await assert_typed_data_is_the_records(first)
    assert first.stats.message_count == 6
