from __future__ import annotations

import json

import anyio
import pytest
from pydantic import JsonValue

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    Checkpoint,
    CheckpointNotFoundError,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    MemoryStore,
    Message,
    MessageNotFoundError,
    NotLoadedError,
    ReadOnlyError,
    SchemaVersionError,
    StoreCorruptedError,
    ThreadSnapshot,
    Usage,
)
from agent_threads.core.ids import new_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.stores.base import LOGS_KEY, Row, record_logs
from agent_threads.timetravel.checkpoint import decode_row, encode_row
from agent_threads.timetravel.checkpoints import CHECKPOINT_KIND, ROLLBACK_LABEL


def texts(messages: object) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


def turn(text: str, tokens: int = 1) -> Message:
    return Message.user(text, usage=Usage(input_tokens=tokens))


async def chat(*words: str, store: MemoryStore | None = None) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store or MemoryStore(), title="t")
    if words:
        await thread.on_new_messages([turn(w) for w in words])
    return thread


# -- recording -------------------------------------------------------------------------


async def test_checkpoint_records_ranges_state_stats_label_and_metadata() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"step": 1})
    cp = await thread.checkpoint("first", metadata={"why": "test"})
    assert cp.thread_id == thread.id and cp.label == "first" and cp.reason == "manual"
    assert cp.message_count == 2 and cp.last_message_id == thread.messages[-1].id
    assert cp.piece_table == thread.ranges and cp.stats == thread.stats
    assert cp.metadata == {"why": "test"} and cp.state_digest == thread.state.digest
    assert await store_rows(thread) == [encode_row(cp)]
    assert decode_row(encode_row(cp), thread.id) == cp


async def store_rows(thread: ChatMessageThread) -> list[str]:
    """The rows of the thread's checkpoint log, as the store holds them."""
    record = await thread.store.get_record(THREAD_KIND, thread.id)
    assert record is not None
    rows = []
    for segment_id, start, end in record_logs(record):
        rows += await thread.store.read_rows(segment_id, start, end)
    return rows


async def test_checkpoint_row_holds_ranges_not_messages() -> None:
    thread = await chat(*[f"message {i} " * 20 for i in range(500)])
    await thread.update_state({"k": "v"})
    cp = await thread.checkpoint()
    (row,) = await store_rows(thread)
    assert len(row.encode()) < 200 and cp.message_count == 500
    assert await thread.store.list_records(CHECKPOINT_KIND) == []


async def test_a_checkpoint_adds_one_row_and_rewrites_no_record_but_the_thread() -> None:
    store = MemoryStore()
    thread = await chat("a", store=store)
    made = [await thread.checkpoint(str(i)) for i in range(5)]
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None and len(record.data[LOGS_KEY]) == 1  # type: ignore[arg-type]
    assert [decode_row(r, thread.id) for r in await store_rows(thread)] == made
    assert [r.kind for r in await store.list_records()] == [THREAD_KIND]


async def test_unchanged_state_adds_no_blob() -> None:
    store = MemoryStore()
    thread = await chat("a", store=store)
    await thread.update_state({"k": "v"})
    blobs = await store.list_blobs()
    first, second = await thread.checkpoint(), await thread.checkpoint()
    assert await store.list_blobs() == blobs
    assert first.state_digest == second.state_digest is not None


async def test_checkpoints_list_oldest_first() -> None:
    thread = await chat()
    made = []
    for word in "abc":
        await thread.on_new_messages([turn(word)])
        made.append(await thread.checkpoint(word))
    assert await thread.checkpoints() == made


async def test_get_checkpoint_by_id_or_newest_label() -> None:
    thread = await chat("a")
    old = await thread.checkpoint("same label")
    await thread.on_new_messages([turn("b")])
    new = await thread.checkpoint("same label")
    assert await thread.get_checkpoint(old.id) == old
    assert await thread.get_checkpoint("same label") == new


async def test_unknown_checkpoint_names_itself_and_the_thread() -> None:
    thread = await chat("a")
    with pytest.raises(CheckpointNotFoundError, match=rf"'nope'.*{thread.id}") as caught:
        await thread.get_checkpoint("nope")
    assert caught.value.checkpoint == "nope"
    with pytest.raises(CheckpointNotFoundError):
        await thread.at("not a label either")


