"""WorkflowThread keeps the AgentThread contract: copy(), fork(), fork(message_id=...)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    MemoryStore,
    Message,
    MessageNotFoundError,
    StepRecord,
    ThreadNotFoundError,
    WorkflowThread,
)
from agent_threads.workflows import StepContext, StepResult, Workflow, step


def texts(messages: Any) -> list[str]:
    return [m.text for m in messages]


async def contents(wt: WorkflowThread) -> dict[str, list[str]]:
    return {k: texts((await wt.get_sub_thread(k)).messages) for k in wt.sub_thread_keys}


def record(step: str, superstep: int = 0, **fields: Any) -> StepRecord:
    return StepRecord(step=step, agent=step, key=step, superstep=superstep, **fields)


async def hand_run(store: MemoryStore | None = None) -> WorkflowThread:
    """A workflow driven by hand: a task in main, one committed superstep of `research`."""
    wt = await WorkflowThread.create(store or MemoryStore(), title="team")
    await (await wt.get_sub_thread()).on_new_messages([Message.user("task")])
    research = await wt.create_sub_thread("research")
    await research.on_new_messages([Message.assistant("finding 1")])
    await wt.update_execution(current=[record("research", status="completed", output=1)])
    await wt.commit_superstep(state={"k": 1}, next=[], waiting={})
    await wt.create_sub_thread("writer")  # empty
    return wt


# -- copy() ---------------------------------------------------------------------------------


async def test_a_copy_has_new_ids_and_the_same_sub_threads_execution_and_state() -> None:
    wt = await hand_run()
    copy = wt.copy()
    assert copy.id != wt.id and copy.version == 0
    assert copy.sub_thread_keys == wt.sub_thread_keys
    assert set(copy.sub_thread_ids.values()).isdisjoint(wt.sub_thread_ids.values())
    assert await contents(copy) == await contents(wt)
    assert list(copy.execution.history) == list(wt.execution.history)
    assert copy.state == wt.state == {"k": 1} and copy.title == wt.title
    assert await copy.checkpoints() == []  # checkpoints stay with the original


async def test_a_copy_is_stored_by_its_first_write_with_its_sub_threads() -> None:
    store = MemoryStore()
    wt = await hand_run(store)
    copy = wt.copy()
    with pytest.raises(ThreadNotFoundError):
        await WorkflowThread.load(copy.id, store=store)
    await copy.update_execution(status="paused")
    loaded = await WorkflowThread.load(copy.id, store=store)
    assert dict(loaded.sub_thread_ids) == dict(copy.sub_thread_ids)
    assert await contents(loaded) == await contents(wt)
    assert list(loaded.execution.history) == list(wt.execution.history)
    assert loaded.execution.status == "paused" and loaded.state == {"k": 1}
    writer = await loaded.get_sub_thread("writer")  # empty: checkpointed empty, like a fork's
    assert [c.message_count for c in await writer.checkpoints()] == [0]


async def test_writes_to_a_copy_never_change_the_original() -> None:
    store = MemoryStore()
    wt = await hand_run(store)
    before, history = await contents(wt), list(wt.execution.history)
    copy = wt.copy()
    await (await copy.get_sub_thread("research")).on_new_messages([Message.assistant("copy")])
    await copy.update_execution(current=[record("writer", 1, status="completed")])
    await copy.commit_superstep(state={"k": 2}, next=[], waiting={})
    await copy.create_sub_thread("critic")
    await copy.checkpoint("copy's")
    for original in (wt, await WorkflowThread.load(wt.id, store=store)):
        assert await contents(original) == before
        assert list(original.execution.history) == history and original.state == {"k": 1}
        assert [c.label for c in await original.checkpoints()] == [None]
    assert texts((await copy.get_sub_thread("research")).messages) == ["finding 1", "copy"]


async def test_writes_to_the_original_never_show_in_the_copy() -> None:
    store = MemoryStore()
    wt = await hand_run(store)
    copy = wt.copy()
    await copy.update(title="copy")  # stored now
    expected = await contents(copy)
    await (await wt.get_sub_thread("research")).on_new_messages([Message.assistant("later")])
    await wt.update_execution(current=[record("writer", 1, status="completed")])
    await wt.commit_superstep(state={"k": 2}, next=[], waiting={})
    for twin in (copy, await WorkflowThread.load(copy.id, store=store)):
        assert await contents(twin) == expected
        assert [r.step for r in twin.execution.history] == ["research"]
        assert twin.state == {"k": 1} and twin.title == "copy"


async def test_copy_keeps_stats_unless_told_to_reset_them() -> None:
    wt = await hand_run()
    research = await wt.get_sub_thread("research")
    kept = await wt.copy().get_sub_thread("research")
    reset = await wt.copy(reset_stats=True).get_sub_thread("research")
    assert kept.stats == research.stats and research.stats.message_count == 1
    assert reset.stats.message_count == 0
    assert texts(reset.messages) == ["finding 1"]


async def test_a_copy_of_a_running_workflow_is_idle_and_names_no_checkpoint() -> None:
    wt = await hand_run()
    await wt.update_execution(status="running", current=[record("writer", 1, status="running")])
    copy = wt.copy()
    assert copy.execution.status == "idle" and copy.execution.checkpoint is None
    assert wt.execution.status == "running" and wt.execution.checkpoint is not None
    assert copy.execution.current == wt.execution.current


async def test_a_copy_whose_id_is_taken_stores_nothing() -> None:
    store = MemoryStore()
    wt = await hand_run(store)
    other = await WorkflowThread.create(store)
    copy = wt.copy(id=other.id)
    with pytest.raises(ConflictError, match="already exists"):
        await copy.update_execution(status="paused")
    for sub_id in copy.sub_thread_ids.values():
        with pytest.raises(ThreadNotFoundError):
            await ChatMessageThread.load(sub_id, store=store)


async def test_a_checkpoint_of_a_copy_stores_the_copy_first() -> None:
    store = MemoryStore()
    wt = await hand_run(store)
    copy = wt.copy()
    cut = await copy.checkpoint("start")
    await (await copy.get_sub_thread()).on_new_messages([Message.user("more")])
    loaded = await WorkflowThread.load(copy.id, store=store)
    assert [c.id for c in await loaded.checkpoints()] == [cut.id]
    await loaded.rollback(cut)
    assert await contents(loaded) == await contents(wt)


async def test_a_paused_run_copied_resumes_on_its_own() -> None:
    calls: Counter[str] = Counter()

    @step(agent="editor")
    async def draft(ctx: StepContext) -> str:
        calls[ctx.step] += 1
        await ctx.emit(Message.assistant("draft"))
        return "draft"

    @step(agent="editor")
    async def approve(ctx: StepContext) -> Any:
        calls[ctx.step] += 1
        await ctx.emit(Message.assistant("may I?"))
        answer = await ctx.interrupt("publish?")
        await ctx.emit(Message.user(str(answer)))
        return answer

    workflow = Workflow("approval").edge(draft, approve)
    store = MemoryStore()
    run = await workflow.run(store=store)
    copy = await workflow.resume(run.copy(), reply="yes")
    assert copy.execution.status == "completed" and copy.execution.history[-1].output == "yes"
    assert texts((await copy.get_sub_thread("editor")).messages) == ["draft", "may I?", "yes"]
    assert calls == {"draft": 1, "approve": 2}
    original = await WorkflowThread.load(run.id, store=store)
    assert original.execution.status == "paused"
    assert texts((await original.get_sub_thread("editor")).messages) == ["draft", "may I?"]


def test_copy_works_under_trio() -> None:
    async def main() -> None:
        store = MemoryStore()
        wt = await hand_run(store)
        copy = wt.copy()
        await (await copy.get_sub_thread()).on_new_messages([Message.user("trio")])
        await copy.update_execution(status="paused")
        loaded = await WorkflowThread.load(copy.id, store=store)
        assert texts((await loaded.get_sub_thread()).messages) == ["task", "trio"]
        assert texts((await wt.get_sub_thread()).messages) == ["task"]

    anyio.run(main, backend="trio")


# -- fork() and fork(message_id=...) ----------------------------------------------------------


def team(calls: Counter[str]) -> Workflow:
    """plan -> (alice, bob) -> write; every step emits two messages on its sub-thread."""

    def two_messages(name: str) -> Any:
        async def run(ctx: StepContext) -> StepResult:
            calls[name] += 1
            await ctx.emit(Message.assistant(f"{name} 1"))
            await ctx.emit(Message.assistant(f"{name} 2"))
            return StepResult(output=name, patch={name: True})

        return run

    plan = step(name="plan", agent="planner")(two_messages("plan"))
    alice, bob = step(name="alice")(two_messages("alice")), step(name="bob")(two_messages("bob"))
    write = step(name="write", agent="writer")(two_messages("write"))
    return Workflow("team").edge(plan, [alice, bob]).join([alice, bob], write)


async def message(wt: WorkflowThread, key: str, text: str) -> Message:
    return next(m for m in (await wt.get_sub_thread(key)).messages if m.text == text)


async def test_fork_forks_every_sub_thread_at_its_head_without_copying_messages() -> None:
    run = await team(Counter()).run()
    fork = await run.fork()
    for key in run.sub_thread_keys:
        assert (await fork.get_sub_thread(key)).ranges == (await run.get_sub_thread(key)).ranges
    assert set(fork.sub_thread_ids.values()).isdisjoint(run.sub_thread_ids.values())
    assert list(fork.execution.history) == list(run.execution.history)


async def test_fork_at_the_last_message_of_a_step_continues_after_its_superstep() -> None:
    calls: Counter[str] = Counter()
    run = await team(calls).run()
    alice_2 = await message(run, "alice", "alice 2")
    fork = await run.fork(message_id=alice_2.id)
    assert fork.fork_point == alice_2.id and fork.parent_id == run.id
    assert [r.step for r in fork.execution.history] == ["plan", "alice", "bob"]
    assert [t.step for t in fork.execution.next] == ["write"] and fork.execution.status == "idle"
    assert await contents(fork) == {
        "main": [],
        "planner": ["plan 1", "plan 2"],
        "alice": ["alice 1", "alice 2"],
        "bob": ["bob 1", "bob 2"],
    }
    assert fork.state == {"plan": True, "alice": True, "bob": True}
    calls.clear()
    await team(calls).resume(fork)
    assert calls == {"write": 1}


async def test_fork_inside_a_step_takes_the_superstep_boundary_before_it() -> None:
    calls: Counter[str] = Counter()
    run = await team(calls).run()
    alice_1 = await message(run, "alice", "alice 1")
    fork = await run.fork(message_id=alice_1.id)
    assert [r.step for r in fork.execution.history] == ["plan"]
    assert sorted(t.step for t in fork.execution.next) == ["alice", "bob"]
    assert await contents(fork) == {
        "main": [],
        "planner": ["plan 1", "plan 2"],
        "alice": ["alice 1"],  # bob's sub-thread did not exist yet
    }
    calls.clear()
    fork = await team(calls).resume(fork)
    assert calls == {"alice": 1, "bob": 1, "write": 1}
    assert texts((await fork.get_sub_thread("alice")).messages) == [
        "alice 1", "alice 1", "alice 2",
    ]  # fmt: skip


async def test_fork_at_the_runs_last_message_is_the_finished_run() -> None:
    calls: Counter[str] = Counter()
    run = await team(calls).run()
    write_2 = await message(run, "writer", "write 2")
    fork = await run.fork(message_id=write_2.id)
    assert list(fork.execution.history) == list(run.execution.history)
    assert await contents(fork) == await contents(run)
    calls.clear()
    assert (await team(calls).resume(fork)).execution.status == "completed" and not calls


async def test_fork_at_a_message_added_after_the_run_keeps_the_finished_run() -> None:
    run = await team(Counter()).run()
    main = await run.get_sub_thread()
    await main.on_new_messages([Message.user("one more thing"), Message.user("and another")])
    fork = await run.fork(message_id=main.messages[0].id)
    assert texts((await fork.get_sub_thread()).messages) == ["one more thing"]
    assert list(fork.execution.history) == list(run.execution.history)
    assert (await contents(fork))["writer"] == ["write 1", "write 2"]


async def test_fork_at_a_message_of_a_workflow_without_checkpoints_takes_its_head() -> None:
    wt = await WorkflowThread.create(title="by hand")
    main = await wt.get_sub_thread()
    await main.on_new_messages([Message.user("a"), Message.user("b")])
    other = await wt.create_sub_thread("other")
    await other.on_new_messages([Message.assistant("x")])
    await wt.update_execution(next=[])
    fork = await wt.fork(message_id=main.messages[0].id, reset_stats=False)
    assert await contents(fork) == {"main": ["a"], "other": ["x"]}
    assert (await fork.get_sub_thread()).stats.message_count == 1
    assert (await fork.get_sub_thread("other")).stats == other.stats


async def test_fork_at_a_message_passes_over_a_cut_that_would_roll_it_back() -> None:
    wt = await WorkflowThread.create()
    start = await wt.checkpoint("start")
    await wt.update_execution(current=[record("main", status="running", thread_head=0)])
    main = await wt.get_sub_thread()
    await main.on_new_messages([Message.assistant("partial 1"), Message.assistant("partial 2")])
    await wt.checkpoint("mid-step")  # main ends at "partial 2", but the step is under way
    fork = await wt.fork(message_id=main.messages[1].id)
    assert fork.execution.current == () and fork.fork_point == main.messages[1].id
    assert texts((await fork.get_sub_thread()).messages) == ["partial 1", "partial 2"]
    assert start.sub_threads["main"].thread_id == main.id


async def test_fork_at_a_message_no_sub_thread_holds_names_the_workflow_and_message() -> None:
    wt = await hand_run()
    with pytest.raises(MessageNotFoundError, match=f"'nope' not found in thread '{wt.id}'"):
        await wt.fork(message_id="nope")
    chat = await ChatMessageThread.create()
    with pytest.raises(MessageNotFoundError, match=f"'nope' not found in thread '{chat.id}'"):
        await chat.fork(message_id="nope")  # the same error for every thread type


async def test_fork_at_a_message_two_sub_threads_hold_is_refused() -> None:
    wt = await WorkflowThread.create()
    shared = Message.user("to everyone")
    await (await wt.get_sub_thread()).on_new_messages([shared])
    await (await wt.create_sub_thread("other")).on_new_messages([shared])
    with pytest.raises(ValueError, match=r"sub-threads \['main', 'other'\]"):
        await wt.fork(message_id=shared.id)


async def test_fork_at_a_message_and_a_checkpoint_at_once_is_refused() -> None:
    wt = await hand_run()
    task = (await wt.get_sub_thread()).messages[0]
    with pytest.raises(TypeError, match="not both"):
        await wt.fork(task.id, checkpoint=(await wt.checkpoints())[0])


# -- a fork never changes its parent -----------------------------------------------------------

actions = st.lists(
    st.one_of(
        st.tuples(st.just("append"), st.sampled_from(["main", "a", "b"])),
        st.tuples(st.just("commit"), st.sampled_from(["main", "a", "b"])),
        st.tuples(st.just("checkpoint"), st.just("")),
    ),
    min_size=1,
    max_size=12,
)


async def observe(wt: WorkflowThread) -> str:
    """Everything a reader of the stored workflow sees, as one comparable document."""
    fresh = await WorkflowThread.load(wt.id, store=wt.store)
    document = json.loads(await fresh.export())
    document.pop("history", None)
    return json.dumps(
        {**document, "checkpoints": [c.id for c in await fresh.checkpoints()]}, sort_keys=True
    )


async def build(ops: list[tuple[str, str]]) -> tuple[WorkflowThread, list[tuple[str, str]]]:
    wt = await WorkflowThread.create(MemoryStore())
    for key in ("a", "b"):
        await wt.create_sub_thread(key)
    ids: list[tuple[str, str]] = []  # (key, message id)
    for n, (op, key) in enumerate(ops):
        if op == "append":
            m = Message.user(f"{key}{n}")
            await (await wt.get_sub_thread(key)).on_new_messages([m])
            ids.append((key, m.id))
        elif op == "commit":
            superstep = wt.execution.superstep
            await wt.update_execution(current=[record(key, superstep, status="completed")])
            await wt.commit_superstep(state={"n": n}, next=[], waiting={})
        else:
            await wt.checkpoint()
    return wt, ids


async def write_everywhere(fork: WorkflowThread) -> None:
    for key in fork.sub_thread_keys:
        await (await fork.get_sub_thread(key)).on_new_messages([Message.user("fork")])
    superstep = fork.execution.superstep
    await fork.update_execution(current=[record("fork", superstep, status="completed")])
    await fork.commit_superstep(state={"fork": True}, next=[], waiting={})
    await fork.create_sub_thread("fork-only")
    await fork.update(title="fork")


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(actions, st.integers(0, 100), st.sampled_from(["message", "head", "copy"]))
def test_a_fork_or_copy_never_changes_its_parent(
    ops: list[tuple[str, str]], pick: int, how: str
) -> None:
    async def main() -> None:
        wt, ids = await build(ops)
        before = await observe(wt)
        if how == "message" and ids:
            key, message_id = ids[pick % len(ids)]
            fork = await wt.fork(message_id=message_id)
            assert (await fork.get_sub_thread(key)).messages[-1].id == message_id
        elif how == "copy":
            fork = wt.copy()
        else:
            fork = await wt.fork()
        await write_everywhere(fork)
        assert await observe(wt) == before

    anyio.run(main)
