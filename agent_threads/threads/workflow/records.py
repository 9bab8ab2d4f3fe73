"""Workflow records: a workflow's part of its thread record and its checkpoint records.

Each stored shape has one typed model, one function that reads it (raising
`StoreCorruptedError` naming the workflow or checkpoint when it is malformed) and one
that writes it. Also here: the sub-thread keys, and the new sub-threads they name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    ValidationError,
    field_validator,
    model_validator,
)

from agent_threads.core import pieces
from agent_threads.core.pieces import OpenSegment, Range
from agent_threads.core.records import ThreadStats
from agent_threads.errors import InvalidIdError, SchemaVersionError, StoreCorruptedError
from agent_threads.stores.base import Record, ThreadStore, validate_tag
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData, RunStatus
from agent_threads.threads.workflow.lease import Lease
from agent_threads.threads.workflow.step_log import StepLog
from agent_threads.timetravel.checkpoint import CheckpointReason

MAIN = "main"
"""The default sub-thread key."""

CREATED_LABEL = "created"
"""The label of the checkpoint a sub-thread gets when a workflow creates it (empty)."""

WORKFLOW_CHECKPOINT_KIND = "workflow_checkpoint"
"""The store record kind of workflow checkpoints; `Record.owner` is the workflow id."""

WORKFLOW_CHECKPOINT_SCHEMA_VERSION = 2
"""Version of the workflow checkpoint record this code writes.

2: the step history's length is `history_length`. Version 1 records (which called it
`message_count`, next to an always empty `last_message_id`) are still read.
"""

RangeTriple = tuple[str, int, int]
"""A range as records store it: `[segment_id, start, end]`."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def _triples(value: Any) -> Any:
    """`value` as range triples if it is a list (ValueError naming a malformed range).

    `Range.from_json` is stricter than pydantic's lax ints (no booleans, no strings) and
    checks `0 <= start <= end`; anything but a list is left for pydantic to report.
    """
    if value is None:
        return ()
    if not isinstance(value, list | tuple):
        return value
    return tuple((r.segment_id, r.start, r.end) for r in map(Range.from_json, value))


def _step_log_ranges(triples: tuple[RangeTriple, ...]) -> pieces.Ranges:
    return tuple(Range(*r) for r in triples)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'data'}: {e['msg']}" for e in exc.errors())


# -- the workflow's part of its thread record ---------------------------------------------


