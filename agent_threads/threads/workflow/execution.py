"""Execution state of a workflow run: step records, pending tasks and the run's status.

A run advances in supersteps. The steps of a superstep are `current` step records; when
the superstep ends they move to `history`, an append-only log stored like messages (as
ranges over segments), so a checkpoint or a fork shares it instead of copying it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, cast, overload

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue

from agent_threads.core.ids import new_id
from agent_threads.core.sequence import SequenceView
from agent_threads.state import ImmutableState

StepStatus = Literal["pending", "running", "completed", "failed", "interrupted"]
"""Where one attempt of a step stands."""

RunStatus = Literal["idle", "running", "paused", "completed", "failed"]
"""Where a workflow run stands: `paused` waits for a reply or was cancelled."""

FINISHED: frozenset[str] = frozenset({"completed", "failed", "interrupted"})
"""Step statuses an attempt never leaves."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def now() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def check_json(value: object, *, what: str) -> JsonValue:
    """`value` as plain JSON data (read-only state mappings become dicts), else raise.

    Raises:
        TypeError: naming `what` and the offending type.
    """
    if value is None or isinstance(value, str | bool | int):
        return value
    try:
        return cast(JsonValue, json.loads(json.dumps(value, default=_plain, allow_nan=False)))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{what} must be JSON-serializable: {exc}") from exc


def _plain(value: object) -> object:
    if isinstance(value, Mapping):  # a mapping read from an ImmutableState
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


class StepTask(BaseModel):
    """A step due to run in the next superstep, with its input."""

    model_config = _FROZEN
    step: str = Field(min_length=1)
    input: JsonValue = None


class StepRecord(BaseModel):
    """One attempt of one step: what ran, on which sub-thread, with what outcome.

    `thread_head` is the sub-thread's message count when the attempt was scheduled:
    messages above it belong to this attempt. `branch` names the sub-thread checkpoint
    that keeps the messages of an attempt rolled back after a crash, failure or interrupt.
    """

    model_config = _FROZEN
    id: str = Field(default_factory=new_id)
    step: str = Field(min_length=1)
    agent: str = Field(min_length=1)
    key: str = Field(min_length=1)
    superstep: int = Field(ge=0)
    status: StepStatus = "pending"
    attempt: int = Field(default=1, ge=1)
    input: JsonValue = None
    output: JsonValue = None
    patch: dict[str, JsonValue] | None = None
    thread_head: int = Field(default=0, ge=0)
    started_at: AwareDatetime | None = None
    finished_at: AwareDatetime | None = None
    error: str | None = None
    prompt: JsonValue = None
    replies: tuple[JsonValue, ...] = ()
    branch: str | None = None

    @property
    def is_finished(self) -> bool:
        """Whether this attempt is over (completed, failed or interrupted)."""
        return self.status in FINISHED

    @property
    def duration(self) -> float | None:
        """Seconds from start to finish, when both are known."""
        if self.started_at is None or self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()

    def running(self) -> StepRecord:
        """This attempt, started now."""
        return self.model_copy(update={"status": "running", "started_at": now()})

    def completed(self, output: JsonValue, patch: Mapping[str, JsonValue] | None) -> StepRecord:
        """This attempt, finished now with `output` and a state patch."""
        output = check_json(output, what=f"the output of step {self.step!r}")
        clean = check_json(patch, what=f"the state patch of step {self.step!r}")
        if clean is not None and not isinstance(clean, dict):
            raise TypeError(f"the state patch of step {self.step!r} must be a mapping")
        return self._finish("completed", output=output, patch=clean)

    def failed(self, error: str, *, branch: str | None = None) -> StepRecord:
        """This attempt, failed now with `error` (its messages kept on `branch`)."""
        return self._finish("failed", error=error, branch=branch)

    def interrupted(self, prompt: JsonValue) -> StepRecord:
        """This attempt, stopped now to wait for a reply to `prompt`."""
        prompt = check_json(prompt, what=f"the interrupt prompt of step {self.step!r}")
        return self._finish("interrupted", prompt=prompt)

    def retry(self, *, thread_head: int, replies: Sequence[JsonValue] = ()) -> StepRecord:
        """A new pending attempt of the same step, with the same input."""
        return StepRecord(
            step=self.step,
            agent=self.agent,
            key=self.key,
            superstep=self.superstep,
            attempt=self.attempt + 1,
            input=self.input,
            thread_head=thread_head,
            replies=tuple(replies),
        )

    def _finish(self, status: StepStatus, **fields: Any) -> StepRecord:
        return self.model_copy(update={"status": status, "finished_at": now(), **fields})


