"""Checkpoints: recorded points of a thread's history, time travel to them, and rollback.

A checkpoint is one row of its thread's *checkpoint log*: segments like the message
segments, listed under `logs` in the thread record (the row's form is in
`_checkpoint_log`). A row holds the thread's piece table at that moment, its state
digest, stats, last message id and time; `vacuum()` reads the log's rows to keep what
they reference alive (see `stores.base`). Recording one is a row append and a record
write, the way messages are appended: O(number of ranges) whatever the length of the
history, and about 200 bytes per checkpoint. Segment rows below a recorded end never
change, so a checkpoint reads back exactly as it was, forever. A thread that goes
drops its log with it; a fork or copy starts with an empty one.

A rollback deletes nothing: it records the current head as an automatic checkpoint
labelled `ROLLBACK_LABEL` (rolling back to that one undoes the rollback) and publishes
the target's ranges, state and stats in the same compare-and-set on the thread record,
the arbiter appends use. The thread keeps its open segment, so the next append opens a
new one instead of writing over the abandoned messages (see `pieces.can_extend`).

Threads written before checkpoint logs (record version 1) kept each checkpoint as a
record of kind `CHECKPOINT_KIND`; those are still read, and moved into the log by the
thread's first new checkpoint.

The thread methods (`checkpoint`, `checkpoints`, `get_checkpoint`, `at`, `rollback`,
`lineage`) live on `CheckpointedThread` and call the functions here; `ThreadSnapshot` (what
`at` returns) is in `snapshots.py`, the export of checkpoints (`to_json`, `export`) in
`_history.py`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, JsonValue, ValidationError

from agent_threads.core import pieces
from agent_threads.core.ids import new_id, validate_id
from agent_threads.core.pieces import Range, Ranges
from agent_threads.core.records import (
    SCHEMA_VERSION,
    THREAD_KIND,
    WRITE_ATTEMPTS,
    ThreadData,
    ThreadStats,
    clean_metadata,
    read_state,
    read_thread_data,
)
from agent_threads.errors import (
    CheckpointNotFoundError,
    ConflictError,
    InvalidIdError,
    SchemaVersionError,
    StoreCorruptedError,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import LOGS_KEY, Record, Row, validate_tag
from agent_threads.timetravel.checkpoint import (
    Checkpoint,
    CheckpointReason,
    decode_row,
    encode_row,
    new_checkpoint_time,
)
from agent_threads.timetravel.protocol import CheckpointedThread
from agent_threads.timetravel.snapshot import Point, ThreadSnapshot, ThreadT

CHECKPOINT_KIND = "checkpoint"
"""The record kind checkpoints had before they moved into checkpoint logs (still read)."""

ROLLBACK_LABEL = "before-rollback"
"""The label of the checkpoint `rollback()` saves first: roll back to it to undo."""

_LEGACY_SCHEMA_VERSION = 1


class Ancestor(BaseModel):
    """One thread of a lineage: an ancestor a thread was (indirectly) forked from.

    `fork_point` is the last message the line below shares with this ancestor; `deleted`
    says the ancestor's record is gone (its id is known, its own parent is not).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    thread_id: str
    title: str | None = None
    fork_point: str | None = None
    deleted: bool = False


def clean_label(label: str | None) -> str | None:
    """Return a usable checkpoint label (1-128 characters, no control characters)."""
    if label is None:
        return None
    try:
        return validate_tag(label)
    except InvalidIdError as exc:
        raise InvalidIdError(label, what="checkpoint label", reason=exc.reason) from exc


# -- the checkpoint log -------------------------------------------------------------------


def log_ranges(data: ThreadData) -> Ranges:
    """The ranges of a thread's checkpoint log, from its record data."""
    return tuple(Range(*r) for r in data.logs or ())


def _is_legacy(data: ThreadData) -> bool:
    """Whether the thread was written before checkpoint logs (its checkpoints are records)."""
    return data.logs is None


async def _current_data(thread: CheckpointedThread) -> ThreadData | None:
    """The thread record as the store holds it now (None: deleted); an unsaved copy's own."""
    if thread.record.version == 0:
        return thread.record_data
    record = await thread.store.get_record(THREAD_KIND, thread.id)
    return None if record is None else read_thread_data(record, ThreadData)