async def test_another_threads_checkpoint_is_not_found() -> None:
    store = MemoryStore()
    one, other = await chat("a", store=store), await chat("b", store=store)
    cp = await other.checkpoint("mine")
    with pytest.raises(CheckpointNotFoundError):
        await one.get_checkpoint(cp.id)
    with pytest.raises(CheckpointNotFoundError):
        await one.at(cp)
    with pytest.raises(CheckpointNotFoundError):
        await one.rollback(cp)


@pytest.mark.parametrize("label", ["", "x" * 129, "tab\there"])
async def test_bad_label_is_rejected(label: str) -> None:
    thread = await chat("a")
    with pytest.raises(InvalidIdError, match="checkpoint label"):
        await thread.checkpoint(label)
    assert await thread.checkpoints() == []


async def test_metadata_must_be_json() -> None:
    thread = await chat("a")
    with pytest.raises(TypeError, match="metadata"):
        await thread.checkpoint(metadata={"when": object()})


async def test_newer_thread_schema_is_refused_and_a_garbled_log_row_named() -> None:
    store = MemoryStore()
    thread = await chat("a", store=store)
    await thread.checkpoint()
    stored = await store.get_record(THREAD_KIND, thread.id)
    assert stored is not None
    newer = stored.model_copy(update={"data": {**stored.data, "schema_version": 99}})
    await store.put_record(newer, expected_version=stored.version)
    with pytest.raises(SchemaVersionError, match=thread.id):
        await ChatMessageThread.load(thread.id, store=store)
    restored = await store.put_record(stored, expected_version=stored.version + 1)
    segment_id = new_id()
    await store.append_rows(
        segment_id, 0, [Row("garbled", '{"i":"~garbled","r":[["not packed",0,1]]}')]
    )
    logs: list[JsonValue] = [[segment_id, 0, 1]]
    data = {**stored.data, LOGS_KEY: logs}
    await store.put_record(
        stored.model_copy(update={"data": data}), expected_version=restored.version
    )
    with pytest.raises(StoreCorruptedError, match=rf"{segment_id}.*position 0.*not a packed"):
        await thread.checkpoints()
    with pytest.raises(StoreCorruptedError, match="unreadable log row"):
        await store.vacuum(grace=0)


# -- time travel ------------------------------------------------------------------------


async def test_at_checkpoint_is_exact_after_appends_state_changes_and_rollbacks() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"n": 1})
    cp = await thread.checkpoint("two")
    await thread.on_new_messages([turn("c", 5)])
    await thread.update_state({"n": 2})
    await thread.rollback(message_id=thread.messages[0].id)
    await thread.on_new_messages([turn("z")])
    snap = await thread.at("two")
    assert isinstance(snap, ThreadSnapshot) and snap.checkpoint == cp
    assert texts(snap.messages) == ["a", "b"] and snap.state == {"n": 1}
    assert snap.stats.message_count == 2 and snap.stats.input_tokens == 2


async def test_at_survives_deleting_the_thread_it_was_forked_from() -> None:
    store = MemoryStore()
    parent = await chat("a", "b", store=store)
    child = await parent.fork()
    await child.on_new_messages([turn("c")])
    cp = await child.checkpoint()
    await child.rollback(message_id=child.messages[0].id)
    await parent.delete()
    await store.vacuum(grace=0)
    reloaded = await ChatMessageThread.load(child.id, store=store)
    assert texts((await reloaded.at(cp)).messages) == ["a", "b", "c"]


async def test_at_message_uses_the_nearest_checkpoint_state_before_it() -> None:
    thread = await chat("a")
    await thread.update_state({"seen": "a"})
    await thread.checkpoint()
    await thread.on_new_messages([turn("b", 3), turn("c", 4)])
    await thread.update_state({"seen": "c"})
    snap = await thread.at(message_id=thread.messages[1].id)
    assert texts(snap.messages) == ["a", "b"] and snap.checkpoint is None
    assert snap.state == {"seen": "a"}
    assert snap.stats.message_count == 2 and snap.stats.input_tokens == 4
    assert snap.last_message_id == thread.messages[1].id


async def test_at_last_message_is_the_thread_now() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"now": True})
    snap = await thread.at(message_id=thread.messages[-1].id)
    assert snap.state == {"now": True} and snap.stats == thread.stats


async def test_at_message_prefers_the_newest_of_equal_points() -> None:
    thread = await chat("a")
    await thread.update_state({"v": 1})
    await thread.checkpoint()
    await thread.update_state({"v": 2})
    await thread.checkpoint()
    await thread.update_state({"v": 3})
    last = thread.messages[-1].id
    assert (await thread.at(message_id=last)).state == {"v": 3}  # now beats both
    await thread.on_new_messages([turn("b")])
    assert (await thread.at(message_id=last)).state == {"v": 2}  # newer checkpoint wins


