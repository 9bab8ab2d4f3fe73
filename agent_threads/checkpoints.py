"""Checkpoints: recorded points of a thread's history, time travel to them, and rollback.

A checkpoint is a store record of kind `"checkpoint"` owned by its thread. It holds the
thread's piece table at that moment under `ranges` and its state digest under `blobs`
(which keeps both alive through `vacuum()`, see `stores.base`), plus its stats, message
count, last message id and a timestamp. Recording one costs O(number of ranges),
whatever the length of the history. Segment rows below a recorded end never change, so
a checkpoint reads back exactly as it was, forever.

A rollback deletes nothing: it first records the current head as an automatic checkpoint
labelled `ROLLBACK_LABEL` (rolling back to that one undoes the rollback), then publishes
the target's ranges, state and stats with a compare-and-set on the thread record, the
same arbiter appends use. The thread keeps its open segment, so the next append opens a
new one instead of writing over the abandoned messages (see `log.can_extend`).

The thread methods (`checkpoint`, `checkpoints`, `get_checkpoint`, `at`, `rollback`,
`lineage`) live on `AgentThread` and call the functions here; `ThreadSnapshot` (what
`at` returns) is in `snapshots.py`, the export of checkpoints (`to_json`, `export`) in
`_history.py`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    model_validator,
)

from agent_threads import log
from agent_threads._ids import new_id, validate_id
from agent_threads.errors import (
    CheckpointNotFoundError,
    ConflictError,
    InvalidIdError,
    SchemaVersionError,
    StoreCorruptedError,
)
from agent_threads.log import Range, Ranges
from agent_threads.snapshots import Point, ThreadSnapshot, ThreadT
from agent_threads.state import ImmutableState
from agent_threads.stores.base import Record, validate_tag
from agent_threads.thread import THREAD_KIND, AgentThread, ThreadStats, clean_metadata

CHECKPOINT_KIND = "checkpoint"
"""The store record kind of every checkpoint; `Record.owner` is the thread id."""

ROLLBACK_LABEL = "before-rollback"
"""The label of the checkpoint `rollback()` saves first: roll back to it to undo."""

CheckpointReason = Literal["manual", "auto", "rollback"]
"""Why a checkpoint exists: asked for, one per batch (`auto_checkpoint=True`), or saved by
a rollback."""

_SCHEMA_VERSION = 1
_ROLLBACK_ATTEMPTS = 16


class Checkpoint(BaseModel):
    """A recorded point of a thread: what `thread.at()` shows and `thread.rollback()` restores.

    `ranges` is the piece table at that moment, `(segment_id, start, end)` triples whose
    concatenation is the thread's message list then; `state_digest` is the content
    address of its state (None for an empty state).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    thread_id: str
    label: str | None = None
    reason: CheckpointReason = "manual"
    created_at: AwareDatetime
    message_count: int = Field(ge=0)
    last_message_id: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    stats: ThreadStats = Field(default_factory=ThreadStats)
    state_digest: str | None = None
    ranges: tuple[tuple[str, int, int], ...] = ()

    @model_validator(mode="after")
    def _count_matches_ranges(self) -> Self:
        if log.length(self.piece_table) != self.message_count:
            raise ValueError(
                f"message_count {self.message_count} differs from the"
                f" {log.length(self.piece_table)} messages its ranges hold"
            )
        return self

    @property
    def piece_table(self) -> Ranges:
        """`ranges` as `log.Range` values."""
        return tuple(Range(*r) for r in self.ranges)


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


# -- records ------------------------------------------------------------------------


def checkpoint_record(checkpoint: Checkpoint) -> Record:
    """The store record of a checkpoint (its label doubles as a tag, for lookups).

    Kept small, as there may be one per turn: fields at their defaults are left out,
    the state digest is stored only under `blobs` (where vacuum looks), and the message
    count is the length of `ranges`.
    """
    data = checkpoint.model_dump(
        mode="json",
        exclude_defaults=True,
        exclude={"id", "thread_id", "state_digest", "message_count"},
    )
    data["schema_version"] = _SCHEMA_VERSION
    if checkpoint.state_digest:
        data["blobs"] = [checkpoint.state_digest]
    return Record(
        kind=CHECKPOINT_KIND,
        id=checkpoint.id,
        owner=checkpoint.thread_id,
        tags=(checkpoint.label,) if checkpoint.label else (),
        data=data,
    )


def checkpoint_from_record(record: Record) -> Checkpoint:
    """Read a checkpoint record.

    Raises:
        SchemaVersionError: it was written by a newer version.
        StoreCorruptedError: it cannot be decoded.
    """
    data = dict(record.data)
    found = data.pop("schema_version", None)
    if not isinstance(found, int) or not 1 <= found <= _SCHEMA_VERSION:
        raise SchemaVersionError(
            f"checkpoint {record.id!r} record", found=found, supported=_SCHEMA_VERSION
        )
    try:
        blobs = data.pop("blobs", None) or []
        ranges = data.get("ranges") or []
        if not isinstance(blobs, list) or len(blobs) > 1 or not isinstance(ranges, list):
            raise ValueError(f"blobs {blobs!r} or ranges {ranges!r} malformed")
        count = log.length(Range.from_json(r) for r in ranges)
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


