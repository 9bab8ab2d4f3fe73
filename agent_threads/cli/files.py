"""`agent-threads export` and `import`: a thread as the versioned JSON document, and back.

`export` writes `await thread.export()` (the document `AgentThread.from_json` reads, with
the thread's checkpoints); `import` reads one or more such files (`-` is stdin) into the
store. `--as NEW_ID` imports a thread under another id, so a thread can be imported
next to itself; a workflow's sub-threads then get new ids too.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from agent_threads.cli.errors import BAD_INPUT, CommandError, naming, reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, progress_bar
from agent_threads.cli.runner import DebugOption, JsonOption, on_store, opened
from agent_threads.cli.threads import ThreadId, heads, load_thread, summaries_table, with_head
from agent_threads.core.ids import new_id, validate_id
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.listing import ThreadSummary

STDIN = "-"
"""The file name that stands for standard input."""


def export(
    thread_id: ThreadId,
    store: StoreOption,
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write to this file (default: standard output)."),
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Export a thread, its history and checkpoints, as one JSON document.

    `agent-threads import` (or `AgentThread.from_json`) reads it back, into any store.
    """
    with reported(store=store, debug=debug):

        async def read(opened: ThreadStore) -> str:
            with progress_bar(quiet=json_output or output is None) as bar:
                bar.add_task(f"exporting {thread_id}", total=None)
                return await (await load_thread(opened, thread_id)).export()

        document = on_store(store, read)
        if output is None:
            typer.echo(document)
            return
        output.write_text(document + "\n", encoding="utf-8")
        size = output.stat().st_size
        if json_output:
            print_json({"id": thread_id, "file": str(output), "bytes": size})
        else:
            console().print(f"exported {thread_id} to {output} ({size:,} bytes)")


def _read_document(name: str) -> dict[str, Any]:
    with naming(f"file {name}"):
        text = sys.stdin.read() if name == STDIN else Path(name).read_text(encoding="utf-8")
        document = json.loads(text)
        if not isinstance(document, dict):
            raise CommandError(f"file {name}: not a thread export (a JSON object)", code=BAD_INPUT)
        return document


def _renamed(document: dict[str, Any], new_id_: str) -> dict[str, Any]:
    """The export document of the same thread under another id (new sub-thread ids too)."""
    renamed = {**document, "id": validate_id(new_id_, what="--as")}
    subs = document.get("sub_threads")
    if isinstance(subs, dict):
        renamed["sub_threads"] = {
            key: {**sub, "id": new_id()} if isinstance(sub, dict) else sub
            for key, sub in subs.items()
        }
    return renamed


def import_command(
    files: Annotated[
        list[str],
        typer.Argument(help="Export files to import (- reads standard input).", show_default=False),
    ],
    store: StoreOption,
    as_id: Annotated[
        str | None,
        typer.Option("--as", help="Import the thread under this id (one file only)."),
    ] = None,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Import threads from export files; each keeps its id unless --as gives another."""
    with reported(store=store, debug=debug):
        opened(store, existing=False)  # a bad URL is told before any file is read
        if as_id is not None and len(files) != 1:
            raise CommandError("--as names the id of one thread: give one file", code=BAD_INPUT)
        documents = [(name, _read_document(name)) for name in files]
        if as_id is not None:
            documents = [(name, _renamed(doc, as_id)) for name, doc in documents]

        async def load(opened: ThreadStore) -> tuple[list[ThreadSummary], dict[str, int]]:
            imported: list[ThreadSummary] = []
            with progress_bar(quiet=json_output or len(documents) < 2) as bar:
                task = bar.add_task("importing", total=len(documents))
                for name, document in documents:
                    with naming(f"file {name}"):
                        thread = await AgentThread.from_json(document, opened)
                    imported.append(ThreadSummary.of(thread.record))
                    bar.advance(task)
            return imported, await heads(opened, imported)

        imported, lengths = on_store(store, load, existing=False)
        if json_output:
            print_json({"threads": [with_head(s, lengths) for s in imported]})
            return
        console().print(summaries_table(imported, lengths))


__all__ = ["export", "import_command"]