async def _read_log(thread: CheckpointedThread, data: ThreadData) -> list[Checkpoint]:
    """Every checkpoint of the thread's log, oldest first."""
    if _is_legacy(data):
        legacy = await _legacy_checkpoints(thread)
        # another handle may have moved them into the log (then deleted some) meanwhile
        now = await _current_data(thread)
        if now is None or _is_legacy(now):
            return legacy
        data = now
    found: list[Checkpoint] = []
    for r in log_ranges(data):
        rows = await thread.store.read_rows(r.segment_id, r.start, r.end)
        found += [_decode(thread, text, r.segment_id, p) for p, text in enumerate(rows, r.start)]
    return found


def _decode(thread: CheckpointedThread, text: str, segment_id: str, position: int) -> Checkpoint:
    try:
        return decode_row(text, thread.id)
    except ValueError as exc:
        raise StoreCorruptedError(
            f"thread {thread.id!r} checkpoint log {segment_id!r} position {position}",
            detail=str(exc),
        ) from exc


async def _append_to_log(
    thread: CheckpointedThread,
    build: Callable[[], Awaitable[tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]]],
    *,
    keep_on_change: bool,
) -> tuple[Checkpoint, ImmutableState]:
    """Append a checkpoint to the thread's log and publish it, with `data`, in one CAS.

    `build` makes the checkpoint, the state it records and the rest of the record data
    from the handle as it is; it runs again whenever another writer got in first and
    the handle was re-read. With `keep_on_change`, a checkpoint already written stays
    valid when only other parts of the thread moved (it records what this handle saw),
    so only the record write is retried. The same rules as message appends: rows first,
    then the record; a position already taken (another writer, or rows a crash left
    unpublished) sends the write to a new log segment. Caller holds the thread's lock.
    Returns the checkpoint published and its state.
    """
    force_new = False
    for _ in range(WRITE_ATTEMPTS):
        checkpoint, state, data = await build()
        logs = log_ranges(thread.record_data)
        legacy = await _legacy_checkpoints(thread) if _is_legacy(thread.record_data) else []
        rows = [Row(c.id, encode_row(c)) for c in [*legacy, checkpoint]]
        segment_id, start, new_logs, rows = await _plan(thread, logs, rows, force_new=force_new)
        try:
            await thread.store.append_rows(segment_id, start, rows)
        except ConflictError:
            await thread.refresh_unlocked()
            force_new = log_ranges(thread.record_data) == logs  # unchanged: rows nobody published
            continue
        published: dict[str, JsonValue] = {
            **data,
            LOGS_KEY: [r.to_json() for r in new_logs],
            "schema_version": SCHEMA_VERSION,
        }
        keep = (checkpoint, state) if keep_on_change else None
        if await _publish_log(thread, logs, published, keep=keep):
            for old in legacy:
                await thread.store.delete_record(CHECKPOINT_KIND, old.id)
            return checkpoint, state
        force_new = log_ranges(thread.record_data) == logs  # our rows sit there, unpublished
    raise ConflictError(
        f"thread {thread.id!r}",
        detail="other writers kept changing the thread while a checkpoint was saved; try again",
    )


async def _plan(
    thread: CheckpointedThread, logs: Ranges, rows: list[Row], *, force_new: bool
) -> tuple[str, int, Ranges, list[Row]]:
    """Where the rows go: after the log's end, or at the start of a new log segment.

    A new segment is opened for the first checkpoint and when the end is taken; a log
    that reached `pieces.MAX_RANGES` ranges is copied into it whole (rare: every range
    after the first stands for a lost race or a crash).
    """
    if logs and not force_new:
        last = logs[-1]
        return (
            last.segment_id,
            last.end,
            pieces.extend(logs, last.segment_id, last.end, len(rows)),
            rows,
        )
    segment_id = new_id()
    if len(logs) >= pieces.MAX_RANGES:
        old: list[Row] = []
        for r in logs:
            texts = await thread.store.read_rows(r.segment_id, r.start, r.end)
            old += [
                Row(_decode(thread, t, r.segment_id, p).id, t) for p, t in enumerate(texts, r.start)
            ]
        rows, logs = [*old, *rows], ()
    return segment_id, 0, pieces.extend(logs, segment_id, 0, len(rows)), rows


