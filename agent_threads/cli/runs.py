"""`agent-threads runs`: workflow runs, where each stands and what it waits for.

The same library calls as the service's `/api/runs`: `list_threads(kind="workflow")`
for the list, `WorkflowThread.load` for a run's execution state (status, step history,
current and next steps, pending interrupts) and its per-agent sub-threads. Read-only:
resuming a run needs its workflow's code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent_threads.cli import render
from agent_threads.cli.errors import reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, when
from agent_threads.cli.runner import DebugOption, JsonOption, on_store
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.listing import MAX_LIMIT, ThreadSummary, list_threads
from agent_threads.threads.workflow.execution import ExecutionState, StepRecord, StepTask
from agent_threads.threads.workflow.thread import WorkflowThread

PROMPT_CHARS = 200
"""Characters of an interrupt's prompt shown in the table (`--json` has it whole)."""


def _steps(records: Iterable[StepRecord | StepTask]) -> str:
    """The names of the steps, each once, in order ("-" for none)."""
    return ", ".join(dict.fromkeys(r.step for r in records)) or "-"


def run_json(run: WorkflowThread, *, history: bool) -> dict[str, Any]:
    """A run for scripts: the shape of the service's `/api/runs/{id}` (history if asked)."""
    execution = run.execution
    summary = ThreadSummary.of(run.record)
    body: dict[str, Any] = {
        "id": run.id,
        "title": run.title,
        "workflow": execution.workflow,
        "status": execution.status,
        "superstep": execution.superstep,
        "history_length": len(execution.history),
        "current": [r.model_dump(mode="json") for r in execution.current],
        "next": [t.model_dump(mode="json") for t in execution.next],
        "interrupts": [r.model_dump(mode="json") for r in execution.interrupts],
        "error": execution.error,
        "checkpoint": execution.checkpoint,
        "sub_threads": dict(run.sub_thread_ids),
        "updated_at": summary.updated_at.isoformat(),
    }
    if history:
        body["history"] = [r.model_dump(mode="json") for r in execution.history]
        body["sub_thread_summaries"] = [
            {"key": key, "thread": ThreadSummary.of(sub.record).model_dump(mode="json")}
            for key, sub in run.sub_threads.items()
        ]
    return body


async def _runs(
    store: ThreadStore, limit: int, after: str | None
) -> tuple[list[WorkflowThread], str | None]:
    page = await list_threads(store, kind=WorkflowThread.type_name, limit=limit, after=after)
    runs = [await WorkflowThread.load(s.id, store=store) for s in page.threads]
    return runs, page.next_cursor


def _runs_table(runs: list[WorkflowThread]) -> Table:
    table = render.table(
        "id", "workflow", "title", "status", "current", "next", "waiting", "updated"
    )
    for run in runs:
        e = run.execution
        table.add_row(
            run.id,
            e.workflow or "",
            run.title or "",
            e.status,
            _steps(e.current),
            _steps(e.next),
            str(len(e.interrupts)),
            when(ThreadSummary.of(run.record).updated_at),
        )
    return table


def _history_table(history: list[StepRecord]) -> Table:
    table = render.table(
        "superstep",
        "step",
        "agent",
        "status",
        "attempt",
        "started",
        "seconds",
        "error",
        title="steps",
    )
    for r in history:
        seconds = "" if r.duration is None else f"{r.duration:.3f}"
        table.add_row(
            str(r.superstep),
            r.step,
            r.agent,
            r.status,
            str(r.attempt),
            when(r.started_at),
            seconds,
            r.error or "",
        )
    return table


def _print_waiting(out: Console, execution: ExecutionState) -> None:
    for r in execution.interrupts:
        prompt = json.dumps(r.prompt, ensure_ascii=False)
        if len(prompt) > PROMPT_CHARS:
            prompt = prompt[: PROMPT_CHARS - 1] + "…"
        out.print(Text(f"waiting: step {r.step} ({r.agent}) asks {prompt}", style="yellow"))


def print_run(run: WorkflowThread) -> None:
    """One run for a person: status, steps, what it waits for, its agents' sub-threads."""
    out = console()
    e = run.execution
    title = f" “{run.title}”" if run.title else ""
    out.print(Text(f"{run.id}{title}  {e.workflow or ''}  {e.status}", style="bold"))
    out.print(f"superstep {e.superstep}; current: {_steps(e.current)}; next: {_steps(e.next)}")
    if e.error:
        out.print(Text(f"error: {e.error}", style="red"))
    _print_waiting(out, e)
    if len(e.history):
        out.print(_history_table(list(e.history)))
    subs = render.table("key", "thread", "messages", title="sub-threads")
    for key, sub in run.sub_threads.items():
        subs.add_row(key, sub.id, str(sub.head))
    out.print(subs)


def runs(
    store: StoreOption,
    run_id: Annotated[
        str | None, typer.Argument(help="One run to show in full (default: list them).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_LIMIT, help="Runs per page.")] = 20,
    after: Annotated[
        str | None, typer.Option(help="The cursor a previous page printed: the next page.")
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List workflow runs (status, current and next steps, pending interrupts), or show one."""
    with reported(store=store, debug=debug):
        if run_id is not None:
            run = on_store(store, lambda opened: WorkflowThread.load(run_id, store=opened))
            if json_output:
                print_json(run_json(run, history=True))
            else:
                print_run(run)
            return
        found, cursor = on_store(store, lambda opened: _runs(opened, limit, after))
        if json_output:
            print_json({"runs": [run_json(r, history=False) for r in found], "next_cursor": cursor})
            return
        out = console()
        out.print(_runs_table(found) if found else "no workflow runs")
        if cursor is not None:
            out.print(f"more: add --after {cursor}", soft_wrap=True)


__all__ = ["print_run", "run_json", "runs"]
