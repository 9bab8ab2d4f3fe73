"""workflows/human_approval.py: one process pauses at the interrupt, another resumes it."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import anyio
import pytest

from agent_threads import MemoryStore, SQLiteStore, WorkflowThread
from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, load_program, model_env, run_program


@pytest.fixture(scope="module")
def program() -> ModuleType:
    return load_program("human_approval")


def test_a_second_process_resumes_the_paused_run(
    program: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "refunds.db")
    started = run_program("human_approval", ["start", db])
    assert "status 'paused'" in started.stdout
    assert "supervisor) asks: Refund 39.80 EUR for order 1042?" in started.stdout
    program.main(["status", db])
    assert "'paused' at superstep 1" in capsys.readouterr().out
    approved = run_program("human_approval", ["approve", db, "--answer", "yes"])
    assert "status 'completed'" in approved.stdout
    assert "issue_refund" in approved.stdout
    anyio.run(check_history, tmp_path / "refunds.db")


async def check_history(db: Path) -> None:
    async with SQLiteStore(db) as store:
        run = await WorkflowThread.load("refund-1042", store=store)
    steps = [(r.step, r.attempt, r.status) for r in run.execution.history]
    assert steps == [
        ("investigate", 1, "completed"),
        ("approve", 1, "interrupted"),
        ("approve", 2, "completed"),
        ("refund", 1, "completed"),
    ]
    outputs = [r.output for r in run.execution.history if r.step in ("investigate", "refund")]
    pids = [o.get("pid") for o in outputs if isinstance(o, dict)]
    assert len(pids) == 2 and pids[0] != pids[1]  # two processes, and investigate ran once
    assert run.state["approved"] is True and "39.80 EUR" in run.state["letter"]


async def test_a_no_declines_the_refund(
    program: ModuleType, capsys: pytest.CaptureFixture[str]
) -> None:
    store = MemoryStore()
    desk = program.refund_desk(program.Models())
    with anyio.fail_after(30):
        run = await desk.run(program.COMPLAINT, store=store)
        assert run.execution.status == "paused"
        run = await desk.resume(run.id, store=store, reply="no")
    assert [r.step for r in run.execution.history][-1] == "decline"
    assert run.state["approved"] is False and "could not approve" in run.state["letter"]


def test_start_refuses_a_run_id_already_in_the_file(
    program: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "refunds.db")
    program.main(["start", db])
    with pytest.raises(SystemExit, match="already holds run 'refund-1042'"):
        program.main(["start", db])


def test_human_approval_runs_on_an_openai_compatible_server(
    fake_chat: FakeChatServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "refunds.db")
    env = model_env(fake_chat)
    run_program("human_approval", ["start", db, "--model", "fake-model"], env=env)
    before = len(fake_chat.requests)
    done = run_program(
        "human_approval", ["approve", db, "--answer", "yes", "--model", "fake-model"], env=env
    )
    assert "status 'completed'" in done.stdout
    assert len(fake_chat.requests) > before  # the second process called the model too
    assert_valid_traffic(fake_chat)