async def _publish_log(
    thread: CheckpointedThread,
    logs: Ranges,
    data: dict[str, JsonValue],
    *,
    keep: tuple[Checkpoint, ImmutableState] | None,
) -> bool:
    """Publish the record data; False (the handle re-read) if the thread moved first.

    With `keep` (a checkpoint and its state), a write lost to changes that leave the
    log as it was is tried again. If the thread's state moved on from the one the
    checkpoint records, nothing may reference that state's blob any more and vacuum may
    have freed it, so it is stored again first (young again: vacuum's grace spares it).
    Segments cannot be written again: if the thread no longer holds one the checkpoint
    reads (another writer copied its newest ranges into one segment), vacuum may have
    freed it, and the checkpoint is made again from the re-read handle.
    """
    for _ in range(WRITE_ATTEMPTS):
        try:
            await thread.publish(data)
            return True
        except ConflictError:
            await thread.reread_after_lost_write()
            if keep is None or log_ranges(thread.record_data) != logs:
                return False
            checkpoint, state = keep
            held = {r.segment_id for r in thread.content_ranges()}
            if any(r.segment_id not in held for r in checkpoint.piece_table):
                return False
            if checkpoint.state_digest not in (None, thread.state_digest):
                await thread.store.put_blob(state.to_json_bytes())
    return False


# -- recording and finding ------------------------------------------------------------


async def _current_checkpoint(
    thread: CheckpointedThread,
    label: str | None,
    metadata: dict[str, JsonValue],
    reason: CheckpointReason,
) -> Checkpoint:
    """The handle as it is now, as a new checkpoint; O(number of ranges)."""
    ranges = thread.content_ranges()
    count = pieces.length(ranges)
    last = None
    if count:
        last = (await thread.read_ranges(pieces.slice_ranges(ranges, count - 1, count)))[0].id
    checkpoint_id = new_id()
    return Checkpoint(
        id=checkpoint_id,
        thread_id=thread.id,
        label=label,
        reason=reason,
        created_at=new_checkpoint_time(checkpoint_id),
        message_count=count,
        last_message_id=last,
        metadata=metadata,
        stats=thread.stats,
        state_digest=thread.state_digest,
        ranges=tuple((r.segment_id, r.start, r.end) for r in ranges),
    )


async def save_checkpoint(
    thread: CheckpointedThread,
    *,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    reason: CheckpointReason = "manual",
) -> Checkpoint:
    """Record the thread as this handle sees it; O(number of ranges). Caller holds its lock.

    One row appended to the thread's checkpoint log and one record write. The handle's
    in-memory history (what `to_json` writes) gains it too, at O(1).
    """
    label = clean_label(label)
    cleaned = clean_metadata(metadata, what="checkpoint metadata")

    async def build() -> tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]:
        return await _current_checkpoint(thread, label, cleaned, reason), thread.state, {}

    checkpoint, state = await _append_to_log(thread, build, keep_on_change=True)
    thread.remember(checkpoint, state)  # the state it records: the handle's may be newer now
    return checkpoint


async def list_checkpoints(thread: CheckpointedThread) -> list[Checkpoint]:
    """The thread's checkpoints as the store holds them, oldest first."""
    data = await _current_data(thread)
    return [] if data is None else await _read_log(thread, data)


async def find_checkpoint(thread: CheckpointedThread, id_or_label: str) -> Checkpoint:
    """The checkpoint with this id, else the newest one with this label.

    An id costs one index lookup and one row read; a label, a read of the log.

    Raises:
        CheckpointNotFoundError: the thread has none.
    """
    if not isinstance(id_or_label, str):
        raise TypeError(f"a checkpoint id or label is a string, not {id_or_label!r}")
    data = await _current_data(thread)
    if data is None:
        raise CheckpointNotFoundError(id_or_label, thread_id=thread.id)
    if not _is_legacy(data):
        found = await _find_by_id(thread, data, id_or_label)
        if found is not None:
            return found
    listed = await _read_log(thread, data)
    by_id = [c for c in listed if c.id == id_or_label]  # an id first, as above
    matches = by_id or [c for c in listed if c.label == id_or_label]
    if matches:
        return matches[-1]
    raise CheckpointNotFoundError(id_or_label, thread_id=thread.id)


async def _find_by_id(
    thread: CheckpointedThread, data: ThreadData, checkpoint_id: str
) -> Checkpoint | None:
    try:
        places = await thread.store.locate_message(validate_id(checkpoint_id))
    except InvalidIdError:  # not an id: it can still be a label
        return None
    logs = log_ranges(data)
    for segment_id, position in places:
        if any(r.segment_id == segment_id and r.start <= position < r.end for r in logs):
            text = (await thread.store.read_rows(segment_id, position, position + 1))[0]
            found = _decode(thread, text, segment_id, position)
            if found.id == checkpoint_id:
                return found
    return None


async def delete_checkpoints(thread: CheckpointedThread) -> int:
    """Delete the checkpoint records of a thread written before checkpoint logs.

    A thread's log needs no deleting: it goes with the thread record (`vacuum()` frees
    its segments). Returns how many records there were.
    """
    records = await thread.store.list_records(CHECKPOINT_KIND, owner=thread.id)
    for record in records:
        await thread.store.delete_record(CHECKPOINT_KIND, record.id)
    return len(records)


