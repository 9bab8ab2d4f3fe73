"""`agent-threads log`, `checkpoint` and `rollback`: a thread's checkpoints, and moving it back."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

import typer
from rich.table import Table

from agent_threads.cli import render
from agent_threads.cli.errors import BAD_INPUT, CommandError, reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, short_hash, when
from agent_threads.cli.runner import DebugOption, JsonOption, on_store
from agent_threads.cli.threads import ThreadId, heads, load_thread, with_head
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.listing import ThreadSummary
from agent_threads.threads.workflow.checkpoints import WorkflowCheckpoint
from agent_threads.timetravel.checkpoint import Checkpoint


def checkpoint_json(checkpoint: Checkpoint) -> dict[str, Any]:
    """A checkpoint for scripts: everything but its piece table."""
    return checkpoint.model_dump(mode="json", exclude={"ranges"})


def _size(checkpoint: Checkpoint) -> str:
    if isinstance(checkpoint, WorkflowCheckpoint):
        return f"{checkpoint.history_length} steps ({checkpoint.status})"
    return str(checkpoint.message_count)


def checkpoints_table(checkpoints: Sequence[Checkpoint]) -> Table:
    """Checkpoints, oldest first: time, label, why, size, state hash."""
    table = render.table("#", "id", "time", "label", "reason", "messages", "state")
    for number, c in enumerate(checkpoints):
        table.add_row(
            str(number),
            c.id,
            when(c.created_at),
            c.label or "",
            c.reason,
            _size(c),
            short_hash(c.state_digest),
        )
    return table


def log(
    thread_id: ThreadId,
    store: StoreOption,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List a thread's checkpoints, oldest first, with message counts and state hashes."""
    with reported(store=store, debug=debug):

        async def read(opened: ThreadStore) -> Sequence[Checkpoint]:
            return await (await load_thread(opened, thread_id)).checkpoints()

        checkpoints = on_store(store, read)
        if json_output:
            print_json(
                {"thread_id": thread_id, "checkpoints": list(map(checkpoint_json, checkpoints))}
            )
            return
        out = console()
        if checkpoints:
            out.print(checkpoints_table(checkpoints))
        else:
            out.print(f"{thread_id} has no checkpoints")


def checkpoint(
    thread_id: ThreadId,
    store: StoreOption,
    label: Annotated[
        str | None, typer.Option(help="A label to find it by (`show --at LABEL`).")
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Record the thread as it is now; `show --at` and `rollback` return to it."""
    with reported(store=store, debug=debug):

        async def record(opened: ThreadStore) -> Checkpoint:
            return await (await load_thread(opened, thread_id)).checkpoint(label)

        made = on_store(store, record)
        if json_output:
            print_json(checkpoint_json(made))
            return
        named = f" {made.label!r}" if made.label else ""
        size = (
            _size(made)
            if isinstance(made, WorkflowCheckpoint)
            else f"{made.message_count} messages"
        )
        console().print(f"checkpoint {made.id}{named} of {thread_id}: {size}")


async def _roll_back(
    store: ThreadStore, thread_id: str, to_checkpoint: str | None, to_message: str | None
) -> tuple[ThreadSummary, Checkpoint, dict[str, int]]:
    thread = await load_thread(store, thread_id)
    try:
        undo = await thread.rollback(to_checkpoint, message_id=to_message)
    except TypeError as exc:  # a workflow is rolled back to a checkpoint only
        raise CommandError(f"thread {thread_id!r}: {exc}", code=BAD_INPUT) from exc
    summary = ThreadSummary.of(thread.record)
    return summary, undo, await heads(store, [summary])


def rollback(
    thread_id: ThreadId,
    store: StoreOption,
    to_checkpoint: Annotated[
        str | None, typer.Option("--to-checkpoint", help="A checkpoint id or label.")
    ] = None,
    to_message: Annotated[
        str | None,
        typer.Option("--to-message", help="A message id: it stays, those after it leave."),
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Move a thread back to a checkpoint or a message; nothing is deleted.

    The thread's head before the rollback is saved as a checkpoint first: the command
    prints how to roll back to it, which undoes the rollback.
    """
    with reported(store=store, debug=debug):
        if (to_checkpoint is None) == (to_message is None):
            raise CommandError(
                "give exactly one of --to-checkpoint and --to-message", code=BAD_INPUT
            )
        thread, undo, lengths = on_store(
            store, lambda opened: _roll_back(opened, thread_id, to_checkpoint, to_message)
        )
        if json_output:
            print_json({"thread": with_head(thread, lengths), "undo": checkpoint_json(undo)})
            return
        target = to_checkpoint if to_message is None else f"message {to_message}"
        console().print(
            f"rolled {thread_id} back to {target}: {lengths.get(thread_id, '?')} messages now\n"
            f"undo: agent-threads rollback {thread_id} --to-checkpoint {undo.id}",
            soft_wrap=True,
        )


__all__ = ["checkpoint", "checkpoint_json", "checkpoints_table", "log", "rollback"]
