"""Checkpoint logs: the compact row form, racing writers, crashes, vacuum, old stores."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_threads import ChatMessageThread, Checkpoint, MemoryStore, Message
from agent_threads.core.ids import (
    all_valid_ids,
    id_time,
    new_id,
    pack_digest,
    pack_id,
    unpack_digest,
    unpack_id,
)
from agent_threads.core.records import SCHEMA_VERSION, THREAD_KIND, ThreadStats
from agent_threads.stores.base import Row
from agent_threads.timetravel.checkpoint import (
    decode_row,
    encode_row,
    made_checkpoint,
    new_checkpoint_time,
)
from agent_threads.timetravel.checkpoints import CHECKPOINT_KIND, log_ranges

from .legacy_threads import make_legacy

ids = st.one_of(
    st.builds(lambda: new_id()),
    st.uuids().map(str),
    st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,40}", fullmatch=True),
)
digests = st.binary(min_size=32, max_size=32).map(bytes.hex)


@given(ids)
def test_packed_ids_unpack_exactly(value: str) -> None:
    packed = pack_id(value)
    assert unpack_id(packed) == value
    canonical = _is_uuid(value) and str(uuid.UUID(value)) == value
    assert len(packed) == 22 if canonical else packed == "~" + value


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return True


@given(digests)
def test_packed_digests_unpack_exactly(digest: str) -> None:
    assert len(pack_digest(digest)) == 43 and unpack_digest(pack_digest(digest)) == digest


@pytest.mark.parametrize("packed", ["", "abc", "A" * 23, "!" * 22, "~"])
def test_a_malformed_packed_id_is_a_value_error(packed: str) -> None:
    with pytest.raises(ValueError):
        unpack_id(packed)


def test_a_new_id_carries_its_time() -> None:
    before = datetime.now(UTC) - timedelta(milliseconds=1)
    made = id_time(new_id())
    assert made is not None and before <= made <= datetime.now(UTC)
    assert id_time("not-a-uuid") is None and id_time(str(uuid.uuid4())) is None


checkpoints = st.builds(
    lambda cid, label, reason, when, segs, stats, digest, last, meta: Checkpoint(
        id=cid,
        thread_id="t",
        label=label,
        reason=reason,
        created_at=when,
        message_count=sum(end - start for _, start, end in segs),
        last_message_id=last,
        metadata=meta,
        stats=stats,
        state_digest=digest,
        ranges=tuple(segs),
    ),
    ids,
    st.none() | st.text(min_size=1, max_size=20).filter(lambda t: t.isprintable()),
    st.sampled_from(["manual", "auto", "rollback"]),
    st.datetimes(
        min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    st.lists(
        st.tuples(ids, st.integers(0, 1000), st.integers(0, 1000)).map(
            lambda t: (t[0], min(t[1], t[2]), max(t[1], t[2]))
        ),
        max_size=3,
    ),
    st.builds(
        ThreadStats,
        message_count=st.integers(0, 10**6),
        input_tokens=st.integers(0, 10**9),
        output_tokens=st.integers(0, 10**9),
        cost=st.floats(0, 1e6, allow_nan=False),
    ),
    st.none() | digests,
    st.none() | ids,
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
)


@given(checkpoints)
def test_a_checkpoint_row_reads_back_exactly(checkpoint: Checkpoint) -> None:
    row = encode_row(checkpoint)
    assert "\n" not in row
    assert decode_row(row, "t") == checkpoint


@given(checkpoints)
def test_a_checkpoint_made_without_validation_equals_the_validated_one(
    checkpoint: Checkpoint,
) -> None:
    made = made_checkpoint(dict(checkpoint))
    assert made == checkpoint
    assert made.model_fields_set == checkpoint.model_fields_set
    assert made.model_dump() == checkpoint.model_dump()
    assert Checkpoint.model_validate(made.model_dump()) == made


def _made_now(**fields: Any) -> Checkpoint:
    """A checkpoint of thread "t" with a new id, made now."""
    cid = new_id()
    return Checkpoint(id=cid, thread_id="t", created_at=new_checkpoint_time(cid), **fields)


def test_a_row_holding_infinity_is_refused_and_one_holding_such_text_written() -> None:
    infinite = _made_now(message_count=0, stats=ThreadStats(cost=float("inf")))
    with pytest.raises(ValueError, match="NaN or infinity"):
        encode_row(infinite)
    wordy = infinite.model_copy(
        update={"stats": ThreadStats(cost=1.5), "metadata": {"NaN": "Infinity"}, "label": "NaN"}
    )
    assert decode_row(encode_row(wordy), "t") == wordy


def test_a_new_checkpoint_row_is_compact() -> None:
    checkpoint = _made_now(
        message_count=20_000,
        last_message_id=new_id(),
        stats=ThreadStats(message_count=20_000, input_tokens=900_000, output_tokens=600_000),
        state_digest="ab" * 32,
        ranges=((new_id(), 0, 20_000),),
    )
    assert len(encode_row(checkpoint)) < 180


# -- through the thread API ---------------------------------------------------------------


async def test_two_handles_checkpointing_in_turn_keep_every_checkpoint() -> None:
    store = MemoryStore()
    one = await ChatMessageThread.create(store)
    two = await ChatMessageThread.load(one.id, store=store)
    made = []
    for i in range(6):
        handle = (one, two)[i % 2]
        await handle.on_new_messages([Message.user(str(i))])  # retried after the other's write
        made.append(await handle.checkpoint(str(i)))
    listed = await one.checkpoints()
    assert [c.id for c in listed] == [c.id for c in made]
    assert listed == await two.checkpoints()
    for checkpoint in made:
        assert await one.get_checkpoint(checkpoint.id) == checkpoint


async def test_rows_a_crash_left_past_the_log_end_are_skipped() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    first = await thread.checkpoint("first")
    (log,) = log_ranges(thread.record_data)
    await store.append_rows(log.segment_id, log.end, [Row(new_id(), '{"i":"~orphan"}')])
    second = await thread.checkpoint("second")
    assert await thread.checkpoints() == [first, second]
    assert len(log_ranges(thread.record_data)) == 2  # the taken end sent it to a new segment
    fresh = await ChatMessageThread.load(thread.id, store=store)
    assert await fresh.get_checkpoint("second") == second
    assert (await fresh.at("first")).messages == thread.messages


async def test_vacuum_keeps_what_only_checkpoints_reference() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    await thread.update_state({"step": 1})
    old = await thread.checkpoint("old")
    await thread.rollback(message_id=thread.messages[0].id)
    await thread.update_state({"step": 2})
    await thread.on_new_messages([Message.user("c")])
    report = await store.vacuum(grace=0)
    assert report.segments_deleted == report.blobs_deleted == 0
    fresh = await ChatMessageThread.load(thread.id, store=store)
    snapshot = await fresh.at(old)
    assert [m.text for m in snapshot.messages] == ["a", "b"] and snapshot.state["step"] == 1
    await thread.delete()
    await store.vacuum(grace=0)
    assert await store.list_segments() == {} and await store.list_blobs() == {}


async def test_forks_and_copies_start_with_no_checkpoints() -> None:
    thread = await ChatMessageThread.create(MemoryStore())
    await thread.on_new_messages([Message.user("a")])
    await thread.checkpoint("parent's")
    fork = await thread.fork()
    copy = thread.copy()
    assert await fork.checkpoints() == [] and await copy.checkpoints() == []
    await copy.on_new_messages([Message.user("b")])
    assert await copy.checkpoints() == []
    await copy.checkpoint("copy's")
    assert [c.label for c in await thread.checkpoints()] == ["parent's"]


# -- threads stored before checkpoint logs --------------------------------------------------


async def _legacy_thread(store: MemoryStore) -> tuple[ChatMessageThread, list[Checkpoint]]:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    made = await make_legacy(store, thread, [("one", 1), ("two", 2)])
    return await ChatMessageThread.load(thread.id, store=store), made


async def test_checkpoint_records_of_an_old_store_are_read_then_moved_into_the_log() -> None:
    store = MemoryStore()
    thread, made = await _legacy_thread(store)
    assert await thread.checkpoints() == made
    assert await thread.get_checkpoint("one") == made[0]
    assert [m.text for m in (await thread.at("one")).messages] == ["a"]
    newest = await thread.checkpoint("three")
    assert await thread.checkpoints() == [*made, newest]
    assert await store.list_records(CHECKPOINT_KIND) == []
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None and record.data["schema_version"] == SCHEMA_VERSION
    await thread.rollback("one")
    assert [m.text for m in thread.messages] == ["a"]


@given(st.lists(ids, min_size=1, max_size=5), st.sampled_from(["", "a\nb", "x" * 129, "../x"]))
def test_a_batch_of_ids_is_valid_exactly_when_each_id_is(good: list[str], bad: str) -> None:
    assert all_valid_ids(good)
    assert not all_valid_ids([*good, bad]) and not all_valid_ids([bad, *good])
    assert not all_valid_ids([])