# -- checkpoints of threads written before checkpoint logs --------------------------------


async def _legacy_checkpoints(thread: CheckpointedThread) -> list[Checkpoint]:
    """The checkpoint records of a thread from before checkpoint logs, oldest first."""
    records = await thread.store.list_records(CHECKPOINT_KIND, owner=thread.id)
    return [checkpoint_from_record(r) for r in records]


def checkpoint_from_record(record: Record) -> Checkpoint:
    """Read a checkpoint record (the form before checkpoint logs).

    Raises:
        SchemaVersionError: it was written by a newer version.
        StoreCorruptedError: it cannot be decoded.
    """
    data = dict(record.data)
    found = data.pop("schema_version", None)
    where = f"checkpoint {record.id!r} record"
    SchemaVersionError.check(found, where, newest=_LEGACY_SCHEMA_VERSION)
    try:
        blobs = data.pop("blobs", None) or []
        ranges = data.get("ranges") or []
        if not isinstance(blobs, list) or len(blobs) > 1 or not isinstance(ranges, list):
            raise ValueError(f"blobs {blobs!r} or ranges {ranges!r} malformed")
        count = pieces.length(Range.from_json(r) for r in ranges)
        return Checkpoint.model_validate(
            {
                **data,
                "id": record.id,
                "thread_id": record.owner,
                "state_digest": blobs[0] if blobs else None,
                "message_count": count,
            }
        )
    except (ValueError, ValidationError) as exc:
        raise StoreCorruptedError(f"checkpoint {record.id!r}", detail=str(exc)) from exc


async def _own_checkpoint(
    thread: CheckpointedThread, checkpoint: Checkpoint | str, *, reread: bool
) -> Checkpoint:
    if isinstance(checkpoint, str):
        return await find_checkpoint(thread, checkpoint)
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"expected a Checkpoint, an id or a label, got {checkpoint!r}")
    if checkpoint.thread_id != thread.id:
        raise CheckpointNotFoundError(checkpoint.id, thread_id=thread.id)
    if not reread:
        return checkpoint
    found = await find_checkpoint(thread, checkpoint.id)
    if found.id != checkpoint.id:  # a label equal to the id of a checkpoint that is gone
        raise CheckpointNotFoundError(checkpoint.id, thread_id=thread.id)
    return found


# -- points: where a checkpoint or a message puts the thread ----------------------------


async def _resolve(
    thread: CheckpointedThread,
    checkpoint: Checkpoint | str | None,
    message_id: str | None,
    *,
    reread: bool,
) -> Point:
    if checkpoint is None and message_id is None:
        raise TypeError("give a checkpoint (or its id or label), or message_id=...")
    if checkpoint is not None and message_id is not None:
        raise TypeError("give a checkpoint (or its id or label) or message_id=..., not both")
    if message_id is not None:
        return await _point_at_message(thread, message_id)
    assert checkpoint is not None
    found = await _own_checkpoint(thread, checkpoint, reread=reread)
    return Point(found.piece_table, found.state_digest, found.stats, found.last_message_id, found)


async def _point_at_message(thread: CheckpointedThread, message_id: str) -> Point:
    """The thread up to and including a message, with the state and stats there.

    The state is the one recorded by the known point nearest before it on the same
    path: a checkpoint, the point the thread started from, or the thread now. Stats
    are that point's plus the messages after it.
    """
    count = await thread.index_of(message_id) + 1
    target = pieces.prefix(thread.content_ranges(), count)
    base = _nearest_base(target, await _known_points(thread))
    added = await thread.read_ranges(pieces.slice_ranges(target, base.count, count))
    return Point(target, base.state_digest, base.stats.add(added), message_id)


async def _known_points(thread: CheckpointedThread) -> list[Point]:
    """Every point whose state is known, oldest first: empty, origin, checkpoints, now."""
    points = [Point((), None, ThreadStats())]
    origin = origin_point(thread)
    if origin is not None:
        points.append(origin)
    points.extend(
        Point(c.piece_table, c.state_digest, c.stats, c.last_message_id, c)
        for c in await list_checkpoints(thread)
    )
    points.append(Point(thread.content_ranges(), thread.state_digest, thread.stats))
    return points


def origin_point(thread: CheckpointedThread) -> Point | None:
    """The point the thread started from (created empty, forked, copied or imported)."""
    origin = thread.record_data.origin
    if origin is None:
        return None
    return Point(tuple(Range(*r) for r in origin.ranges), origin.state, origin.stats)


