"""`agent-threads ui`: serve a store on this machine and open the web inspector in a browser."""

from __future__ import annotations

import importlib
import socket
import threading
import time
import webbrowser
from types import ModuleType
from typing import Annotated

import typer

from agent_threads.cli.errors import BAD_INPUT, CommandError, reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json
from agent_threads.cli.runner import DebugOption, JsonOption

HOST = "127.0.0.1"
"""The inspector listens on loopback only: it serves the store without API keys."""

INSPECTOR_PATH = "/ui"
"""Where the service serves the inspector."""

STARTUP_TIMEOUT = 30.0
"""Seconds to wait for the server to accept connections before giving up on the browser."""


def _launcher() -> ModuleType:
    """The service's launcher (the extra `server`), imported only by the commands that serve."""
    try:
        return importlib.import_module("agent_threads.server.launch")
    except ImportError as exc:
        raise CommandError(
            f"agent-threads ui needs: pip install 'agent-threads-framework[server]' ({exc})",
            code=BAD_INPUT,
        ) from exc


def _open_when_up(port: int, url: str) -> None:
    """Open `url` in a browser once the server accepts connections (or give up)."""
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                webbrowser.open(url)
                return
        except OSError:
            time.sleep(0.1)


def ui(
    store: StoreOption,
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    no_browser: Annotated[
        bool, typer.Option("--no-browser", help="Print the URL, do not open a browser.")
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Serve the store on 127.0.0.1 and open the inspector in a browser (Ctrl+C stops it)."""
    with reported(store=store, debug=debug):
        launcher = _launcher()
        url = f"http://{HOST}:{port}{INSPECTOR_PATH}"
        if json_output:
            print_json({"url": url})
        else:
            console().print(f"inspector: {url}  (Ctrl+C stops it)")
        if not no_browser:
            threading.Thread(target=_open_when_up, args=(port, url), daemon=True).start()
        launcher.serve(store, host=HOST, port=port)


__all__ = ["INSPECTOR_PATH", "ui"]
