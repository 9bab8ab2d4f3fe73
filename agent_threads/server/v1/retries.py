"""`x-should-retry` on `/v1` errors: which answers the `openai` client may send again.

The `openai` client retries 408, 409, 429 and every 5xx, POST and DELETE included,
unless the answer says `x-should-retry: false`. Under `/v1`, every error answer says:

- `false` for a 4xx other than 408 and 429 (a conflict, a missing id, a bad field:
  sending it again gives the same answer);
- for 408, 429 and 5xx, `true` on a read or on a write carrying an `Idempotency-Key`
  (a retry cannot write twice), `false` on a write without one: its write may have
  been saved when the store stopped answering, so only the caller can tell.

An answer that already says (e.g. `Idempotency`'s 409 while a first try still runs)
is left alone. An unexpected error is answered here (500, the common error body) so
that it carries the header too, then raised on to the server's error handler, which
logs it.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_threads.server.errors import OPENAI_PREFIX, error_response

HEADER = b"x-should-retry"
_TRANSIENT = frozenset({408, 429})


def should_retry(status: int, *, method: str, idempotent: bool) -> bool:
    """Whether the `openai` client may send this request again after this answer."""
    if status < 500 and status not in _TRANSIENT:
        return False
    return method in ("GET", "HEAD", "OPTIONS") or idempotent


class RetryAdvice:
    """ASGI middleware adding `x-should-retry` to error answers under `prefix`."""

    def __init__(self, app: ASGIApp, *, prefix: str = OPENAI_PREFIX) -> None:
        self.app = app
        self.prefix = prefix

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope["path"]).startswith(self.prefix):
            await self.app(scope, receive, send)
            return
        headers = {bytes(k).lower() for k, _ in scope.get("headers", ())}
        method = str(scope["method"])
        idempotent = b"idempotency-key" in headers
        started = False

        async def advising(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                sent = list(message.get("headers", []))
                if status >= 400 and all(bytes(k).lower() != HEADER for k, _ in sent):
                    retry = should_retry(status, method=method, idempotent=idempotent)
                    sent.append((HEADER, b"true" if retry else b"false"))
                    message = {**message, "headers": sent}
            await send(message)

        try:
            await self.app(scope, receive, advising)
        except Exception:
            if not started:
                response = error_response(
                    500, "internal error: the service logged it", "internal_error"
                )
                await response(scope, receive, advising)
            raise


__all__ = ["HEADER", "RetryAdvice", "should_retry"]
