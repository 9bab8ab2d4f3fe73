"""The ThreadStore protocol: the few primitive async operations every store provides.

A store is small and dumb. It keeps three things:

- **records** (`Record`): JSON documents keyed by `(kind, id)` with a version for
  compare-and-set. Threads are records.
- **segment rows**: serialized messages (and checkpoints) keyed by `(segment_id,
  position)`. A position is written once; writing an existing position is a
  `ConflictError`, never an overwrite.
- **blobs**: content-addressed bytes keyed by their SHA-256 hex digest.

Everything about threads (ranges, fork, rollback, views) lives above the store, once.
Every store passes `tests/stores/test_conformance.py`. Every store is a `StoreBase`,
which checks each operation's arguments and maps the store's driver errors to the
library's (`ErrorRule`), once for all of them.

Garbage: a record keeps segments and blobs alive through three keys of its `data`:
`"ranges"` (a list of `[segment_id, start, end]`), `"blobs"` (a list of digests) and
`"logs"` (ranges like `"ranges"`, over *log rows* that reference more: a thread's
checkpoints, see `log_row_references`). `vacuum()` deletes what nothing references,
sparing anything written within a grace period so that an append between its rows and
its pointer is never collected.

A new record may reference old data that vacuum is about to free: a fork of a thread
that is being deleted, written after vacuum read the records. So storing a new record
also marks what it references as written now, and vacuum deletes a segment or blob
only if it was not written since its cutoff, checked atomically with the deletion: the
mark either lands first (the data is spared) or finds the data gone (the new record
is taken back and refused). Nothing a stored record references is ever collected.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import re
import secrets
import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from operator import attrgetter
from types import TracebackType
from typing import (
    ClassVar,
    Literal,
    NamedTuple,
    Protocol,
    Self,
    TypeAlias,
    overload,
    runtime_checkable,
)
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from agent_threads.core.ids import (
    all_valid_ids,
    unpack_digest,
    unpack_id,
    validate_digest,
    validate_id,
)
from agent_threads.core.retry import DEFAULT_RETRY, RetryPolicy
from agent_threads.errors import (
    AgentThreadsError,
    ConflictError,
    InvalidIdError,
    StoreCorruptedError,
    StoreUnavailableError,
)

DEFAULT_VACUUM_GRACE = 60.0
"""Seconds during which a freshly written segment or blob is never vacuumed."""

DEFAULT_CONNECT_TIMEOUT = 5.0
"""Seconds a networked store (Redis, PostgreSQL) waits to open a connection."""

DEFAULT_COMMAND_TIMEOUT = 30.0
"""Seconds a networked store waits for the server to answer one command."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class Record(BaseModel):
    """A versioned JSON document, the unit of compare-and-set.

    `version` is 0 for a record not yet stored. A record is stored first at a version
    drawn at random from `[1, FIRST_VERSION_LIMIT]` (`first_version`), then each
    successful `put_record` stores `expected_version + 1` (`stored_version`). So a
    record deleted and created again restarts at an unrelated version, and a handle
    that went stale before the deletion loses its compare-and-set instead of
    overwriting the new record once that reaches the handle's version (ABA). `owner`
    groups records under another (checkpoints under their thread); `tags` are matched
    by `list_records`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: str
    id: str
    version: int = Field(default=0, ge=0)
    owner: str | None = None
    tags: tuple[str, ...] = ()
    data: dict[str, JsonValue] = Field(default_factory=dict)


_RECORD_TO_JSON = Record.__pydantic_serializer__.to_json


def record_json(record: Record) -> str:
    """The record's JSON text, exactly `record.model_dump_json()`.

    Without that method's per-call wrapper, which handles options no store uses: a third
    of the call for a thread's record of ~750 bytes (4.0 against 6.0 us here).
    """
    return _RECORD_TO_JSON(record).decode()


class Row(NamedTuple):
    """One message as stored in a segment: its id (for lookups) and its JSON text."""

    message_id: str
    data: str


class RowArray(NamedTuple):
    """`length` consecutive rows of a segment as one JSON array text: `"[row,row,...]"`."""

    length: int
    data: str


ROW_ARRAY_ROWS = 64
"""Rows per array `read_row_arrays` gives by default (rows it joins itself)."""


class RowWrite(NamedTuple):
    """Rows to write at positions `start, start+1, ...` of a segment, as `append_rows`."""

    segment_id: str
    start: int
    rows: Sequence[Row]


@dataclass(frozen=True, slots=True)
class VacuumReport:
    """What `vacuum()` removed."""

    segments_deleted: int
    blobs_deleted: int


@runtime_checkable
class ThreadStore(Protocol):
    """The storage protocol. Constructing a store does no I/O; `async with` connects.

    Any operation, `async with` included, raises `StoreUnavailableError` when the
    storage cannot be reached (a connection refused, lost or timed out).
    """

    retry: RetryPolicy
    """How the writes of threads in this store retry lost races (set it to change them)."""

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    async def aclose(self) -> None:
        """Release connections and files. Idempotent."""
        ...

    async def get_record(self, kind: str, record_id: str) -> Record | None:
        """Return the stored record, or None when there is none."""
        ...

    async def put_record(self, record: Record, *, expected_version: int) -> Record:
        """Store `record` if the stored version equals `expected_version`.

        `expected_version=0` means the record must not exist yet. Returns the record as
        stored, with `version == stored_version(expected_version)`: `expected_version + 1`,
        or, for a new record, a version drawn at random (`first_version`), so that a
        record created again after a deletion never repeats the versions a stale handle
        holds. A new record marks the segments and blobs it references
        (`record_references`) as written now, so that a `vacuum()` running meanwhile
        spares them.

        Raises:
            ConflictError: the stored version differs (someone else wrote first).
            StoreCorruptedError: a new record references a segment or blob that is gone
                (vacuum freed it after the last record using it was deleted); the new
                record is not kept.
        """
        ...

    async def delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None = None
    ) -> bool:
        """Delete a record; False if it did not exist.

        Raises:
            ConflictError: `expected_version` is given and differs from the stored one.
        """
        ...

    async def list_records(
        self,
        kind: str | None = None,
        *,
        tags: Collection[str] = (),
        owner: str | None = None,
    ) -> list[Record]:
        """Records of `kind` (all kinds when None) holding every tag in `tags`.

        With `owner`, only records owned by it. Sorted by `(kind, id)`.
        """
        ...

    async def append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        """Write `rows` at positions `start, start+1, ...` of the segment, all or nothing.

        Raises:
            ConflictError: a position is already written; nothing of this call is kept.
        """
        ...

    async def commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        """`append_rows` for each of `writes`, then `put_record`, as one write.

        A thread's turn in one round trip: an append's rows, a checkpoint's log row and
        the record that publishes them. On a conflict nothing of this call is kept: the
        record stays as it was and no row is written (a store that cannot write them in
        one transaction, `JsonFileStore`, checks the version first and may keep the rows
        of writes before a conflicting one, unreferenced, as a crash between the calls
        would). Returns the record as stored, at `stored_version(expected_version)` as
        `put_record`.

        Raises:
            ConflictError: a position is already written, or the stored version differs.
            StoreCorruptedError: as `put_record`, for a new record.
        """
        ...

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        """The rows at positions `start <= p < end`, in order.

        Raises:
            StoreCorruptedError: a position in the range is missing.
        """
        ...

    async def read_row_arrays(self, segment_id: str, start: int, end: int) -> list[RowArray]:
        """The rows at positions `start <= p < end`, in order, as JSON arrays of rows.

        For rows that are JSON texts (message rows): together the arrays hold the rows of
        `read_rows`, so a reader validates many rows in one call. A store that keeps rows
        together (SQLiteStore's chunks) hands them over without cutting them apart, and
        need not check them first: a reader checks that each array holds `length` rows
        (damaged rows may not), and `read_rows` of the range names what is wrong.

        Raises:
            StoreCorruptedError: a position in the range is missing.
        """
        ...

    async def locate_message(self, message_id: str) -> list[tuple[str, int]]:
        """Every `(segment_id, position)` holding a row with this message id."""
        ...

    async def locate_messages(self, message_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        """`locate_message` of several ids at once: each id's places (an empty list: none).

        One round trip where the store can (SQLiteStore: one query); a lazy handle
        checks the ids of a batch it appends with it.
        """
        ...

    async def list_segments(self) -> dict[str, float]:
        """Every segment id, with the Unix time of its last write.

        Where positions were written out of order, a store may give an earlier one
        (`SQLiteStore`: the time its last position was written, or it was made or marked,
        if later); `delete_segments(not_written_since=...)` checks every write.
        """
        ...

    async def delete_segments(
        self, segment_ids: Collection[str], *, not_written_since: float | None = None
    ) -> int:
        """Delete these segments and all their rows; returns how many there were.

        With `not_written_since` (a Unix time), only those whose last write (or mark, see
        `put_record`) is not after it, checked atomically with each deletion.
        """
        ...

    async def put_blob(self, data: bytes) -> str:
        """Store bytes under their SHA-256 hex digest and return the digest."""
        ...

    async def get_blob(self, digest: str) -> bytes | None:
        """The bytes stored under `digest`, or None."""
        ...

    async def list_blobs(self) -> dict[str, float]:
        """Every blob digest, with the Unix time it was (last) written."""
        ...

    async def delete_blobs(
        self, digests: Collection[str], *, not_written_since: float | None = None
    ) -> int:
        """Delete these blobs; returns how many there were.

        With `not_written_since`, only those not written (or marked) after it, as
        `delete_segments`.
        """
        ...

    async def vacuum(self, *, grace: float = DEFAULT_VACUUM_GRACE) -> VacuumReport:
        """Delete segments and blobs no record references, older than `grace` seconds."""
        ...


LibraryError: TypeAlias = (
    type[StoreUnavailableError] | type[StoreCorruptedError] | type[ConflictError]
)


class ErrorRule(NamedTuple):
    """A row of a store's table of driver errors: what such an error means here.

    A driver error that is one of `drivers` and whose message contains `when` becomes
    an `error` (None: it passes through as it is). The first matching row wins.
    """

    drivers: type[Exception] | tuple[type[Exception], ...]
    error: LibraryError | None
    when: str = ""


ErrorTable: TypeAlias = tuple[ErrorRule, ...]

CONNECTION_ERRORS: ErrorTable = (
    ErrorRule((ConnectionError, TimeoutError, socket.gaierror), StoreUnavailableError),
    # asyncio reached none of a host's addresses (refused on several, or unreachable)
    ErrorRule(OSError, StoreUnavailableError, "Connect call failed"),
)
"""The operating system's errors for a server or network file system out of reach."""


def translate_error(
    exc: Exception, table: ErrorTable, *, store: object, operation: str
) -> AgentThreadsError | None:
    """The library error `table` makes of a driver error, or None to let it pass.

    The error names the store by its `repr` (its location, never a password) and the
    `operation`, and quotes the driver's message; raise it `from exc`.
    """
    for rule in table:
        if isinstance(exc, rule.drivers) and rule.when in str(exc):
            if rule.error is None:
                return None
            detail = f"{type(exc).__name__}: {exc}" if str(exc) else _silent(exc)
            if issubclass(rule.error, StoreUnavailableError):
                return StoreUnavailableError(repr(store), operation=operation, detail=detail)
            return rule.error(repr(store), detail=f"{detail} (during {operation})")
    return None


@overload
def check_timeout(seconds: float, *, what: str, none: Literal[False]) -> float: ...


@overload
def check_timeout(seconds: float | None, *, what: str) -> float | None: ...


def check_timeout(seconds: float | None, *, what: str, none: bool = True) -> float | None:
    """Return `seconds` if it is a usable timeout: positive and finite (or None, if `none`).

    Raises:
        ValueError: naming `what`.
    """
    if seconds is None and none:
        return None
    if (
        isinstance(seconds, bool)
        or not isinstance(seconds, int | float)
        or not 0 < seconds < math.inf
    ):
        allowed = "a positive number of seconds" + (" or None" if none else "")
        raise ValueError(f"{what} must be {allowed}, not {seconds!r}")
    return seconds


def _silent(exc: Exception) -> str:
    """What to say of a driver error without a message (asyncio's timeouts have none)."""
    name = type(exc).__name__
    return f"{name}: no answer in time" if isinstance(exc, TimeoutError) else name


def redact_url(url: str) -> str:
    """`url` without what may be secret (a password, the query string), for messages."""
    try:
        parts = urlsplit(url)
    except ValueError:
        parts = None
    if parts is None or not parts.scheme:
        return "<connection string>"  # not a URL: none of it is shown
    host = parts.netloc.rpartition("@")[2]
    netloc = f"{parts.username}@{host}" if parts.username else host
    return f"{parts.scheme}://{netloc}{parts.path}"


class StoreBase(ABC):
    """What every store shares: argument checks, driver errors, `async with`, `vacuum()`.

    Each `ThreadStore` operation checks its arguments here, once for every store (ids,
    digests, positions, row batches: `InvalidIdError` or `ValueError` before any I/O),
    then calls the store's primitive `_do_<operation>`, which may take its arguments as
    valid. A driver error escaping a primitive becomes the library error the store's
    `driver_errors` table gives (`StoreUnavailableError`, `StoreCorruptedError`,
    `ConflictError`), naming the store by its `repr` (which shows no password) and the
    operation, with the driver's error as `__cause__`; errors the table does not list
    pass through. So a store's module holds only what differs: its primitives, its
    table, its `repr`.
    """

    driver_errors: ClassVar[ErrorTable] = ()
    """What this store's driver errors mean here (see `ErrorRule`)."""
    retry: RetryPolicy = DEFAULT_RETRY
    """The retry policy of writes to this store's threads: `store.retry = RetryPolicy(
    deadline=60.0)` gives every write a minute; a call's `deadline=` still wins."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def _raise_translated(self, exc: Exception, operation: str) -> None:
        """Raise, from `exc`, the library error `driver_errors` gives for it; else return.

        Called from `except` (costs nothing until something is raised): the caller
        re-raises what this lets pass, unchanged.
        """
        error = translate_error(exc, self.driver_errors, store=self, operation=operation)
        if error is not None:
            raise error from exc

    async def __aenter__(self) -> Self:
        try:
            await self._do_open()
        except Exception as exc:
            self._raise_translated(exc, "open")
            raise
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Release connections and files. Idempotent."""
        try:
            await self._do_close()
        except Exception as exc:
            self._raise_translated(exc, "aclose")
            raise

    async def get_record(self, kind: str, record_id: str) -> Record | None:
        _validate_key(kind, record_id)
        try:
            return await self._do_get_record(kind, record_id)
        except Exception as exc:
            self._raise_translated(exc, "get_record")
            raise

    async def put_record(self, record: Record, *, expected_version: int) -> Record:
        validate_record(record)
        try:
            stored = await self._do_put_record(record, expected_version=expected_version)
        except Exception as exc:
            self._raise_translated(exc, "put_record")
            raise
        if expected_version == 0:
            await self._hold_references(stored)
        return stored

    async def _hold_references(self, record: Record) -> None:
        """Mark what a new record references as written now; take it back if some is gone.

        After the record is stored, not before: a mark that lands before a running
        vacuum listed the data could still be collected, as that vacuum may have read
        the records before this one was there. Stored first, the record is either seen
        by a vacuum or marks its data after that vacuum's cutoff.
        """
        segments, blobs = held_references(record)
        if not segments and not blobs:
            return
        try:
            gone_segments, gone_blobs = await self._do_mark_written(segments, blobs, time.time())
        except Exception as exc:
            self._raise_translated(exc, "put_record")
            raise
        if gone_segments or gone_blobs:
            with contextlib.suppress(ConflictError):  # written to since: it is its writer's
                await self.delete_record(record.kind, record.id, expected_version=record.version)
            gone = [f"segment {s!r}" for s in sorted(gone_segments)]
            gone += [f"blob {b}" for b in sorted(gone_blobs)]
            raise StoreCorruptedError(
                f"{record.kind} {record.id!r}",
                detail=f"references {', '.join(gone)}, which vacuum() freed after the last"
                " record using it was deleted; the new record was not kept",
            )

    async def delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None = None
    ) -> bool:
        _validate_key(kind, record_id)
        try:
            return await self._do_delete_record(kind, record_id, expected_version=expected_version)
        except Exception as exc:
            self._raise_translated(exc, "delete_record")
            raise

    async def list_records(
        self,
        kind: str | None = None,
        *,
        tags: Collection[str] = (),
        owner: str | None = None,
    ) -> list[Record]:
        wanted = validate_listing(kind, tags)
        if owner is not None:
            validate_id(owner, what="record owner")
        try:
            return await self._do_list_records(kind, tags=wanted, owner=owner)
        except Exception as exc:
            self._raise_translated(exc, "list_records")
            raise

    async def append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        validate_rows(segment_id, start, rows)
        try:
            await self._do_append_rows(segment_id, start, rows)
        except Exception as exc:
            self._raise_translated(exc, "append_rows")
            raise

    async def commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        for write in writes:
            validate_rows(write.segment_id, write.start, write.rows)
        validate_record(record)
        try:
            stored = await self._do_commit(writes, record, expected_version=expected_version)
        except Exception as exc:
            self._raise_translated(exc, "commit")
            raise
        if expected_version == 0:
            await self._hold_references(stored)
        return stored

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        validate_id(segment_id, what="segment id")
        check_span(segment_id, start, end)
        try:
            return await self._do_read_rows(segment_id, start, end)
        except Exception as exc:
            self._raise_translated(exc, "read_rows")
            raise

    async def read_row_arrays(self, segment_id: str, start: int, end: int) -> list[RowArray]:
        validate_id(segment_id, what="segment id")
        check_span(segment_id, start, end)
        try:
            return await self._do_read_row_arrays(segment_id, start, end)
        except Exception as exc:
            self._raise_translated(exc, "read_rows")
            raise

    async def _do_read_row_arrays(self, segment_id: str, start: int, end: int) -> list[RowArray]:
        """`read_rows` joined `ROW_ARRAY_ROWS` rows at a time; a store may do better."""
        rows = await self.read_rows(segment_id, start, end)
        return [
            RowArray(len(batch), f"[{','.join(batch)}]")
            for batch in (rows[i : i + ROW_ARRAY_ROWS] for i in range(0, len(rows), ROW_ARRAY_ROWS))
        ]

    async def locate_message(self, message_id: str) -> list[tuple[str, int]]:
        validate_id(message_id, what="message id")
        try:
            return await self._do_locate_message(message_id)
        except Exception as exc:
            self._raise_translated(exc, "locate_message")
            raise

    async def locate_messages(self, message_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        wanted = list(dict.fromkeys(validate_id(m, what="message id") for m in message_ids))
        if not wanted:
            return {}
        try:
            return await self._do_locate_messages(wanted)
        except Exception as exc:
            self._raise_translated(exc, "locate_messages")
            raise

    async def list_segments(self) -> dict[str, float]:
        try:
            return await self._do_list_segments()
        except Exception as exc:
            self._raise_translated(exc, "list_segments")
            raise

    async def delete_segments(
        self, segment_ids: Collection[str], *, not_written_since: float | None = None
    ) -> int:
        ids = [validate_id(s, what="segment id") for s in segment_ids]
        if not ids:
            return 0
        try:
            return await self._do_delete_segments(ids, not_written_since=not_written_since)
        except Exception as exc:
            self._raise_translated(exc, "delete_segments")
            raise

    async def put_blob(self, data: bytes) -> str:
        digest = digest_of(data)
        try:
            await self._do_put_blob(digest, data)
        except Exception as exc:
            self._raise_translated(exc, "put_blob")
            raise
        return digest

    async def get_blob(self, digest: str) -> bytes | None:
        validate_digest(digest)
        try:
            return await self._do_get_blob(digest)
        except Exception as exc:
            self._raise_translated(exc, "get_blob")
            raise

    async def list_blobs(self) -> dict[str, float]:
        try:
            return await self._do_list_blobs()
        except Exception as exc:
            self._raise_translated(exc, "list_blobs")
            raise

    async def delete_blobs(
        self, digests: Collection[str], *, not_written_since: float | None = None
    ) -> int:
        checked = [validate_digest(d) for d in digests]
        if not checked:
            return 0
        try:
            return await self._do_delete_blobs(checked, not_written_since=not_written_since)
        except Exception as exc:
            self._raise_translated(exc, "delete_blobs")
            raise

    async def vacuum(self, *, grace: float = DEFAULT_VACUUM_GRACE) -> VacuumReport:
        """Delete segments and blobs no record references, older than `grace` seconds."""
        try:
            return await self._do_vacuum(grace=grace)
        except Exception as exc:
            self._raise_translated(exc, "vacuum")
            raise

    # -- the primitives: arguments are valid, lists of ids are not empty -------------------

    async def _do_open(self) -> None:
        """Connect (`async with`); a store without connections keeps this."""
        return None

    @abstractmethod
    async def _do_close(self) -> None: ...

    @abstractmethod
    async def _do_get_record(self, kind: str, record_id: str) -> Record | None: ...

    @abstractmethod
    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record: ...

    @abstractmethod
    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool: ...

    @abstractmethod
    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]: ...

    @abstractmethod
    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None: ...

    @abstractmethod
    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        """Every write's rows and the record's compare-and-set, in one write."""

    @abstractmethod
    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]: ...

    @abstractmethod
    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]: ...

    async def _do_locate_messages(self, message_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
        """Distinct, valid ids' places; one `_do_locate_message` each unless overridden."""
        return {m: await self._do_locate_message(m) for m in message_ids}

    @abstractmethod
    async def _do_list_segments(self) -> dict[str, float]: ...

    @abstractmethod
    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        """Delete, each atomically with the check of its time; how many were deleted."""

    @abstractmethod
    async def _do_put_blob(self, digest: str, data: bytes) -> None: ...

    @abstractmethod
    async def _do_get_blob(self, digest: str) -> bytes | None: ...

    @abstractmethod
    async def _do_list_blobs(self) -> dict[str, float]: ...

    @abstractmethod
    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        """Delete, each atomically with the check of its time; how many were deleted."""

    @abstractmethod
    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        """Set the time of these segments and blobs to `now`; return those missing.

        Each mark is atomic with respect to `_do_delete_segments` and `_do_delete_blobs`
        (a deletion that checks the time sees it, or the mark finds the data gone).
        """

    async def _do_vacuum(self, *, grace: float) -> VacuumReport:
        """Collect garbage through the public operations; a store may add its own cleanup."""
        return await collect_garbage(self, grace=grace)


def _validate_key(kind: str, record_id: str) -> None:
    validate_id(kind, what="record kind")
    validate_id(record_id, what=f"{kind} id")


def digest_of(data: bytes) -> str:
    """The content address of `data`: its SHA-256 hex digest."""
    return hashlib.sha256(data).hexdigest()


def validate_tag(tag: object) -> str:
    """Return `tag` if it is a usable tag: 1-128 characters, no control characters."""
    if not isinstance(tag, str) or not tag or len(tag) > 128 or _CONTROL.search(tag):
        raise InvalidIdError(
            tag, what="tag", reason="must be 1-128 characters without control characters"
        )
    return tag


def validate_record(record: Record) -> None:
    """Check every key of `record` that a store turns into a path or a key."""
    validate_id(record.kind, what="record kind")
    validate_id(record.id, what=f"{record.kind} id")
    if record.owner is not None:
        validate_id(record.owner, what="record owner")
    for tag in record.tags:
        validate_tag(tag)


def validate_listing(kind: str | None, tags: Collection[str]) -> set[str]:
    """Check `list_records`' kind (when given) and tags; returns the tags as a set."""
    if kind is not None:
        validate_id(kind, what="record kind")
    return {validate_tag(t) for t in tags}


_MESSAGE_ID = attrgetter("message_id")


def validate_rows(segment_id: str, start: int, rows: Sequence[Row]) -> None:
    """Check a segment id, a start position and the message ids of rows to append."""
    validate_id(segment_id, what="segment id")
    if start < 0:
        raise ValueError(f"segment {segment_id!r}: start position {start} is negative")
    if not all_valid_ids(list(map(_MESSAGE_ID, rows))):  # the fast path missed: name it
        for row in rows:
            validate_id(row.message_id, what="message id")


FIRST_VERSION_LIMIT = 2**52
"""The largest version a new record is stored at (see `first_version`).

Versions stay exact where numbers are doubles (Redis's Lua scripts, JavaScript clients
of the HTTP API) up to 2**53, so for 2**52 writes of a record at least.
"""


def first_version() -> int:
    """The version a new record is stored at: drawn at random from `[1, FIRST_VERSION_LIMIT]`.

    Random, not 1, so that a record deleted and created again does not repeat the
    versions of its earlier life: a stale handle's compare-and-set then fails instead
    of overwriting the new record (it would succeed only if the new record, after `n`
    writes, reached the handle's version: a chance of about `n / 2**52`).
    """
    return secrets.randbelow(FIRST_VERSION_LIMIT) + 1


def stored_version(expected_version: int) -> int:
    """The version a write over `expected_version` stores (0: a new record, see `Record`)."""
    return expected_version + 1 if expected_version else first_version()


def version_conflict(kind: str, record_id: str, expected: int | None, stored: int) -> ConflictError:
    """The error every store raises when a record's compare-and-set loses."""
    return ConflictError(
        f"{kind} {record_id!r}", detail=f"expected version {expected}, stored version {stored}"
    )


MAX_POSITION = 2**63 - 1
"""The last position a row can hold (a signed 64-bit key, as SQL databases store it)."""


def check_span(segment_id: str, start: int, end: int) -> None:
    """Refuse, before any I/O, a read reaching positions no row can hold.

    Raises:
        StoreCorruptedError: `start` is negative or `end` is past `MAX_POSITION + 1`
            (the rows asked for are missing, as with any other missing range).
    """
    if end > start and (start < 0 or end > MAX_POSITION + 1):
        raise StoreCorruptedError(
            f"segment {segment_id!r}",
            detail=f"positions {start}..{end - 1} requested: rows hold 0..{MAX_POSITION}",
        )


def check_read(segment_id: str, start: int, end: int, rows: Sequence[str]) -> list[str]:
    """Return `rows` if it has one row per position of `[start, end)`, else raise."""
    if len(rows) != max(0, end - start):
        raise StoreCorruptedError(
            f"segment {segment_id!r}",
            detail=f"positions {start}..{end - 1} requested, {len(rows)} rows found",
        )
    return list(rows)


LOGS_KEY = "logs"
"""The record data key listing ranges of log rows (a thread's checkpoint log)."""


def record_references(record: Record) -> tuple[set[str], set[str]]:
    """The segment ids and blob digests that `record` keeps alive by itself.

    Those are the segments of its `ranges` and of its `logs`, and its `blobs`; what
    the rows of its logs reference comes on top (see `log_row_references`).
    """
    segments = {r[0] for r in _ranges_of(record.data.get("ranges"))}
    segments |= {r[0] for r in _ranges_of(record.data.get(LOGS_KEY))}
    blobs: set[str] = set()
    refs = record.data.get("blobs")
    if isinstance(refs, list):
        blobs.update(ref for ref in refs if isinstance(ref, str))
    return segments, blobs


def record_logs(record: Record) -> list[tuple[str, int, int]]:
    """The `(segment_id, start, end)` ranges of log rows `record` lists under `logs`."""
    return _ranges_of(record.data.get(LOGS_KEY))


def _ranges_of(value: object) -> list[tuple[str, int, int]]:
    found: list[tuple[str, int, int]] = []
    for item in value if isinstance(value, list) else ():
        if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
            start, end = item[1], item[2]
            if isinstance(start, int) and isinstance(end, int):
                found.append((item[0], start, end))
    return found


def log_row_references(text: str, *, where: str) -> tuple[set[str], set[str]]:
    """The segment ids and blob digests a log row references.

    A log row (a checkpoint, say) is a JSON object whose `"r"` holds ranges
    `[packed segment id, start, end]` and whose `"b"` holds a packed blob digest (see
    `_ids.pack_id`, `_ids.pack_digest`); other keys are the row owner's business.

    Raises:
        StoreCorruptedError: the row cannot be read, naming `where`.
    """
    try:
        row = json.loads(text)
        if not isinstance(row, dict):
            raise ValueError("not a JSON object")
        segments = {unpack_id(r[0]) for r in row.get("r", ())}
        digest = row.get("b")
        blobs = set() if digest is None else {unpack_digest(digest)}
    except (TypeError, ValueError, IndexError, AttributeError) as exc:  # e.g. a number for an id
        raise StoreCorruptedError(where, detail=f"unreadable log row: {exc}") from exc
    return segments, blobs


async def _references(store: ThreadStore, record: Record) -> tuple[set[str], set[str]]:
    """What `record` keeps alive, its log rows' references included.

    A log that cannot be read because its record moved on since it was listed (deleted,
    or its log copied elsewhere, and another vacuum freed the old rows) is read as the
    record now lists it; only a record that still lists unreadable rows is an error.
    """
    segments, blobs = record_references(record)
    while True:
        try:
            for segment_id, start, end in record_logs(record):
                rows = await store.read_rows(segment_id, start, end)
                for position, text in enumerate(rows, start):
                    where = f"{record.kind} {record.id!r} log {segment_id!r} position {position}"
                    seg_refs, blob_refs = log_row_references(text, where=where)
                    segments |= seg_refs
                    blobs |= blob_refs
            return segments, blobs
        except StoreCorruptedError:
            fresh = await store.get_record(record.kind, record.id)
            if fresh is None:
                return segments, blobs
            if record_logs(fresh) == record_logs(record):
                raise
            record = fresh
            seg_refs, blob_refs = record_references(record)
            segments |= seg_refs
            blobs |= blob_refs


def held_references(record: Record) -> tuple[list[str], list[str]]:
    """The segment ids and blob digests a new record needs to exist (see `put_record`).

    Those of `record_references` that a store can hold: valid ids, segments of
    non-empty ranges. Sorted.
    """
    ranges = _ranges_of(record.data.get("ranges")) + record_logs(record)
    segments = {s for s, start, end in ranges if end > start and _is_valid(validate_id, s)}
    blobs = {b for b in record_references(record)[1] if _is_valid(validate_digest, b)}
    return sorted(segments), sorted(blobs)


def _is_valid(check: Callable[[str], str], value: str) -> bool:
    try:
        check(value)
    except ValueError:
        return False
    return True


async def collect_garbage(store: ThreadStore, *, grace: float) -> VacuumReport:
    """The shared body of every store's `vacuum()`: delete unreferenced, old data.

    Lists segments and blobs before records, so anything written after the listing
    is not a candidate, and anything referenced by then is kept. A record stored after
    the records were read marks what it references after the cutoff, and the deletion
    spares what was written (or marked) since the cutoff (see `put_record`).
    """
    cutoff = time.time() - grace
    segments = await store.list_segments()
    blobs = await store.list_blobs()
    live_segments: set[str] = set()
    live_blobs: set[str] = set()
    for record in await store.list_records():
        seg_refs, blob_refs = await _references(store, record)
        live_segments |= seg_refs
        live_blobs |= blob_refs
    dead_segments = [s for s, t in segments.items() if s not in live_segments and t <= cutoff]
    dead_blobs = [b for b, t in blobs.items() if b not in live_blobs and t <= cutoff]
    segments_deleted = blobs_deleted = 0
    if dead_segments:
        segments_deleted = await store.delete_segments(dead_segments, not_written_since=cutoff)
    if dead_blobs:
        blobs_deleted = await store.delete_blobs(dead_blobs, not_written_since=cutoff)
    return VacuumReport(segments_deleted=segments_deleted, blobs_deleted=blobs_deleted)


__all__ = [
    "CONNECTION_ERRORS",
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_VACUUM_GRACE",
    "FIRST_VERSION_LIMIT",
    "LOGS_KEY",
    "MAX_POSITION",
    "ROW_ARRAY_ROWS",
    "ErrorRule",
    "ErrorTable",
    "Record",
    "Row",
    "RowArray",
    "RowWrite",
    "StoreBase",
    "ThreadStore",
    "VacuumReport",
    "check_read",
    "check_span",
    "check_timeout",
    "collect_garbage",
    "digest_of",
    "first_version",
    "held_references",
    "log_row_references",
    "record_logs",
    "record_references",
    "redact_url",
    "stored_version",
    "translate_error",
    "validate_digest",
    "validate_listing",
    "validate_record",
    "validate_rows",
    "validate_tag",
    "version_conflict",
]
