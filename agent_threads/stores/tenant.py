"""TenantStore: one tenant's part of a shared store, under the tenant's namespace.

`TenantStore(inner, "acme")` is a `ThreadStore` that keeps everything it is given in
`inner` under the namespace `acme:`: record ids, record owners and segment ids are
stored with that prefix and read back without it, so every library call (threads,
forks, checkpoints, workflows, views) works unchanged for the tenant, and another
tenant's thread is simply not there (`ThreadNotFoundError`). Records, segments and
message locations of other namespaces are never listed, read or deleted through it.

The stored data stays consistent for the inner store itself: where the store protocol
says data references segments (a record's `ranges` and `logs`, a log row's `r`, see
`stores.base`), the prefixed ids are stored, so the inner store's `vacuum()`, which
sees every record of every tenant, keeps every tenant's data alive. `vacuum()` here
is the inner store's. Each record also carries the label `@tenant NAME`, so listing
one tenant's records is a label lookup in the inner store.

Blobs are content-addressed, so tenants share them: one tenant reads a blob only by
its SHA-256 digest (which takes knowing the content), and `list_blobs` and
`delete_blobs` skip the blobs other tenants' records reference (they read every
record to know: they are for maintenance, `vacuum()` does not use them).

Ids of a tenant are shorter than the store's limit by the prefix (`max_id_length`).
Tenant names are 1-32 letters, digits, `_` or `-`, so no namespace is the start of
another. A store holding tenants should hold nothing else: an id the library or a
person chose that happens to start with `NAME:` would read as that tenant's.
Opening and closing a TenantStore leaves the inner store alone: its owner does that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence

from pydantic import JsonValue

from agent_threads.core.ids import MAX_ID_LENGTH, pack_id, unpack_id
from agent_threads.errors import AgentThreadsError, InvalidIdError
from agent_threads.stores.base import (
    LOGS_KEY,
    Record,
    Row,
    RowWrite,
    StoreBase,
    ThreadStore,
    VacuumReport,
    log_row_references,
    record_logs,
    record_references,
)

_TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}")
_Rename = Callable[[str], str]
_RANGE_KEYS = ("ranges", LOGS_KEY)
"""The record data keys whose ranges name segments (see `stores.base.record_references`)."""


def validate_tenant(name: object) -> str:
    """Return `name` if it can name a tenant: 1-32 letters, digits, `_` or `-`."""
    if not isinstance(name, str) or not _TENANT.fullmatch(name):
        raise InvalidIdError(
            name,
            what="tenant",
            reason="must be 1-32 letters, digits, _ or -, starting with a letter or digit",
        )
    return name


class TenantStore(StoreBase):
    """One tenant's view of `inner`: its records, segments and message locations only."""

    def __init__(self, inner: ThreadStore, tenant: str) -> None:
        self._inner = inner
        self._tenant = validate_tenant(tenant)
        self._prefix = f"{tenant}:"
        self._label = f"@tenant {tenant}"
        self.retry = inner.retry

    @property
    def inner(self) -> ThreadStore:
        """The shared store."""
        return self._inner

    @property
    def tenant(self) -> str:
        """The tenant's name."""
        return self._tenant

    @property
    def max_id_length(self) -> int:
        """The longest id (record, owner, segment) this tenant may use."""
        return MAX_ID_LENGTH - len(self._prefix)

    def __repr__(self) -> str:
        return f"TenantStore({self._inner!r}, tenant={self._tenant!r})"

    # -- ids, records and rows, in and out -------------------------------------------------

    def _in(self, value: str, what: str) -> str:
        if len(value) > self.max_id_length:
            raise InvalidIdError(
                value,
                what=what,
                reason=f"longer than {self.max_id_length} characters, the most tenant"
                f" {self._tenant!r} may use (its ids are stored after {self._prefix!r})",
            )
        return self._prefix + value

    def _mine(self, value: str) -> bool:
        return value.startswith(self._prefix)

    def _out(self, value: str) -> str:
        return value[len(self._prefix) :] if self._mine(value) else value

    def _record_in(self, record: Record) -> Record:
        return Record(
            kind=record.kind,
            id=self._in(record.id, f"{record.kind} id"),
            version=record.version,
            owner=None if record.owner is None else self._in(record.owner, "record owner"),
            tags=tuple(dict.fromkeys([*record.tags, self._label])),
            data=_with_ranges(record.data, self._prefix.__add__),
        )

    def _record_out(self, record: Record) -> Record:
        return Record(
            kind=record.kind,
            id=self._out(record.id),
            version=record.version,
            owner=None if record.owner is None else self._out(record.owner),
            tags=tuple(t for t in record.tags if t != self._label),
            data=_with_ranges(record.data, self._out),
        )

    def _raise_translated(self, exc: Exception, operation: str) -> None:
        """Show the inner store's errors in the tenant's ids (they pass on unchanged else)."""
        if isinstance(exc, AgentThreadsError):
            _strip_namespace(exc, self._prefix)

    def _rows_in(self, rows: Sequence[Row]) -> list[Row]:
        return [Row(r.message_id, _log_row(r.data, self._prefix.__add__)) for r in rows]

    # -- the primitives ----------------------------------------------------------------

    async def _do_close(self) -> None:
        return None  # the inner store is its owner's to close

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        found = await self._inner.get_record(kind, self._in(record_id, f"{kind} id"))
        return None if found is None else self._record_out(found)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        stored = await self._inner.put_record(
            self._record_in(record), expected_version=expected_version
        )
        return self._record_out(stored)

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        physical = [
            RowWrite(self._in(w.segment_id, "segment id"), w.start, self._rows_in(w.rows))
            for w in writes
        ]
        stored = await self._inner.commit(
            physical, self._record_in(record), expected_version=expected_version
        )
        return self._record_out(stored)

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
        return await self._inner.delete_record(
            kind, self._in(record_id, f"{kind} id"), expected_version=expected_version
        )

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        found = await self._inner.list_records(
            kind,
            tags=[*sorted(tags), self._label],
            owner=None if owner is None else self._in(owner, "record owner"),
        )
        return [self._record_out(r) for r in found if self._mine(r.id)]

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        await self._inner.append_rows(
            self._in(segment_id, "segment id"), start, self._rows_in(rows)
        )

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        rows = await self._inner.read_rows(self._in(segment_id, "segment id"), start, end)
        return [_log_row(text, self._out) for text in rows]

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        places = await self._inner.locate_message(message_id)
        return [(self._out(s), p) for s, p in places if self._mine(s)]

    async def _do_locate_messages(self, message_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
        found = await self._inner.locate_messages(message_ids)
        return {m: [(self._out(s), p) for s, p in found[m] if self._mine(s)] for m in found}

    async def _do_list_segments(self) -> dict[str, float]:
        segments = await self._inner.list_segments()
        return {self._out(s): t for s, t in segments.items() if self._mine(s)}

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        physical = [self._in(s, "segment id") for s in segment_ids]
        return await self._inner.delete_segments(physical, not_written_since=not_written_since)

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        await self._inner.put_blob(data)

    async def _do_get_blob(self, digest: str) -> bytes | None:
        return await self._inner.get_blob(digest)

    async def _do_list_blobs(self) -> dict[str, float]:
        foreign = await self._foreign_blobs()
        return {d: t for d, t in (await self._inner.list_blobs()).items() if d not in foreign}

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        foreign = await self._foreign_blobs()
        mine = [d for d in digests if d not in foreign]
        return await self._inner.delete_blobs(mine, not_written_since=not_written_since)

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        return set(), set()  # the inner store's put_record and commit marked them

    async def _do_vacuum(self, *, grace: float) -> VacuumReport:
        return await self._inner.vacuum(grace=grace)

    async def _foreign_blobs(self) -> set[str]:
        """The blobs other namespaces' records (and their logs' rows) reference."""
        blobs: set[str] = set()
        for record in await self._inner.list_records():
            if self._mine(record.id):
                continue
            blobs |= record_references(record)[1]
            for segment_id, start, end in record_logs(record):
                for text in await self._inner.read_rows(segment_id, start, end):
                    blobs |= log_row_references(text, where=f"segment {segment_id!r}")[1]
        return blobs


def _strip_namespace(error: AgentThreadsError, prefix: str) -> None:
    """Take `prefix` off the ids an error names, in its message and its attributes."""
    quoted = re.compile(r"(['\"])" + re.escape(prefix))
    error.args = tuple(quoted.sub(r"\1", a) if isinstance(a, str) else a for a in error.args)
    for name, value in list(vars(error).items()):
        if isinstance(value, str):
            plain = value[len(prefix) :] if value.startswith(prefix) else value
            setattr(error, name, quoted.sub(r"\1", plain))


def _with_ranges(data: dict[str, JsonValue], rename: _Rename) -> dict[str, JsonValue]:
    """`data` with the segment ids of its `ranges` and `logs` renamed (others as they are)."""
    if not any(isinstance(data.get(key), list) for key in _RANGE_KEYS):
        return data
    renamed = dict(data)
    for key in _RANGE_KEYS:
        value = data.get(key)
        if isinstance(value, list):
            renamed[key] = [_renamed_range(item, rename) for item in value]
    return renamed


def _renamed_range(item: JsonValue, rename: _Rename) -> JsonValue:
    if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
        return [rename(item[0]), item[1], item[2]]
    return item


def _log_row(text: str, rename: _Rename) -> str:
    """A row with the segment ids of its `r` renamed, if it is a log row; else `text`.

    A log row is a JSON object whose `r` lists `[packed segment id, start, end]`
    (`stores.base.log_row_references`); message rows have no top-level `r`. Log rows
    are written as compact JSON, and written back the same way.
    """
    if '"r"' not in text:
        return text
    try:
        row = json.loads(text)
        if not isinstance(row, dict) or not isinstance(row.get("r"), list):
            return text
        ranges = [_renamed_packed(item, rename) for item in row["r"]]
    except ValueError:  # not JSON, or not a packed id: not a log row this store wrote
        return text
    return json.dumps({**row, "r": ranges}, ensure_ascii=False, separators=(",", ":"))


def _renamed_packed(item: object, rename: _Rename) -> object:
    if isinstance(item, list) and len(item) == 3 and isinstance(item[0], str):
        return [pack_id(rename(unpack_id(item[0]))), item[1], item[2]]
    return item


__all__ = ["TenantStore", "validate_tenant"]
