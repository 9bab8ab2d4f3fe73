"""Copying threads between stores: records, segment rows and blobs, as the source holds them.

`plan_copy(source, thread_ids=...)` reads what the threads need: their records (with
their ancestors, a workflow's sub-threads and checkpoints, the records they own), the
segment rows those records and their checkpoint logs reference, and the blobs. Nothing is
rebuilt through the thread API: rows keep their segments and positions, records their
ids, so segments the source shares between forks and checkpoints are shared in the
target too, and the copy costs the source's size, not the sum of its threads' lengths.

`CopyPlan.run(target)` writes blobs, then rows, then records (what a record references
is there before it), and skips what the target already holds equal, so a copy that
stopped half-way is resumed by running it again. A record the target holds with other
content is left alone and reported as a conflict. `verify_copy` then opens each thread
in both stores and compares message counts (read back from the target's rows), state
hashes and checkpoint lists.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_threads.core.ids import unpack_digest, unpack_id, validate_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.errors import (
    ConflictError,
    StoreCorruptedError,
    ThreadNotFoundError,
)
from agent_threads.stores.base import Record, Row, ThreadStore, record_logs, record_references
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.records import (
    WORKFLOW_CHECKPOINT_KIND,
    read_cut_data,
    read_workflow_data,
)
from agent_threads.threads.workflow.thread import WorkflowThread

CHUNK_ROWS = 500
"""Rows read and written per store call while copying a segment."""

Unit = Literal["blobs", "rows", "records"]
"""What a copy's progress counts."""

Progress = Callable[[Unit, int], None]
"""Told how many more blobs, rows or records the copy has handled (copied or skipped)."""


@dataclass(frozen=True, slots=True)
class Span:
    """Positions `start <= p < end` of one segment, to copy as they are."""

    segment_id: str
    start: int
    end: int


@dataclass(slots=True)
class CopyReport:
    """What `CopyPlan.run` did: how much it wrote, and skipped as already there."""

    records_copied: int = 0
    records_skipped: int = 0
    rows_copied: int = 0
    rows_skipped: int = 0
    blobs_copied: int = 0
    blobs_skipped: int = 0
    conflicts: list[str] = field(default_factory=list)
    """The records the target holds with other content (`kind id`), left as they were."""


