"""A thread's history in an export: its checkpoints and every message they need.

`to_json()` writes a `"history"` section from what a handle holds in memory, a
`LoadedHistory`: the thread's checkpoints, the states they use, and (in the handle's
segment cache) their messages. An eager handle reads it once at load, adds its own
checkpoints as it makes them, and re-reads it on `refresh()`; `export()` reads it
afresh and writes the same section.

Messages are laid out once each in a *pool*: the document's `"messages"` (the thread
now) followed by `history.messages` (what only checkpoints still reach, e.g. messages
a rollback abandoned). Each checkpoint lists its content as `[start, end)` ranges over
that pool, so a checkpoint per turn adds a few bytes, not a copy of the conversation.
States are stored once each, by digest, under `history.states`.

On import the pool becomes one new segment and the checkpoints one new checkpoint log,
so every checkpoint reads back exactly, with its original id, label, time, state and
stats.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue, ValidationError

from agent_threads.core import pieces
from agent_threads.core.ids import new_id, validate_id
from agent_threads.core.pieces import Range, Ranges
from agent_threads.core.records import (
    ThreadStats,
    decode_state,
    put_new,
    validation_problems,
)
from agent_threads.errors import AgentThreadsError, InvalidValueError, StoreCorruptedError
from agent_threads.messages import Message
from agent_threads.state import ImmutableState
from agent_threads.stores.base import LOGS_KEY, Record, Row, ThreadStore
from agent_threads.timetravel.checkpoint import Checkpoint, CheckpointReason, encode_row
from agent_threads.timetravel.checkpoints import clean_label, list_checkpoints
from agent_threads.timetravel.protocol import CheckpointedThread
from agent_threads.timetravel.travel import origin_point

_FORBID = ConfigDict(extra="forbid")


class _Pool:
    """Segment positions laid out once each, in order of first use: the export's messages."""

    def __init__(self) -> None:
        self.runs: list[Range] = []
        self.length = 0
        self._spans: dict[str, list[tuple[int, int, int]]] = {}  # (start, end, pool start)

    def place(self, ranges: Sequence[Range], *, add: bool) -> list[list[int]] | None:
        """`ranges` as pool ranges, adding positions not laid out yet (None if `not add`)."""
        out: list[list[int]] = []
        for r in ranges:
            position = r.start
            while position < r.end:
                piece = self._piece(r.segment_id, position, r.end, add=add)
                if piece is None:
                    return None
                lo, hi, position = piece
                if out and out[-1][1] == lo:
                    out[-1][1] = hi
                else:
                    out.append([lo, hi])
        return out

    def _piece(
        self, segment_id: str, position: int, end: int, *, add: bool
    ) -> tuple[int, int, int] | None:
        """The pool run holding `segment_id[position:]` as far as it goes, and where it stops."""
        spans = self._spans.setdefault(segment_id, [])
        i = bisect.bisect_right(spans, (position, math.inf, math.inf)) - 1
        if i >= 0 and spans[i][0] <= position < spans[i][1]:
            start, stop, base = spans[i]
            upto = min(end, stop)
            return base + position - start, base + upto - start, upto
        if not add:
            return None
        upto = min(end, spans[i + 1][0]) if i + 1 < len(spans) else end
        base = self.length
        bisect.insort(spans, (position, upto, base))
        self.runs.append(Range(segment_id, position, upto))
        self.length += upto - position
        return base, base + upto - position, upto


@dataclass(slots=True)
class LoadedHistory:
    """A thread's checkpoints and the states they use, as one handle holds them in memory.

    `checkpoints` by id; `states` by digest. States are content-addressed, so a handle
    shares its `states` with its forks and copies, as it shares its segment cache.
    """

    checkpoints: dict[str, Checkpoint] = field(default_factory=dict)
    states: dict[str, ImmutableState] = field(default_factory=dict)

    def add(self, checkpoint: Checkpoint, state: ImmutableState | None = None) -> None:
        """Hold a checkpoint (and its state, if given): O(1)."""
        self.checkpoints[checkpoint.id] = checkpoint
        if checkpoint.state_digest and state is not None:
            self.states[checkpoint.state_digest] = state

    def forget(self, checkpoint_id: str) -> None:
        """Drop a checkpoint that was deleted."""
        self.checkpoints.pop(checkpoint_id, None)


def started_history(
    thread: CheckpointedThread, states: dict[str, ImmutableState] | None = None
) -> LoadedHistory:
    """The history of a new handle on a thread without checkpoints (created, forked, copied).

    Holds the thread's state, which is also the state it starts from.
    """
    history = LoadedHistory(states={} if states is None else states)
    if thread.state_digest is not None:
        history.states[thread.state_digest] = thread.state
    return history


