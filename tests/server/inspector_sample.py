"""A sample store for the inspector's browser tests and `scripts/screenshots.py`.

Two chat threads (one with thinking, a tool call and its result, usage, a checkpoint,
and a fork holding a fork of its own), a thread of another project, and a workflow run
paused on an interrupt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import uvicorn
from fastapi import FastAPI

from agent_threads import ChatMessageThread, Message, ThreadStore
from agent_threads.messages import ThinkingPart, Usage, tool_call
from agent_threads.workflows import StepContext, Workflow, step

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
"""How the tests and the screenshots start Debian's Chromium (no network, no sandbox)."""


@contextmanager
def serving(app: FastAPI) -> Iterator[str]:
    """uvicorn serving `app` on a free loopback port in a thread: its base URL."""
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(10)


@dataclass(frozen=True)
class Sample:
    """The ids the tests look for."""

    trip: str
    fork: str
    fork_of_fork: str
    other: str
    run: str
    checkpoint: str
    call_id: str


async def build_sample(store: ThreadStore) -> Sample:
    """Fill `store` with the sample threads and run."""
    trip = await ChatMessageThread.create(
        store, title="Trip to Lisbon", tags={"project": "travel", "team": "ops"}
    )
    call = tool_call("weather", {"city": "Lisbon", "days": 3}, call_id="call_weather_1")
    question = Message.user("What will the weather be in Lisbon this weekend?")
    asking = Message.assistant(
        "Let me look that up.",
        tool_calls=[call],
        thinking=ThinkingPart(text="The user wants a forecast; call the weather tool."),
        usage=Usage(input_tokens=120, output_tokens=30, cost=0.0012),
    )
    await trip.on_new_messages([question, asking])
    await trip.on_new_messages(
        [Message.tool_result(call.call_id, {"saturday": "sunny, 24C", "sunday": "cloudy, 21C"})]
    )
    checkpoint = await trip.checkpoint("forecast-fetched")
    await trip.on_new_messages(
        [
            Message.assistant(
                "Saturday is sunny (24C); Sunday is cloudy (21C).",
                usage=Usage(input_tokens=210, output_tokens=18, cost=0.0009),
            ),
            Message.user("Great, book a table for Saturday evening."),
        ]
    )
    fork = await trip.fork(asking.id, title="Trip to Lisbon (Porto instead)")
    await fork.on_new_messages([Message.user("Actually, check Porto instead.")])
    fork_of_fork = await fork.fork(title="Trip to Porto (by train)")
    await fork_of_fork.on_new_messages([Message.user("And the train times, please.")])
    other = await ChatMessageThread.create(
        store, title="Flaky test triage", tags={"project": "eng"}
    )
    await other.on_new_messages([Message.user("test_events fails one run in fifty")])

    @step
    async def draft(ctx: StepContext) -> str:
        await ctx.emit(Message.assistant("A draft of the release notes."))
        return "drafted"

    @step(agent="editor")
    async def approve(ctx: StepContext) -> Any:
        return await ctx.interrupt({"question": "publish the notes?"})

    run = await Workflow("release-notes").edge(draft, approve).run(store=store, title="Release 1.4")
    return Sample(
        trip=trip.id,
        fork=fork.id,
        fork_of_fork=fork_of_fork.id,
        other=other.id,
        run=run.id,
        checkpoint=checkpoint.id,
        call_id=call.call_id,
    )