class ThreadCheck(BaseModel):
    """One thread compared in the source and the target after a copy."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    thread_id: str
    kind: str
    messages: tuple[int, int]
    """The message count in the source, and the messages read back from the target."""
    state: tuple[str | None, str | None]
    """The state hash in the source and in the target."""
    checkpoints: tuple[int, int]
    """How many checkpoints the thread has in the source and in the target."""
    problem: str | None = None
    """What differs, if anything (None: the copy is equal)."""

    @property
    def ok(self) -> bool:
        """Whether the thread is the same in both stores."""
        return self.problem is None


@dataclass(frozen=True, slots=True)
class CopyPlan:
    """What a copy writes, read from the source: records, row spans and blobs."""

    records: tuple[Record, ...]
    spans: tuple[Span, ...]
    blobs: tuple[str, ...]

    @property
    def thread_ids(self) -> list[str]:
        """The ids of the threads the copy holds (sub-threads and ancestors included)."""
        return [r.id for r in self.records if r.kind == THREAD_KIND]

    @property
    def row_count(self) -> int:
        """How many segment rows the copy reads."""
        return sum(s.end - s.start for s in self.spans)

    async def run(
        self,
        source: ThreadStore,
        target: ThreadStore,
        *,
        progress: Progress | None = None,
        replace: bool = False,
    ) -> CopyReport:
        """Write the plan into `target`: blobs, then rows, then records.

        A record the target holds with other content (the source moved on since an
        earlier copy, or the target's thread was written to) is a conflict, left as it
        is, unless `replace`: then the source's record replaces it.

        Raises:
            StoreCorruptedError: the source lost a row or blob the plan names.
            ConflictError: a row position the target holds has other content.
        """
        tell = progress or _silent
        report = CopyReport()
        await _copy_blobs(source, target, self.blobs, report, tell)
        for span in self.spans:
            await _copy_span(source, target, span, report, tell)
        await _copy_records(target, self.records, report, tell, replace=replace)
        return report


def _silent(unit: Unit, count: int) -> None:
    return None


# -- planning ------------------------------------------------------------------------------


async def plan_copy(source: ThreadStore, *, thread_ids: Collection[str] | None = None) -> CopyPlan:
    """What copying `thread_ids` (default: every record of the store) has to write.

    With `thread_ids`, a thread comes with its ancestors (for its lineage), a workflow
    with its sub-threads and checkpoints, and every record with those it owns (legacy
    checkpoint records).

    Raises:
        InvalidIdError: an id is malformed.
        ThreadNotFoundError: the source has no thread with one of the ids.
        StoreCorruptedError: a record or checkpoint log row cannot be read.
    """
    if thread_ids is None:
        records = await source.list_records()
    else:
        records = await _closure(source, [validate_id(t, what="thread id") for t in thread_ids])
    spans: dict[str, list[tuple[int, int]]] = {}
    blobs: set[str] = set()
    for record in records:
        await _references(source, record, spans, blobs)
    return CopyPlan(
        records=tuple(sorted(records, key=_record_order)),
        spans=tuple(_merged(spans)),
        blobs=tuple(sorted(blobs)),
    )


async def _closure(source: ThreadStore, wanted: list[str]) -> list[Record]:
    """The records of `wanted` threads and of everything they need, each once."""
    found: dict[tuple[str, str], Record] = {}
    queue = [(thread_id, True) for thread_id in wanted]
    while queue:
        thread_id, required = queue.pop()
        if (THREAD_KIND, thread_id) in found:
            continue
        record = await source.get_record(THREAD_KIND, thread_id)
        if record is None:
            if required:
                raise ThreadNotFoundError(thread_id)
            continue  # a deleted ancestor: the lineage stops there, as in the source
        found[(THREAD_KIND, thread_id)] = record
        queue += [(t, False) for t in _needed_threads(record)]
        for owned in await source.list_records(owner=thread_id):
            found[(owned.kind, owned.id)] = owned
            queue += [(t, False) for t in _needed_threads(owned)]
    return list(found.values())


def _needed_threads(record: Record) -> list[str]:
    """The threads a record points to: a parent, a workflow's sub-threads (now and in cuts)."""
    if record.kind == WORKFLOW_CHECKPOINT_KIND:
        return [place.thread_id for place in read_cut_data(record).sub_threads.values()]
    if record.kind != THREAD_KIND:
        return []
    needed = [p] if isinstance(p := record.data.get("parent_id"), str) else []
    if record.data.get("type") == WorkflowThread.type_name:
        needed += read_workflow_data(record).sub_threads.values()
    return needed


async def _references(
    source: ThreadStore, record: Record, spans: dict[str, list[tuple[int, int]]], blobs: set[str]
) -> None:
    """Add the row spans and blobs `record` and the rows of its logs reference."""
    blobs |= record_references(record)[1]
    logs = record_logs(record)
    for segment_id, start, end in [*_ranges(record.data.get("ranges")), *logs]:
        if end > start:
            spans.setdefault(segment_id, []).append((start, end))
    for segment_id, start, end in logs:
        rows = await source.read_rows(segment_id, start, end)
        for position, text in enumerate(rows, start):
            where = f"{record.kind} {record.id!r} log {segment_id!r} position {position}"
            ranges, digest = _log_row(text, where)
            for seg, low, high in ranges:
                if high > low:
                    spans.setdefault(seg, []).append((low, high))
            if digest is not None:
                blobs.add(digest)


def _ranges(value: object) -> list[tuple[str, int, int]]:
    """The `[segment_id, start, end]` triples of a record's `ranges`."""
    found: list[tuple[str, int, int]] = []
    for item in value if isinstance(value, list) else ():
        if (
            isinstance(item, list)
            and len(item) == 3
            and isinstance(item[0], str)
            and isinstance(item[1], int)
            and isinstance(item[2], int)
        ):
            found.append((item[0], item[1], item[2]))
    return found


def _log_row(text: str, where: str) -> tuple[list[tuple[str, int, int]], str | None]:
    """The ranges (`"r"`) and blob (`"b"`) of a log row (see `stores.base.log_row_references`)."""
    try:
        row = json.loads(text)
        ranges = [(unpack_id(r[0]), int(r[1]), int(r[2])) for r in row.get("r", ())]
        digest = row.get("b")
        return ranges, None if digest is None else unpack_digest(digest)
    except (TypeError, ValueError, IndexError, AttributeError) as exc:
        raise StoreCorruptedError(where, detail=f"unreadable log row: {exc}") from exc


def _merged(spans: dict[str, list[tuple[int, int]]]) -> Iterable[Span]:
    """Each segment's spans, overlapping and touching ones merged, in order."""
    for segment_id in sorted(spans):
        current: tuple[int, int] | None = None
        for start, end in sorted(spans[segment_id]):
            if current is not None and start <= current[1]:
                current = (current[0], max(current[1], end))
                continue
            if current is not None:
                yield Span(segment_id, *current)
            current = (start, end)
        if current is not None:
            yield Span(segment_id, *current)


def _record_order(record: Record) -> tuple[int, str, str]:
    """Owned records, then chat threads, then workflows (after the sub-threads they name)."""
    if record.kind != THREAD_KIND:
        rank = 0
    else:
        rank = 2 if record.data.get("type") == WorkflowThread.type_name else 1
    return rank, record.kind, record.id


# -- writing -------------------------------------------------------------------------------


async def _copy_blobs(
    source: ThreadStore,
    target: ThreadStore,
    digests: Collection[str],
    report: CopyReport,
    tell: Progress,
) -> None:
    present = set(await target.list_blobs())
    for digest in digests:
        if digest in present:
            report.blobs_skipped += 1
        else:
            data = await source.get_blob(digest)
            if data is None:
                raise StoreCorruptedError(f"blob {digest!r}", detail="missing in the source")
            await target.put_blob(data)
            report.blobs_copied += 1
        tell("blobs", 1)


async def _copy_span(
    source: ThreadStore, target: ThreadStore, span: Span, report: CopyReport, tell: Progress
) -> None:
    for start in range(span.start, span.end, CHUNK_ROWS):
        end = min(span.end, start + CHUNK_ROWS)
        texts = await source.read_rows(span.segment_id, start, end)
        where = f"segment {span.segment_id!r}"
        rows = [Row(_row_id(t, f"{where} position {p}"), t) for p, t in enumerate(texts, start)]
        try:
            await target.append_rows(span.segment_id, start, rows)
            report.rows_copied += len(rows)
        except ConflictError:  # some of them are there already: a resumed copy
            await _reconcile(target, span.segment_id, start, rows, report)
        tell("rows", len(rows))


async def _reconcile(
    target: ThreadStore, segment_id: str, start: int, rows: list[Row], report: CopyReport
) -> None:
    """Write the rows the target lacks; check the ones it holds are the same."""
    try:
        held = await target.read_rows(segment_id, start, start + len(rows))
    except StoreCorruptedError:  # only some are there: row by row
        for position, row in enumerate(rows, start):
            try:
                (text,) = await target.read_rows(segment_id, position, position + 1)
            except StoreCorruptedError:
                await target.append_rows(segment_id, position, [row])
                report.rows_copied += 1
            else:
                _check_same(segment_id, position, text, row.data)
                report.rows_skipped += 1
        return
    for position, (text, row) in enumerate(zip(held, rows, strict=True), start):
        _check_same(segment_id, position, text, row.data)
    report.rows_skipped += len(rows)


def _check_same(segment_id: str, position: int, held: str, copied: str) -> None:
    # the same row may be written with other spacing or key order (by another version, or
    # another program): equal JSON is the same row
    if held != copied and json.loads(held) != json.loads(copied):
        raise ConflictError(
            f"segment {segment_id!r} position {position}",
            detail="the target holds another row there",
        )


def _row_id(text: str, where: str) -> str:
    """The id a row is stored under: a message's or step record's `id`, a checkpoint's `i`."""
    try:
        row = json.loads(text)
        if isinstance(row.get("id"), str):
            return validate_id(row["id"], what="row id")
        return unpack_id(row["i"])
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise StoreCorruptedError(where, detail=f"a row without an id: {exc}") from exc


async def _copy_records(
    target: ThreadStore,
    records: Iterable[Record],
    report: CopyReport,
    tell: Progress,
    *,
    replace: bool,
) -> None:
    held = {(r.kind, r.id): r for r in await target.list_records()}
    for record in records:
        existing = held.get((record.kind, record.id))
        if existing is not None and _same_record(existing, record):
            report.records_skipped += 1
        elif existing is None or replace:
            try:
                version = 0 if existing is None else existing.version
                await target.put_record(_fresh(record), expected_version=version)
                report.records_copied += 1
            except ConflictError:  # written meanwhile: left to the next run
                report.conflicts.append(f"{record.kind} {record.id!r}")
        else:
            report.conflicts.append(f"{record.kind} {record.id!r}")
        tell("records", 1)


def _fresh(record: Record) -> Record:
    return Record(
        kind=record.kind, id=record.id, owner=record.owner, tags=record.tags, data=record.data
    )


def _same_record(a: Record, b: Record) -> bool:
    return (a.owner, sorted(a.tags), _plain(a.data)) == (b.owner, sorted(b.tags), _plain(b.data))


def _plain(data: Any) -> Any:
    return json.loads(json.dumps(data, sort_keys=True))


# -- verifying -----------------------------------------------------------------------------


async def verify_copy(
    source: ThreadStore, target: ThreadStore, thread_ids: Iterable[str]
) -> list[ThreadCheck]:
    """Compare each thread in both stores: messages, state hash, checkpoints.

    The target's messages are read back from its rows (their count and the last id must
    match the source's); a thread that cannot be opened in the target is a problem
    reported, not raised.
    """
    return [await _check(source, target, thread_id) for thread_id in thread_ids]


@dataclass(frozen=True, slots=True)
class _Seen:
    kind: str
    messages: int
    last_id: str | None
    state: str | None
    checkpoints: tuple[tuple[str, int, str | None], ...]


async def _check(source: ThreadStore, target: ThreadStore, thread_id: str) -> ThreadCheck:
    before = await _look(source, thread_id)
    try:
        after = await _look(target, thread_id)
    except (ThreadNotFoundError, StoreCorruptedError) as exc:
        return ThreadCheck(
            thread_id=thread_id,
            kind=before.kind,
            messages=(before.messages, 0),
            state=(before.state, None),
            checkpoints=(len(before.checkpoints), 0),
            problem=f"cannot be opened in the target: {exc}",
        )
    return ThreadCheck(
        thread_id=thread_id,
        kind=before.kind,
        messages=(before.messages, after.messages),
        state=(before.state, after.state),
        checkpoints=(len(before.checkpoints), len(after.checkpoints)),
        problem=_difference(before, after),
    )


async def _look(store: ThreadStore, thread_id: str) -> _Seen:
    """What the verification compares of a thread, read from `store`."""
    try:
        thread: AgentThread = await ChatMessageThread.load(thread_id, store=store, lazy=True)
    except ThreadNotFoundError:
        thread = await AgentThread.load(thread_id, store=store)
    count, last_id = 0, None
    if isinstance(thread, ChatMessageThread):
        messages = await thread.get_messages(0, thread.head)
        count, last_id = len(messages), (messages[-1].id if messages else None)
    elif isinstance(thread, WorkflowThread):
        count = len(thread.execution.history)
    checkpoints = tuple((c.id, c.message_count, c.state_digest) for c in await thread.checkpoints())
    return _Seen(thread.type_name, count, last_id, thread.state_digest, checkpoints)


def _difference(before: _Seen, after: _Seen) -> str | None:
    if before.messages != after.messages or before.last_id != after.last_id:
        return f"{before.messages} messages in the source, {after.messages} read in the target"
    if before.state != after.state:
        return f"state {before.state} in the source, {after.state} in the target"
    if before.checkpoints != after.checkpoints:
        return (
            f"{len(before.checkpoints)} checkpoints in the source,"
            f" {len(after.checkpoints)} (or other ones) in the target"
        )
    return None


__all__ = [
    "CHUNK_ROWS",
    "CopyPlan",
    "CopyReport",
    "Progress",
    "Span",
    "ThreadCheck",
    "Unit",
    "plan_copy",
    "verify_copy",
]
