"""What the commands share: the `--store` option, and failing with one line."""

from __future__ import annotations

import os
from typing import Annotated, NoReturn

import typer

from agent_threads.stores.urls import DEFAULT_STORE_URL, STORE_URL_ENV


def _default_store() -> str:
    return os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL


StoreOption = Annotated[
    str,
    typer.Option(
        "--store",
        default_factory=_default_store,
        show_default=f"${STORE_URL_ENV} or {DEFAULT_STORE_URL}",
        help="The store URL: memory://, sqlite:///rel.db, sqlite:////abs.db, file:///dir,"
        " redis://host:port/db, postgresql://user@host:port/db.",
    ),
]
"""`--store URL` (default `$AGENT_THREADS_STORE`, else `sqlite:///threads.db`)."""


def fail(message: str, *, code: int = 2) -> NoReturn:
    """Print one line naming what is wrong to stderr and exit with `code`."""
    typer.echo(f"agent-threads: {message}", err=True)
    raise typer.Exit(code)
