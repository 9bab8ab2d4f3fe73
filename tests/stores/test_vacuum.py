"""Deleting threads and vacuuming, on every store: forks outlive parents, garbage goes."""

from __future__ import annotations

import random
import time
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from pydantic import JsonValue

from agent_threads import (
    ChatMessageThread,
    CheckpointNotFoundError,
    Message,
    Record,
    Row,
    RowWrite,
    StoreCorruptedError,
    ThreadNotFoundError,
    ThreadStore,
)


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


# -- what keeps a racing vacuum away: marks, and deletions that check them ----------------


def _rows(*ids: str) -> list[Row]:
    return [Row(i, "{}") for i in ids]


async def test_deleting_spares_segments_and_blobs_written_since_the_cutoff(
    store: ThreadStore,
) -> None:
    await store.append_rows("old", 0, _rows("m1"))
    old_blob = await store.put_blob(b"old")
    cutoff = time.time()
    await store.append_rows("fresh", 0, _rows("m2"))
    fresh_blob = await store.put_blob(b"fresh")
    segments = ["old", "fresh", "never-written"]
    assert await store.delete_segments(segments, not_written_since=cutoff) == 1
    assert await store.delete_blobs([old_blob, fresh_blob], not_written_since=cutoff) == 1
    assert set(await store.list_segments()) == {"fresh"}
    assert set(await store.list_blobs()) == {fresh_blob}
    assert await store.delete_segments(segments) == 1  # no cutoff: whatever its time
    assert await store.delete_blobs([fresh_blob]) == 1


async def test_a_new_record_marks_what_it_references_as_written_now(store: ThreadStore) -> None:
    await store.append_rows("s", 0, _rows("m1"))
    digest = await store.put_blob(b"state")
    cutoff = time.time()
    data: dict[str, JsonValue] = {"ranges": [["s", 0, 1]], "blobs": [digest]}
    await store.put_record(Record(kind="thread", id="fork", data=data), expected_version=0)
    assert (await store.list_segments())["s"] > cutoff
    assert (await store.list_blobs())[digest] > cutoff
    assert await store.delete_segments(["s"], not_written_since=cutoff) == 0


async def test_a_new_record_referencing_data_vacuum_freed_is_refused_and_not_kept(
    store: ThreadStore,
) -> None:
    await store.append_rows("kept", 0, _rows("m1"))
    data: dict[str, JsonValue] = {"ranges": [["kept", 0, 1], ["freed", 0, 2]]}
    with pytest.raises(StoreCorruptedError, match=r"'fork'.*segment 'freed'.*not kept"):
        await store.put_record(Record(kind="thread", id="fork", data=data), expected_version=0)
    assert await store.get_record("thread", "fork") is None
    blob = {"blobs": ["0" * 64]}
    with pytest.raises(StoreCorruptedError, match=f"blob {'0' * 64}"):
        await store.put_record(Record(kind="thread", id="fork", data=blob), expected_version=0)
    assert await store.list_records() == []


async def test_a_commit_landing_while_vacuum_runs_keeps_what_it_references(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even with no grace: the commit marks the segment it writes to as written now."""
    record = await store.put_record(Record(kind="thread", id="t"), expected_version=0)
    await store.append_rows("s", 0, _rows("m0", "m1"))  # no record references it yet
    read_records = store.list_records
    landed: list[Record] = []

    async def then_a_commit_lands(*args: Any, **kwargs: Any) -> list[Record]:
        records = await read_records(*args, **kwargs)
        data: dict[str, JsonValue] = {"ranges": [["s", 0, 3]]}
        write = RowWrite("s", 2, _rows("m2"))
        new = Record(kind="thread", id="t", data=data)
        landed.append(await store.commit([write], new, expected_version=record.version))
        return records

    monkeypatch.setattr(store, "list_records", then_a_commit_lands)
    await store.vacuum(grace=0)
    if not landed:
        pytest.skip(f"{store!r} vacuums elsewhere (its service's own store)")
    assert await store.read_rows("s", 0, 3) == ["{}", "{}", "{}"]


# -- vacuum racing forks and deletes ------------------------------------------------------

RACE_TRIALS = 100

FORK_FAILURES = (StoreCorruptedError, CheckpointNotFoundError, ThreadNotFoundError)
"""What a fork of a thread deleted (and vacuumed) meanwhile may raise instead of forking."""


async def _yield_a_few(rng: random.Random) -> None:
    for _ in range(rng.randrange(24)):  # lands the operation anywhere in the others
        await anyio.lowlevel.checkpoint()


async def _race_fork_delete_vacuum(
    store: ThreadStore, rng: random.Random, expected: dict[str, list[str]]
) -> None:
    """Fork a thread (at its head, and at a checkpoint) while it is deleted and vacuumed."""
    parent = await ChatMessageThread.create(store)
    await parent.on_new_messages([Message.user("a"), Message.user("b")])
    await parent.update_state({"seed": rng.random()})
    await parent.checkpoint("one")
    await parent.on_new_messages([Message.user("c")])
    other = await ChatMessageThread.load(parent.id, store=store)  # as another process would

    async def fork(at_checkpoint: bool) -> None:
        await _yield_a_few(rng)
        try:
            if at_checkpoint:
                child = await (await parent.at("one")).fork()
            else:
                child = await parent.fork()
        except FORK_FAILURES:  # the parent was deleted and vacuumed first: nothing to fork
            return
        expected[child.id] = ["a", "b"] if at_checkpoint else ["a", "b", "c"]

    async def delete() -> None:
        await _yield_a_few(rng)
        await other.delete()

    async def vacuum() -> None:
        await _yield_a_few(rng)
        await store.vacuum(grace=0)

    async with anyio.create_task_group() as group:
        group.start_soon(fork, False)
        group.start_soon(fork, True)
        group.start_soon(delete)
        group.start_soon(vacuum)


async def _assert_whole(store: ThreadStore, thread_id: str, texts_then: list[str]) -> None:
    thread = await ChatMessageThread.load(thread_id, store=store)
    assert texts(thread) == texts_then, thread_id
    for checkpoint in await thread.checkpoints():
        snapshot = await thread.at(checkpoint)
        assert len(snapshot.messages) == checkpoint.message_count, (thread_id, checkpoint.id)


async def test_vacuum_racing_forks_and_deletes_never_takes_what_a_thread_reads(
    store: ThreadStore,
) -> None:
    rng = random.Random(20_251_125)
    bystander = await ChatMessageThread.create(store)
    await bystander.on_new_messages([Message.user("z")])
    await bystander.checkpoint("kept")
    forked = 0
    for _ in range(RACE_TRIALS):
        expected = {bystander.id: ["z"]}
        await _race_fork_delete_vacuum(store, rng, expected)
        assert {r.id for r in await store.list_records("thread")} == set(expected)
        for thread_id, texts_then in expected.items():
            await _assert_whole(store, thread_id, texts_then)
        forked += len(expected) - 1
        for thread_id in set(expected) - {bystander.id}:  # the next trial's vacuum frees them
            await store.delete_record("thread", thread_id)
    assert forked >= RACE_TRIALS // 2  # most forks won the race: the test raced something
