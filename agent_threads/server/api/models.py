"""The bodies of the native API: requests in, answers out (messages are `Message`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue

from agent_threads.core.records import ThreadStats
from agent_threads.messages import Message
from agent_threads.threads.listing import ThreadSummary
from agent_threads.threads.workflow.execution import ExecutionState, RunStatus, StepRecord, StepTask
from agent_threads.timetravel.checkpoint import Checkpoint, CheckpointReason

_REQUEST = ConfigDict(frozen=True, extra="forbid")
_ANSWER = ConfigDict(frozen=True)

MAX_PAGE = 100
"""The most items a page of the API holds."""

PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE)]
Order = Literal["asc", "desc"]


class ThreadCreate(BaseModel):
    """A new chat thread: all optional, `messages` appended at once."""

    model_config = _REQUEST
    id: str | None = None
    title: str | None = None
    tags: dict[str, str] | None = None
    metadata: dict[str, JsonValue] | None = None
    messages: list[Message] = Field(default_factory=list)


class ThreadPatch(BaseModel):
    """What to change of a thread: fields left out stay; tags and metadata are replaced."""

    model_config = _REQUEST
    title: str | None = None
    tags: dict[str, str] | None = None
    metadata: dict[str, JsonValue] | None = None


class ThreadList(BaseModel):
    """A page of threads, newest update first unless asked otherwise."""

    model_config = _ANSWER
    threads: list[ThreadSummary]
    next_cursor: str | None = None


class ForkRequest(BaseModel):
    """A fork: of the whole thread, or up to and including `from_message_id`."""

    model_config = _REQUEST
    id: str | None = None
    title: str | None = None
    tags: dict[str, str] | None = None
    reset_metrics: bool = True
    from_message_id: str | None = None


class MessageBatch(BaseModel):
    """Messages to append, in order, all or nothing."""

    model_config = _REQUEST
    messages: list[Message] = Field(min_length=1)


class MessagePage(BaseModel):
    """A page of messages; `index` of each is its position in the thread (from 0)."""

    model_config = _ANSWER
    messages: list[Message]
    first_index: int | None = None
    first_id: str | None = None
    last_id: str | None = None
    has_more: bool
    head: int


class AppendResult(BaseModel):
    """The messages appended and the thread's length after them."""

    model_config = _ANSWER
    messages: list[Message]
    head: int


class CheckpointRequest(BaseModel):
    """A checkpoint of the thread as it is now."""

    model_config = _REQUEST
    label: str | None = None
    metadata: dict[str, JsonValue] | None = None


class CheckpointInfo(BaseModel):
    """A checkpoint, without its piece table."""

    model_config = _ANSWER
    id: str
    thread_id: str
    label: str | None
    reason: CheckpointReason
    created_at: AwareDatetime
    message_count: int
    last_message_id: str | None
    metadata: dict[str, JsonValue]
    stats: ThreadStats

    @classmethod
    def of(cls, checkpoint: Checkpoint) -> CheckpointInfo:
        """The answer for a library checkpoint."""
        return cls.model_validate(checkpoint.model_dump(exclude={"ranges", "state_digest"}))


class CheckpointList(BaseModel):
    """Every checkpoint of a thread, oldest first."""

    model_config = _ANSWER
    checkpoints: list[CheckpointInfo]


class RollbackRequest(BaseModel):
    """Where to roll back to: a checkpoint (id or label) or a message, exactly one."""

    model_config = _REQUEST
    checkpoint: str | None = None
    message_id: str | None = None


class RollbackResult(BaseModel):
    """The thread after the rollback, and its old head's checkpoint (roll back to it to undo)."""

    model_config = _ANSWER
    thread: ThreadSummary
    undo: CheckpointInfo


class DroppedRangeInfo(BaseModel):
    """Messages `start..end` (indexes and ids, inclusive) a view left out."""

    model_config = _ANSWER
    start: int
    end: int
    start_id: str
    end_id: str


class ViewResult(BaseModel):
    """A context view: its messages in the format asked for, their token count, what was left out.

    `messages` are `Message`s for `format=native`, Chat Completions messages for `openai`,
    Messages API messages for `anthropic` (whose system prompt is `system`).
    """

    model_config = _ANSWER
    format: Literal["native", "openai", "anthropic"]
    messages: list[JsonValue]
    system: str | None = None
    tokens: int
    dropped: list[DroppedRangeInfo]


class SubThreadInfo(BaseModel):
    """A workflow run's sub-thread: its key and its summary."""

    model_config = _ANSWER
    key: str
    thread: ThreadSummary


class RunInfo(BaseModel):
    """Where a workflow run stands: status, step history, current and next steps."""

    model_config = _ANSWER
    id: str
    title: str | None
    workflow: str | None
    status: RunStatus
    superstep: int
    history: list[StepRecord]
    current: list[StepRecord]
    next: list[StepTask]
    interrupts: list[StepRecord]
    error: str | None
    checkpoint: str | None
    sub_threads: dict[str, str]
    updated_at: datetime

    @classmethod
    def of(cls, summary: ThreadSummary, execution: ExecutionState, subs: dict[str, str]) -> RunInfo:
        """The answer for a run, from its summary and execution state."""
        return cls(
            id=summary.id,
            title=summary.title,
            workflow=execution.workflow,
            status=execution.status,
            superstep=execution.superstep,
            history=list(execution.history),
            current=list(execution.current),
            next=list(execution.next),
            interrupts=list(execution.interrupts),
            error=execution.error,
            checkpoint=execution.checkpoint,
            sub_threads=subs,
            updated_at=summary.updated_at,
        )


class Deleted(BaseModel):
    """A deleted thread's id."""

    model_config = _ANSWER
    id: str
    deleted: bool = True
