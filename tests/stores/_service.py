"""A live service for the store tests: uvicorn on a loopback port, in a thread of its own.

One server for the whole run, started on first use and stopped at exit. Each store a
test opens is an app of its own (`create_app` over a fresh `MemoryStore`) served under a
path prefix of that server (`http://127.0.0.1:PORT/s/N`), so every `HttpStore` test gets
a fresh, empty store over a real socket, and a hypothesis example costs an app, not a
server start. The prefix is all the dispatcher adds: requests reach the app as they
would reach `agent-threads serve`.
"""

from __future__ import annotations

import atexit
import itertools
import socket
import threading
from contextlib import AbstractContextManager

import uvicorn
from anyio.from_thread import BlockingPortal, start_blocking_portal
from starlette.types import ASGIApp, Receive, Scope, Send

from agent_threads import ThreadStore
from agent_threads.server import create_app


class _Prefixes:
    """An ASGI app sending `/s/N/rest` to app N as `/rest`."""

    def __init__(self) -> None:
        self.apps: dict[str, ASGIApp] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        parts = str(scope.get("path", "")).split("/", 3)
        app = self.apps.get(parts[2]) if len(parts) == 4 and parts[1] == "s" else None
        if scope["type"] != "http" or app is None:
            await send({"type": "http.response.start", "status": 404, "headers": []})
            await send({"type": "http.response.body", "body": b"no such app"})
            return
        rest = "/" + parts[3]
        await app({**scope, "path": rest, "raw_path": rest.encode()}, receive, send)


class _Server(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


class Service:
    """The server, its thread, and the apps it serves."""

    def __init__(self) -> None:
        self._prefixes = _Prefixes()
        self._names = itertools.count()
        self._portal_context: AbstractContextManager[BlockingPortal] = start_blocking_portal(
            backend="asyncio"
        )
        portal = self._portal_context.__enter__()
        config = uvicorn.Config(
            self._prefixes,
            host="127.0.0.1",
            port=0,
            lifespan="off",
            log_level="warning",
            access_log=False,
        )
        self._server = _Server(config)
        self._serving = portal.start_task_soon(self._server.serve)
        if not self._server.listening.wait(10):
            raise RuntimeError("the test service did not start listening in 10 s")
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def mount(self, store: ThreadStore) -> str:
        """Serve `store` (anonymously: no API keys); its base URL."""
        name = str(next(self._names))
        self._prefixes.apps[name] = create_app(store)
        return f"{self.url}/s/{name}"

    def unmount(self, url: str) -> None:
        self._prefixes.apps.pop(url.rsplit("/", 1)[1], None)

    def close(self) -> None:
        self._server.should_exit = True
        self._serving.result(10)
        self._portal_context.__exit__(None, None, None)


_service: Service | None = None
_lock = threading.Lock()


def service() -> Service:
    """The shared service, started on first use."""
    global _service
    with _lock:
        if _service is None:
            _service = Service()
            atexit.register(_service.close)
        return _service
