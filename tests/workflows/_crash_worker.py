"""A child process for tests/workflows/test_processes.py: runs workflows on SQLite.

Usage:
    python _crash_worker.py run DB LOG THREAD_ID       run the team workflow (to be killed)
    python _crash_worker.py resume-team DB LOG THREAD_ID [--gate STEP | --stall STEP]
                                                       resume a run of the team workflow
    python _crash_worker.py approve DB THREAD_ID       run the approval workflow to its pause
    python _crash_worker.py resume DB THREAD_ID REPLY  resume the approval workflow

`run` and `resume-team` print one JSON line per step record change, so the parent can
kill them at a chosen point; `resume-team` ends with a line holding the run's `status`,
or the `error` that stopped it. Every step writes `start` and `done` lines to LOG, a
side-effect log outside the store (appended and fsynced), which the parent uses to count
how often steps really ran.

`--gate STEP`: STEP, after its first message, prints `{"gate": STEP}` and waits for a
line on stdin while the runner goes on (renewing its lease). `--stall STEP`: the same
with `{"stall": STEP}`, but the wait blocks the whole event loop, lease renewals
included, as a long pause of the process would.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path
from typing import Any

import anyio

from agent_threads import (
    LeaseLostError,
    Message,
    RunInProgressError,
    SQLiteStore,
    StepRecord,
    tool_call,
)
from agent_threads.workflows import END, Step, StepContext, StepResult, Workflow, step

RESEARCHERS = ("r1", "r2", "r3", "r4")
MESSAGES = {"plan": 2, "write": 2, "review": 1, **dict.fromkeys(RESEARCHERS, 3)}
"""How many messages each step emits, one `emit` (one store write) at a time."""

RUN_LEASE = 0.5
"""Seconds the lease of a `run` lasts: the parent resumes each killed run once it expires."""

LEASE = 1.0
"""Seconds the lease of a `resume-team` lasts (renewed every third of it while it runs)."""


def marker(ctx: StepContext, index: int) -> str:
    """The text of a step's `index`-th message: whose attempt wrote it."""
    return f"{ctx.record.superstep}/{ctx.step}/{ctx.attempt}/{index}"


def log_event(log: Path, event: str, ctx: StepContext) -> None:
    line = json.dumps(
        {
            "event": event,
            "superstep": ctx.record.superstep,
            "step": ctx.step,
            "attempt": ctx.attempt,
        }
    )
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)


async def emit(ctx: StepContext, index: int) -> None:
    await anyio.sleep(random.uniform(0, 0.003))
    text = marker(ctx, index)
    if index == 0 and ctx.step.startswith("r"):
        call = tool_call("search", {"query": ctx.step})
        await ctx.emit(
            [
                Message.assistant(text, tool_calls=[call]),
                Message.tool_result(call.call_id, "ok"),
            ]
        )
    else:
        await ctx.emit(Message.assistant(text))


async def hold(mode: str, step_name: str) -> None:
    """Wait for a line on stdin: alongside the runner (`gate`) or blocking it (`stall`)."""
    print(json.dumps({mode: step_name}), flush=True)
    if mode == "gate":
        await anyio.to_thread.run_sync(sys.stdin.readline)
    else:
        sys.stdin.readline()  # blocks the event loop on purpose: a stalled process


def team(log: Path, *, hold_at: tuple[str, str] | None = None) -> Workflow:
    """plan -> r1..r4 (concurrently) -> write -> review -(once)-> write -> review -> END.

    `hold_at` is (mode, step): that step holds (see `hold`) after its first message.
    """

    def make(name: str, agent: str) -> Step:
        async def body(ctx: StepContext) -> StepResult:
            log_event(log, "start", ctx)
            for index in range(MESSAGES[name]):
                await emit(ctx, index)
                if index == 0 and hold_at is not None and hold_at[1] == name:
                    await hold(*hold_at)
            log_event(log, "done", ctx)
            ran = [*ctx.state.get("ran", ()), f"{ctx.record.superstep}/{name}"]
            patch: dict[str, Any] = {"ran": ran}
            if name == "write":
                patch["drafts"] = ctx.state.get("drafts", 0) + 1
            return StepResult(output=f"{name} output", patch=patch)

        return step(name=name, agent=agent)(body)

    plan, write, review = make("plan", "planner"), make("write", "writer"), make("review", "critic")
    researchers = [make(name, name) for name in RESEARCHERS]
    workflow = Workflow("team", merge="combine_lists")
    workflow.edge(plan, researchers).join(researchers, write, merge="combine_lists")
    workflow.edge(write, review)
    workflow.branch(review, lambda state, output: "write" if state["drafts"] < 2 else END)
    return workflow


def approval() -> Workflow:
    """draft -> approve (waits for a person) -> END."""

    @step
    async def draft(ctx: StepContext) -> str:
        await ctx.emit(Message.assistant("the draft"))
        return "the draft"

    @step
    async def approve(ctx: StepContext) -> Any:
        answer = await ctx.interrupt({"question": "publish?", "draft": ctx.input})
        await ctx.emit(Message.user(f"answer: {answer}"))
        return {"published": answer == "yes", "pid": os.getpid()}

    return Workflow("approval").edge(draft, approve)


def report(record: StepRecord) -> None:
    print(json.dumps({"step": record.step, "status": record.status}), flush=True)


async def resume_team(store: SQLiteStore, log: str, thread_id: str, *options: str) -> None:
    hold_at = (options[0].removeprefix("--"), options[1]) if options else None
    workflow = team(Path(log), hold_at=hold_at)
    try:
        run = await workflow.resume(thread_id, store=store, on_step=report, lease_duration=LEASE)
    except RunInProgressError as exc:
        print(json.dumps({"error": type(exc).__name__, "owner": exc.owner}), flush=True)
    except LeaseLostError as exc:
        print(json.dumps({"error": type(exc).__name__, "holder": exc.holder}), flush=True)
    else:
        print(json.dumps({"status": run.execution.status}), flush=True)


async def main(*argv: str) -> None:
    command, db, *args = argv
    async with SQLiteStore(db) as store:
        if command == "run":
            log, thread_id = args
            workflow = team(Path(log))
            await workflow.run(
                "agents", store=store, id=thread_id, on_step=report, lease_duration=RUN_LEASE
            )
        elif command == "resume-team":
            await resume_team(store, *args)
        elif command == "approve":
            run = await approval().run(store=store, id=args[0])
            print(json.dumps({"status": run.execution.status, "pid": os.getpid()}), flush=True)
        elif command == "resume":
            thread_id, reply = args
            run = await approval().resume(thread_id, store=store, reply=reply)
            print(json.dumps({"status": run.execution.status}), flush=True)
        else:
            raise SystemExit(f"unknown command {command!r}")


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:])