class OpenSegmentData(BaseModel):
    """The step-log segment a workflow may extend, and how far it is written."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    id: str
    end: int = Field(ge=0)


class WorkflowData(BaseModel):
    """The workflow keys of a workflow thread record (the other keys are every thread's).

    `sub_threads` maps each key to its sub-thread's id, `execution` is the inline
    execution data, and `ranges` / `segment` are the step log's ranges and open segment
    (`head`, their length, is written for readers of a chat record's shape and ignored).
    `lease` is the run's lease while a runner holds it (see `lease.py`); checkpoints,
    forks, copies and exports never carry it.
    """

    model_config = ConfigDict(frozen=True, extra="ignore")
    sub_threads: dict[str, str] = Field(default_factory=dict)
    execution: ExecutionData = Field(default_factory=ExecutionData)
    ranges: tuple[RangeTriple, ...] = ()
    segment: OpenSegmentData | None = None
    lease: Lease | None = None

    @field_validator("sub_threads", "execution", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @field_validator("ranges", mode="before")
    @classmethod
    def _ranges(cls, value: Any) -> Any:
        return _triples(value)

    @property
    def step_log(self) -> StepLog:
        """The step log these keys describe."""
        segment = self.segment
        open_segment = None if segment is None else OpenSegment(segment.id, segment.end)
        return StepLog(_step_log_ranges(self.ranges), open_segment)


def read_workflow_data(record: Record) -> WorkflowData:
    """The workflow keys of a workflow thread record.

    Raises:
        StoreCorruptedError: a key is malformed, naming the workflow and the key.
    """
    try:
        return WorkflowData.model_validate(record.data)
    except ValidationError as exc:
        raise StoreCorruptedError(f"workflow {record.id!r} record", detail=_problems(exc)) from exc


def workflow_data(
    *,
    sub_threads: Mapping[str, str] | None = None,
    execution: ExecutionData | None = None,
    step_log: StepLog | None = None,
) -> dict[str, JsonValue]:
    """The record data of the given parts of a workflow (only those: a write merges them in).

    Cheap enough for every superstep: it serializes what it is given, nothing else.
    """
    data: dict[str, JsonValue] = {}
    if sub_threads is not None:
        data["sub_threads"] = dict[str, JsonValue](sub_threads)
    if execution is not None:
        data["execution"] = execution.model_dump(mode="json")
    if step_log is not None:
        segment = step_log.open_segment
        data["ranges"] = [r.to_json() for r in step_log.ranges]
        data["head"] = step_log.length  # the log's `ranges` are what vacuum keeps alive
        data["segment"] = (
            None if segment is None else {"id": segment.segment_id, "end": segment.end}
        )
    return data


# -- workflow checkpoint records ----------------------------------------------------------


class SubThreadCut(BaseModel):
    """Where one sub-thread stood at a workflow checkpoint: its id and its checkpoint."""

    model_config = _FROZEN
    thread_id: str
    checkpoint_id: str


class CutData(BaseModel):
    """The data of a workflow checkpoint record (the id and the workflow's are the record's).

    `ranges` are the step log's (under that key, so `vacuum()` keeps their segments
    alive) and `history_length` their length; `sub_threads` names each sub-thread's
    checkpoint; `execution` is the inline execution data then.
    """

    model_config = _FROZEN
    label: str | None = None
    reason: CheckpointReason = "manual"
    created_at: AwareDatetime
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    stats: ThreadStats = Field(default_factory=ThreadStats)
    state_digest: str | None = None
    superstep: int = Field(ge=0)
    status: RunStatus
    sub_threads: dict[str, SubThreadCut] = Field(default_factory=dict)
    history_length: int = Field(ge=0)
    ranges: tuple[RangeTriple, ...] = ()
    execution: ExecutionData = Field(default_factory=ExecutionData)

    @field_validator("ranges", mode="before")
    @classmethod
    def _ranges(cls, value: Any) -> Any:
        return _triples(value)

    @field_validator("execution", mode="before")
    @classmethod
    def _no_execution_is_empty(cls, value: object) -> object:
        return {} if value is None else value

    @model_validator(mode="after")
    def _length_matches_ranges(self) -> CutData:
        held = pieces.length(self.step_log.ranges)
        if held != self.history_length:
            raise ValueError(
                f"history_length {self.history_length} differs from the {held} step"
                " records its ranges hold"
            )
        return self

    @property
    def step_log(self) -> StepLog:
        """The step log then (shared: a cut never extends a segment)."""
        return StepLog(_step_log_ranges(self.ranges), None)


def read_cut_data(record: Record) -> CutData:
    """The data of a workflow checkpoint record, of this version or an older one.

    Raises:
        SchemaVersionError: it was written by a newer version.
        StoreCorruptedError: it cannot be decoded, naming the checkpoint.
    """
    data = dict(record.data)
    where = f"workflow checkpoint {record.id!r}"
    found = data.pop("schema_version", None)
    version = SchemaVersionError.check(
        found, f"{where} record", newest=WORKFLOW_CHECKPOINT_SCHEMA_VERSION
    )
    data.pop("blobs", None)  # derived from state_digest (see cut_record)
    if version == 1:
        data["history_length"] = data.pop("message_count", None)
        data.pop("last_message_id", None)
    try:
        return CutData.model_validate(data)
    except ValidationError as exc:
        raise StoreCorruptedError(where, detail=_problems(exc)) from exc


def cut_record(checkpoint_id: str, workflow_id: str, cut: CutData) -> Record:
    """The store record of a workflow checkpoint (`ranges` and `blobs` keep data alive).

    Its label is also its tag, so a label lookup is a tag filter.
    """
    data: dict[str, JsonValue] = {
        "schema_version": WORKFLOW_CHECKPOINT_SCHEMA_VERSION,
        **cut.model_dump(mode="json"),
        "blobs": [cut.state_digest] if cut.state_digest else [],
    }
    tags = (cut.label,) if cut.label else ()
    return Record(
        kind=WORKFLOW_CHECKPOINT_KIND, id=checkpoint_id, owner=workflow_id, tags=tags, data=data
    )


# -- sub-threads --------------------------------------------------------------------------


def agent_name(agent: object) -> str:
    """The name of an agent given as a string or as an object with a `name`."""
    name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"an agent is a non-empty name or has a `name` attribute, got {agent!r}")
    return name


def check_key(key: object) -> str:
    """Return `key` if it can name a sub-thread (1-128 characters, no control characters)."""
    try:
        return validate_tag(key)
    except InvalidIdError as exc:
        raise InvalidIdError(key, what="sub-thread key", reason=exc.reason) from None


async def new_sub_thread(
    store: ThreadStore, key: str, agent: str, title: str | None
) -> ChatMessageThread:
    """A new sub-thread, checkpointed empty (a crashed first step rolls back to it)."""
    sub = await ChatMessageThread.create(
        store,
        title=f"{title} / {key}" if title else key,
        metadata={"agent": agent, "key": key},
    )
    await sub.checkpoint(CREATED_LABEL)
    return sub
