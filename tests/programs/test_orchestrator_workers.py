"""workflows/orchestrator_workers.py: the planner decides the fan-out width at run time."""

from __future__ import annotations

from types import ModuleType

import anyio
import pytest

from agent_threads import MemoryStore
from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, load_program


@pytest.fixture(scope="module")
def program() -> ModuleType:
    return load_program("orchestrator_workers")


async def test_the_plan_decides_how_many_workers_run_at_once(
    program: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        two, four = await program.demo(MemoryStore(), program.Models())
    for run, width in ((two, 2), (four, 4)):
        workers = [f"worker-{i}" for i in range(1, width + 1)]
        assert run.sub_thread_keys == ("main", "planner", *workers, "synthesizer")
        steps = {r.step for r in run.execution.history if r.superstep == 1}
        assert steps == {f"worker_{i}" for i in range(1, width + 1)}
        assert run.execution.history[-1].step == "synthesize"
        assert len(run.state["results"]) == width
        assert f"all {width} regions" in run.state["answer"]


async def test_a_failed_worker_is_rolled_back_and_retried_alone(
    program: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        run, _ = await program.demo(MemoryStore(), program.Models())
    attempts = [(r.step, r.attempt, r.status) for r in run.execution.history if r.superstep == 1]
    assert sorted(attempts) == [
        ("worker_1", 1, "completed"),
        ("worker_2", 1, "failed"),
        ("worker_2", 2, "completed"),
    ]
    failed = next(r for r in run.execution.history if r.status == "failed")
    assert failed.branch is not None and "SearchTimeout" in (failed.error or "")
    sub = await run.get_sub_thread("worker-2")
    assert len((await sub.at(failed.branch)).messages) == 2  # the attempt's partial messages
    assert [m.role for m in sub.messages] == ["system", "user", "assistant", "tool", "assistant"]


async def test_orchestrator_runs_on_an_openai_compatible_server(
    program: ModuleType, fake_model: FakeChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        await program.start(program.parse_args(["--model", "fake-model"]))
    out = capsys.readouterr().out
    assert out.count("the planner chose 2 workers") == 2  # the fake plans 2 subtasks
    assert "worker_2's failed attempt was rolled back" in out
    assert_valid_traffic(fake_model)
