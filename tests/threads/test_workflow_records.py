"""Workflow records as stored: the workflow's thread record and its checkpoint records."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from agent_threads import (
    MemoryStore,
    Message,
    SchemaVersionError,
    StepRecord,
    StoreCorruptedError,
    WorkflowThread,
)

REMOVE: Any = object()
"""A value for `rewrite` that removes the key."""


async def rewrite(store: MemoryStore, kind: str, record_id: str, **changes: Any) -> None:
    """Change a stored record's data in place, as another version of the code would."""
    record = await store.get_record(kind, record_id)
    assert record is not None
    data: dict[str, JsonValue] = {**record.data, **changes}
    data = {k: v for k, v in data.items() if v is not REMOVE}
    await store.put_record(
        record.model_copy(update={"data": data}), expected_version=record.version
    )


async def workflow_with_a_superstep(store: MemoryStore) -> WorkflowThread:
    wt = await WorkflowThread.create(store, title="w")
    await (await wt.get_sub_thread()).on_new_messages([Message.user("task")])
    step = StepRecord(step="a", agent="a", key="a", superstep=0, status="completed")
    await wt.update_execution(current=[step])
    await wt.commit_superstep(state={"n": 1}, next=[], waiting={})
    return wt


async def test_a_workflow_checkpoint_names_its_history_length_and_holds_no_messages() -> None:
    store = MemoryStore()
    wt = await workflow_with_a_superstep(store)
    checkpoint = await wt.checkpoint("cut")
    assert checkpoint.history_length == 1
    assert checkpoint.message_count == 0 and checkpoint.ranges == ()
    stored = await store.get_record("workflow_checkpoint", checkpoint.id)
    assert stored is not None
    assert stored.data["schema_version"] == 2 and stored.data["history_length"] == 1
    assert "message_count" not in stored.data and "last_message_id" not in stored.data
    ranges = stored.data["ranges"]  # the step log's, kept alive by vacuum
    assert isinstance(ranges, list) and len(ranges) == 1


async def test_a_checkpoint_written_by_the_previous_version_still_loads() -> None:
    store = MemoryStore()
    wt = await workflow_with_a_superstep(store)
    checkpoint = await wt.checkpoint("old")
    await rewrite(
        store,
        "workflow_checkpoint",
        checkpoint.id,
        schema_version=1,
        message_count=1,
        last_message_id=None,
        history_length=REMOVE,
    )
    stored = await store.get_record("workflow_checkpoint", checkpoint.id)
    assert stored is not None and "history_length" not in stored.data
    assert "last_message_id" in stored.data
    loaded = await WorkflowThread.load(wt.id, store=store)
    old = await loaded.get_checkpoint("old")
    assert old.history_length == 1 and old.message_count == 0
    await loaded.commit_superstep(state={"n": 2}, next=[], waiting={})
    await loaded.rollback(old)
    assert [r.step for r in loaded.execution.history] == ["a"] and loaded.state == {"n": 1}


async def test_a_checkpoint_of_a_newer_version_is_refused_by_name() -> None:
    store = MemoryStore()
    wt = await workflow_with_a_superstep(store)
    checkpoint = await wt.checkpoint()
    await rewrite(store, "workflow_checkpoint", checkpoint.id, schema_version=3)
    with pytest.raises(SchemaVersionError, match=checkpoint.id):
        await wt.get_checkpoint(checkpoint.id)


@pytest.mark.parametrize(
    "changes",
    [
        {"history_length": 5},
        {"ranges": [["s", 2, 1]]},
        {"sub_threads": {"main": {"thread_id": 1}}},
        {"status": "dancing"},
    ],
    ids=["length", "range", "sub-thread", "status"],
)
async def test_a_malformed_checkpoint_record_names_the_checkpoint(
    changes: dict[str, JsonValue],
) -> None:
    store = MemoryStore()
    wt = await workflow_with_a_superstep(store)
    checkpoint = await wt.checkpoint()
    await rewrite(store, "workflow_checkpoint", checkpoint.id, **changes)
    with pytest.raises(StoreCorruptedError, match=f"workflow checkpoint '{checkpoint.id}'"):
        await wt.get_checkpoint(checkpoint.id)


@pytest.mark.parametrize(
    "changes",
    [
        {"sub_threads": {"main": 7}},
        {"sub_threads": ["main"]},
        {"execution": {"status": "dancing"}},
        {"execution": {"superstep": -1}},
        {"ranges": [["s", 0, True]]},
        {"ranges": "s"},
        {"segment": {"id": "s"}},
    ],
    ids=["sub-thread-id", "sub-thread-map", "status", "superstep", "range", "ranges", "segment"],
)
async def test_a_malformed_workflow_record_names_the_workflow(
    changes: dict[str, JsonValue],
) -> None:
    store = MemoryStore()
    wt = await workflow_with_a_superstep(store)
    await rewrite(store, "thread", wt.id, **changes)
    with pytest.raises(StoreCorruptedError, match=f"workflow '{wt.id}' record"):
        await WorkflowThread.load(wt.id, store=store)


async def test_absent_workflow_keys_read_as_empty() -> None:
    store = MemoryStore()
    wt = await WorkflowThread.create(store)
    await rewrite(store, "thread", wt.id, execution=REMOVE, segment=None)
    loaded = await WorkflowThread.load(wt.id, store=store)
    assert loaded.execution.status == "idle" and loaded.sub_thread_keys == ("main",)
