"""`agent-threads ls`, `fork` and `rm`: list threads, branch one, delete one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any

import typer
from rich.table import Table

from agent_threads.cli import render
from agent_threads.cli.errors import reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, tags_text, when
from agent_threads.cli.runner import (
    DebugOption,
    JsonOption,
    TagOption,
    on_store,
    parse_tags,
)
from agent_threads.errors import ThreadNotFoundError
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.listing import MAX_LIMIT, ThreadPage, ThreadSummary, list_threads

ThreadId = Annotated[str, typer.Argument(help="The thread's id.", show_default=False)]


async def load_thread(store: ThreadStore, thread_id: str) -> AgentThread:
    """A handle on a thread of any kind; a chat thread's is lazy (messages read when asked).

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    try:
        return await ChatMessageThread.load(thread_id, store=store, lazy=True)
    except ThreadNotFoundError:  # not a chat thread: a workflow, or nothing
        return await AgentThread.load(thread_id, store=store)


async def heads(store: ThreadStore, summaries: Iterable[ThreadSummary]) -> dict[str, int]:
    """How many messages each chat thread holds now (its head), by id.

    A summary's `message_count` counts the messages of its stats, which a fork resets;
    the head is the thread's length. One record read per thread; a thread deleted
    meanwhile is left out.
    """
    found: dict[str, int] = {}
    for summary in summaries:
        if summary.kind == ChatMessageThread.type_name:
            with contextlib.suppress(ThreadNotFoundError):
                thread = await ChatMessageThread.load(summary.id, store=store, lazy=True)
                found[summary.id] = thread.head
    return found


def _kind(summary: ThreadSummary) -> str:
    return summary.kind if summary.run_status is None else f"{summary.kind} ({summary.run_status})"


def summaries_table(summaries: Sequence[ThreadSummary], lengths: Mapping[str, int]) -> Table:
    """Threads as a table: id, kind, title, tags, messages (`lengths`), last update."""
    table = render.table("id", "kind", "title", "tags", "messages", "updated")
    for s in summaries:
        table.add_row(
            s.id,
            _kind(s),
            s.title or "",
            tags_text(s.tags),
            str(lengths[s.id]) if s.id in lengths else "-",
            when(s.updated_at),
        )
    return table


def with_head(summary: ThreadSummary, lengths: Mapping[str, int]) -> dict[str, Any]:
    """A summary for scripts, with `head`: the messages a chat thread holds (None otherwise)."""
    return {**summary.model_dump(mode="json"), "head": lengths.get(summary.id)}


def list_command(
    store: StoreOption,
    tag: TagOption = [],  # noqa: B006 - typer reads the default, never changes it
    kind: Annotated[
        str | None, typer.Option(help="Only threads of this kind: chat, workflow.")
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="Only threads whose title contains this (any case).")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, max=MAX_LIMIT, help="Threads per page.")] = 20,
    after: Annotated[
        str | None, typer.Option(help="The cursor a previous page printed: the next page.")
    ] = None,
    oldest_first: Annotated[
        bool, typer.Option("--oldest-first", help="Oldest update first (default: newest).")
    ] = False,
    sub_threads: Annotated[
        bool, typer.Option("--sub-threads", help="List workflow sub-threads too.")
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """List threads, most recently updated first, filtered by tags, kind and title."""
    with reported(store=store, debug=debug):
        tags = parse_tags(tag)

        async def read(opened: ThreadStore) -> tuple[ThreadPage, dict[str, int]]:
            page = await list_threads(
                opened,
                kind=kind,
                tags=tags,
                title_contains=title,
                order="asc" if oldest_first else "desc",
                limit=limit,
                after=after,
                include_sub_threads=sub_threads,
            )
            return page, await heads(opened, page.threads)

        page, lengths = on_store(store, read)
        if json_output:
            print_json(
                {
                    "threads": [with_head(s, lengths) for s in page.threads],
                    "next_cursor": page.next_cursor,
                }
            )
            return
        out = console()
        if not page.threads:
            out.print("no threads" + (" on this page" if after else ""))
        else:
            out.print(summaries_table(page.threads, lengths))
        if page.next_cursor is not None:
            out.print(f"more: add --after {page.next_cursor}", soft_wrap=True)


def fork(
    thread_id: ThreadId,
    store: StoreOption,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Fork up to and including this message (default: all of it)."),
    ] = None,
    new_id: Annotated[
        str | None, typer.Option("--id", help="The fork's id (default: a new one).")
    ] = None,
    title: Annotated[
        str | None, typer.Option(help="The fork's title (default: the thread's).")
    ] = None,
    tag: TagOption = [],  # noqa: B006
    keep_stats: Annotated[
        bool, typer.Option("--keep-stats", help="Keep the thread's usage stats (default: reset).")
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Fork a thread, whole or up to a message; the original is left as it is.

    The fork's tags are the --tag options if any are given, else the thread's.
    """
    with reported(store=store, debug=debug):
        tags = parse_tags(tag) if tag else None

        async def branch(opened: ThreadStore) -> tuple[ThreadSummary, dict[str, int]]:
            source = await load_thread(opened, thread_id)
            child = await source.fork(
                at, id=new_id, title=title, tags=tags, reset_stats=not keep_stats
            )
            summary = ThreadSummary.of(child.record)
            return summary, await heads(opened, [summary])

        child, lengths = on_store(store, branch)
        if json_output:
            print_json(with_head(child, lengths))
            return
        point = f" at message {at}" if at else ""
        size = f" ({lengths[child.id]} messages)" if child.id in lengths else ""
        console().print(f"forked {thread_id}{point} as {child.id}{size}")


def remove(
    thread_id: ThreadId,
    store: StoreOption,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Delete a thread and its checkpoints (a workflow with its sub-threads); forks stay.

    `agent-threads vacuum` then frees the messages nothing references any more.
    """
    with reported(store=store, debug=debug):

        async def delete(opened: ThreadStore) -> None:
            await (await load_thread(opened, thread_id)).delete()

        on_store(store, delete)
        if json_output:
            print_json({"id": thread_id, "deleted": True})
            return
        console().print(f"deleted {thread_id}")


__all__ = [
    "ThreadId",
    "fork",
    "heads",
    "list_command",
    "load_thread",
    "remove",
    "summaries_table",
    "with_head",
]
