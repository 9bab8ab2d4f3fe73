from __future__ import annotations

from typing import Any

import pytest

from agent_threads import ImmutableState, StepRecord, StepTask
from agent_threads.workflows import END, Step, StepContext, Workflow, as_step, step


async def noop(ctx: StepContext) -> Any:
    return ctx.input


def done(name: str, output: Any) -> StepRecord:
    return StepRecord(
        step=name, agent=name, key=name, superstep=0, status="completed", output=output
    )


def named(*names: str) -> list[Step]:
    return [step(name=n)(noop) for n in names]


def test_step_defaults_agent_and_key_to_its_name() -> None:
    made = step(noop)
    assert (made.name, made.agent, made.key, made.max_attempts) == ("noop", "noop", "noop", 1)
    custom = step(name="plan", agent="planner", max_attempts=3)(noop)
    assert (custom.name, custom.agent, custom.key) == ("plan", "planner", "planner")


def test_agent_objects_with_a_name_and_an_async_call_are_steps() -> None:
    class Researcher:
        name = "researcher"

        async def __call__(self, ctx: StepContext) -> str:
            return "notes"

    made = as_step(Researcher())
    assert made.name == made.agent == "researcher"


def test_steps_must_be_async_and_well_named() -> None:
    with pytest.raises(TypeError, match="not an async callable"):
        step(name="sync")(lambda ctx: None)  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="max_attempts"):
        step(max_attempts=0)(noop)
    with pytest.raises(ValueError, match="END"):
        step(name=END)(noop)


def test_two_different_steps_cannot_share_a_name() -> None:
    first, second = step(name="x")(noop), step(name="x", agent="other")(noop)
    workflow = Workflow("w").add(first)
    workflow.add(step(name="x")(noop))  # the same function and options: the same step
    with pytest.raises(ValueError, match="another step named 'x'"):
        workflow.add(second)


def test_the_first_step_added_is_the_start_unless_given() -> None:
    a, b = named("a", "b")
    assert Workflow("w").edge(a, b).start == ("a",)
    assert Workflow("w", start=[a, b]).add(a, b).start == ("a", "b")


def test_validate_names_an_unknown_step() -> None:
    (a,) = named("a")
    with pytest.raises(ValueError, match="no step 'ghost'"):
        Workflow("w").edge(a, "ghost").validate()
    with pytest.raises(ValueError, match="no steps"):
        Workflow("w").validate()


def test_sequential_and_fan_out_edges_deliver_the_output() -> None:
    a, b, c = named("a", "b", "c")
    workflow = Workflow("w").edge(a, [b, c])
    tasks, waiting = workflow.route([done("a", 7)], ImmutableState(), {})
    assert tasks == [StepTask(step="b", input=7), StepTask(step="c", input=7)] and waiting == {}


def test_a_join_waits_across_supersteps_then_gets_outputs_by_source() -> None:
    a, b, c = named("a", "b", "c")
    workflow = Workflow("w").join([a, b], c)
    tasks, waiting = workflow.route([done("a", 1)], ImmutableState(), {})
    assert tasks == [] and waiting == {"c": {"a": 1}}
    tasks, waiting = workflow.route([done("b", 2)], ImmutableState(), waiting)
    assert tasks == [StepTask(step="c", input={"a": 1, "b": 2})] and waiting == {}


def test_a_single_source_join_still_gets_a_dict() -> None:
    a, b = named("a", "b")
    tasks, _ = Workflow("w").join([a], b).route([done("a", 1)], ImmutableState(), {})
    assert tasks == [StepTask(step="b", input={"a": 1})]


def test_a_step_reached_twice_in_one_superstep_runs_once_with_both_outputs() -> None:
    a, b, c = named("a", "b", "c")
    workflow = Workflow("w").edge(a, c).edge(b, c)
    tasks, _ = workflow.route([done("a", 1), done("b", 2)], ImmutableState(), {})
    assert tasks == [StepTask(step="c", input={"a": 1, "b": 2})]


def test_a_branch_routes_on_the_state_and_the_output() -> None:
    review, write, publish = named("review", "write", "publish")
    workflow = Workflow("w").branch(
        review,
        lambda state, output: "write" if state.get("rounds", 0) < 1 else [publish.name],
        targets=[write, publish],
    )
    tasks, _ = workflow.route([done("review", "meh")], ImmutableState(), {})
    assert tasks == [StepTask(step="write", input="meh")]
    tasks, _ = workflow.route([done("review", "ok")], ImmutableState({"rounds": 1}), {})
    assert tasks == [StepTask(step="publish", input="ok")]


def test_a_branch_may_end_its_path() -> None:
    (a,) = named("a")
    workflow = Workflow("w").branch(a, lambda state, output: END)
    assert workflow.route([done("a", 1)], ImmutableState(), {}) == ([], {})


def test_a_router_choosing_an_undeclared_target_is_named() -> None:
    a, b = named("a", "b")
    workflow = Workflow("w").add(b).branch(a, lambda state, output: "c", targets=[b])
    with pytest.raises(ValueError, match=r"after step 'a' chose 'c'"):
        workflow.route([done("a", 1)], ImmutableState(), {})


def test_merge_policy_is_the_strictest_of_the_joins_fed() -> None:
    a, b, c, d, e = named("a", "b", "c", "d", "e")
    workflow = Workflow("w").join([a, b], c, merge="combine_lists").join([b, d], e, merge="raise")
    assert workflow.merge_policy(["a"]) == "combine_lists"
    assert workflow.merge_policy(["a", "b"]) == "raise"
    assert workflow.merge_policy(["c"]) == "last_write_wins"