def _nearest_base(target: Ranges, points: Sequence[Point]) -> Point:
    """The longest point that is a prefix of `target`; the newest one among equals."""
    best = points[0]
    for point in points:
        if best.count <= point.count <= pieces.length(target) and _is_prefix(point.ranges, target):
            best = point
    return best


def _merged(ranges: Sequence[Range]) -> list[Range]:
    out: list[Range] = []
    for r in ranges:
        if not len(r):
            continue
        if out and out[-1].segment_id == r.segment_id and out[-1].end == r.start:
            out[-1] = Range(r.segment_id, out[-1].start, r.end)
        else:
            out.append(r)
    return out


def _is_prefix(head: Sequence[Range], ranges: Sequence[Range]) -> bool:
    """Whether `head` holds exactly the first segment positions of `ranges`."""
    a, b = _merged(head), _merged(ranges)
    if not a:
        return True
    if len(a) > len(b) or a[:-1] != b[: len(a) - 1]:
        return False
    last, other = a[-1], b[len(a) - 1]
    return (last.segment_id, last.start) == (other.segment_id, other.start) and (
        last.end <= other.end
    )


async def _state_at(thread: CheckpointedThread, digest: str | None) -> ImmutableState:
    if digest is not None and digest == thread.state_digest:
        return thread.state
    return await read_state(thread.store, digest, owner=f"thread {thread.id!r}")


# -- time travel and rollback ------------------------------------------------------------


async def snapshot(
    thread: ThreadT, checkpoint: Checkpoint | str | None, message_id: str | None
) -> ThreadSnapshot[ThreadT]:
    """The read-only thread at a checkpoint or message (see `CheckpointedThread.at`)."""
    point = await _resolve(thread, checkpoint, message_id, reread=False)
    state = await _state_at(thread, point.state_digest)
    messages = await thread.read_ranges(point.ranges) if thread.messages_in_memory() else None
    return ThreadSnapshot(thread, point, state, messages)


async def rollback(
    thread: CheckpointedThread, checkpoint: Checkpoint | str | None, message_id: str | None
) -> Checkpoint:
    """Move the thread back (or forward) to a point; returns the checkpoint of the old head.

    The old head's checkpoint and the move are one write: its row goes into the log
    first, then a compare-and-set on the thread record publishes the log and the point's
    ranges, state and stats together. If another handle moved the thread first, the
    handle is re-read and its new head saved instead. Caller holds the thread's lock.
    """
    moved: list[ImmutableState] = []

    async def build() -> tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]:
        point = await _resolve(thread, checkpoint, message_id, reread=True)
        moved[:] = [await _state_at(thread, point.state_digest)]
        saved = await _current_checkpoint(thread, ROLLBACK_LABEL, {}, "rollback")
        data: dict[str, JsonValue] = {
            **thread.rollback_data(point.ranges),
            "state": point.state_digest,
            "blobs": thread.blob_refs(point.state_digest),
            "stats": point.stats.model_dump(),
        }
        return saved, thread.state, data

    saved, before = await _append_to_log(thread, build, keep_on_change=False)
    thread.remember(saved, before)
    await thread.adopt(thread.record, moved[0])
    return saved


async def lineage(thread: CheckpointedThread) -> list[Ancestor]:
    """The thread's ancestors, parent first, up to the root or the first deleted one."""
    ancestors: list[Ancestor] = []
    seen = {thread.id}
    parent, fork_point = thread.parent_id, thread.fork_point
    while parent is not None and parent not in seen:
        seen.add(parent)
        try:
            record = await thread.store.get_record(THREAD_KIND, validate_id(parent))
        except InvalidIdError as exc:
            raise StoreCorruptedError(f"thread {thread.id!r} lineage", detail=str(exc)) from exc
        data = None if record is None else read_thread_data(record, ThreadData)
        ancestors.append(
            Ancestor(
                thread_id=parent,
                title=None if data is None else data.title,
                fork_point=fork_point,
                deleted=data is None,
            )
        )
        parent = None if data is None else data.parent_id
        fork_point = None if data is None else data.fork_point
    return ancestors


__all__ = [
    "CHECKPOINT_KIND",
    "LOGS_KEY",
    "ROLLBACK_LABEL",
    "Ancestor",
    "Checkpoint",
    "CheckpointReason",
    "Point",
    "ThreadSnapshot",
    "checkpoint_from_record",
    "clean_label",
    "delete_checkpoints",
    "find_checkpoint",
    "lineage",
    "list_checkpoints",
    "log_ranges",
    "rollback",
    "save_checkpoint",
    "snapshot",
]
