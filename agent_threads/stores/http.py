"""HttpStore: a ThreadStore over the HTTP service (`agent-threads serve`), with httpx.

`HttpStore("http://127.0.0.1:8080", api_key=KEY)` calls the service's raw store API
(`/api/store`, one request per store operation) on the tenant of `KEY`, so every
library feature (threads, forks, checkpoints, workflows, views) works on a store the
service holds, from any process or machine that reaches it. `open_store` makes one of
`http://` and `https://` URLs: `open_store("http://127.0.0.1:8080")`, the key from
`AGENT_THREADS_API_KEY`.

Connections are pooled (`max_connections`), opened within `connect_timeout` seconds
(retried `connect_retries` times: a connection refused is never half a request); an
answer is awaited `timeout` seconds. A request that cannot reach the service, or that
it answers 502, 503 or 504, raises `StoreUnavailableError` (a write whose answer was
lost may have been made: re-read first, as with any store). An error answer names the
library error's class in its `code`, and the same class is raised here, with the
service's message: `ConflictError`, `StoreCorruptedError`, `InvalidIdError`, ...
A key the service does not take raises `StoreUnavailableError` naming the 401.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, urlsplit

from pydantic import TypeAdapter

from agent_threads.core.retry import RetryPolicy
from agent_threads.errors import (
    AgentThreadsError,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores.base import (
    CONNECTION_ERRORS,
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    ErrorRule,
    ErrorTable,
    Record,
    Row,
    RowWrite,
    StoreBase,
    VacuumReport,
    check_timeout,
    redact_url,
)

try:
    import httpx
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("HttpStore needs: pip install 'agent-threads-framework[http]'") from exc

API_KEY_ENV = "AGENT_THREADS_API_KEY"
"""The environment variable `open_store` takes an `http(s)://` store's API key from."""

DEFAULT_MAX_CONNECTIONS = 20
"""Connections an HttpStore keeps open to the service at most."""

_DRIVER_ERRORS: ErrorTable = (
    # connections refused, lost or timed out, answers that are not HTTP
    ErrorRule(httpx.TransportError, StoreUnavailableError),
    *CONNECTION_ERRORS,
)
_NOT_FOUND = "not_found"
"""The `code` of the service's 404 for a record or blob it does not hold."""
_RECORDS = TypeAdapter(list[Record])
_TIMES = TypeAdapter(dict[str, float])


_IDS_PER_QUERY = 100
"""Message ids per `locate_messages` request (in its query string: ~5 KB)."""


