"""`Idempotency-Key`: a retried write answers what its first try answered, written once.

A POST or DELETE under `/v1` carrying an `Idempotency-Key` header claims the key for its
tenant before it runs: a record of kind `KIND` in the tenant's store (so every server
process on one store sees it), its id the key's SHA-256. A successful answer (2xx) is
kept in the record for `ttl` seconds (default a day) and given again, with the header
`Idempotent-Replayed: true`, to any request with the same key and the same method,
path, query and body. Meanwhile:

- the same key with another request answers 400 (`x-should-retry: false`);
- the same key while the first request still runs answers 409 (`x-should-retry: true`:
  the client retries, and then gets the first answer); a claim whose request never
  finished (a process killed) expires after `pending_ttl` seconds;
- an error answer is not kept: it means nothing was written (no `/v1` route answers an
  error after its write is saved), so the claim is released and a retry runs again.

Expired records are deleted by a sweep of the tenant's records, at most once every
`sweep_interval` seconds per tenant and process, after an answer is sent.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from dataclasses import dataclass

import anyio
from pydantic import JsonValue
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from agent_threads.errors import AgentThreadsError, ConflictError, StoreUnavailableError
from agent_threads.server.auth import Tenants
from agent_threads.server.errors import OPENAI_PREFIX, UnauthorizedError, error_response
from agent_threads.stores.base import Record, ThreadStore

log = logging.getLogger("agent_threads.server")

KIND = "idempotency"
"""The record kind of idempotency keys' claims and kept answers."""
HEADER = "idempotency-key"
MAX_KEY_LENGTH = 255
DEFAULT_TTL = 24 * 3600.0
DEFAULT_PENDING_TTL = 300.0
DEFAULT_SWEEP_INTERVAL = 600.0
_WRITES = frozenset({"POST", "DELETE"})


@dataclass(frozen=True, slots=True)
class _Answer:
    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


@dataclass(frozen=True, slots=True)
class _Claim:
    record: Record
    mine: bool


@dataclass(frozen=True, slots=True)
class _Request:
    store: ThreadStore
    record_id: str
    fingerprint: str


class Idempotency:
    """ASGI middleware answering retried writes under `prefix` from their first answer."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        prefix: str = OPENAI_PREFIX,
        ttl: float = DEFAULT_TTL,
        pending_ttl: float = DEFAULT_PENDING_TTL,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> None:
        self.app = app
        self.prefix = prefix
        self.ttl = ttl
        self.pending_ttl = pending_ttl
        self.sweep_interval = sweep_interval
        self._swept: dict[int, float] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        key = _header(scope, HEADER) if _is_write(scope, self.prefix) else None
        if key is None:
            await self.app(scope, receive, send)
            return
        if not 0 < len(key) <= MAX_KEY_LENGTH:
            response = error_response(
                400,
                f"the Idempotency-Key header must be 1 to {MAX_KEY_LENGTH} characters",
                "invalid_request_error",
                param="Idempotency-Key",
            )
            await response(scope, receive, send)
            return
        body, replay = await _read_body(receive)
        request = self._request(scope, key, body)
        if request is None:  # no valid API key: the app answers 401
            await self.app(scope, replay, send)
            return
        await self._run(request, scope, replay, send)
        await self._sweep(request.store)

    def _request(self, scope: Scope, key: str, body: bytes) -> _Request | None:
        tenants: Tenants = scope["app"].state.tenants
        try:
            store = tenants.store_for(_header(scope, "authorization"))
        except UnauthorizedError:
            return None
        digest = hashlib.sha256()
        for piece in (scope["method"], scope["path"], scope.get("query_string", b""), body):
            digest.update(piece if isinstance(piece, bytes) else piece.encode())
            digest.update(b"\0")
        record_id = hashlib.sha256(key.encode()).hexdigest()
        return _Request(store, record_id, digest.hexdigest())

    async def _run(self, request: _Request, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            claim = await self._claim(request)
        except StoreUnavailableError as exc:
            await error_response(503, str(exc), "store_unavailable")(scope, receive, send)
            return
        if claim.record.data.get("fingerprint") != request.fingerprint:
            await _mismatch()(scope, receive, send)
        elif claim.record.data.get("state") == "done":
            await _replay(claim.record, send)
        elif not claim.mine:
            await _busy()(scope, receive, send)
        else:
            await _send(await self._answer(request, claim.record, scope, receive), send)

    async def _answer(
        self, request: _Request, claim: Record, scope: Scope, receive: Receive
    ) -> _Answer:
        """Run the request, keep a successful answer, release the claim otherwise."""
        try:
            answer = await _capture(self.app, scope, receive)
        except BaseException:
            with anyio.CancelScope(shield=True):
                await _release(request.store, claim)
            raise
        if 200 <= answer.status < 300:
            await self._keep(request.store, claim, answer)
        else:
            await _release(request.store, claim)
        return answer

    async def _claim(self, request: _Request) -> _Claim:
        """The live record of the key: a claim of ours, or another request's record."""
        store = request.store
        while True:
            now = time.time()
            found = await store.get_record(KIND, request.record_id)
            if found is not None and _expires(found) > now:
                return _Claim(found, mine=False)
            data: dict[str, JsonValue] = {
                "state": "pending",
                "fingerprint": request.fingerprint,
                "expires_at": now + self.pending_ttl,
            }
            claim = Record(kind=KIND, id=request.record_id, data=data)
            try:
                stored = await store.put_record(
                    claim, expected_version=0 if found is None else found.version
                )
            except ConflictError:
                continue  # another request claimed it, or it changed: read it again
            return _Claim(stored, mine=True)

    async def _keep(self, store: ThreadStore, claim: Record, answer: _Answer) -> None:
        try:
            text = answer.body.decode()
        except UnicodeDecodeError:
            await _release(store, claim)
            return
        content_type = dict(answer.headers).get(b"content-type", b"application/json").decode()
        data: dict[str, JsonValue] = {
            "state": "done",
            "fingerprint": claim.data["fingerprint"],
            "expires_at": time.time() + self.ttl,
            "status": answer.status,
            "content_type": content_type,
            "body": text,
        }
        done = claim.model_copy(update={"data": data})
        try:
            await store.put_record(done, expected_version=claim.version)
        except AgentThreadsError:  # the write is saved: answer it; the claim expires
            log.exception("could not keep the answer of idempotency key %s", claim.id)

    async def _sweep(self, store: ThreadStore) -> None:
        now = time.time()
        if now - self._swept.get(id(store), 0.0) < self.sweep_interval:
            return
        self._swept[id(store)] = now
        try:
            for record in await store.list_records(KIND):
                if _expires(record) <= now:
                    await _delete(store, record)
        except AgentThreadsError:
            log.exception("could not sweep expired idempotency keys")


