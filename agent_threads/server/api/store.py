"""Routes of `/api/store`: the `ThreadStore` primitives on the caller's tenant store.

What `HttpStore` (`agent_threads.stores.http`) speaks: each route is one store operation
(records with compare-and-set, a commit, segment rows, message locations, segments,
blobs, vacuum), run on the caller's `TenantStore` (or, without API keys, on the store
itself), so every library feature works through the service with the service's tenants
and keys. Nothing here knows threads: that stays in the client's library.

Errors: a library error (and a `ValueError`, the library's refusal of an argument) is
answered here, by this router's route class (`StoreRoute`), with the common error body
whose `code` names the error's class (`ConflictError`, `StoreCorruptedError`,
`InvalidIdError`, ...) and whose `param` holds what the error names, so the client raises
the same class again. `StoreCorruptedError` is answered 409, not 500: here it says that
the rows or blobs asked for are not there (or a new record references data `vacuum()`
freed), an answer about the data the caller asked for.

Vacuum: without API keys, `POST /api/store/vacuum` runs the store's `vacuum()`. With keys,
a tenant's vacuum collects the tenant's garbage only (`collect_garbage` over its
`TenantStore`: its own segments, and blobs no other tenant references), and never
anything younger than `DEFAULT_VACUUM_GRACE` seconds whatever `grace` says: blobs are
shared, and another tenant's fresh blob may not be referenced by its record yet. The
store's own vacuum of every tenant's garbage is the operator's (`agent-threads vacuum`).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.routing import APIRoute
from pydantic import BaseModel, ConfigDict, Field

from agent_threads.errors import (
    AgentThreadsError,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_response, error_responses
from agent_threads.stores.base import (
    DEFAULT_VACUUM_GRACE,
    MAX_POSITION,
    Record,
    Row,
    RowWrite,
    VacuumReport,
    collect_garbage,
)
from agent_threads.stores.tenant import TenantStore

_REQUEST = ConfigDict(frozen=True, extra="forbid")
_ANSWER = ConfigDict(frozen=True)

_ErrorAnswer = tuple[int, str, Callable[[Any], str | None]]
_ERRORS: tuple[tuple[type[Exception], _ErrorAnswer], ...] = (
    (ConflictError, (409, "conflict", lambda e: e.key)),
    (StoreCorruptedError, (409, "store_corrupted", lambda e: e.where)),
    (InvalidIdError, (422, "invalid_request", lambda e: e.what)),
    (InvalidValueError, (422, "invalid_request", lambda e: e.where)),
    (SchemaVersionError, (500, "store_error", lambda e: e.where)),
    (StoreUnavailableError, (503, "store_unavailable", lambda e: None)),
    (AgentThreadsError, (500, "store_error", lambda e: None)),
    (ValueError, (422, "invalid_request", lambda e: None)),
)
"""How this router answers an error, first match: status, type, and the `param`."""


def store_error_response(exc: Exception) -> Response:
    """The answer to a store operation's error: its class named in `code`."""
    for error, (status, kind, param) in _ERRORS:
        if isinstance(exc, error):
            headers = {"Retry-After": "1"} if status == 503 else None
            return error_response(
                status, str(exc), kind, param=param(exc), code=type(exc).__name__, headers=headers
            )
    raise exc  # not a store error: the app's handlers answer it