async def load_history(
    thread: CheckpointedThread, states: dict[str, ImmutableState] | None = None
) -> LoadedHistory:
    """Read the thread's history from the store: what `to_json` needs to write it.

    One listing of the thread's checkpoints, one blob read per state not in `states`
    yet, and a read of the messages (the thread's and its checkpoints') the handle does
    not hold yet. A missing state blob is left out (writing the history then names it).
    """
    history = started_history(thread, states)
    await thread.read_ranges(thread.content_ranges())
    for checkpoint in await list_checkpoints(thread):
        history.add(checkpoint)
        await thread.read_ranges(checkpoint.piece_table)
    origin = origin_point(thread)
    wanted = [c.state_digest for c in history.checkpoints.values()]
    for digest in dict.fromkeys([*wanted, origin.state_digest if origin else None]):
        if digest is not None and digest not in history.states:
            await _read_state(thread.store, digest, into=history.states)
    return history


def history_section(thread: CheckpointedThread, history: LoadedHistory) -> dict[str, Any]:
    """The `"history"` section of the thread's export, from `history` and the handle's cache.

    Synchronous: every message it needs must be in memory (see `load_history`).
    """
    pool = _Pool()
    current = thread.content_ranges()
    placed = pool.place(current, add=True)
    if placed and placed != [[0, pieces.length(current)]]:
        raise StoreCorruptedError(f"thread {thread.id!r}", detail="its ranges repeat a position")
    current_runs = len(pool.runs)
    entries = []
    digests: list[str] = []
    for checkpoint in history.checkpoints.values():  # log order (ids need not follow it)
        entries.append(_checkpoint_entry(checkpoint, pool.place(checkpoint.piece_table, add=True)))
        if checkpoint.state_digest:
            digests.append(checkpoint.state_digest)
    # the origin's rows may be gone (vacuumed): then it is no use, and the empty point
    # stands in, so the import does not take its own arrival as a known point
    origin_entry: dict[str, Any] = {
        "ranges": [],
        "state": None,
        "stats": ThreadStats().model_dump(),
    }
    origin = origin_point(thread)
    if origin is not None and (ranges := pool.place(origin.ranges, add=False)) is not None:
        origin_entry = {
            "ranges": ranges,
            "state": origin.state_digest,
            "stats": origin.stats.model_dump(),
        }
        digests.extend([origin.state_digest] if origin.state_digest else [])
    extra = thread.held_messages(tuple(pool.runs[current_runs:]))
    return {
        "messages": [m.model_dump(mode="json") for m in extra],
        "states": {d: _state_dict(thread, history, d) for d in dict.fromkeys(digests)},
        "checkpoints": entries,
        "origin": origin_entry,
    }


def _checkpoint_entry(checkpoint: Checkpoint, ranges: list[list[int]] | None) -> dict[str, Any]:
    entry = checkpoint.model_dump(mode="json", exclude={"thread_id", "ranges", "state_digest"})
    return {**entry, "state": checkpoint.state_digest, "ranges": ranges or []}


def _state_dict(thread: CheckpointedThread, history: LoadedHistory, digest: str) -> dict[str, Any]:
    state = history.states.get(digest)
    if state is None and digest == thread.state_digest:
        state = thread.state
    if state is None:
        raise StoreCorruptedError(
            f"blob {digest}", detail=f"a recorded state of thread {thread.id!r} is missing"
        )
    return state.to_dict()


async def _read_state(store: ThreadStore, digest: str, *, into: dict[str, ImmutableState]) -> None:
    blob = await store.get_blob(digest)
    if blob is not None:
        into[digest] = decode_state(blob, digest)


# -- import ---------------------------------------------------------------------------


class _ExportedPoint(BaseModel):
    model_config = _FORBID
    ranges: list[tuple[int, int]] = Field(default_factory=list)
    state: str | None = None
    stats: ThreadStats = Field(default_factory=ThreadStats)


class _ExportedCheckpoint(_ExportedPoint):
    id: str
    label: str | None = None
    reason: CheckpointReason = "manual"
    created_at: AwareDatetime
    message_count: int = Field(ge=0)
    last_message_id: str | None = None
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class History(BaseModel):
    """The `"history"` section of an export, validated."""

    model_config = _FORBID
    messages: tuple[Message, ...] = ()
    states: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    checkpoints: tuple[_ExportedCheckpoint, ...] = ()
    origin: _ExportedPoint | None = None


def read_history(document: dict[str, Any]) -> History:
    """The history of an export document (empty if it has none).

    Raises:
        InvalidValueError: the section is malformed, naming the thread and the fields.
    """
    raw = document.get("history")
    if raw is None:
        return History()
    try:
        return History.model_validate(raw)
    except ValidationError as exc:
        where = f"thread export {document.get('id')!r}"
        reason = f"bad history: {validation_problems(exc)}"
        raise InvalidValueError(where, reason=reason) from exc


@dataclass(frozen=True, slots=True)
class PlannedHistory:
    """An import's history, checked against its messages: what `store_history` writes."""

    record: Record
    states: dict[str, ImmutableState]
    checkpoints: list[Checkpoint]


