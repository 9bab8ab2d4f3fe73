"""Running a command's library calls on the store a URL names, and the options every command takes.

`on_store(url, action)` opens the store, awaits `action(store)` on anyio's default
backend (asyncio: the SQLite, Redis and PostgreSQL drivers need it), closes the store
and returns what `action` returned; the command then shapes that for a person or, with
`--json`, for a script. A command that only reads refuses a SQLite file or JSON-file
directory that does not exist (opening one would create it empty).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import anyio
import typer

from agent_threads.cli.errors import BAD_INPUT, NOT_FOUND, CommandError
from agent_threads.stores.base import ThreadStore, redact_url
from agent_threads.stores.jsonfile import JsonFileStore
from agent_threads.stores.sqlite import SQLiteStore
from agent_threads.stores.urls import open_store

T = TypeVar("T")

JsonOption = Annotated[
    bool, typer.Option("--json", help="Print JSON for scripts instead of tables and text.")
]
"""`--json`: the answer as JSON on stdout (the library's models, dumped)."""

DebugOption = Annotated[
    bool,
    typer.Option("--debug", help="On an error, show its traceback (also $AGENT_THREADS_DEBUG=1)."),
]
"""`--debug`: let an error through with its traceback instead of one line."""


TagOption = Annotated[
    list[str],
    typer.Option("--tag", help='A tag as key=value (or key alone, for the value ""); repeatable.'),
]
"""`--tag key=value`, repeatable: read with `parse_tags`."""


def parse_tags(values: list[str]) -> dict[str, str]:
    """`key=value` options as tags (`key` alone is the tag with value "").

    The library checks the keys and values; here only a key given twice is refused.

    Raises:
        CommandError: a key is given twice.
    """
    tags: dict[str, str] = {}
    for value in values:
        key, _, item = value.partition("=")
        if key in tags:
            raise CommandError(f"--tag: the key {key!r} is given twice", code=BAD_INPUT)
        tags[key] = item
    return tags


def _missing(store: ThreadStore) -> str | None:
    """The file or directory a local store lives in, if it does not exist."""
    if isinstance(store, SQLiteStore) and store.path != ":memory:":
        return None if os.path.exists(store.path) else store.path
    if isinstance(store, JsonFileStore):
        return None if store.directory.is_dir() else str(store.directory)
    return None


def opened(url: str, *, existing: bool) -> ThreadStore:
    """The store `url` names, not connected yet.

    Raises:
        InvalidValueError: the URL is malformed or its scheme unknown.
        CommandError: `existing` and the store's file or directory does not exist.
    """
    store = open_store(url)
    missing = _missing(store) if existing else None
    if missing is not None:
        raise CommandError(
            f"store {redact_url(url)}: {missing} does not exist (check --store or"
            " $AGENT_THREADS_STORE; commands that write create it)",
            code=NOT_FOUND,
        )
    return store


def on_store(
    url: str, action: Callable[[ThreadStore], Awaitable[T]], *, existing: bool = True
) -> T:
    """Open the store `url` names, await `action(store)`, close the store; the result.

    `existing=False` lets a command that writes create a new local store.
    """
    store = opened(url, existing=existing)

    async def main() -> T:
        async with store:
            return await action(store)

    return anyio.run(main)


__all__ = ["DebugOption", "JsonOption", "TagOption", "on_store", "opened", "parse_tags"]
