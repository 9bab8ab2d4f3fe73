"""A sample store for the command line tests, and a runner that invokes the command in-process.

The sample (a SQLite file in `tmp_path`) holds what every command has something to show
of: a chat thread with a tool call, checkpoints and a state; forks of it, one rolled back
(its checkpoint log reaches messages its head no longer holds), a fork of a fork; a
thread with other tags; a workflow run paused on an interrupt.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from typer.testing import CliRunner, Result

from agent_threads import ChatMessageThread, Message, SQLiteStore, ThreadStore, tool_call
from agent_threads.cli import app
from agent_threads.workflows import StepContext, Workflow, step

LONG = "It shipped yesterday. " + "x" * 2000


@dataclass(frozen=True)
class Sample:
    """The sample store's URL and the ids of what it holds."""

    url: str
    path: Path
    messages: list[str]  # the ids of the messages of "support"


async def fill(store: ThreadStore) -> list[str]:
    """Write the sample threads into `store`; the ids of the messages of "support"."""
    support = await ChatMessageThread.create(
        store, id="support", title="Late order", tags={"env": "prod", "team": "care"}
    )
    call = tool_call("lookup_order", {"order": 42}, call_id="call_1")
    await support.on_new_messages(
        [
            Message.system("Be kind."),
            Message.user("My order is late.", author="alice"),
            Message.assistant("Let me check.", tool_calls=[call], author="bot"),
        ]
    )
    await support.checkpoint("asked")
    await support.on_new_messages(
        [Message.tool_result("call_1", {"status": "shipped"}), Message.assistant(LONG)]
    )
    await support.update_state({"mood": "calm"})
    await support.checkpoint("done")
    retry = await support.fork(support.messages[2].id, id="retry", title="Retry")
    await retry.on_new_messages([Message.assistant("Sorry! Refund issued.")])
    await retry.checkpoint("sorry")
    await retry.fork(id="retry-2")
    await retry.rollback(message_id=support.messages[2].id)
    await retry.on_new_messages([Message.assistant("Apologies: a refund is on its way.")])
    await ChatMessageThread.create(store, id="other", title="Another", tags={"env": "dev"})

    @step
    async def draft(ctx: StepContext) -> str:
        await ctx.emit(Message.assistant("a draft"))
        return "text"

    @step(agent="editor")
    async def approve(ctx: StepContext) -> Any:
        return await ctx.interrupt({"question": "publish?"})

    await Workflow("approval").edge(draft, approve).run(store=store, title="release", id="run-1")
    return [m.id for m in support.messages]


def make_sample(path: Path) -> Sample:
    async def main() -> list[str]:
        async with SQLiteStore(path) as store:
            return await fill(store)

    return Sample(f"sqlite:///{path}", path, anyio.run(main))


@pytest.fixture
def sample(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Sample:
    monkeypatch.delenv("AGENT_THREADS_STORE", raising=False)
    monkeypatch.delenv("AGENT_THREADS_DEBUG", raising=False)
    monkeypatch.setenv("COLUMNS", "200")  # Rich tables wide enough to hold whole ids
    return make_sample(tmp_path / "sample.db")


def run(*args: str, input: str | None = None) -> Result:
    """`agent-threads ARGS`, in this process."""
    return CliRunner().invoke(app, list(args), input=input, catch_exceptions=False)


def ok(*args: str, input: str | None = None) -> str:
    """The standard output of a command that must succeed."""
    result = run(*args, input=input)
    assert result.exit_code == 0, result.output
    return result.stdout


def as_json(*args: str, input: str | None = None) -> Any:
    """The parsed `--json` output of a command that must succeed."""
    return json.loads(ok(*args, "--json", input=input))


def fails(*args: str, code: int) -> str:
    """The one line a failing command prints on stderr (it must exit with `code`)."""
    result = run(*args)
    assert result.exit_code == code, (result.exit_code, result.output)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agent-threads: "), result.stderr
    assert "Traceback" not in result.output
    return lines[0]
