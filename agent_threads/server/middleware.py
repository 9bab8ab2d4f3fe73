"""The service's ASGI middleware: a limit on request bodies, one log line per request."""

from __future__ import annotations

import logging
import time

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_threads.server.errors import RequestTooLargeError, error_response

log = logging.getLogger("agent_threads.server")

DEFAULT_MAX_BODY_BYTES = 8 * 2**20
"""The largest request body the service takes by default (8 MiB)."""


class BodyLimit:
    """Answer 413 to a body larger than `limit` bytes, before a route reads it whole.

    A declared `Content-Length` over the limit is answered at once. A body sent in
    chunks is counted as it comes: past the limit, the app is told the client went away
    (so no route runs: bodies are parsed before routes) and its answer is replaced by
    the 413.
    """

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    def _too_large(self) -> Response:
        return error_response(413, str(RequestTooLargeError(self.limit)), "request_too_large")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers", ())).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._too_large()(scope, receive, send)
            return
        received = 0
        over = False

        async def limited() -> Message:
            nonlocal received, over
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.limit:
                    over = True
                    return {"type": "http.disconnect"}
            return message

        async def answering(message: Message) -> None:
            if not over:
                await send(message)
            elif message["type"] == "http.response.start":
                await self._too_large()(scope, receive, send)

        await self.app(scope, limited, answering)


class RequestLog:
    """Log one line per request: method, path, status, duration, tenant."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # unless a response starts
        state = scope.setdefault("state", {})  # where the tenant dependency notes the tenant

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            tenant = state.get("tenant") if isinstance(state, dict) else None
            log.info(
                "%s %s %d %.1fms tenant=%s",
                scope["method"],
                scope["path"],
                status,
                (time.perf_counter() - started) * 1000,
                tenant or "-",
            )


__all__ = ["DEFAULT_MAX_BODY_BYTES", "BodyLimit", "RequestLog"]
