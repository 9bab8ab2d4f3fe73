"""The step log: a workflow's closed step records, stored as ranges over segments.

Records are segment rows exactly like messages (keyed by the record id), so the log
gets the piece table's properties: appends never rewrite, and a checkpoint or a fork
shares the ranges instead of copying the records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from agent_threads.core import pieces
from agent_threads.core.ids import new_id
from agent_threads.core.pieces import OpenSegment, Range, Ranges
from agent_threads.errors import ConflictError, StoreCorruptedError
from agent_threads.stores.base import Row, ThreadStore
from agent_threads.threads.workflow.execution import StepRecord


@dataclass(frozen=True, slots=True)
class StepLog:
    """The ranges of a step log and the segment its owner may extend.

    Stored in the workflow record under the keys a chat thread keeps its messages in
    (`ranges`, `head`, `segment`: see `records.workflow_data`), so `vacuum()` keeps the
    log's segments alive the same way.
    """

    ranges: Ranges = ()
    open_segment: OpenSegment | None = None

    @property
    def length(self) -> int:
        """How many records the log holds."""
        return pieces.length(self.ranges)

    def shared(self) -> StepLog:
        """The same records, without the right to extend the segment (for forks)."""
        return StepLog(self.ranges, None)


async def read_records(store: ThreadStore, ranges: Sequence[Range]) -> list[StepRecord]:
    """The records the ranges hold, in order.

    Raises:
        StoreCorruptedError: a row is missing or is not a step record.
    """
    records: list[StepRecord] = []
    for r in ranges:
        rows = await store.read_rows(r.segment_id, r.start, r.end)
        for offset, row in enumerate(rows):
            try:
                records.append(StepRecord.model_validate_json(row))
            except ValidationError as exc:
                where = f"segment {r.segment_id!r} position {r.start + offset}"
                raise StoreCorruptedError(where, detail=f"undecodable step record: {exc}") from exc
    return records


async def append_records(
    store: ThreadStore, step_log: StepLog, records: Sequence[StepRecord], closed: list[StepRecord]
) -> StepLog:
    """Write `records` after the log's end and return the log that includes them.

    Rows only: the caller publishes the returned log in its record afterwards, so a
    crash in between leaves unreferenced rows, never a torn log. `closed` is the
    in-memory copy of the log's records, used when the range list is consolidated.
    """
    if not records:
        return step_log
    head = step_log.length
    rows = [Row(r.id, r.model_dump_json()) for r in records]
    if pieces.can_extend(step_log.ranges, step_log.open_segment):
        assert step_log.open_segment is not None
        segment_id = step_log.open_segment.segment_id
        try:
            await store.append_rows(segment_id, head, rows)
            return _extended(step_log.ranges, segment_id, head, len(rows))
        except ConflictError:
            pass  # rows a crashed attempt left at these positions: open a new segment
    start = pieces.consolidation_start(step_log.ranges)
    if start is None:
        start = head
    moved = [Row(r.id, r.model_dump_json()) for r in closed[start:head]]
    segment_id = new_id()
    await store.append_rows(segment_id, start, moved + rows)
    return _extended(
        pieces.prefix(step_log.ranges, start), segment_id, start, len(moved) + len(rows)
    )


def _extended(ranges: Ranges, segment_id: str, start: int, count: int) -> StepLog:
    new_ranges = pieces.extend(ranges, segment_id, start, count)
    return StepLog(new_ranges, OpenSegment(segment_id, start + count))
