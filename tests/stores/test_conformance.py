"""The store conformance suite: every store in STORES must pass every test here.

Tests ask for the `store` fixture (a fresh open store) or `store_factory` (to open
stores themselves, e.g. per hypothesis example); they never name a store class.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    ConflictError,
    DuplicateMessageError,
    InvalidIdError,
    Message,
    MessageNotFoundError,
    NotLoadedError,
    Record,
    Row,
    StoreCorruptedError,
    ThreadNotFoundError,
    ThreadStore,
    Usage,
)
from agent_threads.core.ids import new_id
from agent_threads.stores.base import FIRST_VERSION_LIMIT

from .conftest import ReopenStore, StoreFactory

HOSTILE_IDS = ["", "../x", "a/b", "a\\b", "x\x00y", "a" * 129, " lead", "..", "é/..", "a\nb"]


def record(kind: str = "thing", id: str = "r1", **data: Any) -> Record:
    return Record(kind=kind, id=id, data=data)


def rows(*ids: str) -> list[Row]:
    return [Row(i, json.dumps({"id": i})) for i in ids]


# -- records ------------------------------------------------------------------------


async def test_put_record_creates_a_record_at_a_first_version_and_reads_back(
    store: ThreadStore,
) -> None:
    stored = await store.put_record(
        record(data_key="ünïcode ✓", nested={"a": [1, 2.5, None, True]}), expected_version=0
    )
    assert 1 <= stored.version <= FIRST_VERSION_LIMIT
    assert await store.get_record("thing", "r1") == stored


async def test_each_write_after_the_first_stores_the_next_version(store: ThreadStore) -> None:
    first = await store.put_record(record(n=1), expected_version=0)
    second = await store.put_record(record(n=2), expected_version=first.version)
    third = await store.commit([], record(n=3), expected_version=second.version)
    assert (second.version, third.version) == (first.version + 1, first.version + 2)
    assert await store.get_record("thing", "r1") == third


async def test_a_record_deleted_and_created_again_starts_at_an_unrelated_version(
    store: ThreadStore,
) -> None:
    old = await store.put_record(record(n=1), expected_version=0)
    old = await store.put_record(record(n=2), expected_version=old.version)
    seen = {old.version - 1, old.version}
    for n in range(3):  # a chance of 2**-51 per draw to meet one of the old versions
        assert await store.delete_record("thing", "r1")
        again = await store.put_record(record(n=n), expected_version=0)
        assert 1 <= again.version <= FIRST_VERSION_LIMIT and again.version not in seen
        seen.add(again.version)


async def test_a_version_from_before_a_deletion_conflicts_with_the_record_created_again(
    store: ThreadStore,
) -> None:
    old = await store.put_record(record(note="old"), expected_version=0)
    await store.delete_record("thing", "r1", expected_version=old.version)
    new = await store.put_record(record(note="new"), expected_version=0)
    new = await store.put_record(record(note="new"), expected_version=new.version)
    for stale in (old.version, old.version + 1):
        with pytest.raises(ConflictError, match="r1"):
            await store.put_record(record(note="stale"), expected_version=stale)
        with pytest.raises(ConflictError, match="r1"):
            await store.commit([], record(note="stale"), expected_version=stale)
        with pytest.raises(ConflictError, match="r1"):
            await store.delete_record("thing", "r1", expected_version=stale)
    assert await store.get_record("thing", "r1") == new


async def test_get_record_of_unknown_id_is_none(store: ThreadStore) -> None:
    assert await store.get_record("thing", "nobody") is None


async def test_put_record_with_stale_version_raises_and_keeps_stored(store: ThreadStore) -> None:
    first = await store.put_record(record(n=1), expected_version=0)
    second = await store.put_record(record(n=2), expected_version=first.version)
    with pytest.raises(ConflictError, match="r1"):
        await store.put_record(record(n=3), expected_version=first.version)
    with pytest.raises(ConflictError):
        await store.put_record(record(n=4), expected_version=0)
    assert await store.get_record("thing", "r1") == second
    assert second.version == first.version + 1


async def test_delete_record_reports_whether_it_existed(store: ThreadStore) -> None:
    stored = await store.put_record(record(), expected_version=0)
    with pytest.raises(ConflictError):
        await store.delete_record("thing", "r1", expected_version=stored.version + 1)
    assert await store.delete_record("thing", "r1", expected_version=stored.version)
    assert not await store.delete_record("thing", "r1")
    assert await store.get_record("thing", "r1") is None


async def test_list_records_filters_by_kind_tags_and_owner(store: ThreadStore) -> None:
    await store.put_record(
        Record(kind="a", id="2", tags=("x", "y z"), owner="o1"), expected_version=0
    )
    await store.put_record(Record(kind="a", id="1", tags=("x",)), expected_version=0)
    await store.put_record(Record(kind="b", id="3", tags=("x",), owner="o1"), expected_version=0)
    assert [r.id for r in await store.list_records("a")] == ["1", "2"]
    assert [r.id for r in await store.list_records("a", tags=["x", "y z"])] == ["2"]
    assert [r.id for r in await store.list_records(owner="o1")] == ["2", "3"]
    assert [r.id for r in await store.list_records("b", owner="o1")] == ["3"]
    assert [(r.kind, r.id) for r in await store.list_records()] == [
        ("a", "1"),
        ("a", "2"),
        ("b", "3"),
    ]
    assert await store.list_records("a", tags=["nope"]) == []


# -- segments -----------------------------------------------------------------------


async def test_rows_read_back_by_position_range(store: ThreadStore) -> None:
    await store.append_rows("seg", 0, rows("m0", "m1", "m2"))
    await store.append_rows("seg", 3, rows("m3"))
    assert await store.read_rows("seg", 1, 4) == [r.data for r in rows("m1", "m2", "m3")]
    assert await store.read_rows("seg", 2, 2) == []


async def test_segment_positions_may_start_anywhere(store: ThreadStore) -> None:
    await store.append_rows("late", 1000, rows("a", "b"))
    assert await store.read_rows("late", 1000, 1002) == [r.data for r in rows("a", "b")]


async def test_append_at_written_position_conflicts_and_writes_nothing(store: ThreadStore) -> None:
    await store.append_rows("seg", 0, rows("m0", "m1"))
    with pytest.raises(ConflictError, match="seg"):
        await store.append_rows("seg", 1, rows("x1", "x2", "x3"))
    assert await store.read_rows("seg", 0, 2) == [r.data for r in rows("m0", "m1")]
    with pytest.raises(StoreCorruptedError):
        await store.read_rows("seg", 2, 3)  # x2 must not have been kept
    assert await store.locate_message("x3") == []


async def test_reading_missing_positions_is_reported(store: ThreadStore) -> None:
    await store.append_rows("seg", 0, rows("m0"))
    with pytest.raises(StoreCorruptedError, match="seg"):
        await store.read_rows("seg", 0, 2)
    with pytest.raises(StoreCorruptedError, match="ghost"):
        await store.read_rows("ghost", 0, 1)
    for start, end in ((-(2**70), 1), (0, 2**70), (2**70, 2**71)):  # answered at once
        with anyio.fail_after(10), pytest.raises(StoreCorruptedError, match="seg"):
            await store.read_rows("seg", start, end)


async def test_locate_message_finds_every_copy(store: ThreadStore) -> None:
    await store.append_rows("s1", 0, rows("m0", "m1"))
    await store.append_rows("s2", 5, rows("m1"))
    assert sorted(await store.locate_message("m1")) == [("s1", 1), ("s2", 5)]
    assert await store.locate_message("nowhere") == []


async def test_locate_messages_finds_every_copy_of_several_ids_at_once(
    store: ThreadStore,
) -> None:
    await store.append_rows("s1", 0, rows("m0", "m1", "m10"))
    await store.append_rows("s2", 5, rows("m1"))
    found = await store.locate_messages(["m1", "nowhere", "m0", "m1", "m"])
    assert found == {"m1": [("s1", 1), ("s2", 5)], "nowhere": [], "m0": [("s1", 0)], "m": []}
    for message_id, places in found.items():
        assert sorted(await store.locate_message(message_id)) == places
    assert await store.locate_messages([]) == {}
    many = await store.locate_messages([f"x{i}" for i in range(150)] + ["m10"])
    assert len(many) == 151 and many.pop("m10") == [("s1", 2)] and not any(many.values())
    with pytest.raises(InvalidIdError, match="message id"):
        await store.locate_messages(["m0", "../etc"])


async def test_list_and_delete_segments(store: ThreadStore) -> None:
    await store.append_rows("s1", 0, rows("m0"))
    await store.append_rows("s2", 0, rows("m1"))
    assert set(await store.list_segments()) == {"s1", "s2"}
    await store.delete_segments(["s1"])
    assert set(await store.list_segments()) == {"s2"}
    assert await store.locate_message("m0") == []


# -- several clients of one storage ---------------------------------------------------


async def test_of_racing_clients_appending_at_one_position_exactly_one_wins(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    outcomes: list[str] = []

    async def append(n: int) -> None:
        async with another_client(store) as client:
            try:
                await client.append_rows("contended", 0, rows(f"m{n}", f"n{n}"))
                outcomes.append(f"m{n}")
            except ConflictError:
                outcomes.append("conflict")

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(append, n)
    winners = [o for o in outcomes if o != "conflict"]
    assert len(winners) == 1 and len(outcomes) == 6
    assert await store.locate_message(winners[0]) == [("contended", 0)]
    assert await store.read_rows("contended", 0, 2) == [
        r.data for r in rows(winners[0], "n" + winners[0][1:])
    ]


async def test_of_racing_clients_setting_one_version_exactly_one_wins(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    first = await store.put_record(record(), expected_version=0)
    won: list[int] = []

    async def put(n: int) -> None:
        async with another_client(store) as client:
            try:
                await client.put_record(record(n=n), expected_version=first.version)
                won.append(n)
            except ConflictError:
                pass

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(put, n)
    stored = await store.get_record("thing", "r1")
    assert len(won) == 1 and stored is not None
    assert (stored.version, stored.data) == (first.version + 1, {"n": won[0]})


async def test_two_clients_appending_to_one_thread_lose_nothing(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await make_thread(store, [])
    async with another_client(store) as second:
        other = await ChatMessageThread.load(thread.id, store=second)

        async def write(handle: ChatMessageThread, tag: str) -> None:
            for i in range(20):
                await handle.on_new_messages([Message.user(f"{tag}{i}")])

        async with anyio.create_task_group() as group:
            group.start_soon(write, thread, "a")
            group.start_soon(write, other, "b")
    found = texts((await ChatMessageThread.load(thread.id, store=store)).messages)
    assert sorted(found) == sorted([f"a{i}" for i in range(20)] + [f"b{i}" for i in range(20)])
    assert [t for t in found if t[0] == "a"] == [f"a{i}" for i in range(20)]
    assert [t for t in found if t[0] == "b"] == [f"b{i}" for i in range(20)]


# -- blobs ------------------------------------------------------------------------


async def test_blobs_are_content_addressed(store: ThreadStore) -> None:
    digest = await store.put_blob(b'{"a":1}')
    assert digest == await store.put_blob(b'{"a":1}')
    assert len(digest) == 64
    assert await store.get_blob(digest) == b'{"a":1}'
    assert await store.get_blob("0" * 64) is None
    assert set(await store.list_blobs()) == {digest}
    await store.delete_blobs([digest])
    assert await store.get_blob(digest) is None


# -- vacuum -----------------------------------------------------------------------


async def test_vacuum_frees_only_unreferenced_data(store: ThreadStore) -> None:
    await store.append_rows("kept", 0, rows("a"))
    await store.append_rows("dropped", 0, rows("b"))
    live_blob = await store.put_blob(b"live")
    dead_blob = await store.put_blob(b"dead")
    await store.put_record(record(ranges=[["kept", 0, 1]], blobs=[live_blob]), expected_version=0)
    report = await store.vacuum(grace=0)
    assert (report.segments_deleted, report.blobs_deleted) == (1, 1)
    assert set(await store.list_segments()) == {"kept"}
    assert await store.get_blob(live_blob) == b"live"
    assert await store.get_blob(dead_blob) is None


async def test_vacuum_spares_fresh_writes(store: ThreadStore) -> None:
    await store.append_rows("in-flight", 0, rows("a"))
    report = await store.vacuum(grace=3600)
    assert report.segments_deleted == 0
    assert set(await store.list_segments()) == {"in-flight"}


# -- hostile input ------------------------------------------------------------------


@pytest.mark.parametrize("bad", HOSTILE_IDS)
async def test_hostile_ids_are_rejected_everywhere(store: ThreadStore, bad: str) -> None:
    with pytest.raises(InvalidIdError):
        await store.get_record("thing", bad)
    with pytest.raises(InvalidIdError):
        await store.put_record(record(id=bad), expected_version=0)
    with pytest.raises(InvalidIdError):
        await store.put_record(record(kind=bad), expected_version=0)
    with pytest.raises(InvalidIdError):
        await store.append_rows(bad, 0, rows("m"))
    with pytest.raises(InvalidIdError):
        await store.append_rows("seg", 0, rows(bad))
    with pytest.raises(InvalidIdError):
        await store.read_rows(bad, 0, 1)
    with pytest.raises(InvalidIdError):
        await ChatMessageThread.load(bad, store=store)
    assert await store.list_records() == []
    assert await store.list_segments() == {}


async def test_hostile_blob_digests_are_rejected(store: ThreadStore) -> None:
    for bad in ["../../etc/passwd", "A" * 64, "0" * 63, ""]:
        with pytest.raises(InvalidIdError):
            await store.get_blob(bad)


# -- threads on every store -------------------------------------------------------------


async def make_thread(store: ThreadStore, texts: list[str]) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store, title="t", tags={"suite": "conformance"})
    await thread.on_new_messages([Message.user(t) for t in texts])
    return thread


def texts(messages: Any) -> list[str]:
    return [m.text for m in messages]


async def test_thread_reloads_with_everything(store: ThreadStore) -> None:
    thread = await make_thread(store, ["a", "b"])
    await thread.on_new_messages([Message.assistant("c", usage=Usage(input_tokens=3, cost=0.5))])
    await thread.update_state({"step": {"n": 2}})
    await thread.update(metadata={"owner": "me"})
    again = await ChatMessageThread.load(thread.id, store=store)
    assert again.messages == thread.messages
    assert again.state == thread.state == {"step": {"n": 2}}
    assert again.stats == thread.stats
    assert again.stats.input_tokens == 3 and again.stats.message_count == 3
    assert (again.title, again.tags, dict(again.metadata)) == (
        "t",
        {"suite": "conformance"},
        {"owner": "me"},
    )


async def test_fork_at_message_holds_prefix_and_leaves_parent_unchanged(store: ThreadStore) -> None:
    parent = await make_thread(store, ["a", "b", "c"])
    at = parent.messages[1]
    child = await parent.fork(message_id=at.id)
    await child.on_new_messages([Message.user("child")])
    await parent.on_new_messages([Message.user("parent")])
    assert texts(child.messages) == ["a", "b", "child"]
    assert texts(parent.messages) == ["a", "b", "c", "parent"]
    assert (child.parent_id, child.fork_point) == (parent.id, at.id)
    reloaded_parent = await ChatMessageThread.load(parent.id, store=store)
    reloaded_child = await ChatMessageThread.load(child.id, store=store)
    assert texts(reloaded_parent.messages) == ["a", "b", "c", "parent"]
    assert texts(reloaded_child.messages) == ["a", "b", "child"]


async def test_fork_at_unknown_message_raises_and_creates_nothing(store: ThreadStore) -> None:
    parent = await make_thread(store, ["a"])
    with pytest.raises(MessageNotFoundError, match="no-such-id"):
        await parent.fork(message_id="no-such-id")
    assert [r.id for r in await store.list_records("thread")] == [parent.id]


async def test_second_handle_collision_is_detected_then_retried(store: ThreadStore) -> None:
    first = await make_thread(store, ["a"])
    second = await ChatMessageThread.load(first.id, store=store)
    await first.on_new_messages([Message.user("from first")])
    with pytest.raises(ConflictError, match=first.id):
        await second.on_new_messages([Message.user("lost")], deadline=0)
    await second.on_new_messages([Message.user("from second")])
    assert texts(second.messages) == ["a", "from first", "from second"]
    await first.refresh()
    assert texts(first.messages) == ["a", "from first", "from second"]


async def test_state_updates_from_two_handles_both_survive(store: ThreadStore) -> None:
    first = await make_thread(store, [])
    second = await ChatMessageThread.load(first.id, store=store)
    await first.update_state({"a": 1})
    await second.update_state({"b": 2})
    await second.on_new_messages([Message.user("x")])
    reloaded = await ChatMessageThread.load(first.id, store=store)
    assert reloaded.state == {"a": 1, "b": 2}
    assert texts(reloaded.messages) == ["x"]


async def test_crash_between_rows_and_pointer_leaves_thread_whole(store: ThreadStore) -> None:
    thread = await make_thread(store, ["a", "b"])
    segment_id = thread.ranges[-1].segment_id
    orphan = Message.user("orphan")  # rows written, record never published: a crash
    await store.append_rows(segment_id, thread.head, [Row(orphan.id, orphan.model_dump_json())])
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert texts(reloaded.messages) == ["a", "b"]
    await reloaded.on_new_messages([Message.user("c")])
    assert texts((await ChatMessageThread.load(thread.id, store=store)).messages) == ["a", "b", "c"]


async def test_duplicate_message_id_is_rejected_and_nothing_stored(store: ThreadStore) -> None:
    thread = await make_thread(store, ["a"])
    with pytest.raises(DuplicateMessageError, match=thread.messages[0].id):
        await thread.on_new_messages([Message.user("new"), thread.messages[0]])
    twice = Message.user("twice")
    with pytest.raises(DuplicateMessageError):
        await thread.on_new_messages([twice, twice])
    assert texts((await ChatMessageThread.load(thread.id, store=store)).messages) == ["a"]


async def test_a_lazy_handle_refuses_a_batch_holding_an_id_of_the_thread_not_of_a_sibling(
    store: ThreadStore,
) -> None:
    parent = await make_thread(store, ["a", "b"])
    fork = await parent.fork(message_id=parent.messages[0].id)  # holds "a", not "b"
    lazy = await ChatMessageThread.load(fork.id, store=store, lazy=True)
    held, elsewhere = parent.messages
    with pytest.raises(DuplicateMessageError, match=held.id):
        await lazy.on_new_messages([Message.user("new"), held])
    await lazy.on_new_messages([Message.user("new"), elsewhere])  # only in the parent
    reloaded = await ChatMessageThread.load(fork.id, store=store)
    assert texts(reloaded.messages) == ["a", "new", "b"]


async def test_deleted_thread_is_gone_but_its_forks_work(store: ThreadStore) -> None:
    parent = await make_thread(store, ["a", "b"])
    child = await parent.fork()
    await parent.delete()
    with pytest.raises(ThreadNotFoundError, match=parent.id):
        await ChatMessageThread.load(parent.id, store=store)
    await store.vacuum(grace=0)
    reloaded = await ChatMessageThread.load(child.id, store=store)
    await reloaded.on_new_messages([Message.user("c")])
    assert texts(reloaded.messages) == ["a", "b", "c"]


async def test_lazy_handle_reads_tails_and_still_writes(store: ThreadStore) -> None:
    thread = await make_thread(store, [str(i) for i in range(30)])
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    with pytest.raises(NotLoadedError, match="get_messages"):
        _ = lazy.messages
    assert texts(await lazy.get_messages(-3)) == ["27", "28", "29"]
    assert texts(await lazy.get_messages(5, 7)) == ["5", "6"]
    await lazy.on_new_messages([Message.user("30")])
    fork = await lazy.fork(message_id=(await lazy.get_messages(1, 2))[0].id)
    assert texts(await fork.get_messages()) == ["0", "1"]
    assert texts((await ChatMessageThread.load(thread.id, store=store)).messages)[-2:] == [
        "29",
        "30",
    ]


async def test_export_import_round_trip_into_the_store(store: ThreadStore) -> None:
    thread = await make_thread(store, ["a", "b"])
    await thread.update_state({"k": [1, 2]})
    document = thread.to_json()
    await thread.delete()
    restored = await AgentThread.from_json(document, store=store)
    assert isinstance(restored, ChatMessageThread)
    assert restored.id == thread.id and restored.messages == thread.messages
    assert (await ChatMessageThread.load(thread.id, store=store)).state == {"k": [1, 2]}
    with pytest.raises(ConflictError, match="already exists"):
        await AgentThread.from_json(document, store=store)


async def test_ranges_stay_short_when_every_append_opens_a_segment(store: ThreadStore) -> None:
    thread = await make_thread(store, ["root"])
    for i in range(150):  # an orphan row at the segment's end forces a new segment each time
        blocker = Message.user(f"orphan {i}")
        segment_id = thread.ranges[-1].segment_id
        await store.append_rows(
            segment_id, thread.head, [Row(blocker.id, blocker.model_dump_json())]
        )
        await thread.on_new_messages([Message.user(str(i))])
    assert len(thread.ranges) <= 64
    expected = ["root", *[str(i) for i in range(150)]]
    assert texts(thread.messages) == expected
    assert texts((await ChatMessageThread.load(thread.id, store=store)).messages) == expected


# -- the reference model ------------------------------------------------------------


def test_threads_always_equal_their_reference_model(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    """Random appends, forks (whole and at a message) and reloads, checked against lists."""
    with start_blocking_portal(backend="asyncio") as portal:

        class ThreadModel(RuleBasedStateMachine):
            threads = Bundle("threads")

            def __init__(self) -> None:
                super().__init__()
                self.opened = portal.wrap_async_context_manager(store_factory(tmp_path / new_id()))
                self.store = self.opened.__enter__()
                self.model: dict[str, list[str]] = {}
                self.handles: dict[str, ChatMessageThread] = {}

            def teardown(self) -> None:
                self.opened.__exit__(None, None, None)

            @initialize(target=threads)
            def create(self) -> str:
                thread: ChatMessageThread = portal.call(ChatMessageThread.create, self.store)
                self.handles[thread.id], self.model[thread.id] = thread, []
                return thread.id

            @rule(thread_id=threads, count=st.integers(1, 4))
            def append(self, thread_id: str, count: int) -> None:
                batch = [Message.user(f"{thread_id[-4:]}-{i}") for i in range(count)]
                portal.call(self.handles[thread_id].on_new_messages, batch)
                self.model[thread_id].extend(m.id for m in batch)

            @rule(target=threads, thread_id=threads, data=st.data())
            def fork(self, thread_id: str, data: st.DataObject) -> str:
                ids = self.model[thread_id]
                cut = data.draw(st.none() | st.integers(0, max(0, len(ids) - 1)), label="cut")
                at = None if cut is None or not ids else ids[cut]
                child = portal.call(lambda: self.handles[thread_id].fork(message_id=at))
                self.handles[child.id] = child
                self.model[child.id] = list(ids) if at is None else ids[: ids.index(at) + 1]
                return child.id

            @rule(thread_id=threads, lazy=st.booleans())
            def reload(self, thread_id: str, lazy: bool) -> None:
                handle = portal.call(
                    lambda: ChatMessageThread.load(thread_id, store=self.store, lazy=lazy)
                )
                assert [m.id for m in portal.call(handle.get_messages)] == self.model[thread_id]
                self.handles[thread_id] = handle

            @invariant()
            def every_thread_equals_its_model(self) -> None:
                for thread_id, handle in self.handles.items():
                    got = portal.call(handle.get_messages)
                    assert [m.id for m in got] == self.model[thread_id], thread_id

        ThreadModel.TestCase.settings = settings(
            max_examples=20,
            stateful_step_count=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )
        run_state_machine_as_test(ThreadModel, settings=ThreadModel.TestCase.settings)
