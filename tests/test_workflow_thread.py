from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    CheckpointNotFoundError,
    ConflictError,
    InvalidIdError,
    MemoryStore,
    Message,
    MessageNotFoundError,
    ReadOnlyError,
    Record,
    StepRecord,
    StepTask,
    SubThreadNotFoundError,
    ThreadNotFoundError,
    WorkflowCheckpoint,
    WorkflowThread,
)


def texts(messages: Any) -> list[str]:
    return [m.text for m in messages]


@dataclass
class Agent:
    name: str


async def workflow_with_two_agents(store: MemoryStore | None = None) -> WorkflowThread:
    wt = await WorkflowThread.create(store or MemoryStore(), title="team")
    await (await wt.get_sub_thread()).on_new_messages([Message.user("task")])
    researcher = await wt.create_sub_thread(Agent("researcher"))
    await researcher.on_new_messages([Message.assistant("finding 1")])
    return wt


def record(step: str, superstep: int = 0, **fields: Any) -> StepRecord:
    return StepRecord(step=step, agent=step, key=step, superstep=superstep, **fields)


# -- sub-threads -------------------------------------------------------------------------


async def test_create_makes_an_empty_main_sub_thread() -> None:
    wt = await WorkflowThread.create(title="t")
    main = await wt.get_sub_thread()
    assert wt.sub_thread_keys == ("main",)
    assert isinstance(main, ChatMessageThread) and main.head == 0
    assert wt.execution.status == "idle" and list(wt.execution.history) == []


async def test_sub_threads_live_in_the_same_store_keyed_by_agent_name() -> None:
    store = MemoryStore()
    wt = await WorkflowThread.create(store)
    by_object = await wt.create_sub_thread(Agent("planner"))
    by_name = await wt.create_sub_thread("writer", key="writer-2")
    assert wt.sub_thread_keys == ("main", "planner", "writer-2")
    assert await wt.get_sub_thread("planner") is by_object
    assert dict(wt.sub_thread_ids) == {
        "main": (await wt.get_sub_thread()).id,
        "planner": by_object.id,
        "writer-2": by_name.id,
    }
    assert (await ChatMessageThread.load(by_name.id, store=store)).metadata["agent"] == "writer"


async def test_unknown_sub_thread_key_is_named_in_the_error() -> None:
    wt = await WorkflowThread.create()
    with pytest.raises(SubThreadNotFoundError, match=r"'ghost'.*\['main'\]") as caught:
        await wt.get_sub_thread("ghost")
    assert caught.value.key == "ghost" and caught.value.workflow_id == wt.id
    with pytest.raises(SubThreadNotFoundError, match="ghost"):
        await wt.delete_sub_thread("ghost")


async def test_create_sub_thread_rejects_taken_and_unusable_keys() -> None:
    wt = await WorkflowThread.create()
    with pytest.raises(ConflictError, match="'main'"):
        await wt.create_sub_thread("main")
    with pytest.raises(InvalidIdError, match="sub-thread key"):
        await wt.create_sub_thread("a", key="bad\nkey")
    with pytest.raises(TypeError, match="name"):
        await wt.create_sub_thread(object())


async def test_delete_sub_thread_removes_the_key_and_the_thread() -> None:
    store = MemoryStore()
    wt = await workflow_with_two_agents(store)
    sub_id = wt.sub_thread_ids["researcher"]
    await wt.delete_sub_thread("researcher")
    assert wt.sub_thread_keys == ("main",)
    with pytest.raises(ThreadNotFoundError):
        await ChatMessageThread.load(sub_id, store=store)
    assert (await WorkflowThread.load(wt.id, store=store)).sub_thread_keys == ("main",)


async def test_load_restores_sub_threads_execution_and_history() -> None:
    store = MemoryStore()
    wt = await workflow_with_two_agents(store)
    await wt.update_execution(workflow="w", status="running", next=[StepTask(step="a")])
    await wt.update_execution(current=[record("a", status="completed", output=1)], next=())
    await wt.commit_superstep(state={"k": 1}, next=[StepTask(step="b", input=1)], waiting={})
    loaded = await AgentThread.load(wt.id, store=store)
    assert isinstance(loaded, WorkflowThread)
    assert [(r.step, r.output) for r in loaded.execution.history] == [("a", 1)]
    assert loaded.execution.next == (StepTask(step="b", input=1),)
    assert loaded.execution.superstep == 1 and loaded.state == {"k": 1}
    assert texts((await loaded.get_sub_thread("researcher")).messages) == ["finding 1"]