async def test_rollback_to_the_last_message_keeps_the_state() -> None:
    thread = await ChatMessageThread.create(auto_checkpoint=True)
    await thread.on_new_messages([turn("a")])
    await thread.update_state({"after": "the auto checkpoint"})
    await thread.rollback(message_id=thread.messages[-1].id)
    assert thread.state == {"after": "the auto checkpoint"}


async def test_fork_remembers_the_state_it_started_from() -> None:
    parent = await chat("a")
    await parent.update_state({"from": "parent"})
    fork = await parent.fork()
    await fork.on_new_messages([turn("b")])
    await fork.update_state({"from": "fork"})
    await parent.update_state({"from": "parent, later"})
    snap = await fork.at(message_id=fork.messages[0].id)
    assert snap.state == {"from": "parent"} and snap.stats.message_count == 0
    await fork.store.vacuum(grace=0)
    await fork.rollback(message_id=fork.messages[0].id)
    assert fork.state == {"from": "parent"}


async def test_at_message_before_any_checkpoint_starts_from_empty_state() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"late": 1})
    snap = await thread.at(message_id=thread.messages[0].id)
    assert snap.state == {} and snap.stats.message_count == 1


async def test_at_unknown_message_raises() -> None:
    thread = await chat("a")
    with pytest.raises(MessageNotFoundError, match="ghost"):
        await thread.at(message_id="ghost")


async def test_at_needs_exactly_one_target() -> None:
    thread = await chat("a")
    cp = await thread.checkpoint()
    with pytest.raises(TypeError, match=r"or message_id=\.\.\.$"):
        await thread.at()
    with pytest.raises(TypeError, match="not both"):
        await thread.at(cp, message_id=thread.messages[0].id)


async def test_snapshot_is_read_only() -> None:
    thread = await chat("a")
    snap = await thread.at(await thread.checkpoint())
    with pytest.raises(ReadOnlyError, match=r"snapshot.*fork"):
        await snap.on_new_messages([turn("b")])
    with pytest.raises(ReadOnlyError):
        await snap.update_state({"x": 1})
    with pytest.raises(ReadOnlyError):
        await snap.rollback()
    with pytest.raises(ReadOnlyError):
        await snap.update(title="x")
    with pytest.raises(ReadOnlyError):
        await snap.delete()
    with pytest.raises(ReadOnlyError):
        snap.anything = 1
    assert texts(thread.messages) == ["a"]


async def test_snapshot_fork_is_a_live_thread_from_that_point() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"v": 1})
    cp = await thread.checkpoint()
    await thread.on_new_messages([turn("c")])
    fork = await (await thread.at(cp)).fork(title="retry")
    assert isinstance(fork, ChatMessageThread)
    assert texts(fork.messages) == ["a", "b"] and fork.state == {"v": 1}
    assert fork.parent_id == thread.id and fork.fork_point == cp.last_message_id
    assert fork.title == "retry" and fork.stats.message_count == 0
    await fork.on_new_messages([turn("d")])
    assert texts(thread.messages) == ["a", "b", "c"]
    reloaded = await ChatMessageThread.load(fork.id, store=thread.store)
    assert texts(reloaded.messages) == ["a", "b", "d"]


async def test_lazy_handle_snapshot_pages_its_messages() -> None:
    thread = await chat("a", "b", "c")
    cp = await thread.checkpoint()
    lazy = await ChatMessageThread.load(thread.id, store=thread.store, lazy=True)
    snap = await lazy.at(cp)
    with pytest.raises(NotLoadedError):
        snap.messages  # noqa: B018
    assert texts(await snap.get_messages(-2)) == ["b", "c"]
    assert (await lazy.checkpoint()).last_message_id == thread.messages[-1].id


# -- rollback ---------------------------------------------------------------------------


async def test_rollback_restores_messages_state_stats_and_saves_the_head() -> None:
    thread = await chat("a")
    await thread.update_state({"n": 1})
    cp = await thread.checkpoint()
    await thread.on_new_messages([turn("b", 7)])
    await thread.update_state({"n": 2})
    saved = await thread.rollback(cp)
    assert texts(thread.messages) == ["a"] and thread.state == {"n": 1}
    assert thread.stats == cp.stats
    assert saved.label == ROLLBACK_LABEL and saved.reason == "rollback"
    assert saved.message_count == 2 and await thread.get_checkpoint(ROLLBACK_LABEL) == saved
    reloaded = await ChatMessageThread.load(thread.id, store=thread.store)
    assert texts(reloaded.messages) == ["a"] and reloaded.state == {"n": 1}