class StoreRoute(APIRoute):
    """A route whose library errors are answered with `store_error_response`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except (AgentThreadsError, ValueError) as exc:
                return store_error_response(exc)

        return answer


router = APIRouter(prefix="/api/store", tags=["store"], route_class=StoreRoute)

_COMMON = error_responses(401, 422, 503)
_WRITE = {**_COMMON, **error_responses(409, 413)}

RowPair = Annotated[list[str], Field(min_length=2, max_length=2)]
"""A row: `[message_id, row JSON]`."""
Position = Annotated[int, Field(ge=0, le=MAX_POSITION)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
UnixTime = Annotated[float, Field(allow_inf_nan=False)]


class RecordPut(BaseModel):
    """`put_record(record, expected_version=...)`."""

    model_config = _REQUEST
    record: Record
    expected_version: Annotated[int, Field(ge=0)]


class RowsWrite(BaseModel):
    """Rows to write at `start, start+1, ...` of a segment: `[message_id, row JSON]` pairs."""

    model_config = _REQUEST
    segment_id: str
    start: Position
    rows: list[RowPair]


class Commit(BaseModel):
    """`commit(writes, record, expected_version=...)`."""

    model_config = _REQUEST
    writes: list[RowsWrite]
    record: Record
    expected_version: Annotated[int, Field(ge=0)]


class Deletion(BaseModel):
    """Segments or blobs to delete, only those not written since a time if given."""

    model_config = _REQUEST
    ids: list[str]
    not_written_since: UnixTime | None = None


class Vacuum(BaseModel):
    """`vacuum(grace=...)`."""

    model_config = _REQUEST
    grace: Seconds = DEFAULT_VACUUM_GRACE


class RecordList(BaseModel):
    """Records, sorted by kind and id."""

    model_config = _ANSWER
    records: list[Record]


class RecordDeleted(BaseModel):
    """The record was deleted."""

    model_config = _ANSWER
    deleted: bool = True


class Written(BaseModel):
    """How many rows were written."""

    model_config = _ANSWER
    rows: int


class Rows(BaseModel):
    """Rows of a segment, in order."""

    model_config = _ANSWER
    rows: list[str]


class Location(BaseModel):
    """Where a row holding a message is."""

    model_config = _ANSWER
    segment_id: str
    position: int


class Locations(BaseModel):
    """Every row holding a message."""

    model_config = _ANSWER
    locations: list[Location]


class ManyLocations(BaseModel):
    """Every row holding each of several messages (an empty list: none)."""

    model_config = _ANSWER
    locations: dict[str, list[Location]]


class WriteTimes(BaseModel):
    """Segment ids or blob digests, each with the Unix time of its last write."""

    model_config = _ANSWER
    times: dict[str, float]


class Count(BaseModel):
    """How many there were."""

    model_config = _ANSWER
    deleted: int


class BlobDigest(BaseModel):
    """A stored blob's SHA-256 hex digest."""

    model_config = _ANSWER
    digest: str


class VacuumResult(BaseModel):
    """What `vacuum()` removed."""

    model_config = _ANSWER
    segments_deleted: int
    blobs_deleted: int


NOT_FOUND = "not_found"
"""The `code` of a 404 saying the record or blob asked for is not stored (a 404 without it
is an address the service does not know)."""


def _missing(what: str, param: str) -> Response:
    return error_response(404, f"{what} not found", "not_found", param=param, code=NOT_FOUND)


def _rows(pairs: list[list[str]]) -> list[Row]:
    return [Row(message_id, data) for message_id, data in pairs]


@router.get("/records", responses=_COMMON)
async def list_records(
    store: Store,
    kind: str | None = None,
    tag: Annotated[list[str], Query(description="a tag every record holds")] = [],  # noqa: B006
    owner: str | None = None,
) -> RecordList:
    """`list_records(kind, tags=..., owner=...)`: records of a kind, holding every tag."""
    return RecordList(records=await store.list_records(kind, tags=tag, owner=owner))


@router.get(
    "/records/{kind}/{record_id}",
    response_model=Record,
    responses={**_COMMON, **error_responses(404)},
)
async def get_record(kind: str, record_id: str, store: Store) -> Response:
    """`get_record(kind, record_id)`: the record; 404 when there is none."""
    record = await store.get_record(kind, record_id)
    if record is None:
        return _missing(f"record {kind}/{record_id}", record_id)
    return Response(record.model_dump_json(), media_type="application/json")


@router.post("/records", responses=_WRITE)
async def put_record(body: RecordPut, store: Store) -> Record:
    """`put_record`: store the record if the stored version is `expected_version`."""
    return await store.put_record(body.record, expected_version=body.expected_version)


@router.delete(
    "/records/{kind}/{record_id}",
    response_model=RecordDeleted,
    responses={**_COMMON, **error_responses(404, 409)},
)
async def delete_record(
    kind: str,
    record_id: str,
    store: Store,
    expected_version: Annotated[int | None, Query(ge=0)] = None,
) -> Response:
    """`delete_record`; 404 when there was none, 409 when `expected_version` differs."""
    if not await store.delete_record(kind, record_id, expected_version=expected_version):
        return _missing(f"record {kind}/{record_id}", record_id)
    return Response(RecordDeleted().model_dump_json(), media_type="application/json")


@router.post("/commit", responses=_WRITE)
async def commit(body: Commit, store: Store) -> Record:
    """`commit`: rows and the record that publishes them, as one write."""
    writes = [RowWrite(w.segment_id, w.start, _rows(w.rows)) for w in body.writes]
    return await store.commit(writes, body.record, expected_version=body.expected_version)