def clean_label(label: str | None) -> str | None:
    """Return a usable checkpoint label (1-128 characters, no control characters)."""
    if label is None:
        return None
    try:
        return validate_tag(label)
    except InvalidIdError as exc:
        raise InvalidIdError(label, what="checkpoint label", reason=exc.reason) from exc


# -- recording and finding ------------------------------------------------------------


async def save_checkpoint(
    thread: AgentThread,
    *,
    label: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    reason: CheckpointReason = "manual",
) -> Checkpoint:
    """Record the thread as this handle sees it; O(number of ranges). Caller holds its lock.

    The handle's in-memory history (what `to_json` writes) gains it too, at O(1).
    """
    ranges = thread._content_ranges()
    count = log.length(ranges)
    last = None
    if count:
        last = (await thread._read_ranges(log.slice_ranges(ranges, count - 1, count)))[0].id
    checkpoint = Checkpoint(
        id=new_id(),
        thread_id=thread.id,
        label=clean_label(label),
        reason=reason,
        created_at=datetime.now(UTC),
        message_count=count,
        last_message_id=last,
        metadata=clean_metadata(metadata, what="checkpoint metadata"),
        stats=thread.stats,
        state_digest=_state_digest(thread),
        ranges=tuple((r.segment_id, r.start, r.end) for r in ranges),
    )
    await thread.store.put_record(checkpoint_record(checkpoint), expected_version=0)
    if thread._history is not None:
        thread._history.add(checkpoint, thread.state)
    return checkpoint


def _state_digest(thread: AgentThread) -> str | None:
    digest = thread._record.data.get("state")
    return digest if isinstance(digest, str) else None


async def list_checkpoints(thread: AgentThread) -> list[Checkpoint]:
    """The thread's checkpoints, oldest first (ids are time-ordered)."""
    records = await thread.store.list_records(CHECKPOINT_KIND, owner=thread.id)
    return [checkpoint_from_record(r) for r in records]


async def find_checkpoint(thread: AgentThread, id_or_label: str) -> Checkpoint:
    """The checkpoint with this id, else the newest one with this label.

    Raises:
        CheckpointNotFoundError: the thread has none.
    """
    if not isinstance(id_or_label, str):
        raise TypeError(f"a checkpoint id or label is a string, not {id_or_label!r}")
    try:
        record = await thread.store.get_record(CHECKPOINT_KIND, validate_id(id_or_label))
    except InvalidIdError:  # not an id: it can still be a label
        record = None
    if record is not None and record.owner == thread.id:
        return checkpoint_from_record(record)
    try:
        records = await thread.store.list_records(
            CHECKPOINT_KIND, owner=thread.id, tags=[id_or_label]
        )
    except InvalidIdError:
        records = []
    for found in reversed(records):
        checkpoint = checkpoint_from_record(found)
        if checkpoint.label == id_or_label:
            return checkpoint
    raise CheckpointNotFoundError(id_or_label, thread_id=thread.id)


async def delete_checkpoints(thread: AgentThread) -> int:
    """Delete every checkpoint record the thread owns; returns how many there were."""
    records = await thread.store.list_records(CHECKPOINT_KIND, owner=thread.id)
    for record in records:
        await thread.store.delete_record(CHECKPOINT_KIND, record.id)
    return len(records)


async def _own_checkpoint(
    thread: AgentThread, checkpoint: Checkpoint | str, *, reread: bool
) -> Checkpoint:
    if isinstance(checkpoint, str):
        return await find_checkpoint(thread, checkpoint)
    if not isinstance(checkpoint, Checkpoint):
        raise TypeError(f"expected a Checkpoint, an id or a label, got {checkpoint!r}")
    if checkpoint.thread_id != thread.id:
        raise CheckpointNotFoundError(checkpoint.id, thread_id=thread.id)
    if not reread:
        return checkpoint
    record = await thread.store.get_record(CHECKPOINT_KIND, checkpoint.id)
    if record is None or record.owner != thread.id:
        raise CheckpointNotFoundError(checkpoint.id, thread_id=thread.id)
    return checkpoint_from_record(record)


# -- points: where a checkpoint or a message puts the thread ----------------------------


