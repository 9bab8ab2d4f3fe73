"""Checkpoint logs under races, crashes and garbled rows: each checkpoint published once."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Collection
from typing import Any, cast

import anyio
import pytest
from pydantic import JsonValue

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    Checkpoint,
    ConflictError,
    InvalidIdError,
    MemoryStore,
    Message,
    Record,
    StoreCorruptedError,
    ThreadStore,
    WorkflowThread,
)
from agent_threads.core import pieces as piece_table
from agent_threads.core.ids import new_id, pack_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.stores.base import LOGS_KEY, Row
from agent_threads.timetravel.checkpoints import CHECKPOINT_KIND, log_ranges

from .legacy_threads import make_legacy

Hook = Callable[[], Awaitable[object]]


class _ClientOf:
    """Another client of the same store, as another process holds (its handles race ours)."""

    def __init__(self, store: ThreadStore) -> None:
        self._store = store

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def client_of(store: ThreadStore) -> ThreadStore:
    return cast(ThreadStore, _ClientOf(store))


class HookStore(MemoryStore):
    """A MemoryStore that runs another writer's step just before one chosen record write
    (`before_put`) or listing (`before_list`), or crashes deleting records (`fail_delete`)."""

    def __init__(self) -> None:
        super().__init__()
        self.before_put: tuple[str, Hook] | None = None
        self.fail_delete: str | None = None
        self.before_list: tuple[str, Hook] | None = None

    async def put_record(self, record: Record, *, expected_version: int) -> Record:
        if self.before_put is not None and self.before_put[0] == record.id:
            hook, self.before_put = self.before_put[1], None
            await hook()
        return await super().put_record(record, expected_version=expected_version)

    async def list_records(
        self, kind: str | None = None, *, tags: Collection[str] = (), owner: str | None = None
    ) -> list[Record]:
        if self.before_list is not None and self.before_list[0] == kind:
            hook, self.before_list = self.before_list[1], None
            await hook()
        return await super().list_records(kind, tags=tags, owner=owner)

    async def delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None = None
    ) -> bool:
        if kind == self.fail_delete:
            raise OSError("crash")
        return await super().delete_record(kind, record_id, expected_version=expected_version)


def texts(messages: object) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


# -- a checkpoint whose record write lost a race ----------------------------------------


async def test_a_checkpoint_racing_a_state_update_exports_the_state_it_recorded() -> None:
    store = HookStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await thread.update_state({"step": 1})
    other = await ChatMessageThread.load(thread.id, store=client_of(store))
    store.before_put = (thread.id, lambda: other.update_state({"step": 2}))
    cp = await thread.checkpoint("raced")
    recorded = (await thread.at(cp)).state.to_dict()
    document = json.loads(thread.to_json())
    (entry,) = document["history"]["checkpoints"]
    assert document["history"]["states"][entry["state"]] == recorded
    assert document == json.loads(await thread.export())


async def test_a_stale_handles_checkpoint_keeps_the_state_it_recorded_through_vacuum() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await thread.update_state({"step": 1})
    other = await ChatMessageThread.load(thread.id, store=store)
    await other.update_state({"step": 2})  # nothing references {"step": 1} any more
    await store.vacuum(grace=0)
    cp = await thread.checkpoint()  # records what this handle saw: {"step": 1}
    assert thread.state == {"step": 2}  # the lost record write re-read it
    document = json.loads(thread.to_json())
    (entry,) = document["history"]["checkpoints"]
    assert document["history"]["states"][entry["state"]] == {"step": 1}
    await store.vacuum(grace=0)
    fresh = await ChatMessageThread.load(thread.id, store=store)
    assert (await fresh.at(cp)).state == {"step": 1}
    assert document == json.loads(await fresh.export())


async def test_a_stale_handles_checkpoint_never_records_segments_vacuum_freed() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)

    async def append_after_a_lost_race(n: int) -> None:
        for i in range(n):  # rows a racing writer (or a crash) left at the head: each
            last = thread.ranges[-1] if thread.ranges else None  # append opens a segment
            if last is not None:
                await store.append_rows(last.segment_id, last.end, [Row(new_id(), "{}")])
            await thread.on_new_messages([Message.user(f"{i}")])

    await append_after_a_lost_race(piece_table.MAX_RANGES - 4)
    stale = await ChatMessageThread.load(thread.id, store=store)
    await append_after_a_lost_race(8)  # past MAX_RANGES: the newest half is copied
    assert len(thread.ranges) < piece_table.MAX_RANGES
    assert (await store.vacuum(grace=0)).segments_deleted > 0
    cp = await stale.checkpoint()
    fresh = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    snapshot = await fresh.at(cp)
    assert len(await snapshot.get_messages()) == cp.message_count


async def test_a_workflow_cut_reuses_a_sub_thread_checkpoint_only_if_it_holds_what_it_shows() -> (
    None
):
    store = MemoryStore()
    workflow = await WorkflowThread.create(store)
    main = await workflow.get_sub_thread()
    await main.on_new_messages([Message.user("a")])
    other = await ChatMessageThread.load(main.id, store=store)
    await other.on_new_messages([Message.user("b")])
    await workflow.checkpoint("first")  # the stale handle's view, as documented
    assert texts(main.messages) == ["a", "b"]  # its checkpoint's record write re-read it
    await workflow.checkpoint("second")
    snapshot = await (await workflow.at("second")).get_sub_thread()
    assert texts(snapshot.messages) == texts(main.messages)


# -- garbled rows ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbled",
    [
        {"r": [[5, 0, 1]]},
        {"m": 7},
        {"t": 10**23},
        {"r": [[None, 0, 1]]},
    ],
)
async def test_a_garbled_log_row_is_named_by_the_reader_and_by_vacuum(
    garbled: dict[str, object],
) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    segment_id = new_id()
    row = json.dumps({"i": pack_id(new_id()), **garbled})
    await store.append_rows(segment_id, 0, [Row("garbled", row)])
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None
    logs: list[JsonValue] = [[segment_id, 0, 1]]
    data = {**record.data, LOGS_KEY: logs}
    await store.put_record(
        record.model_copy(update={"data": data}), expected_version=record.version
    )
    with pytest.raises(StoreCorruptedError, match=rf"{segment_id}.*position 0"):
        await thread.checkpoints()
    if "r" in garbled:  # vacuum reads only what rows reference
        with pytest.raises(StoreCorruptedError, match="unreadable log row"):
            await store.vacuum(grace=0)


# -- finding checkpoints --------------------------------------------------------------------


async def _make_legacy(store: MemoryStore, thread: ChatMessageThread, labels: list[str]) -> None:
    """Turn `thread` into a version-1 thread with a checkpoint record per label."""
    await make_legacy(store, thread, [(label, thread.head) for label in labels])


async def test_an_id_wins_over_a_newer_label_equal_to_it_in_old_stores_too() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await _make_legacy(store, thread, ["first"])
    legacy = await ChatMessageThread.load(thread.id, store=store)
    (first,) = await legacy.checkpoints()
    await _make_legacy(store, thread, [first.id])  # a newer one labelled with that id
    assert (await legacy.get_checkpoint(first.id)).id == first.id
    await legacy.checkpoint()  # moves them into the log
    assert (await legacy.get_checkpoint(first.id)).id == first.id


@pytest.mark.parametrize("read", ["checkpoints", "get_checkpoint"])
async def test_old_checkpoints_read_while_another_handle_moves_them_are_all_found(
    read: str,
) -> None:
    store = HookStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await _make_legacy(store, thread, ["one", "two"])
    reader = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    mover = await ChatMessageThread.load(thread.id, store=store)
    store.before_list = (CHECKPOINT_KIND, lambda: mover.checkpoint("moved"))
    # the reader saw the old record, then the records went into the log
    if read == "checkpoints":
        assert [c.label for c in await reader.checkpoints()][:2] == ["one", "two"]
    else:
        assert (await reader.get_checkpoint("one")).label == "one"


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [("id", "a b", "checkpoint id"), ("id", "", "checkpoint id"), ("label", "a\nb", "label")],
)
async def test_an_import_names_a_bad_checkpoint_id_or_label(
    field: str, value: str, named: str
) -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("a")])
    await thread.checkpoint("fine")
    document = json.loads(thread.to_json())
    document["history"]["checkpoints"][0][field] = value
    store = MemoryStore()
    with pytest.raises(InvalidIdError, match=named):
        await AgentThread.from_json(document, store=store)
    assert await store.list_records() == []


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
async def test_a_checkpoint_holding_no_json_number_is_refused_by_name(bad: float) -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("a")])
    with pytest.raises(ValueError, match=r"checkpoint .*(NaN|nan|inf)"):
        await thread.checkpoint("odd", metadata={"score": bad})
    assert await thread.checkpoints() == []
    await thread.checkpoint("fine")
    document = json.loads(thread.to_json())
    document["history"]["checkpoints"][0]["metadata"] = {"score": bad}
    store = MemoryStore()
    with pytest.raises(ValueError, match=rf"checkpoint .* of thread {thread.id!r}"):
        await AgentThread.from_json(json.dumps(document), store=store)
    assert await store.list_records() == []


# -- a log of many ranges ------------------------------------------------------------------


async def test_a_log_of_max_ranges_is_copied_into_one_segment_and_reads_back() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    made: list[Checkpoint] = []
    for i in range(piece_table.MAX_RANGES + 2):
        await thread.on_new_messages([Message.user(str(i))])
        if i % 7 == 0:
            await thread.update_state({"i": i})
        if made:  # a crash left a row past the log's end: the next one opens a segment
            last = log_ranges(thread.record_data)[-1]
            await store.append_rows(last.segment_id, last.end, [Row(new_id(), '{"i":"~x"}')])
        made.append(await thread.checkpoint(f"cp{i}"))
        assert len(log_ranges(thread.record_data)) <= piece_table.MAX_RANGES
    assert len(log_ranges(thread.record_data)) < piece_table.MAX_RANGES // 2
    await store.vacuum(grace=0)
    fresh = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    assert await fresh.checkpoints() == made
    for i, checkpoint in enumerate(made):
        assert await fresh.get_checkpoint(checkpoint.id) == checkpoint
        assert await fresh.get_checkpoint(f"cp{i}") == checkpoint
        snapshot = await fresh.at(checkpoint)
        assert [m.text for m in await snapshot.get_messages()] == [str(n) for n in range(i + 1)]
        assert snapshot.state.to_dict() == {"i": i - i % 7}


# -- moving an old store's checkpoints into the log --------------------------------------


async def test_a_crash_after_moving_old_checkpoints_into_the_log_leaves_no_duplicate() -> None:
    store = HookStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await _make_legacy(store, thread, ["one", "two"])
    legacy = await ChatMessageThread.load(thread.id, store=store)
    old = await legacy.checkpoints()
    store.fail_delete = CHECKPOINT_KIND
    with pytest.raises(OSError, match="crash"):
        await legacy.checkpoint("three")  # published, then the old records were not deleted
    store.fail_delete = None
    fresh = await ChatMessageThread.load(thread.id, store=store)
    listed = await fresh.checkpoints()
    assert [c.label for c in listed] == ["one", "two", "three"]
    assert listed[:2] == old
    await fresh.checkpoint("four")
    assert [c.label for c in await fresh.checkpoints()] == ["one", "two", "three", "four"]
    copy = await ChatMessageThread.from_json(await fresh.export(), store=MemoryStore())
    assert [c.label for c in await copy.checkpoints()] == ["one", "two", "three", "four"]
    await fresh.delete()
    assert await store.list_records(CHECKPOINT_KIND) == []


# -- copies ------------------------------------------------------------------------------


async def test_a_copy_whose_id_is_taken_is_told_so_at_its_first_checkpoint_or_rollback() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    segments = set(await store.list_segments())
    for first_write in ("checkpoint", "rollback"):
        copy = thread.copy(id=thread.id)
        with pytest.raises(ConflictError, match="already exists"):
            if first_write == "checkpoint":
                await copy.checkpoint()
            else:
                await copy.rollback(message_id=thread.messages[0].id)
    assert len(set(await store.list_segments()) - segments) <= 2  # one try each, not 16
    assert await thread.checkpoints() == []


# -- export ----------------------------------------------------------------------------------


async def test_export_keeps_the_log_order_which_ids_need_not_follow() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("a")])
    await thread.checkpoint("same")
    await thread.on_new_messages([Message.user("b")])
    await thread.checkpoint("same")
    document = json.loads(thread.to_json())
    # as the log of two processes whose ids were made in one millisecond (or on machines
    # whose clocks differ) can hold them: the later-published one has the smaller id
    document["history"]["checkpoints"].reverse()
    imported = await ChatMessageThread.from_json(document)
    order = [c.id for c in await imported.checkpoints()]
    newest = await imported.get_checkpoint("same")
    assert newest.id == order[-1]
    again = await ChatMessageThread.from_json(imported.to_json())
    assert [c.id for c in await again.checkpoints()] == order
    assert (await again.get_checkpoint("same")).id == newest.id
    reread = await ChatMessageThread.from_json(await imported.export())
    assert [c.id for c in await reread.checkpoints()] == order


async def test_any_first_write_of_a_copy_whose_id_is_taken_says_so_at_once() -> None:
    store = MemoryStore()
    taken = await ChatMessageThread.create(store)
    original = await ChatMessageThread.create(store)
    await original.on_new_messages([Message.user("a")])
    writes: list[Callable[[ChatMessageThread], Awaitable[object]]] = [
        lambda copy: copy.on_new_messages([Message.user("b")]),
        lambda copy: copy.update_state({"k": 1}),
        lambda copy: copy.update(title="t"),
        lambda copy: copy.checkpoint(),
    ]
    for write in writes:
        copy = original.copy(id=taken.id)
        with anyio.fail_after(5), pytest.raises(ConflictError, match="already exists"):
            await write(copy)