class HttpStore(StoreBase):
    """The store a service at `url` holds for the tenant of `api_key` (none: anonymous)."""

    driver_errors = _DRIVER_ERRORS

    def __init__(
        self,
        url: str,
        api_key: str | None = None,
        *,
        timeout: float = DEFAULT_COMMAND_TIMEOUT,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        connect_retries: int = 1,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        retry: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        """Say where the service is; connecting waits for the first call or `async with`.

        `retry` is the policy of this store's threads' writes (`ThreadStore.retry`).
        `transport` replaces the network (say `httpx.ASGITransport(app)` to call an app
        in-process); the others then do not apply.

        Raises:
            InvalidValueError: `url` is not an `http://` or `https://` URL, or `api_key`
                is not text a header can carry.
            ValueError: a timeout is not a positive number of seconds.
        """
        self._url = _checked_url(url)
        self._headers = {"Accept": "application/json"}
        if api_key is not None:
            if not isinstance(api_key, str) or not api_key.isprintable() or not api_key.strip():
                raise InvalidValueError("HttpStore api_key", reason="must be printable text")
            self._headers["Authorization"] = f"Bearer {api_key.strip()}"
        self._timeout = httpx.Timeout(
            check_timeout(timeout, what="timeout", none=False),
            connect=check_timeout(connect_timeout, what="connect_timeout", none=False),
        )
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._connect_retries = connect_retries
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        if retry is not None:
            self.retry = retry

    @property
    def url(self) -> str:
        """The service's base URL, as given (without a trailing `/`)."""
        return self._url

    def __repr__(self) -> str:
        return f"HttpStore({redact_url(self._url)!r})"

    # -- requests ----------------------------------------------------------------------

    def _open_client(self) -> httpx.AsyncClient:
        if self._client is None:
            transport = self._transport or httpx.AsyncHTTPTransport(
                retries=self._connect_retries, limits=self._limits
            )
            self._client = httpx.AsyncClient(
                base_url=f"{self._url}/api/store/",
                headers=self._headers,
                timeout=self._timeout,
                transport=transport,
                follow_redirects=False,
            )
        return self._client

    async def _call(
        self,
        method: str,
        path: str,
        operation: str,
        *,
        body: object = None,
        content: bytes | None = None,
        params: Mapping[str, Any] | list[tuple[str, Any]] | None = None,
        missing: bool = False,
    ) -> httpx.Response | None:
        """Send one request; its answer if 2xx (None for a 404 when `missing`), else raise."""
        headers = None
        if body is not None:
            content = json.dumps(body, separators=(",", ":")).encode()
            headers = {"Content-Type": "application/json"}
        elif content is not None:
            headers = {"Content-Type": "application/octet-stream"}
        answer = await self._open_client().request(
            method, path, content=content, params=params, headers=headers
        )
        if answer.is_success:
            return answer
        if missing and answer.status_code == 404 and _error_of(answer).get("code") == _NOT_FOUND:
            return None
        raise self._error(answer, operation)

    async def _json(self, method: str, path: str, operation: str, **options: Any) -> Any:
        answer = await self._call(method, path, operation, **options)
        assert answer is not None
        return answer.json()

    def _error(self, answer: httpx.Response, operation: str) -> Exception:
        """The library error an error answer stands for."""
        error = _error_of(answer)
        message = str(error.get("message") or answer.reason_phrase)
        param = error.get("param")
        build = _REBUILD.get(str(error.get("code")))
        if build is not None:
            rebuilt = build(param if isinstance(param, str) else "", message)
            rebuilt.args = (message,)  # the service's words, exactly
            return rebuilt
        if answer.status_code == 413:
            return InvalidValueError(f"{self!r} {operation}", reason=message)
        if answer.status_code == 422:  # refused before any store operation ran
            return InvalidValueError(f"{self!r} {operation} {param or ''}".rstrip(), reason=message)
        detail = f"the service answered {answer.status_code} {answer.reason_phrase}: {message}"
        if answer.status_code == 404:
            detail += f" (is {redact_url(self._url)} the service's address?)"
        return StoreUnavailableError(repr(self), operation=operation, detail=detail)

    # -- the primitives ----------------------------------------------------------------

    async def _do_open(self) -> None:
        self._open_client()

    async def _do_close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        path = f"records/{_q(kind)}/{_q(record_id)}"
        answer = await self._call("GET", path, "get_record", missing=True)
        return None if answer is None else Record.model_validate_json(answer.content)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        body = {"record": _record(record), "expected_version": expected_version}
        answer = await self._call("POST", "records", "put_record", body=body)
        assert answer is not None
        return Record.model_validate_json(answer.content)

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        body = {
            "writes": [
                {"segment_id": w.segment_id, "start": w.start, "rows": _pairs(w.rows)}
                for w in writes
            ],
            "record": _record(record),
            "expected_version": expected_version,
        }
        answer = await self._call("POST", "commit", "commit", body=body)
        assert answer is not None
        return Record.model_validate_json(answer.content)

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
        params = {} if expected_version is None else {"expected_version": expected_version}
        path = f"records/{_q(kind)}/{_q(record_id)}"
        answer = await self._call("DELETE", path, "delete_record", params=params, missing=True)
        return answer is not None

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        params: list[tuple[str, str]] = [("tag", t) for t in sorted(tags)]
        if kind is not None:
            params.append(("kind", kind))
        if owner is not None:
            params.append(("owner", owner))
        found = await self._json("GET", "records", "list_records", params=params)
        return _RECORDS.validate_python(found["records"])

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        body = {"segment_id": segment_id, "start": start, "rows": _pairs(rows)}
        await self._call("POST", "rows", "append_rows", body=body)

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        if end <= start:
            return []
        params = {"segment_id": segment_id, "start": start, "end": end}
        found = await self._json("GET", "rows", "read_rows", params=params)
        rows: list[str] = found["rows"]
        return rows

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        params = {"message_id": message_id}
        found = await self._json("GET", "locations", "locate_message", params=params)
        return [(place["segment_id"], int(place["position"])) for place in found["locations"]]

    async def _do_locate_messages(self, message_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
        held: dict[str, list[dict[str, Any]]] = {}
        for first in range(0, len(message_ids), _IDS_PER_QUERY):  # the URL stays short
            params = {"message_id": message_ids[first : first + _IDS_PER_QUERY]}
            found = await self._json("GET", "locations/many", "locate_messages", params=params)
            held.update(found["locations"])
        return {
            m: [(place["segment_id"], int(place["position"])) for place in held[m]]
            for m in message_ids
        }

    async def _do_list_segments(self) -> dict[str, float]:
        found = await self._json("GET", "segments", "list_segments")
        return _TIMES.validate_python(found["times"])

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        body = {"ids": segment_ids, "not_written_since": not_written_since}
        found = await self._json("POST", "segments/delete", "delete_segments", body=body)
        return int(found["deleted"])

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        await self._call("POST", "blobs", "put_blob", content=data)

    async def _do_get_blob(self, digest: str) -> bytes | None:
        answer = await self._call("GET", f"blobs/{digest}", "get_blob", missing=True)
        return None if answer is None else answer.content

    async def _do_list_blobs(self) -> dict[str, float]:
        found = await self._json("GET", "blobs", "list_blobs")
        return _TIMES.validate_python(found["times"])

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        body = {"ids": digests, "not_written_since": not_written_since}
        found = await self._json("POST", "blobs/delete", "delete_blobs", body=body)
        return int(found["deleted"])

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        return set(), set()  # the service's put_record and commit marked them

    async def _do_vacuum(self, *, grace: float) -> VacuumReport:
        found = await self._json("POST", "vacuum", "vacuum", body={"grace": grace})
        return VacuumReport(
            segments_deleted=int(found["segments_deleted"]),
            blobs_deleted=int(found["blobs_deleted"]),
        )


def _checked_url(url: object) -> str:
    if isinstance(url, str):
        parts = urlsplit(url)
        if parts.scheme in ("http", "https") and parts.hostname and not parts.query:
            return url.rstrip("/")
    shown = redact_url(url) if isinstance(url, str) else repr(url)
    raise InvalidValueError(
        f"HttpStore URL {shown!r}",
        reason="write http://host:port or https://host:port (a path is kept, no query)",
    )


def _q(value: str) -> str:
    """A path segment (ids are validated already: this keeps `:` and `+` as they are)."""
    return quote(value, safe="")


def _record(record: Record) -> dict[str, Any]:
    return record.model_dump(mode="json")


def _pairs(rows: Sequence[Row]) -> list[list[str]]:
    return [[row.message_id, row.data] for row in rows]


def _error_of(answer: httpx.Response) -> dict[str, Any]:
    """The `error` object of an error answer's body; empty if it has none."""
    try:
        body = answer.json()
    except ValueError:
        return {}
    error = body.get("error") if isinstance(body, dict) else None
    return error if isinstance(error, dict) else {}


def _after(message: str, prefix: str) -> str:
    return message[len(prefix) :] if message.startswith(prefix) else message


_REBUILD: dict[str, Callable[[str, str], Exception]] = {
    "ConflictError": lambda p, m: ConflictError(p, detail=_after(m, f"conflict on {p}: ")),
    "StoreCorruptedError": lambda p, m: StoreCorruptedError(
        p, detail=_after(m, f"store data corrupted at {p}: ")
    ),
    "InvalidIdError": lambda p, m: InvalidIdError(None, what=p, reason=m),
    "InvalidValueError": lambda p, m: InvalidValueError(p, reason=_after(m, f"{p}: ")),
    "SchemaVersionError": lambda p, m: SchemaVersionError(p, found=None, supported=None),
    "ValueError": lambda p, m: ValueError(m),
    "AgentThreadsError": lambda p, m: AgentThreadsError(m),
}
"""Each error class the service may name in `code`, rebuilt from its `param` and message."""


def store_from_url(url: str) -> HttpStore:
    """The `HttpStore` of `open_store(url)`: the key from `AGENT_THREADS_API_KEY`, if set."""
    return HttpStore(url, os.environ.get(API_KEY_ENV) or None)


__all__ = ["API_KEY_ENV", "DEFAULT_MAX_CONNECTIONS", "HttpStore", "store_from_url"]
