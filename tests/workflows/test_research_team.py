"""The research-team program (workflows/research_team.py, what `make demo` runs) keeps working."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from agent_threads import MemoryStore
from tests.programs.programs import load_program


@pytest.fixture(scope="module")
def sample() -> ModuleType:
    return load_program("research_team")


async def test_the_strict_reviewer_sends_the_writer_back_once(sample: ModuleType) -> None:
    run = await sample.research_team().run(sample.QUESTION, store=MemoryStore())
    steps = [r.step for r in run.execution.history]
    assert steps[0] == "plan" and steps[4:] == ["write", "review", "write", "review"]
    assert sorted(steps[1:4]) == ["research_costs", "research_rules", "research_safety"]
    assert run.state["drafts"] == 2 and len(run.state["sources"]) == 6
    costs = (await run.get_sub_thread("cost-analyst")).messages
    assert [m.role for m in costs] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]


async def test_human_approval_pauses_until_a_reply(sample: ModuleType) -> None:
    store = MemoryStore()
    team = sample.research_team(policy="lenient", human_approval=True)
    run = await team.run(sample.QUESTION, store=store)
    assert run.execution.status == "paused"
    run = await team.resume(run.id, store=store, reply="no")
    assert run.execution.status == "completed" and run.state["published"] is False


async def test_the_demo_runs_start_to_end(
    sample: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    await sample.demo(tmp_path / "demo.db")
    out = capsys.readouterr().out
    assert "rolled back and re-ran ['research_rules']" in out
    assert "the fork re-ran only ['write', 'review']" in out
    assert "published=True" in out
