"""workflows/evaluator_optimizer.py: drafts on forks until the critic accepts one."""

from __future__ import annotations

from types import ModuleType

import anyio
import pytest

from agent_threads import ChatMessageThread, MemoryStore
from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, load_program


@pytest.fixture(scope="module")
def program() -> ModuleType:
    return load_program("evaluator_optimizer")


async def test_the_loop_ends_when_the_critic_accepts(
    program: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        run = await program.demo(MemoryStore(), program.Models())
    steps = [r.step for r in run.execution.history]
    assert steps == ["write", "critique"] * 3 + ["keep"]
    assert run.state["review"]["accept"] is True and run.state["kept"] == 3


async def test_each_draft_is_a_fork_and_the_best_is_kept(
    program: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MemoryStore()
    with anyio.fail_after(30):
        run = await program.demo(store, program.Models())
    writer = await run.get_sub_thread("writer")
    drafts = [await ChatMessageThread.load(d["thread"], store=store) for d in run.state["drafts"]]
    assert drafts[0].parent_id == writer.id
    assert [d.parent_id for d in drafts[1:]] == [d.id for d in drafts[:-1]]
    assert [len(d.messages) for d in drafts] == [3, 5, 7]  # + notes and a draft per round
    assert [d.messages[-1].text for d in drafts] == list(program.DRAFTS)
    assert [m.role for m in writer.messages] == ["system", "user", "assistant"]
    assert writer.messages[-1].text == program.DRAFTS[-1]
    assert writer.messages[-1].metadata["kept_from"] == drafts[-1].id


async def test_evaluator_runs_on_an_openai_compatible_server(
    program: ModuleType, fake_model: FakeChatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with anyio.fail_after(30):
        await program.start(program.parse_args(["--model", "fake-model"]))
    assert "2 rounds; the critic accepted" in capsys.readouterr().out  # accepted the 2nd time
    assert_valid_traffic(fake_model)
