"""workflows/routing.py: triage hands each request to one specialist."""

from __future__ import annotations

from types import ModuleType

import anyio
import pytest

from agent_threads import MemoryStore
from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, load_program


@pytest.fixture(scope="module")
def routing() -> ModuleType:
    return load_program("routing")


async def test_each_request_reaches_its_specialist_only(
    routing: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        runs = await routing.demo(MemoryStore(), routing.Models())
    chosen = [run.state["specialist"] for run in runs[:3]]
    assert chosen == ["billing", "technical", "accounts"]
    for run, name in zip(runs, chosen, strict=False):
        assert run.sub_thread_keys == ("main", "triage", name)
        specialist = await run.get_sub_thread(name)
        roles = [m.role for m in specialist.messages]
        assert roles == ["system", "user", "assistant", "tool", "assistant"]
    triage = await runs[0].get_sub_thread("triage")
    assert triage.messages[2].tool_calls[0].name == "transfer"
    assert triage.messages[3].tool_results[0].call_id == triage.messages[2].tool_calls[0].call_id


async def test_a_fork_after_triage_reruns_only_the_specialist(
    routing: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        runs = await routing.demo(MemoryStore(), routing.Models())
    original, fork = runs[0], runs[-1]
    assert [r.step for r in fork.execution.history] == ["triage", "billing"]
    assert fork.execution.history[0].id == original.execution.history[0].id  # not re-run
    assert fork.state["answer"] != original.state["answer"]
    assert "re-ran only ['billing']" in capsys.readouterr().out


async def test_routing_runs_on_an_openai_compatible_server(
    routing: ModuleType, fake_model: FakeChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        await routing.start(routing.parse_args(["--model", "fake-model"]))
    out = capsys.readouterr().out
    assert "triage chose 'billing'" in out  # the fake picks the first enum value
    assert "re-ran only ['billing']" in out
    assert_valid_traffic(fake_model)
    forced = [r for r in fake_model.requests if isinstance(r.get("tool_choice"), dict)]
    assert {r["tool_choice"]["function"]["name"] for r in forced} == {"transfer"}
