from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_threads import (
    JsonFileStore,
    MemoryStore,
    Message,
    StateConflictError,
    StepFailedError,
    StepRecord,
    ThreadStore,
    WorkflowFailedError,
    WorkflowThread,
)
from agent_threads.workflows import CRASHED, END, StepContext, StepResult, Workflow, step


def texts(messages: Any) -> list[str]:
    return [m.text for m in messages]


def statuses(run: WorkflowThread) -> list[tuple[str, str]]:
    return [(r.step, r.status) for r in run.execution.history]


class Calls:
    """Counts step calls, the side effect a resume must not repeat."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def __call__(self, ctx: StepContext) -> None:
        self.counts[ctx.step] += 1


def pipeline(calls: Calls, *, writer_text: str = "draft") -> Workflow:
    """plan -> (alice, bob) -> write -> review -(once)-> write -> review -> END."""

    @step(agent="planner")
    async def plan(ctx: StepContext) -> StepResult:
        calls(ctx)
        await ctx.emit(Message.assistant(f"plan for {ctx.input}"))
        return StepResult(output=["a", "b"], patch={"topics": ["a", "b"]})

    def researcher(name: str) -> Any:
        @step(name=name)
        async def research(ctx: StepContext) -> StepResult:
            calls(ctx)
            await ctx.emit(Message.assistant(f"{name} notes"))
            return StepResult(output=f"{name} notes", patch={"notes": [name]})

        return research

    @step(agent="writer")
    async def write(ctx: StepContext) -> StepResult:
        calls(ctx)
        await ctx.emit(Message.assistant(writer_text))
        return StepResult(output=writer_text, patch={"drafts": ctx.state.get("drafts", 0) + 1})

    @step(agent="reviewer")
    async def review(ctx: StepContext) -> str:
        calls(ctx)
        return "revise" if ctx.state["drafts"] < 2 else "ok"

    alice, bob = researcher("alice"), researcher("bob")
    workflow = Workflow("pipeline")
    workflow.edge(plan, [alice, bob]).join([alice, bob], write, merge="combine_lists")
    workflow.edge(write, review)
    workflow.branch(review, lambda state, verdict: "write" if verdict == "revise" else END)
    return workflow


async def test_a_run_passes_outputs_along_and_merges_patches() -> None:
    calls = Calls()
    run = await pipeline(calls).run("the topic")
    assert run.execution.status == "completed" and run.execution.error is None
    assert [r.step for r in run.execution.history] == [
        "plan", "alice", "bob", "write", "review", "write", "review",
    ]  # fmt: skip
    assert run.state == {"topics": ["a", "b"], "notes": ["alice", "bob"], "drafts": 2}
    first_write = run.execution.history[3]
    assert first_write.input == {"alice": "alice notes", "bob": "bob notes"}
    assert texts((await run.get_sub_thread("planner")).messages) == ["plan for the topic"]
    assert texts((await run.get_sub_thread("writer")).messages) == ["draft", "draft"]
    assert calls.counts == {"plan": 1, "alice": 1, "bob": 1, "write": 2, "review": 2}


async def test_a_run_writes_a_checkpoint_per_superstep() -> None:
    run = await pipeline(Calls()).run("t")
    checkpoints = await run.checkpoints()
    assert [c.superstep for c in checkpoints] == list(range(7))
    assert [c.reason for c in checkpoints] == ["manual"] + ["auto"] * 6
    assert run.execution.checkpoint == checkpoints[-1].id


async def test_messages_get_their_agent_as_author() -> None:
    run = await pipeline(Calls()).run("t")
    assert {m.author for m in (await run.get_sub_thread("alice")).messages} == {"alice"}


async def test_fan_out_steps_run_at_once_each_on_its_own_sub_thread() -> None:
    started, all_started = 0, anyio.Event()

    async def worker(ctx: StepContext) -> str:
        nonlocal started
        started += 1
        if started == 3:
            all_started.set()
        await all_started.wait()  # only returns if all three are in flight together
        await ctx.emit(Message.assistant(f"{ctx.step} done"))
        return ctx.step

    workers = [step(name=n)(worker) for n in ("w1", "w2", "w3")]
    workflow = Workflow("fan", start=workers).add(*workers)
    with anyio.fail_after(10):
        run = await workflow.run()
    for name in ("w1", "w2", "w3"):
        assert texts((await run.get_sub_thread(name)).messages) == [f"{name} done"]


async def test_a_hundred_agents_in_one_fan_out_finish_concurrently() -> None:
    arrived, everyone = 0, anyio.Event()

    async def agent(ctx: StepContext) -> int:
        nonlocal arrived
        arrived += 1
        if arrived == 100:
            everyone.set()
        await everyone.wait()  # a barrier: deadlocks unless all 100 overlap
        await anyio.sleep(0.2)
        await ctx.emit(Message.assistant(f"agent {ctx.input} of {ctx.step}"))
        return int(ctx.step.removeprefix("agent-"))

    agents = [step(name=f"agent-{i}")(agent) for i in range(100)]

    @step
    async def fan(ctx: StepContext) -> int:
        return 42

    workflow = Workflow("hundred").edge(fan, agents)
    began = anyio.current_time()
    with anyio.fail_after(30):
        run = await workflow.run()
    elapsed = anyio.current_time() - began
    assert elapsed < 10, f"100 steps of 0.2 s took {elapsed:.1f} s: they did not overlap"
    assert run.execution.status == "completed" and len(run.execution.history) == 101
    for i in (0, 57, 99):
        assert texts((await run.get_sub_thread(f"agent-{i}")).messages) == [
            f"agent 42 of agent-{i}"
        ]


async def test_a_step_completion_is_stored_while_its_siblings_still_run() -> None:
    store = MemoryStore()
    release, fast_done = anyio.Event(), anyio.Event()

    @step
    async def fast(ctx: StepContext) -> str:
        return "quick"

    @step
    async def slow(ctx: StepContext) -> str:
        await release.wait()
        return "late"

    def observe(record: StepRecord) -> None:
        if record.step == "fast" and record.status == "completed":
            fast_done.set()

    workflow = Workflow("race", start=[fast, slow]).add(fast, slow)
    async with anyio.create_task_group() as group:
        group.start_soon(lambda: workflow.run(store=store, id="race-1", on_step=observe))
        await fast_done.wait()
        seen = await WorkflowThread.load("race-1", store=store)
        release.set()
    assert sorted((r.step, r.status) for r in seen.execution.current) == [
        ("fast", "completed"),
        ("slow", "running"),
    ]


async def test_join_policy_raise_fails_the_run_naming_the_key() -> None:
    @step
    async def a(ctx: StepContext) -> StepResult:
        return StepResult(output=1, patch={"winner": "a"})

    @step
    async def b(ctx: StepContext) -> StepResult:
        return StepResult(output=2, patch={"winner": "b"})

    @step
    async def c(ctx: StepContext) -> None:
        return None

    workflow = Workflow("strict", start=[a, b]).join([a, b], c, merge="raise")
    with pytest.raises(WorkflowFailedError, match="winner") as info:
        await workflow.run()
    assert not isinstance(info.value, StepFailedError)
    assert isinstance(info.value.__cause__, StateConflictError)
    run = info.value.run
    assert run.execution.status == "failed"
    assert run.execution.error is not None and "winner" in run.execution.error


async def test_a_failing_step_is_retried_and_its_partial_messages_kept_aside() -> None:
    attempts = 0

    @step(max_attempts=3)
    async def flaky(ctx: StepContext) -> str:
        nonlocal attempts
        attempts += 1
        await ctx.emit(Message.assistant(f"try {ctx.attempt}"))
        if attempts < 3:
            raise RuntimeError(f"boom {attempts}")
        return "fine"

    run = await Workflow("retry").add(flaky).run()
    assert statuses(run) == [("flaky", "failed"), ("flaky", "failed"), ("flaky", "completed")]
    first = run.execution.history[0]
    assert first.error == "RuntimeError: boom 1" and first.branch is not None
    sub = await run.get_sub_thread("flaky")
    assert texts(sub.messages) == ["try 3"]
    assert texts((await sub.at(first.branch)).messages) == ["try 1"]


async def test_a_failing_step_raises_step_failed_error_with_its_exception_as_cause() -> None:
    store = MemoryStore()
    raised: list[Exception] = []

    @step(max_attempts=2)
    async def fragile(ctx: StepContext) -> str:
        raised.append(KeyError(f"missing on attempt {ctx.attempt}"))
        raise raised[-1]

    with pytest.raises(StepFailedError) as info:
        await Workflow("fragile").add(fragile).run(store=store, id="fragile-1")
    error = info.value
    assert (error.step, error.attempt, error.workflow, error.workflow_id) == (
        "fragile", 2, "fragile", "fragile-1",
    )  # fmt: skip
    assert error.__cause__ is raised[-1] and len(raised) == 2
    assert "step 'fragile' failed on attempt 2: KeyError" in str(error)
    stored = await WorkflowThread.load("fragile-1", store=store)
    assert stored.execution.status == "failed" and stored.lease is None
    assert stored.execution.error == "step 'fragile' failed: KeyError: 'missing on attempt 2'"


async def test_steps_failing_together_raise_one_error_naming_the_others() -> None:
    @step
    async def left(ctx: StepContext) -> None:
        raise ValueError("left broke")

    @step
    async def right(ctx: StepContext) -> None:
        raise RuntimeError("right broke")

    with pytest.raises(StepFailedError) as info:
        await Workflow("pair", start=[left, right]).add(left, right).run()
    assert info.value.step == "left" and isinstance(info.value.__cause__, ValueError)
    assert info.value.__notes__ == [
        "step 'right' failed too, on attempt 1: RuntimeError: right broke"
    ]


async def test_an_observer_error_reaches_the_caller_alone_not_in_a_group() -> None:
    def observe(record: StepRecord) -> None:
        if record.status == "completed":
            raise LookupError("the display is gone")

    with pytest.raises(LookupError, match="the display is gone"):
        await Workflow("w").add(step(name="only")(_echo)).run(on_step=observe)


async def test_a_failed_run_resumes_after_the_fix_without_rerunning_finished_steps() -> None:
    calls, broken = Calls(), True

    @step
    async def first(ctx: StepContext) -> str:
        calls(ctx)
        return "one"

    @step
    async def second(ctx: StepContext) -> str:
        calls(ctx)
        await ctx.emit(Message.assistant("half done"))
        if broken:
            raise ValueError("service down")
        return "two"

    workflow = Workflow("fix").edge(first, second)
    with pytest.raises(StepFailedError) as info:
        await workflow.run()
    run = info.value.run
    assert run.execution.status == "failed"
    assert run.execution.error == "step 'second' failed: ValueError: service down"
    assert texts((await run.get_sub_thread("second")).messages) == []
    broken = False
    run = await workflow.resume(run)
    assert run.execution.status == "completed" and calls.counts == {"first": 1, "second": 2}
    assert texts((await run.get_sub_thread("second")).messages) == ["half done"]


async def test_an_interrupt_pauses_the_run_and_a_reply_continues_it() -> None:
    store = MemoryStore()
    calls = Calls()

    @step
    async def draft(ctx: StepContext) -> str:
        calls(ctx)
        return "text"

    @step
    async def approve(ctx: StepContext) -> Any:
        calls(ctx)
        await ctx.emit(Message.assistant("may I publish?"))
        answer = await ctx.interrupt({"question": "publish?", "draft": ctx.input})
        await ctx.emit(Message.user(str(answer)))
        return answer

    workflow = Workflow("approval").edge(draft, approve)
    run = await workflow.run(store=store)
    assert run.execution.status == "paused"
    (waiting,) = run.execution.interrupts
    assert waiting.prompt == {"question": "publish?", "draft": "text"}
    with pytest.raises(ValueError, match=r"replies for steps \['draft'\] that do not wait"):
        await workflow.resume(run.id, store=store, replies={"draft": "x"})
    run = await workflow.resume(run.id, store=store, reply="yes")
    assert run.execution.status == "completed" and run.execution.history[-1].output == "yes"
    assert texts((await run.get_sub_thread("approve")).messages) == ["may I publish?", "yes"]
    assert calls.counts == {"draft": 1, "approve": 2}


async def test_a_reply_with_nothing_waiting_is_refused() -> None:
    workflow = Workflow("plain").add(step(name="only")(_echo))
    run = await workflow.run(1)
    with pytest.raises(ValueError, match="0 wait"):
        await workflow.resume(run, reply="surprise")


async def _echo(ctx: StepContext) -> Any:
    return ctx.input


async def test_cancellation_leaves_a_resumable_run() -> None:
    store = MemoryStore()
    calls, hang, started = Calls(), True, anyio.Event()

    @step
    async def quick(ctx: StepContext) -> str:
        calls(ctx)
        return "q"

    @step
    async def stuck(ctx: StepContext) -> str:
        calls(ctx)
        await ctx.emit(Message.assistant("partial"))
        started.set()
        if hang:
            await anyio.sleep_forever()
        return "s"

    workflow = Workflow("cancel", start=[quick, stuck]).add(quick, stuck)
    with anyio.move_on_after(0.5):
        await workflow.run(store=store, id="cancel-1")
    assert started.is_set()
    run = await WorkflowThread.load("cancel-1", store=store)
    assert run.execution.status == "paused"
    hang = False
    run = await workflow.resume(run)
    assert run.execution.status == "completed" and calls.counts == {"quick": 1, "stuck": 2}
    crashed = [r for r in run.execution.history if r.error == CRASHED]
    assert [r.step for r in crashed] == ["stuck"]
    assert texts((await run.get_sub_thread("stuck")).messages) == ["partial"]


async def test_resuming_with_another_workflow_is_refused() -> None:
    run = await Workflow("one").add(step(name="s")(_echo)).run()
    with pytest.raises(ValueError, match="runs workflow 'one', not 'two'"):
        await Workflow("two").add(step(name="s")(_echo)).resume(run)


async def test_two_steps_of_a_superstep_cannot_share_a_sub_thread() -> None:
    a = step(name="a", agent="same")(_echo)
    b = step(name="b", agent="same")(_echo)
    with pytest.raises(ValueError, match="sub-thread 'same'"):
        await Workflow("clash", start=[a, b]).add(a, b).run()


async def test_a_non_json_output_fails_the_step_naming_it() -> None:
    @step
    async def odd(ctx: StepContext) -> object:
        return object()

    with pytest.raises(StepFailedError, match="output of step 'odd'") as info:
        await Workflow("odd").add(odd).run()
    assert isinstance(info.value.__cause__, TypeError)
    run = info.value.run
    assert run.execution.status == "failed"
    assert run.execution.error is not None and "output of step 'odd'" in run.execution.error


async def test_resuming_a_completed_run_changes_nothing() -> None:
    calls = Calls()
    workflow = pipeline(calls)
    run = await workflow.run("t")
    version = run.version
    assert (await workflow.resume(run)).version == version and sum(calls.counts.values()) == 7


async def test_observers_see_every_attempt_start_and_end() -> None:
    seen: list[tuple[str, str]] = []

    async def observe(record: StepRecord) -> None:
        seen.append((record.step, record.status))

    await Workflow("w").add(step(name="only")(_echo)).run(on_step=observe)
    assert seen == [("only", "running"), ("only", "completed")]


async def test_fork_at_a_mid_checkpoint_reruns_only_the_steps_after_the_cut() -> None:
    calls = Calls()
    run = await pipeline(calls).run("t")
    before = [(r.step, r.output) for r in run.execution.history]
    writer_messages = texts((await run.get_sub_thread("writer")).messages)
    cut = next(c for c in await run.checkpoints() if c.superstep == 2)  # writer is next
    fork = await (await run.at(cut)).fork()
    assert fork.execution.status == "idle" and [t.step for t in fork.execution.next] == ["write"]
    rerun_calls = Calls()
    fork = await pipeline(rerun_calls, writer_text="better draft").resume(fork)
    assert fork.execution.status == "completed"
    assert rerun_calls.counts == {"write": 2, "review": 2}  # plan and research were not re-run
    outputs = [r.output for r in fork.execution.history]
    assert outputs[3:] == ["better draft", "revise", "better draft", "ok"]
    assert [(r.step, r.output) for r in run.execution.history] == before
    assert texts((await run.get_sub_thread("writer")).messages) == writer_messages
    assert texts((await fork.get_sub_thread("writer")).messages) == ["better draft"] * 2
    assert texts((await fork.get_sub_thread("alice")).messages) == ["alice notes"]


def test_a_workflow_runs_under_trio_on_memory_and_json_file_stores(tmp_path: Path) -> None:
    async def main() -> None:
        stores: list[ThreadStore] = [MemoryStore(), JsonFileStore(tmp_path / "files")]
        for store in stores:
            async with store:
                calls = Calls()
                run = await pipeline(calls).run("trio", store=store)
                assert run.execution.status == "completed"
                reloaded = await WorkflowThread.load(run.id, store=store)
                assert len(reloaded.execution.history) == 7
                assert texts((await reloaded.get_sub_thread("writer")).messages) == ["draft"] * 2

    anyio.run(main, backend="trio")


async def test_resuming_with_a_workflow_that_lacks_a_pending_step_names_it() -> None:
    first = step(name="first")(_echo)
    gate = step(name="gate")(_gate)
    run = await Workflow("w").edge(first, gate).run(1)
    assert run.execution.status == "paused"
    with pytest.raises(ValueError, match="no step 'gate'"):
        await Workflow("w").add(first).resume(run, reply="go")


async def _gate(ctx: StepContext) -> Any:
    return await ctx.interrupt("open?")


async def test_vacuum_keeps_the_step_history_and_checkpoints_of_a_run() -> None:
    store = MemoryStore()
    run = await pipeline(Calls()).run("t", store=store)
    await run.fork(checkpoint=(await run.checkpoints())[3])
    await store.vacuum(grace=0)
    reloaded = await WorkflowThread.load(run.id, store=store)
    assert list(reloaded.execution.history) == list(run.execution.history)
    for checkpoint in await reloaded.checkpoints():
        snapshot = await reloaded.at(checkpoint)
        assert len(snapshot.execution.history) == checkpoint.history_length
        for key in snapshot.sub_thread_keys:
            await (await snapshot.get_sub_thread(key)).get_messages()
