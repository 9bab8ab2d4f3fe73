"""`agent-threads serve`: the HTTP service on uvicorn, over the store a URL names."""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Annotated

import typer

from agent_threads.cli.options import StoreOption, fail
from agent_threads.errors import InvalidValueError

_MIB = 2**20


def _launcher() -> ModuleType:
    """The service's launcher, imported only here: the other commands need no server."""
    try:
        return importlib.import_module("agent_threads.server.launch")
    except ImportError as exc:
        fail(f"agent-threads serve needs: pip install 'agent-threads-framework[server]' ({exc})")


def serve(
    store: StoreOption,
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.")] = 8080,
    api_key: Annotated[
        list[str],
        typer.Option(
            "--api-key",
            help="TENANT:KEY, repeatable (also $AGENT_THREADS_API_KEYS, comma-separated)."
            " Without keys the service listens on a loopback address only.",
        ),
    ] = [],  # noqa: B006 - typer reads the default, never changes it
    workers: Annotated[int, typer.Option(min=1, help="Worker processes.")] = 1,
    max_body_bytes: Annotated[
        int, typer.Option(min=1, help="The largest request body taken (413 above).")
    ] = 8 * _MIB,
    cors_origin: Annotated[
        list[str], typer.Option("--cors-origin", help="An origin browsers may call from.")
    ] = [],  # noqa: B006
) -> None:
    """Serve the HTTP API (/api, docs at /docs) over the store."""
    launcher = _launcher()
    try:
        launcher.serve(
            store,
            host=host,
            port=port,
            api_keys=api_key,
            workers=workers,
            max_body_bytes=max_body_bytes,
            cors_origins=cors_origin,
        )
    except InvalidValueError as exc:
        fail(str(exc))