async def test_load_of_a_chat_thread_as_a_workflow_names_its_type() -> None:
    store = MemoryStore()
    chat = await ChatMessageThread.create(store)
    with pytest.raises(ThreadNotFoundError, match="'chat' thread"):
        await WorkflowThread.load(chat.id, store=store)


async def test_copy_copies_every_sub_thread_under_new_ids() -> None:
    wt = await workflow_with_two_agents()
    copy = wt.copy()
    assert copy.id != wt.id and copy.sub_thread_keys == wt.sub_thread_keys
    assert set(copy.sub_thread_ids.values()).isdisjoint(wt.sub_thread_ids.values())
    assert texts((await copy.get_sub_thread("researcher")).messages) == ["finding 1"]


# -- execution writes ---------------------------------------------------------------------


class GatedStore(MemoryStore):
    """Holds every record write at `gate` while it is closed, and counts the writes."""

    def __init__(self) -> None:
        super().__init__()
        self.gate: anyio.Event | None = None
        self.held = anyio.Event()
        self.writes = 0

    async def put_record(self, record: Record, *, expected_version: int) -> Record:
        if self.gate is not None:
            self.held.set()
            await self.gate.wait()
        self.writes += 1
        return await super().put_record(record, expected_version=expected_version)


async def test_step_records_finishing_together_are_stored_in_few_writes() -> None:
    store = GatedStore()
    wt = await WorkflowThread.create(store)
    records = [record(f"s{i}") for i in range(50)]
    await wt.update_execution(current=records)
    store.gate, store.writes = anyio.Event(), 0
    async with anyio.create_task_group() as group:
        group.start_soon(wt.record_step, records[0].running())
        await store.held.wait()  # the first write is under way; the others queue behind it
        for item in records[1:]:
            group.start_soon(wt.record_step, item.running())
        await anyio.wait_all_tasks_blocked()
        store.gate.set()
    assert store.writes == 2
    stored = await WorkflowThread.load(wt.id, store=store)
    assert [r.status for r in stored.execution.current] == ["running"] * 50


async def test_record_step_of_another_superstep_is_refused() -> None:
    wt = await WorkflowThread.create()
    with pytest.raises(ValueError, match="superstep 3"):
        await wt.record_step(record("a", superstep=3))


async def test_a_second_runner_changing_the_execution_meets_a_conflict() -> None:
    store = MemoryStore()
    first = await WorkflowThread.create(store)
    second = await WorkflowThread.load(first.id, store=store)
    await first.update_execution(status="running")
    with pytest.raises(ConflictError, match="another writer"):
        await second.update_execution(status="paused")


async def test_metadata_written_by_another_handle_does_not_block_the_runner() -> None:
    store = MemoryStore()
    runner = await WorkflowThread.create(store)
    other = await WorkflowThread.load(runner.id, store=store)
    await other.update(title="renamed")
    await runner.update_execution(status="running")
    fresh = await WorkflowThread.load(runner.id, store=store)
    assert fresh.title == "renamed" and fresh.execution.status == "running"


async def test_commit_superstep_moves_current_into_the_history_and_checkpoints() -> None:
    wt = await WorkflowThread.create()
    await wt.update_execution(current=[record("a", status="completed", output="x")])
    checkpoint_id = await wt.commit_superstep(
        state={"n": 1}, next=[StepTask(step="b")], waiting={"c": {"a": "x"}}
    )
    execution = wt.execution
    assert execution.current == () and execution.superstep == 1
    assert execution.checkpoint == checkpoint_id
    assert execution.waiting == {"c": {"a": "x"}}
    checkpoint = await wt.get_checkpoint(checkpoint_id)
    assert checkpoint.reason == "auto" and checkpoint.history_length == 1
    assert set(checkpoint.sub_threads) == {"main"}


# -- checkpoints, time travel, rollback, forks ---------------------------------------------


async def test_checkpoint_is_a_cut_across_every_sub_thread() -> None:
    wt = await workflow_with_two_agents()
    checkpoint = await wt.checkpoint("cut", metadata={"why": "test"})
    await (await wt.get_sub_thread("researcher")).on_new_messages([Message.assistant("later")])
    await wt.create_sub_thread("writer")
    snapshot = await wt.at("cut")
    assert snapshot.checkpoint == checkpoint and snapshot.sub_thread_keys == ("main", "researcher")
    researcher = await snapshot.get_sub_thread("researcher")
    assert texts(researcher.messages) == ["finding 1"]
    assert texts((await snapshot.get_sub_thread()).messages) == ["task"]
    assert snapshot.execution.status == "idle"
    with pytest.raises(SubThreadNotFoundError, match="writer"):
        await snapshot.get_sub_thread("writer")


