"""MemoryStore: the in-process reference implementation of the ThreadStore protocol."""

from __future__ import annotations

import time
from collections.abc import Sequence

from agent_threads.core.copies import replaced
from agent_threads.errors import ConflictError
from agent_threads.stores.base import (
    Record,
    Row,
    RowWrite,
    StoreBase,
    check_read,
    record_json,
    stored_version,
    version_conflict,
)


class _Segment:
    __slots__ = ("rows", "written_at")

    def __init__(self) -> None:
        self.rows: dict[int, Row] = {}
        self.written_at = time.time()


class MemoryStore(StoreBase):
    """Keeps everything in dicts; for tests, scratch work and the reference semantics.

    Records are kept as JSON text, as a real store would keep them, so nothing a caller
    holds can change what is stored. Every method runs without awaiting in between,
    which makes each operation atomic on one event loop.
    """

    def __init__(self) -> None:
        self._records: dict[tuple[str, str], str] = {}
        self._segments: dict[str, _Segment] = {}
        self._by_message: dict[str, set[tuple[str, int]]] = {}
        self._blobs: dict[str, tuple[bytes, float]] = {}
        self._closed = False

    async def _do_close(self) -> None:
        self._closed = True

    @property
    def is_closed(self) -> bool:
        """Whether `aclose()` was called (a MemoryStore keeps working after it)."""
        return self._closed

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        text = self._records.get((kind, record_id))
        return None if text is None else Record.model_validate_json(text)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        key = (record.kind, record.id)
        current = self._records.get(key)
        found = 0 if current is None else Record.model_validate_json(current).version
        if found != expected_version:
            raise version_conflict(record.kind, record.id, expected_version, found)
        stored = replaced(record, {"version": stored_version(expected_version)})
        self._records[key] = record_json(stored)
        return stored

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
        current = await self._do_get_record(kind, record_id)
        if current is None:
            return False
        if expected_version is not None and current.version != expected_version:
            raise version_conflict(kind, record_id, expected_version, current.version)
        del self._records[(kind, record_id)]
        return True

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        found = []
        for (record_kind, _), text in sorted(self._records.items()):
            if kind is not None and record_kind != kind:
                continue
            record = Record.model_validate_json(text)
            if owner is not None and record.owner != owner:
                continue
            if tags <= set(record.tags):
                found.append(record)
        return found

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        self._check_free(segment_id, start, len(rows))
        self._write_rows(segment_id, start, rows)

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        current = self._records.get((record.kind, record.id))
        found = 0 if current is None else Record.model_validate_json(current).version
        if found != expected_version:
            raise version_conflict(record.kind, record.id, expected_version, found)
        claimed: set[tuple[str, int]] = set()
        for write in writes:  # every check before any write: all or nothing
            self._check_free(write.segment_id, write.start, len(write.rows))
            span = {(write.segment_id, write.start + i) for i in range(len(write.rows))}
            if claimed & span:
                position = min(p for _, p in claimed & span)
                raise _taken(write.segment_id, position)
            claimed |= span
        for write in writes:
            self._write_rows(write.segment_id, write.start, write.rows)
        return await self._do_put_record(record, expected_version=expected_version)

    def _check_free(self, segment_id: str, start: int, count: int) -> None:
        segment = self._segments.get(segment_id)
        if segment is not None:
            for position in range(start, start + count):
                if position in segment.rows:
                    raise _taken(segment_id, position)

    def _write_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        segment = self._segments.get(segment_id)
        if segment is None:
            segment = self._segments[segment_id] = _Segment()
        for offset, row in enumerate(rows):
            segment.rows[start + offset] = Row(row.message_id, row.data)
            self._by_message.setdefault(row.message_id, set()).add((segment_id, start + offset))
        segment.written_at = time.time()

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        segment = self._segments.get(segment_id)
        rows = segment.rows if segment is not None else {}
        if end - start > len(rows):  # more positions than rows: some are missing
            return check_read(segment_id, start, end, [])
        found = [rows[p].data for p in range(start, end) if p in rows]
        return check_read(segment_id, start, end, found)

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        return sorted(self._by_message.get(message_id, ()))

    async def _do_list_segments(self) -> dict[str, float]:
        return {sid: seg.written_at for sid, seg in self._segments.items()}

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        deleted = 0
        for segment_id in segment_ids:
            segment = self._segments.get(segment_id)
            if segment is None or _written_since(segment.written_at, not_written_since):
                continue
            del self._segments[segment_id]
            deleted += 1
            for position, row in segment.rows.items():
                places = self._by_message.get(row.message_id)
                if places is not None:
                    places.discard((segment_id, position))
                    if not places:
                        del self._by_message[row.message_id]
        return deleted

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        self._blobs[digest] = (bytes(data), time.time())

    async def _do_get_blob(self, digest: str) -> bytes | None:
        entry = self._blobs.get(digest)
        return None if entry is None else entry[0]

    async def _do_list_blobs(self) -> dict[str, float]:
        return {digest: written for digest, (_, written) in self._blobs.items()}

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        deleted = 0
        for digest in digests:
            entry = self._blobs.get(digest)
            if entry is not None and not _written_since(entry[1], not_written_since):
                del self._blobs[digest]
                deleted += 1
        return deleted

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        for segment_id in segment_ids:
            if segment_id in self._segments:
                self._segments[segment_id].written_at = now
        for digest in digests:
            if digest in self._blobs:
                self._blobs[digest] = (self._blobs[digest][0], now)
        missing_segments = {s for s in segment_ids if s not in self._segments}
        return missing_segments, {d for d in digests if d not in self._blobs}


def _taken(segment_id: str, position: int) -> ConflictError:
    return ConflictError(
        f"segment {segment_id!r}", detail=f"position {position} is already written"
    )


def _written_since(written_at: float, cutoff: float | None) -> bool:
    return cutoff is not None and written_at > cutoff
