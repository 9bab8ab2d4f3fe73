"""Deleting threads and vacuuming, on every store: forks outlive parents, garbage goes."""

from __future__ import annotations

from agent_threads import ChatMessageThread, Message, Row, ThreadStore


def texts(thread: ChatMessageThread) -> list[str]:
    return [m.text for m in thread.messages]


async def test_vacuum_frees_a_deleted_parent_only_once_no_fork_reads_it(
    store: ThreadStore,
) -> None:
    parent = await ChatMessageThread.create(store)
    await parent.on_new_messages([Message.user(t) for t in ("a", "b", "c")])
    fork = await parent.fork(message_id=parent.messages[1].id)
    await fork.on_new_messages([Message.user("f")])
    bystander = await ChatMessageThread.create(store)
    await bystander.on_new_messages([Message.user("z")])
    shared, own = parent.ranges[0].segment_id, fork.ranges[-1].segment_id

    await parent.delete()
    report = await store.vacuum(grace=0)
    assert report.segments_deleted == 0  # the fork still reads the parent's segment
    assert texts(await ChatMessageThread.load(fork.id, store=store)) == ["a", "b", "f"]

    await fork.delete()
    report = await store.vacuum(grace=0)
    assert report.segments_deleted == 2
    assert shared not in await store.list_segments()
    assert own not in await store.list_segments()
    assert texts(await ChatMessageThread.load(bystander.id, store=store)) == ["z"]
    assert (await store.vacuum(grace=0)).segments_deleted == 0


async def test_vacuum_frees_rows_a_crash_left_unpublished(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("kept")])
    lost = Message.user("never published")
    await store.append_rows("orphan-segment", 0, [Row(lost.id, lost.model_dump_json())])
    assert (await store.vacuum()).segments_deleted == 0  # too fresh: it may be in flight
    assert (await store.vacuum(grace=0)).segments_deleted == 1
    assert await store.locate_message(lost.id) == []
    assert texts(await ChatMessageThread.load(thread.id, store=store)) == ["kept"]