async def test_rolling_forward_to_the_saved_head_restores_everything() -> None:
    thread = await chat("a", "b")
    await thread.update_state({"n": 2})
    before = (list(thread.messages), thread.state, thread.stats)
    saved = await thread.rollback(message_id=thread.messages[0].id)
    await thread.rollback(saved)
    assert (list(thread.messages), thread.state, thread.stats) == before


async def test_appends_after_rollback_never_overwrite_abandoned_messages() -> None:
    thread = await chat("a", "b", "c")
    saved = await thread.rollback(message_id=thread.messages[0].id)
    await thread.on_new_messages([turn("x"), turn("y")])
    assert len(thread.ranges) == 2
    assert texts(thread.messages) == ["a", "x", "y"]
    assert texts((await thread.at(saved)).messages) == ["a", "b", "c"]
    reloaded = await ChatMessageThread.load(thread.id, store=thread.store)
    assert texts((await reloaded.at(saved)).messages) == ["a", "b", "c"]


async def test_rollback_of_a_stale_handle_saves_the_newest_head() -> None:
    store = MemoryStore()
    first = await chat("a", store=store)
    cp = await first.checkpoint()
    second = await ChatMessageThread.load(first.id, store=store)
    await second.on_new_messages([turn("from second")])
    saved = await first.rollback(cp)  # first has not seen the second's append
    assert texts((await first.at(saved)).messages) == ["a", "from second"]
    assert [c.id for c in await first.checkpoints()] == [cp.id, saved.id]


async def test_concurrent_rollbacks_lose_no_head() -> None:
    store = MemoryStore()
    one = await chat("a", store=store)
    start = await one.checkpoint("start")
    two = await ChatMessageThread.load(one.id, store=store)
    await one.on_new_messages([turn("b")])
    await two.refresh()
    async with anyio.create_task_group() as group:
        group.start_soon(one.rollback, start)
        group.start_soon(two.rollback, start)
    saved = [c for c in await one.checkpoints() if c.reason == "rollback"]
    assert len(saved) == 2
    assert sorted(c.message_count for c in saved) == [1, 2]


async def test_rollback_to_a_checkpoint_the_thread_does_not_hold_is_refused() -> None:
    store = MemoryStore()
    thread = await chat("a", store=store)
    cp = await thread.checkpoint()
    made_up = cp.model_copy(update={"id": new_id()})
    with pytest.raises(CheckpointNotFoundError, match=made_up.id):
        await thread.rollback(made_up)
    await thread.delete()
    with pytest.raises(CheckpointNotFoundError):
        await thread.rollback(cp)


async def test_rollback_keeps_abandoned_segments_through_vacuum() -> None:
    store = MemoryStore()
    thread = await chat("a", "b", store=store)
    saved = await thread.rollback(message_id=thread.messages[0].id)
    await thread.on_new_messages([turn("c")])
    await store.vacuum(grace=0)
    fresh = await ChatMessageThread.load(thread.id, store=store)
    assert texts((await fresh.at(saved)).messages) == ["a", "b"]


# -- automatic checkpoints ------------------------------------------------------------------


async def test_auto_checkpoint_records_one_per_batch_and_persists() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store, auto_checkpoint=True)
    await thread.on_new_messages([turn("a"), turn("b")])
    await thread.on_new_messages([turn("c")])
    cps = await thread.checkpoints()
    assert [(c.reason, c.message_count) for c in cps] == [("auto", 2), ("auto", 3)]
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert reloaded.auto_checkpoint
    await reloaded.on_new_messages([turn("d")])
    assert len(await thread.checkpoints()) == 3
    fork = await reloaded.fork()
    assert fork.auto_checkpoint and not (await chat()).auto_checkpoint


async def test_append_checkpoint_holds_its_metadata_in_the_same_write() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    made = await thread.on_new_messages(
        [turn("a")], checkpoint="t1", checkpoint_metadata={"step": 1, "by": ["x"]}
    )
    assert made is not None and made.metadata == {"step": 1, "by": ["x"]}
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    [stored] = await reloaded.checkpoints()
    assert (stored.label, stored.metadata, stored.message_count) == ("t1", made.metadata, 1)