def plan_history(
    record: Record, segment_id: str, pool: Sequence[Message], history: History
) -> PlannedHistory:
    """Check an import's history against its pool of messages, writing nothing.

    Returns the thread record with its origin, the states by digest and the checkpoints.

    Raises:
        InvalidValueError: a state, a checkpoint or the origin does not fit the pool (a
            hand-edited file), named by the thread and field.
    """
    where = f"thread export {record.id!r}"
    try:
        states = {old: ImmutableState(raw) for old, raw in history.states.items()}
        digests = {old: state.digest for old, state in states.items()}
        checkpoints = [
            _imported_checkpoint(c, record.id, segment_id, pool, digests, where)
            for c in history.checkpoints
        ]
        if len({c.id for c in checkpoints}) != len(checkpoints):
            raise ValueError(f"{where}: two checkpoints have the same id")
        if history.origin is not None:
            record = _with_origin(record, history.origin, segment_id, pool, digests, where)
    except InvalidValueError:
        raise
    except ValueError as exc:  # InvalidIdError stays what it is
        if isinstance(exc, AgentThreadsError):
            raise
        raise InvalidValueError(f"{where} history", reason=str(exc)) from exc
    by_digest = {state.digest: state for state in states.values()}
    return PlannedHistory(record, by_digest, checkpoints)


async def store_history(store: ThreadStore, plan: PlannedHistory) -> tuple[Record, LoadedHistory]:
    """Write an import's states and checkpoint log, then its thread record.

    Returns that record, and the checkpoints and states written, for the new handle.
    The pool's rows must already be in their segment. The checkpoints go into a new log
    segment before the thread record; if that record cannot be written, nothing
    references them and `vacuum()` frees them.

    Raises:
        ConflictError: the thread already exists in `store`.
    """
    record = plan.record
    loaded = LoadedHistory()
    for digest, state in plan.states.items():
        await store.put_blob(state.to_json_bytes())
        loaded.states[digest] = state
    logs: list[JsonValue] = []
    if plan.checkpoints:
        log_id = new_id()
        rows = [Row(c.id, encode_row(c)) for c in plan.checkpoints]
        await store.append_rows(log_id, 0, rows)
        logs = [[log_id, 0, len(rows)]]
    record = record.model_copy(update={"data": {**record.data, LOGS_KEY: logs}})
    for checkpoint in plan.checkpoints:
        loaded.add(checkpoint)
    return await put_new(store, record), loaded


def _pool_ranges(
    pairs: Sequence[tuple[int, int]], segment_id: str, pool: Sequence[Message], where: str
) -> Ranges:
    ranges: Ranges = ()
    for start, end in pairs:
        if not 0 <= start <= end <= len(pool):
            raise ValueError(f"{where}: range [{start}, {end}) outside its {len(pool)} messages")
        ranges = pieces.extend(ranges, segment_id, start, end - start)
    return ranges


def _digest(old: str | None, digests: dict[str, str], where: str) -> str | None:
    if old is None:
        return None
    if old not in digests:
        raise ValueError(f"{where}: state {old} is not in history.states")
    return digests[old]


def _imported_checkpoint(
    entry: _ExportedCheckpoint,
    thread_id: str,
    segment_id: str,
    pool: Sequence[Message],
    digests: dict[str, str],
    where: str,
) -> Checkpoint:
    validate_id(entry.id, what=f"checkpoint id in {where}")
    label = clean_label(entry.label)
    where = f"{where} checkpoint {entry.id!r}"
    ranges = _pool_ranges(entry.ranges, segment_id, pool, where)
    last = pool[ranges[-1].end - 1].id if ranges else None
    if last != entry.last_message_id or pieces.length(ranges) != entry.message_count:
        raise ValueError(f"{where}: its ranges do not end at message {entry.last_message_id!r}")
    return Checkpoint(
        id=entry.id,
        thread_id=thread_id,
        label=label,
        reason=entry.reason,
        created_at=entry.created_at,
        message_count=entry.message_count,
        last_message_id=last,
        metadata=entry.metadata,
        stats=entry.stats,
        state_digest=_digest(entry.state, digests, where),
        ranges=tuple((r.segment_id, r.start, r.end) for r in ranges),
    )


def _with_origin(
    record: Record,
    origin: _ExportedPoint,
    segment_id: str,
    pool: Sequence[Message],
    digests: dict[str, str],
    where: str,
) -> Record:
    ranges = _pool_ranges(origin.ranges, segment_id, pool, f"{where} origin")
    state = _digest(origin.state, digests, f"{where} origin")
    data = dict(record.data)
    data["origin"] = {
        "ranges": [r.to_json() for r in ranges],
        "state": state,
        "stats": origin.stats.model_dump(),
    }
    blobs = data.get("blobs")
    refs = [*(blobs if isinstance(blobs, list) else []), *([state] if state else [])]
    data["blobs"] = list(dict.fromkeys(refs))
    return record.model_copy(update={"data": data})