@router.post("/rows", responses=_WRITE)
async def append_rows(body: RowsWrite, store: Store) -> Written:
    """`append_rows`: write rows at `start, start+1, ...` of a segment, all or nothing."""
    await store.append_rows(body.segment_id, body.start, _rows(body.rows))
    return Written(rows=len(body.rows))


@router.get("/rows", responses={**_COMMON, **error_responses(409)})
async def read_rows(segment_id: str, start: Position, end: Position, store: Store) -> Rows:
    """`read_rows`: the rows at `start <= p < end` of a segment; 409 when one is missing."""
    return Rows(rows=await store.read_rows(segment_id, start, end))


@router.get("/locations", responses=_COMMON)
async def locate_message(message_id: str, store: Store) -> Locations:
    """`locate_message`: every `[segment_id, position]` holding a row of this message."""
    found = await store.locate_message(message_id)
    return Locations(locations=[Location(segment_id=s, position=p) for s, p in found])


@router.get("/locations/many", responses=_COMMON)
async def locate_messages(
    store: Store,
    message_id: Annotated[list[str], Query(max_length=1000, description="repeat for each id")],
) -> ManyLocations:
    """`locate_messages`: the rows holding each of these messages, in one call."""
    found = await store.locate_messages(message_id)
    return ManyLocations(
        locations={
            m: [Location(segment_id=s, position=p) for s, p in held] for m, held in found.items()
        }
    )


@router.get("/segments", responses=_COMMON)
async def list_segments(store: Store) -> WriteTimes:
    """`list_segments`: every segment with the time of its last write."""
    return WriteTimes(times=await store.list_segments())


@router.post("/segments/delete", responses=_WRITE)
async def delete_segments(body: Deletion, store: Store) -> Count:
    """`delete_segments`: delete these segments (not written since the time, if given)."""
    deleted = await store.delete_segments(body.ids, not_written_since=body.not_written_since)
    return Count(deleted=deleted)


_BYTES = {"schema": {"type": "string", "format": "binary"}}


@router.post(
    "/blobs",
    responses=_WRITE,
    openapi_extra={
        "requestBody": {"required": True, "content": {"application/octet-stream": _BYTES}}
    },
)
async def put_blob(request: Request, store: Store) -> BlobDigest:
    """`put_blob`: store the body's bytes under their SHA-256 digest."""
    return BlobDigest(digest=await store.put_blob(await request.body()))


@router.get(
    "/blobs/{digest}",
    response_class=Response,
    responses={
        200: {"content": {"application/octet-stream": _BYTES}, "description": "The bytes"},
        **_COMMON,
        **error_responses(404),
    },
)
async def get_blob(digest: str, store: Store) -> Response:
    """`get_blob`: the bytes stored under the digest; 404 when there are none."""
    data = await store.get_blob(digest)
    if data is None:
        return _missing(f"blob {digest}", digest)
    return Response(data, media_type="application/octet-stream")


@router.get("/blobs", responses=_COMMON)
async def list_blobs(store: Store) -> WriteTimes:
    """`list_blobs`: every blob digest with the time it was written."""
    return WriteTimes(times=await store.list_blobs())


@router.post("/blobs/delete", responses=_WRITE)
async def delete_blobs(body: Deletion, store: Store) -> Count:
    """`delete_blobs`: delete these blobs (not written since the time, if given)."""
    deleted = await store.delete_blobs(body.ids, not_written_since=body.not_written_since)
    return Count(deleted=deleted)


@router.post("/vacuum", responses=_WRITE)
async def vacuum(store: Store, body: Vacuum | None = None) -> VacuumResult:
    """`vacuum`: delete unreferenced segments and blobs older than `grace` seconds.

    With API keys, only the caller's tenant's garbage, at least `DEFAULT_VACUUM_GRACE`
    seconds old (see the module's docstring).
    """
    grace = (body or Vacuum()).grace
    report: VacuumReport
    if isinstance(store, TenantStore):
        report = await collect_garbage(store, grace=max(grace, DEFAULT_VACUUM_GRACE))
    else:
        report = await store.vacuum(grace=grace)
    return VacuumResult(
        segments_deleted=report.segments_deleted, blobs_deleted=report.blobs_deleted
    )


__all__ = ["NOT_FOUND", "StoreRoute", "router", "store_error_response"]