async def test_append_refuses_checkpoint_metadata_that_is_not_json() -> None:
    thread = await ChatMessageThread.create()
    with pytest.raises(InvalidValueError):
        await thread.on_new_messages([turn("a")], checkpoint=True, checkpoint_metadata={"x": {1}})
    assert thread.head == 0


# -- export, import, delete, lineage ---------------------------------------------------------


async def _history_thread(store: MemoryStore) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store, title="h", auto_checkpoint=True)
    await thread.on_new_messages([turn("a")])
    await thread.update_state({"n": 1})
    await thread.checkpoint("one", metadata={"m": 1})
    await thread.on_new_messages([turn("b", 2)])
    await thread.update_state({"n": 2})
    await thread.rollback("one")
    await thread.on_new_messages([turn("c")])
    return thread


async def test_export_and_import_keep_every_checkpoint_exactly() -> None:
    thread = await _history_thread(MemoryStore())
    elsewhere = MemoryStore()
    imported = await AgentThread.from_json(await thread.export(), store=elsewhere)
    assert isinstance(imported, ChatMessageThread) and imported.auto_checkpoint
    assert imported.messages == thread.messages and imported.state == thread.state
    await _assert_same_history(thread, imported)
    abandoned = await imported.get_checkpoint(ROLLBACK_LABEL)
    await imported.rollback(abandoned)
    assert texts(imported.messages) == ["a", "b"] and imported.state == {"n": 2}


async def test_imported_thread_appends_after_its_pool() -> None:
    thread = await _history_thread(MemoryStore())
    elsewhere = MemoryStore()
    imported = await AgentThread.from_json(await thread.export(), store=elsewhere)
    assert isinstance(imported, ChatMessageThread)
    await imported.on_new_messages([turn("d")])
    abandoned = await imported.get_checkpoint(ROLLBACK_LABEL)
    assert texts((await imported.at(abandoned)).messages) == ["a", "b"]
    assert texts(imported.messages) == ["a", "c", "d"]


async def test_export_stores_each_message_and_state_once() -> None:
    thread = await ChatMessageThread.create(auto_checkpoint=True)
    await thread.update_state({"big": "x" * 1000})
    for i in range(50):
        await thread.on_new_messages([turn(f"m{i}")])
    document = json.loads(await thread.export())
    assert len(document["history"]["checkpoints"]) == 50
    assert document["history"]["messages"] == [] and len(document["history"]["states"]) == 1
    assert document["history"]["checkpoints"][9]["ranges"] == [[0, 10]]


async def _assert_same_history(thread: ChatMessageThread, imported: AgentThread) -> None:
    originals, copies = await thread.checkpoints(), await imported.checkpoints()
    assert len(originals) > 0
    assert [c.model_dump(exclude={"ranges"}) for c in copies] == [
        c.model_dump(exclude={"ranges"}) for c in originals
    ]
    for original, copy in zip(originals, copies, strict=True):
        then, now = await thread.at(original), await imported.at(copy)
        assert now.messages == then.messages and now.state == then.state
        assert now.stats == then.stats


async def test_to_json_carries_every_checkpoint_exactly() -> None:
    thread = await _history_thread(MemoryStore())
    imported = await AgentThread.from_json(thread.to_json(), store=MemoryStore())
    assert isinstance(imported, ChatMessageThread) and imported.auto_checkpoint
    assert imported.messages == thread.messages and imported.state == thread.state
    await _assert_same_history(thread, imported)
    abandoned = await imported.get_checkpoint(ROLLBACK_LABEL)
    assert texts((await imported.at(abandoned)).messages) == ["a", "b"]


async def test_to_json_is_what_export_reads_from_the_store() -> None:
    thread = await _history_thread(MemoryStore())
    assert json.loads(thread.to_json()) == json.loads(await thread.export())


async def test_a_handle_loaded_after_the_checkpoints_exports_them() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    loaded = await ChatMessageThread.load(thread.id, store=store)
    imported = await AgentThread.from_json(loaded.to_json(), store=MemoryStore())
    await _assert_same_history(thread, imported)


async def test_another_handles_checkpoint_shows_in_to_json_after_refresh() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    other = await ChatMessageThread.load(thread.id, store=store)
    await other.on_new_messages([turn("d")])
    made = await other.checkpoint("by other", metadata={"who": "other"})
    ids = [c["id"] for c in json.loads(thread.to_json())["history"]["checkpoints"]]
    assert made.id not in ids
    await thread.refresh()
    imported = await AgentThread.from_json(thread.to_json(), store=MemoryStore())
    copy = await imported.get_checkpoint("by other")
    assert copy.model_dump(exclude={"ranges"}) == made.model_dump(exclude={"ranges"})
    assert texts((await imported.at(copy)).messages) == ["a", "c", "d"]