async def test_checkpoint_reuses_the_checkpoint_of_an_unchanged_sub_thread() -> None:
    wt = await workflow_with_two_agents()
    first = await wt.checkpoint()
    await (await wt.get_sub_thread()).on_new_messages([Message.user("more")])
    second = await wt.checkpoint()
    assert second.sub_threads["researcher"] == first.sub_threads["researcher"]
    assert second.sub_threads["main"] != first.sub_threads["main"]


async def test_snapshots_are_read_only() -> None:
    wt = await workflow_with_two_agents()
    snapshot = await wt.at(await wt.checkpoint())
    with pytest.raises(ReadOnlyError):
        await snapshot.rollback()
    with pytest.raises(ReadOnlyError):
        snapshot.note = 1


async def test_time_travel_needs_a_checkpoint_not_a_message() -> None:
    wt = await workflow_with_two_agents()
    with pytest.raises(TypeError, match="checkpoint"):
        await wt.at(message_id="m")
    with pytest.raises(MessageNotFoundError, match="'m' not found"):
        await wt.fork("m")  # a fork may be at a message of a sub-thread, if one holds it
    with pytest.raises(CheckpointNotFoundError, match="nope"):
        await wt.at("nope")


async def test_rollback_restores_every_sub_thread_and_can_be_undone() -> None:
    wt = await workflow_with_two_agents()
    await wt.update_execution(current=[record("a", status="completed")])
    cut = await wt.checkpoint("before")
    await wt.commit_superstep(state={"done": True}, next=[], waiting={})
    await (await wt.get_sub_thread("researcher")).on_new_messages([Message.assistant("later")])
    await wt.create_sub_thread("writer")
    saved = await wt.rollback(cut)
    assert saved.label == "before-rollback" and saved.reason == "rollback"
    assert wt.sub_thread_keys == ("main", "researcher")
    assert texts((await wt.get_sub_thread("researcher")).messages) == ["finding 1"]
    assert wt.state == {} and wt.execution.superstep == 0 and len(wt.execution.current) == 1
    await wt.rollback(saved)
    assert list(wt.sub_thread_keys) == ["main", "researcher", "writer"]
    assert texts((await wt.get_sub_thread("researcher")).messages) == ["finding 1", "later"]
    assert wt.state == {"done": True} and [r.step for r in wt.execution.history] == ["a"]


async def test_fork_at_a_checkpoint_is_idle_and_independent_of_its_parent() -> None:
    store = MemoryStore()
    wt = await workflow_with_two_agents(store)
    await wt.update_execution(status="running", next=[StepTask(step="go")])
    cut = await wt.checkpoint()
    await (await wt.get_sub_thread("researcher")).on_new_messages([Message.assistant("after")])
    fork = await (await wt.at(cut)).fork(title="what if")
    assert fork.parent_id == wt.id and fork.fork_point == cut.id and fork.title == "what if"
    assert fork.execution.status == "idle" and fork.execution.next == (StepTask(step="go"),)
    fork_researcher = await fork.get_sub_thread("researcher")
    assert texts(fork_researcher.messages) == ["finding 1"]
    await fork_researcher.on_new_messages([Message.assistant("fork only")])
    assert texts((await wt.get_sub_thread("researcher")).messages) == ["finding 1", "after"]
    assert set(fork.sub_thread_ids.values()).isdisjoint(wt.sub_thread_ids.values())
    reloaded = await WorkflowThread.load(fork.id, store=store)
    assert texts((await reloaded.get_sub_thread("researcher")).messages)[-1] == "fork only"


async def test_fork_resets_sub_thread_stats_unless_told_to_keep_them() -> None:
    wt = await workflow_with_two_agents()
    cut = await wt.checkpoint()
    researcher = await wt.get_sub_thread("researcher")
    assert researcher.stats.message_count == 1
    for fork in (await wt.fork(), await (await wt.at(cut)).fork()):
        assert (await fork.get_sub_thread("researcher")).stats.message_count == 0
    for fork in (
        await wt.fork(reset_stats=False),
        await wt.fork(checkpoint=cut, reset_stats=False),
    ):
        assert (await fork.get_sub_thread("researcher")).stats == researcher.stats


async def test_fork_shares_history_and_messages_instead_of_copying_them() -> None:
    wt = await WorkflowThread.create()
    main = await wt.get_sub_thread()
    await main.on_new_messages([Message.user(str(i)) for i in range(500)])
    await wt.update_execution(current=[record(f"s{i}", status="completed") for i in range(300)])
    await wt.commit_superstep(state={}, next=[], waiting={})
    fork = await wt.fork()
    assert (await fork.get_sub_thread()).ranges == main.ranges
    assert fork.execution.history[299] is wt.execution.history[299]