def _is_write(scope: Scope, prefix: str) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] in _WRITES
        and str(scope["path"]).startswith(prefix)
    )


def _header(scope: Scope, name: str) -> str | None:
    wanted = name.encode()
    for header, value in scope.get("headers", ()):
        if header.lower() == wanted:
            return bytes(value).decode("latin-1").strip()
    return None


def _expires(record: Record) -> float:
    value = record.data.get("expires_at")
    return float(value) if isinstance(value, int | float) else 0.0


async def _read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a `receive` that gives it again (then waits as before)."""
    chunks: list[bytes] = []
    messages: list[Message] = []
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break

    async def replay() -> Message:
        return messages.pop(0) if messages else await receive()

    return b"".join(chunks), replay


async def _capture(app: ASGIApp, scope: Scope, receive: Receive) -> _Answer:
    status = 500
    headers: list[tuple[bytes, bytes]] = []
    body: list[bytes] = []

    async def keep(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", []))
        elif message["type"] == "http.response.body":
            body.append(message.get("body", b""))

    await app(scope, receive, keep)
    return _Answer(status, headers, b"".join(body))


async def _send(answer: _Answer, send: Send) -> None:
    await send({"type": "http.response.start", "status": answer.status, "headers": answer.headers})
    await send({"type": "http.response.body", "body": answer.body})


async def _replay(record: Record, send: Send) -> None:
    body = str(record.data.get("body", "")).encode()
    status = record.data.get("status")
    headers = [
        (b"content-type", str(record.data.get("content_type", "application/json")).encode()),
        (b"content-length", str(len(body)).encode()),
        (b"idempotent-replayed", b"true"),
    ]
    await _send(_Answer(status if isinstance(status, int) else 200, headers, body), send)


def _mismatch() -> ASGIApp:
    return error_response(
        400,
        "this Idempotency-Key was used with another request (method, path or body):"
        " use a new key for a new request",
        "invalid_request_error",
        param="Idempotency-Key",
        headers={"x-should-retry": "false"},
    )


def _busy() -> ASGIApp:
    return error_response(
        409,
        "a request with this Idempotency-Key is still running: retry to get its answer",
        "conflict",
        param="Idempotency-Key",
        headers={"x-should-retry": "true", "Retry-After": "1"},
    )


async def _release(store: ThreadStore, claim: Record) -> None:
    try:
        await _delete(store, claim)
    except AgentThreadsError:  # the claim expires after pending_ttl
        log.exception("could not release idempotency key %s", claim.id)


async def _delete(store: ThreadStore, record: Record) -> None:
    with contextlib.suppress(ConflictError):  # someone claimed or kept it since: theirs now
        await store.delete_record(KIND, record.id, expected_version=record.version)


__all__ = [
    "DEFAULT_PENDING_TTL",
    "DEFAULT_SWEEP_INTERVAL",
    "DEFAULT_TTL",
    "HEADER",
    "KIND",
    "MAX_KEY_LENGTH",
    "Idempotency",
]
