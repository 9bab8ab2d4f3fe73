"""Time travel: where a checkpoint or a message puts a thread, `at()` and `rollback()`.

A *point* is a piece table with the state and stats there. A checkpoint is one; a
message is resolved to one from the nearest known point before it on the same path (a
checkpoint, the thread's origin, or its head). `at()` shows a point as a read-only
`ThreadSnapshot`; `rollback()` moves the thread to it, saving the old head first as a
checkpoint labelled `ROLLBACK_LABEL`, in the same compare-and-set on the thread record
that appends use. Nothing is deleted: the thread keeps its open segment, so the next
append opens a new one instead of writing over the abandoned messages.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import JsonValue

from agent_threads.core import pieces
from agent_threads.core.pieces import Range, Ranges
from agent_threads.core.records import ThreadStats, read_state
from agent_threads.errors import CheckpointNotFoundError, InvalidValueError
from agent_threads.state import ImmutableState
from agent_threads.timetravel.checkpoint import Checkpoint
from agent_threads.timetravel.checkpoints import (
    ROLLBACK_LABEL,
    append_to_log,
    current_checkpoint,
    find_checkpoint,
    list_checkpoints,
)
from agent_threads.timetravel.protocol import CheckpointedThread
from agent_threads.timetravel.snapshot import Point, ThreadSnapshot, ThreadT


async def _own_checkpoint(
    thread: CheckpointedThread, checkpoint: Checkpoint | str, *, reread: bool
) -> Checkpoint:
    if isinstance(checkpoint, str):
        return await find_checkpoint(thread, checkpoint)
    if not isinstance(checkpoint, Checkpoint):
        raise InvalidValueError(
            f"thread {thread.id!r} checkpoint",
            reason=f"expected a Checkpoint, an id or a label, got {checkpoint!r}",
        )
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
        raise InvalidValueError(
            f"thread {thread.id!r}",
            reason="give a checkpoint (or its id or label), or message_id=...",
        )
    if checkpoint is not None and message_id is not None:
        raise InvalidValueError(
            f"thread {thread.id!r}",
            reason="give a checkpoint (or its id or label) or message_id=..., not both",
        )
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
        saved = await current_checkpoint(thread, ROLLBACK_LABEL, {}, "rollback")
        data: dict[str, JsonValue] = {
            **thread.rollback_data(point.ranges),
            "state": point.state_digest,
            "blobs": thread.blob_refs(point.state_digest),
            "stats": point.stats.model_dump(),
        }
        return saved, thread.state, data

    saved, before = await append_to_log(thread, build, keep_on_change=False)
    thread.remember(saved, before)
    await thread.adopt(thread.record, moved[0])
    return saved