class ExecutionData(BaseModel):
    """The part of the execution state a workflow record stores inline (small and bounded).

    `current` holds every attempt of the superstep under way (several per step when
    one was retried); `waiting` holds outputs delivered to fan-in steps that still
    wait for other sources; `checkpoint` is the workflow checkpoint this superstep
    started from, the point a crashed step's messages are rolled back to.
    """

    model_config = _FROZEN
    workflow: str | None = None
    status: RunStatus = "idle"
    superstep: int = Field(default=0, ge=0)
    next: tuple[StepTask, ...] = ()
    current: tuple[StepRecord, ...] = ()
    waiting: dict[str, dict[str, JsonValue]] = Field(default_factory=dict)
    error: str | None = None
    checkpoint: str | None = None


class StepHistory(SequenceView[StepRecord]):
    """A read-only view of a history list's first `length` records plus a tail, in O(1).

    The list only ever grows (a rollback replaces it), so a view taken earlier keeps
    showing what it showed.
    """

    __slots__ = ("_items", "_length", "_tail")

    def __init__(
        self,
        items: Sequence[StepRecord],
        *,
        length: int | None = None,
        tail: Sequence[StepRecord] = (),
    ) -> None:
        self._items = items
        self._length = len(items) if length is None else length
        self._tail = tuple(tail)

    def __len__(self) -> int:
        return self._length + len(self._tail)

    @overload
    def __getitem__(self, index: int) -> StepRecord: ...

    @overload
    def __getitem__(self, index: slice) -> list[StepRecord]: ...

    def __getitem__(self, index: int | slice) -> StepRecord | list[StepRecord]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"step record index {index} out of range (length {len(self)})")
        return self._items[index] if index < self._length else self._tail[index - self._length]

    def __iter__(self) -> Iterator[StepRecord]:
        for i in range(self._length):
            yield self._items[i]
        yield from self._tail

    def __repr__(self) -> str:
        return f"StepHistory({list(self)!r})"


@dataclass(frozen=True, slots=True)
class ExecutionState:
    """Where a workflow run stands: status, supersteps, step records and shared state.

    Attributes:
        workflow: the name of the workflow definition that runs this thread, if any.
        status: `idle | running | paused | completed | failed`.
        superstep: how many supersteps have ended.
        history: every step record, oldest first: the ended supersteps', then `current`.
        current: the attempts of the superstep under way (several run at once).
        next: the steps due in the next superstep, with their inputs.
        waiting: outputs delivered to fan-in steps still waiting for other sources.
        state: the shared workflow state.
        error: why the run failed, if it did.
        checkpoint: the id of the workflow checkpoint the current superstep started from.
    """

    workflow: str | None
    status: RunStatus
    superstep: int
    history: Sequence[StepRecord]
    current: tuple[StepRecord, ...]
    next: tuple[StepTask, ...]
    waiting: Mapping[str, Mapping[str, JsonValue]]
    state: ImmutableState
    error: str | None
    checkpoint: str | None

    @classmethod
    def build(
        cls,
        data: ExecutionData,
        closed: Sequence[StepRecord],
        state: ImmutableState,
        *,
        length: int | None = None,
    ) -> ExecutionState:
        """Combine stored data, the first `length` closed step records and the state."""
        return cls(
            workflow=data.workflow,
            status=data.status,
            superstep=data.superstep,
            history=StepHistory(closed, length=length, tail=data.current),
            current=data.current,
            next=data.next,
            waiting=data.waiting,
            state=state,
            error=data.error,
            checkpoint=data.checkpoint,
        )

    @property
    def interrupts(self) -> tuple[StepRecord, ...]:
        """The current steps waiting for a reply (their latest attempt was interrupted)."""
        return tuple(r for r in latest_attempts(self.current) if r.status == "interrupted")

    @property
    def is_finished(self) -> bool:
        """Whether the run completed (nothing left to run)."""
        return self.status == "completed"


def latest_attempts(records: Sequence[StepRecord]) -> list[StepRecord]:
    """The last attempt of each step among `records`, in the order steps first appear."""
    latest: dict[str, StepRecord] = {}
    for record in records:
        latest[record.step] = record
    return list(latest.values())


__all__ = [
    "ExecutionData",
    "ExecutionState",
    "RunStatus",
    "StepHistory",
    "StepRecord",
    "StepStatus",
    "StepTask",
    "latest_attempts",
]