async def _resolve(
    thread: AgentThread,
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


async def _point_at_message(thread: AgentThread, message_id: str) -> Point:
    """The thread up to and including a message, with the state and stats there.

    The state is the one recorded by the known point nearest before it on the same
    path: a checkpoint, the point the thread started from, or the thread now. Stats
    are that point's plus the messages after it.
    """
    count = await thread._index_of(message_id) + 1
    target = log.prefix(thread._content_ranges(), count)
    base = _nearest_base(target, await _known_points(thread))
    added = await thread._read_ranges(log.slice_ranges(target, base.count, count))
    return Point(target, base.state_digest, base.stats.add(added), message_id)


async def _known_points(thread: AgentThread) -> list[Point]:
    """Every point whose state is known, oldest first: empty, origin, checkpoints, now."""
    points = [Point((), None, ThreadStats())]
    origin = origin_point(thread)
    if origin is not None:
        points.append(origin)
    points.extend(
        Point(c.piece_table, c.state_digest, c.stats, c.last_message_id, c)
        for c in await list_checkpoints(thread)
    )
    points.append(Point(thread._content_ranges(), _state_digest(thread), thread.stats))
    return points


def origin_point(thread: AgentThread) -> Point | None:
    """The point the thread started from (created empty, forked, copied or imported)."""
    origin = thread._record.data.get("origin")
    if origin is None:
        return None
    try:
        if not isinstance(origin, dict):
            raise ValueError("origin is not an object")
        raw = origin.get("ranges") or []
        ranges = tuple(Range.from_json(r) for r in (raw if isinstance(raw, list) else [raw]))
        digest = origin.get("state")
        stats = ThreadStats.model_validate(origin.get("stats") or {})
    except (ValueError, ValidationError) as exc:
        raise StoreCorruptedError(f"thread {thread.id!r} origin", detail=str(exc)) from exc
    return Point(ranges, digest if isinstance(digest, str) else None, stats)


def _nearest_base(target: Ranges, points: Sequence[Point]) -> Point:
    """The longest point that is a prefix of `target`; the newest one among equals."""
    best = points[0]
    for point in points:
        if best.count <= point.count <= log.length(target) and _is_prefix(point.ranges, target):
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


async def _state_at(thread: AgentThread, digest: str | None) -> ImmutableState:
    if digest is None:
        return ImmutableState()
    if digest == _state_digest(thread):
        return thread.state
    blob = await thread.store.get_blob(digest)
    if blob is None:
        raise StoreCorruptedError(
            f"blob {digest}", detail=f"a recorded state of thread {thread.id!r} is missing"
        )
    try:
        return ImmutableState.from_json_bytes(blob)
    except ValueError as exc:
        raise StoreCorruptedError(f"blob {digest}", detail=f"undecodable state: {exc}") from exc


# -- time travel and rollback ------------------------------------------------------------


async def snapshot(
    thread: ThreadT, checkpoint: Checkpoint | str | None, message_id: str | None
) -> ThreadSnapshot[ThreadT]:
    """The read-only thread at a checkpoint or message (see `AgentThread.at`)."""
    point = await _resolve(thread, checkpoint, message_id, reread=False)
    state = await _state_at(thread, point.state_digest)
    messages = await thread._read_ranges(point.ranges) if thread._messages_in_memory() else None
    return ThreadSnapshot(thread, point, state, messages)


async def rollback(
    thread: AgentThread, checkpoint: Checkpoint | str | None, message_id: str | None
) -> Checkpoint:
    """Move the thread back (or forward) to a point; returns the checkpoint of the old head.

    The old head is recorded before the thread record moves, so a crash in between
    leaves an extra checkpoint, never a lost head. If another handle moved the thread
    first, that checkpoint is deleted, the thread re-read, and the head saved again.
    Caller holds the thread's lock.
    """
    for _ in range(_ROLLBACK_ATTEMPTS):
        point = await _resolve(thread, checkpoint, message_id, reread=True)
        state = await _state_at(thread, point.state_digest)
        saved = await save_checkpoint(thread, label=ROLLBACK_LABEL, reason="rollback")
        data: dict[str, JsonValue] = {
            **thread._rollback_data(point.ranges),
            "state": point.state_digest,
            "blobs": thread._blob_refs(point.state_digest),
            "stats": point.stats.model_dump(),
        }
        try:
            await thread._publish(data)
        except ConflictError:
            await thread.store.delete_record(CHECKPOINT_KIND, saved.id)
            if thread._history is not None:
                thread._history.forget(saved.id)
            await thread._refresh_unlocked()
            continue
        thread._state = state
        await thread._adopt(thread._record)
        return saved
    raise ConflictError(
        f"thread {thread.id!r}",
        detail="other writers kept changing the thread during the rollback; try again",
    )


async def lineage(thread: AgentThread) -> list[Ancestor]:
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
        data = {} if record is None else record.data
        title = data.get("title")
        ancestors.append(
            Ancestor(
                thread_id=parent,
                title=title if isinstance(title, str) else None,
                fork_point=fork_point,
                deleted=record is None,
            )
        )
        next_parent, next_fork = data.get("parent_id"), data.get("fork_point")
        parent = next_parent if isinstance(next_parent, str) else None
        fork_point = next_fork if isinstance(next_fork, str) else None
    return ancestors


__all__ = [
    "CHECKPOINT_KIND",
    "ROLLBACK_LABEL",
    "Ancestor",
    "Checkpoint",
    "CheckpointReason",
    "Point",
    "ThreadSnapshot",
    "checkpoint_from_record",
    "checkpoint_record",
    "delete_checkpoints",
    "find_checkpoint",
    "lineage",
    "list_checkpoints",
    "rollback",
    "save_checkpoint",
    "snapshot",
]
