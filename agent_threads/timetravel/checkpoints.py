"""The checkpoint log: recording a thread's checkpoints, listing and finding them.

A checkpoint is one row of its thread's *checkpoint log*: segments like the message
segments, listed under `logs` in the thread record (the row's form is in
`timetravel.checkpoint`). A row holds the thread's piece table at that moment, its
state digest, stats, last message id and time; `vacuum()` reads the log's rows to keep
what they reference alive (see `stores.base`). Recording one is a row append and a
record write, the way messages are appended: O(number of ranges) whatever the length of
the history, and about 200 bytes per checkpoint. Segment rows below a recorded end never
change, so a checkpoint reads back exactly as it was, forever. A thread that goes drops
its log with it; a fork or copy starts with an empty one. `rollback()` (in
`timetravel.travel`) appends its checkpoint of the old head through `append_to_log`
too, in the same record write that moves the thread.

Threads written before checkpoint logs (record version 1) kept each checkpoint as a
record of kind `CHECKPOINT_KIND`; those are still read, and moved into the log by the
thread's first new checkpoint.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import JsonValue, ValidationError

from agent_threads.core import pieces
from agent_threads.core.ids import new_id, validate_id
from agent_threads.core.pieces import Range, Ranges
from agent_threads.core.records import (
    SCHEMA_VERSION,
    THREAD_KIND,
    ThreadData,
    ThreadStats,
    clean_metadata,
    read_thread_data,
)
from agent_threads.core.retry import Backoff
from agent_threads.errors import (
    CheckpointNotFoundError,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    SchemaVersionError,
    StoreCorruptedError,
)
from agent_threads.state import ImmutableState
from agent_threads.stores.base import LOGS_KEY, Record, Row, RowWrite, validate_tag
from agent_threads.timetravel.checkpoint import (
    Checkpoint,
    CheckpointReason,
    decode_row,
    encode_row,
    made_checkpoint,
    new_checkpoint_time,
)
from agent_threads.timetravel.protocol import CheckpointedThread

CHECKPOINT_KIND = "checkpoint"
"""The record kind checkpoints had before they moved into checkpoint logs (still read)."""

ROLLBACK_LABEL = "before-rollback"
"""The label of the checkpoint `rollback()` saves first: roll back to it to undo."""

_LEGACY_SCHEMA_VERSION = 1


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


async def append_to_log(
    thread: CheckpointedThread,
    build: Callable[[], Awaitable[tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]]],
    *,
    keep_on_change: bool,
    backoff: Backoff | None = None,
) -> tuple[Checkpoint, ImmutableState]:
    """Append a checkpoint to the thread's log and publish it, with `data`, in one write.

    `build` makes the checkpoint, the state it records and the rest of the record data
    from the handle as it is; it runs again whenever another writer got in first and
    the handle was re-read. With `keep_on_change`, a checkpoint stays valid when only
    other parts of the thread moved (it records what this handle saw), so it is written
    again as it is. The log row and the record are one store write (`publish` with
    `writes`); a position already taken while the thread did not move holds rows a
    crash left unpublished, and sends the write to a new log segment. Lost races are
    retried with `backoff` (default: the thread's retry policy). Caller holds the
    thread's lock. Returns the checkpoint published and its state.

    Raises:
        ConflictError: other writers kept winning until the deadline.
    """
    backoff = thread.retry_policy().start() if backoff is None else backoff
    force_new = False
    built = None
    while True:
        if built is None:
            built = await build()
        checkpoint, state, data = built
        logs = log_ranges(thread.record_data)
        legacy = await _legacy_checkpoints(thread) if _is_legacy(thread.record_data) else []
        rows = [Row(c.id, encode_row(c)) for c in [*legacy, checkpoint]]
        segment_id, start, new_logs, rows = await _plan(thread, logs, rows, force_new=force_new)
        published: dict[str, JsonValue] = {
            **data,
            LOGS_KEY: [r.to_json() for r in new_logs],
            "schema_version": SCHEMA_VERSION,
        }
        seen = thread.record.version
        try:
            await thread.publish(published, writes=[RowWrite(segment_id, start, rows)])
        except ConflictError:
            await thread.reread_after_lost_write()
            force_new = thread.record.version == seen  # unchanged: rows nobody published
            if not (keep_on_change and await _still_valid(thread, checkpoint, state)):
                built = None
            if not force_new:
                await _back_off(thread, backoff)
            continue
        for old in legacy:
            await thread.store.delete_record(CHECKPOINT_KIND, old.id)
        return checkpoint, state


async def _back_off(thread: CheckpointedThread, backoff: Backoff) -> None:
    if not await backoff.wait():
        raise backoff.exhausted(thread.id, "a checkpoint was saved")


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


async def _still_valid(
    thread: CheckpointedThread, checkpoint: Checkpoint, state: ImmutableState
) -> bool:
    """Whether a checkpoint made before the thread moved can still be written as it is.

    Not if the thread no longer holds a segment it reads (another writer copied its
    newest ranges into one segment): vacuum may have freed it. If the thread's state
    moved on from the one it records, nothing may reference that state's blob any more
    and vacuum may have freed it, so it is stored again (young again: vacuum's grace
    spares it).
    """
    held = {r.segment_id for r in thread.content_ranges()}
    if any(r.segment_id not in held for r in checkpoint.piece_table):
        return False
    if checkpoint.state_digest not in (None, thread.state_digest):
        await thread.store.put_blob(state.to_json_bytes())
    return True


# -- recording and finding ------------------------------------------------------------


async def current_checkpoint(
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
    return new_checkpoint(
        thread,
        ranges,
        last_message_id=last,
        stats=thread.stats,
        label=label,
        reason=reason,
        metadata=metadata,
    )


def new_checkpoint(
    thread: CheckpointedThread,
    ranges: Ranges,
    *,
    last_message_id: str | None,
    stats: ThreadStats,
    label: str | None,
    reason: CheckpointReason,
    metadata: dict[str, JsonValue] | None = None,
) -> Checkpoint:
    """A new checkpoint of the thread holding `ranges` (with the handle's state)."""
    checkpoint_id = new_id()
    return made_checkpoint(  # each value checked already: the label and metadata cleaned
        {
            "id": checkpoint_id,
            "thread_id": thread.id,
            "label": label,
            "reason": reason,
            "created_at": new_checkpoint_time(checkpoint_id),
            "message_count": pieces.length(ranges),
            "last_message_id": last_message_id,
            "metadata": dict(metadata) if metadata else {},  # its own, as validation makes
            "stats": stats,
            "state_digest": thread.state_digest,
            "ranges": tuple((r.segment_id, r.start, r.end) for r in ranges),
        }
    )


def has_log(data: ThreadData) -> bool:
    """Whether the thread keeps its checkpoints in a log (not as records of version 1)."""
    return not _is_legacy(data)


async def plan_log_write(
    thread: CheckpointedThread, checkpoint: Checkpoint, *, force_new: bool
) -> tuple[RowWrite, dict[str, JsonValue], dict[str, object]]:
    """Where the checkpoint's log row goes, and the record data that publishes it.

    For a store write the caller makes with other rows (`publish(data, writes=...)`):
    an append and its checkpoint in one. `force_new` opens a new log segment (the end
    of the log is taken: rows a crash left unpublished). The thread has a log
    (`has_log`). The third item is that data as `ThreadData` reads it
    (`publish(typed=...)`).
    """
    logs = log_ranges(thread.record_data)
    rows = [Row(checkpoint.id, encode_row(checkpoint))]
    segment_id, start, new_logs, rows = await _plan(thread, logs, rows, force_new=force_new)
    data: dict[str, JsonValue] = {
        LOGS_KEY: [r.to_json() for r in new_logs],
        "schema_version": SCHEMA_VERSION,
    }
    typed: dict[str, object] = {
        LOGS_KEY: tuple((r.segment_id, r.start, r.end) for r in new_logs),
        "schema_version": SCHEMA_VERSION,
    }
    return RowWrite(segment_id, start, rows), data, typed


async def save_checkpoint(
    thread: CheckpointedThread,
    *,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    reason: CheckpointReason = "manual",
    backoff: Backoff | None = None,
) -> Checkpoint:
    """Record the thread as this handle sees it; O(number of ranges). Caller holds its lock.

    One row appended to the thread's checkpoint log and one record write. The handle's
    in-memory history (what `to_json` writes) gains it too, at O(1).
    """
    label = clean_label(label)
    cleaned = clean_metadata(metadata, what=f"thread {thread.id!r} checkpoint metadata")

    async def build() -> tuple[Checkpoint, ImmutableState, dict[str, JsonValue]]:
        return await current_checkpoint(thread, label, cleaned, reason), thread.state, {}

    checkpoint, state = await append_to_log(thread, build, keep_on_change=True, backoff=backoff)
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
        raise InvalidValueError(
            f"thread {thread.id!r} checkpoint",
            reason=f"an id or label is a string, not {id_or_label!r}",
        )
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
