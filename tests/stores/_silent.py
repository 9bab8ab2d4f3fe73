"""Servers that stop answering, for the timeout tests of the networked stores (loopback only).

- `silent_server()`: accepts every TCP connection, reads what comes and never answers.
- `unaccepting_server()`: listens but accepts nothing; once its queue is full, a new
  connection is never established (on Linux), so only a connect timeout ends the wait.
- `StallingProxy`: forwards to a real server until `stall()`, then forwards nothing
  either way (a network gone silent, connections left open) until `resume()`; with
  `hold_closes=True`, a connection the server closes stays open to the client until
  `release_closes()`.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress

import anyio
from anyio.abc import SocketAttribute, SocketStream

TIMEOUT = 0.5
"""The connect and command timeouts of these tests; a call must end well within BOUND."""
BOUND = 5.0


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _read_forever(client: SocketStream) -> None:
    async with client:
        with suppress(anyio.BrokenResourceError, anyio.EndOfStream):
            async for _ in client:
                pass  # heard, never answered


@asynccontextmanager
async def silent_server() -> AsyncIterator[int]:
    """A loopback server that accepts connections and never answers; yields its port."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    async with listener, anyio.create_task_group() as group:
        group.start_soon(listener.serve, _read_forever)
        yield listener.extra(SocketAttribute.local_port)
        group.cancel_scope.cancel()


@contextmanager
def unaccepting_server() -> Iterator[int]:
    """A loopback port whose listener never accepts and whose queue is full; yields it."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port: int = listener.getsockname()[1]
        fillers = [socket.socket() for _ in range(4)]
        try:
            for filler in fillers:  # fill the accept queue: later connects get no answer
                filler.setblocking(False)
                with suppress(BlockingIOError):
                    filler.connect(("127.0.0.1", port))
            yield port
        finally:
            for filler in fillers:
                filler.close()


class StallingProxy:
    """A loopback TCP proxy to `target` that goes silent on `stall()`.

    While stalled, it forwards nothing in either direction, on connections open or new,
    and closes none of them. After `resume()`, new connections are forwarded again.
    With `hold_closes`, a connection the server closes gets everything the server sent
    but stays open to the client (a close that has not arrived yet) until
    `release_closes()`; closes after that pass at once. `close_held` is set once a
    close is held, all the server sent before it passed on.
    """

    def __init__(self, target: tuple[str, int], *, hold_closes: bool = False) -> None:
        self._target = target
        self._closes_released = anyio.Event()
        self.close_held = anyio.Event()
        if not hold_closes:
            self._closes_released.set()
        self._stalled = anyio.Event()
        self.port = 0

    @asynccontextmanager
    async def running(self) -> AsyncIterator[StallingProxy]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as group:
            group.start_soon(listener.serve, self._serve)
            yield self
            group.cancel_scope.cancel()

    def stall(self) -> None:
        self._stalled.set()

    def resume(self) -> None:
        self._stalled = anyio.Event()

    def release_closes(self) -> None:
        self._closes_released.set()

    async def _serve(self, client: SocketStream) -> None:
        stalled = self._stalled
        if stalled.is_set():
            await _read_forever(client)
            return
        upstream = await anyio.connect_tcp(*self._target)
        async with client, upstream, anyio.create_task_group() as group:
            group.start_soon(self._pipe, client, upstream, stalled)
            await self._pipe(upstream, client, stalled)
            if not self._closes_released.is_set():
                self.close_held.set()
                await self._closes_released.wait()
            group.cancel_scope.cancel()

    @staticmethod
    async def _pipe(source: SocketStream, sink: SocketStream, stalled: anyio.Event) -> None:
        with suppress(anyio.BrokenResourceError, anyio.EndOfStream, anyio.ClosedResourceError):
            async for chunk in source:
                if stalled.is_set():
                    await anyio.sleep_forever()  # holds the connection open, silent
                await sink.send(chunk)