async def test_to_json_and_from_json_round_trip_a_workflow() -> None:
    wt = await workflow_with_two_agents()
    await wt.update_execution(workflow="w", current=[record("a", status="completed", output=[1])])
    await wt.commit_superstep(state={"k": "v"}, next=[StepTask(step="b")], waiting={})
    document = wt.to_json()
    assert json.loads(document)["kind"] == "workflow"
    restored = await AgentThread.from_json(document, store=MemoryStore())
    assert isinstance(restored, WorkflowThread) and restored.id == wt.id
    assert restored.sub_thread_keys == wt.sub_thread_keys and restored.state == {"k": "v"}
    assert list(restored.execution.history) == list(wt.execution.history)
    assert restored.execution.next == wt.execution.next
    assert texts((await restored.get_sub_thread("researcher")).messages) == ["finding 1"]


async def test_export_carries_each_sub_threads_checkpoints() -> None:
    wt = await workflow_with_two_agents()
    cut = await wt.checkpoint()
    restored = await AgentThread.from_json(await wt.export(), store=MemoryStore())
    assert isinstance(restored, WorkflowThread)
    researcher = await restored.get_sub_thread("researcher")
    assert cut.sub_threads["researcher"].checkpoint_id in {
        c.id for c in await researcher.checkpoints()
    }


async def test_to_json_carries_each_sub_threads_checkpoints() -> None:
    wt = await workflow_with_two_agents()
    cut = await wt.checkpoint()
    restored = await AgentThread.from_json(wt.to_json(), store=MemoryStore())
    assert isinstance(restored, WorkflowThread)
    for key, place in cut.sub_threads.items():
        sub = await restored.get_sub_thread(key)
        assert place.checkpoint_id in {c.id for c in await sub.checkpoints()}


async def test_importing_into_a_store_holding_its_sub_threads_leaves_nothing_behind() -> None:
    store = MemoryStore()
    wt = await workflow_with_two_agents(store)
    other = await WorkflowThread.create(store)
    document = json.loads(wt.to_json())
    document["id"] = other.id
    with pytest.raises(ConflictError):
        await AgentThread.from_json(document, store=store)
    assert (await WorkflowThread.load(wt.id, store=store)).sub_thread_keys == wt.sub_thread_keys


async def test_delete_removes_sub_threads_and_checkpoints_but_not_forks() -> None:
    store = MemoryStore()
    wt = await workflow_with_two_agents(store)
    fork = await wt.fork(checkpoint=await wt.checkpoint())
    await wt.delete()
    assert await store.list_records("workflow_checkpoint", owner=wt.id) == []
    for sub_id in wt.sub_thread_ids.values():
        with pytest.raises(ThreadNotFoundError):
            await ChatMessageThread.load(sub_id, store=store)
    with pytest.raises(ThreadNotFoundError):
        await wt.delete()
    assert texts((await fork.get_sub_thread("researcher")).messages) == ["finding 1"]


# -- the step log against a reference model ---------------------------------------------------

operations = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.integers(0, 4)),
        st.tuples(st.just("checkpoint"), st.just(0)),
        st.tuples(st.just("rollback"), st.integers(0, 50)),
        st.tuples(st.just("reload"), st.just(0)),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations)
def test_step_history_always_equals_a_reference_model(ops: list[tuple[str, int]]) -> None:
    async def main() -> None:
        store = MemoryStore()
        wt = await WorkflowThread.create(store)
        model: list[str] = []
        saved: list[tuple[WorkflowCheckpoint, list[str]]] = []
        for op, arg in ops:
            if op == "commit":
                names = [f"s{len(model) + i}" for i in range(arg)]
                superstep = wt.execution.superstep
                current = [record(n, superstep, status="completed") for n in names]
                await wt.update_execution(current=current)
                await wt.commit_superstep(state={"n": len(model)}, next=[], waiting={})
                model += names
            elif op == "checkpoint":
                saved.append((await wt.checkpoint(), list(model)))
            elif op == "rollback" and saved:
                checkpoint, at_model = saved[arg % len(saved)]
                saved.append((await wt.rollback(checkpoint), list(model)))
                model = list(at_model)
            elif op == "reload":
                wt = await WorkflowThread.load(wt.id, store=store)
            assert [r.step for r in wt.execution.history] == model
        for checkpoint, at_model in saved:
            snapshot = await wt.at(checkpoint)
            assert [r.step for r in snapshot.execution.history] == at_model

    anyio.run(main)