async def test_a_fork_exports_the_state_it_started_from() -> None:
    store = MemoryStore()
    thread = await chat("a", store=store)
    await thread.update_state({"n": 1})
    fork = await thread.fork()
    await fork.update_state({"n": 2})
    await fork.on_new_messages([turn("b")])
    await fork.checkpoint()
    imported = await AgentThread.from_json(fork.to_json(), store=MemoryStore())
    first = imported.messages[0].id  # type: ignore[attr-defined]
    assert (await imported.at(message_id=first)).state == {"n": 1}


async def test_lazy_handle_to_json_points_at_export() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    with pytest.raises(NotLoadedError, match=r"export\(\)"):
        lazy.to_json()
    assert json.loads(await lazy.export()) == json.loads(thread.to_json())
    with pytest.raises(NotLoadedError):
        lazy.to_json()


async def test_import_over_an_existing_thread_writes_no_checkpoint() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    before = await store.list_records(CHECKPOINT_KIND)
    with pytest.raises(ConflictError, match=thread.id):
        await AgentThread.from_json(await thread.export(), store=store)
    assert await store.list_records(CHECKPOINT_KIND) == before


async def test_import_into_a_store_holding_the_thread_changes_nothing() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    document = json.loads(await thread.export())
    before = await store.list_records()
    with pytest.raises(ConflictError, match=thread.id):
        await AgentThread.from_json(document, store=store)
    assert await store.list_records() == before


async def test_import_of_two_checkpoints_with_one_id_is_rejected() -> None:
    thread = await _history_thread(MemoryStore())
    document = json.loads(await thread.export())
    entries = document["history"]["checkpoints"]
    entries[-1]["id"] = entries[0]["id"]
    with pytest.raises(ValueError, match="same id"):
        await AgentThread.from_json(document, store=MemoryStore())


async def test_hand_edited_history_is_rejected_with_a_reason() -> None:
    thread = await _history_thread(MemoryStore())
    document = json.loads(await thread.export())
    document["history"]["checkpoints"][0]["ranges"] = [[0, 999]]
    with pytest.raises(ValueError, match=r"outside"):
        await AgentThread.from_json(document, store=MemoryStore())
    document["history"]["checkpoints"] = [{"id": "x"}]
    with pytest.raises(ValueError, match="bad history"):
        await AgentThread.from_json(document, store=MemoryStore())


async def test_delete_removes_checkpoints_and_vacuum_frees_their_segments() -> None:
    store = MemoryStore()
    thread = await _history_thread(store)
    await thread.delete()
    assert await store.list_records(CHECKPOINT_KIND) == []
    await store.vacuum(grace=0)
    assert await store.list_segments() == {} and await store.list_blobs() == {}


async def test_lineage_lists_ancestors_up_to_the_root() -> None:
    store = MemoryStore()
    root = await chat("a", store=store)
    child = await root.fork()
    await child.on_new_messages([turn("b")])
    grandchild = await (await child.at(message_id=child.messages[-1].id)).fork()
    assert await root.lineage() == []
    lineage = await grandchild.lineage()
    assert [a.thread_id for a in lineage] == [child.id, root.id]
    assert lineage[0].fork_point == child.messages[-1].id
    assert lineage[1].fork_point == root.messages[-1].id and lineage[1].title == "t"
    await child.delete()
    assert [(a.thread_id, a.deleted) for a in await grandchild.lineage()] == [(child.id, True)]


def test_checkpoints_work_on_trio() -> None:
    async def main() -> list[str]:
        thread = await chat("a", "b")
        cp = await thread.checkpoint()
        await thread.on_new_messages([turn("c")])
        await thread.rollback(cp)
        return texts(thread.messages)

    assert anyio.run(main, backend="trio") == ["a", "b"]


def test_checkpoint_model_checks_its_count() -> None:
    with pytest.raises(ValueError, match="message_count"):
        Checkpoint.model_validate(
            {
                "id": "c",
                "thread_id": "t",
                "created_at": "2026-01-01T00:00:00Z",
                "message_count": 3,
                "ranges": [["s", 0, 2]],
            }
        )
