"""Thread records: their kind, schema version, stats, and the rules every writer of one shares.

A thread lives in its store as one record of kind `THREAD_KIND`, versioned for
compare-and-set. Everything here is pure but `put_new` and `read_state`, which take the
store to act on as an argument.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import partial, reduce
from operator import add, attrgetter, is_not
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, field_validator

from agent_threads.core.copies import replaced
from agent_threads.core.limits import check_json, check_text
from agent_threads.core.tags import labels_to_tags, stored_tags
from agent_threads.errors import ConflictError, InvalidValueError, StoreCorruptedError
from agent_threads.messages import Message, Usage
from agent_threads.state import ImmutableState

if TYPE_CHECKING:  # the store protocol sits above this module; only its type is needed
    from agent_threads.stores.base import Record, ThreadStore

SCHEMA_VERSION = 3
"""Version of the thread record this code writes (3: tags are a dict in the data).

2: checkpoints in a log (see `logs`); 3: `tags` is a `dict[str, str]` in the record data,
and the record's labels are derived from it (`core.tags.labels_of`). Older records are
read as they are: the labels of a record of version 1 or 2 without `tags` in its data
become its tags (`{label: ""}`), and its next write stores them in the data (a record
of version 2 is then written as version 3). The checkpoints of a record of version 1
are records of their own until the first new checkpoint moves them into the log (and
the record to the current version).
"""

THREAD_KIND = "thread"
"""The store record kind of every thread, whatever its type."""


class ThreadStats(BaseModel):
    """What a thread has accumulated: messages appended and their summed `usage`."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    message_count: int = Field(default=0, ge=0)
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)

    def as_data(self) -> dict[str, JsonValue]:
        """`model_dump()`: the four numbers.

        Without a call to pydantic's serializer: ~11,000 instructions (callgrind), 2% of
        an append of one message.
        """
        return dict(self.__dict__)

    def add(self, messages: Iterable[Message]) -> ThreadStats:
        """These stats plus the given messages (summed in C: no step in Python for each).

        Sums that are plainly valid (counts that are ints, a cost that is a float, none
        below zero) are not validated again; any other (a usage made without validation,
        `Usage.model_construct`, or of a subclass that widens a field) is, as the stats of
        a record read back would be, so such a usage is refused before it is stored.
        Every field is given (a copy's fields set is all four, as a validated one's is).
        """
        batch = list(messages)
        usages = given_usages(batch)
        if not usages:  # only the count grows
            return replaced(
                self, {**self.__dict__, "message_count": self.message_count + len(batch)}
            )
        fields = {
            "message_count": self.message_count + len(batch),
            "input_tokens": self.input_tokens + sum(map(_INPUT_TOKENS, usages)),
            "output_tokens": self.output_tokens + sum(map(_OUTPUT_TOKENS, usages)),
            # added in order, as `cost += ...` would: `sum` of floats compensates since 3.12
            "cost": self.cost + reduce(add, map(_COST, usages), 0.0),
        }
        if _plainly_valid(fields):
            return replaced(self, fields)
        return ThreadStats(**fields)


def _plainly_valid(fields: dict[str, Any]) -> bool:
    """Whether `ThreadStats` holds these sums as they are: ints and a float, none below 0.

    (The message count is this stats' count, valid, plus a length.)
    """
    inputs, outputs, cost = fields["input_tokens"], fields["output_tokens"], fields["cost"]
    return (
        type(inputs) is int
        and inputs >= 0
        and type(outputs) is int
        and outputs >= 0
        and type(cost) is float
        and cost >= 0
    )


def given_usages(messages: Iterable[Message]) -> list[Usage]:
    """The usages the messages give, in order (found in C, no step in Python for each)."""
    return list(filter(_given, map(_USAGE, messages)))


_USAGE = attrgetter("usage")
_given = partial(is_not, None)
"""Whether a value is not None (`filter(None, ...)` would drop a falsy one too)."""
_INPUT_TOKENS = attrgetter("input_tokens")
_OUTPUT_TOKENS = attrgetter("output_tokens")
_COST = attrgetter("cost")


def clean_metadata(
    metadata: Mapping[str, Any] | None, *, what: str = "thread metadata"
) -> dict[str, JsonValue]:
    """A JSON copy of user metadata (threads, checkpoints).

    Raises:
        InvalidValueError: naming `what` and the field, if it is not JSON that reads back
            as it is (see `core.limits`).
    """
    if metadata is None:
        return {}
    if not isinstance(metadata, Mapping):
        raise InvalidValueError(what, reason=f"must be a dict, not {metadata!r:.60}")
    check_json(metadata, what)
    return cast(dict[str, JsonValue], json.loads(json.dumps(dict(metadata))))


MAX_TITLE_LENGTH = 1024
"""The longest a thread's title may be, in characters."""


def clean_title(title: object, what: str) -> str | None:
    """`title` if it is None or text of at most `MAX_TITLE_LENGTH` characters.

    Raises:
        InvalidValueError: naming `what` (e.g. "thread 'abc' title").
    """
    if title is None:
        return None
    if not isinstance(title, str):
        raise InvalidValueError(what, reason=f"must be text or None, not {title!r:.60}")
    if len(title) > MAX_TITLE_LENGTH:
        raise InvalidValueError(what, reason=f"longer than {MAX_TITLE_LENGTH} characters")
    check_text(title, what)
    return title


def thread_exists(thread_id: str) -> ConflictError:
    """The error for a new thread whose id another thread holds (no retry can help)."""
    return ConflictError(f"thread {thread_id!r}", detail="a thread with this id already exists")


async def put_new(store: ThreadStore, record: Record) -> Record:
    """Store a new thread record (ConflictError naming it if the id is taken)."""
    try:
        return await store.put_record(record, expected_version=0)
    except ConflictError as exc:
        raise thread_exists(record.id) from exc


async def read_state(store: ThreadStore, digest: str | None, *, owner: str) -> ImmutableState:
    """The state stored under `digest` (None: the empty state).

    Raises:
        StoreCorruptedError: the blob is missing or undecodable; `owner` names whose
            state it is (e.g. "thread 'abc'").
    """
    if digest is None:
        return ImmutableState()
    blob = await store.get_blob(digest)
    if blob is None:
        raise StoreCorruptedError(f"blob {digest}", detail=f"the state of {owner} is missing")
    return decode_state(blob, digest)


def decode_state(blob: bytes, digest: str) -> ImmutableState:
    """The state a blob holds (StoreCorruptedError naming the blob if undecodable)."""
    try:
        return ImmutableState.from_json_bytes(blob)
    except ValueError as exc:
        raise StoreCorruptedError(f"blob {digest}", detail=f"undecodable state: {exc}") from exc


RangeJson = tuple[str, int, int]
"""A range as records store it: `[segment_id, start, end]`."""

_RECORD = ConfigDict(frozen=True, extra="ignore")
"""Typed views of record data ignore the keys of other layers (a subclass's, a store's)."""


class Origin(BaseModel):
    """The point a thread started from (created, forked, copied or imported)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    ranges: tuple[RangeJson, ...] = ()
    state: str | None = None
    stats: ThreadStats = Field(default_factory=ThreadStats)

    @field_validator("stats", mode="before")
    @classmethod
    def _no_stats_is_zero(cls, value: object) -> object:
        return ThreadStats() if value is None else value


class ThreadData(BaseModel):
    """The data of a thread record, as every type of thread keeps it.

    `logs` lists the ranges of the thread's checkpoint log; it is None in a record of
    version 1, whose checkpoints are records of their own. `blobs` are the state
    digests the thread keeps alive (its state and its origin's). `tags` map keys to
    values (`core.tags`), read sorted by key; a record of version 1 or 2 may hold its
    tags as labels only (see `read_thread_data`).
    """

    model_config = _RECORD
    schema_version: int
    type: str
    title: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    parent_id: str | None = None
    fork_point: str | None = None
    created_at: str
    updated_at: str
    stats: ThreadStats = Field(default_factory=ThreadStats)
    state: str | None = None
    blobs: tuple[str, ...] = ()
    logs: tuple[RangeJson, ...] | None = None
    origin: Origin | None = None

    @field_validator("stats", mode="before")
    @classmethod
    def _no_stats_is_zero(cls, value: object) -> object:
        return ThreadStats() if value is None else value

    @field_validator("tags", mode="before")
    @classmethod
    def _tags_a_thread_may_hold(cls, value: object) -> object:
        # sorted by key: the same on every store, and on data a store once kept without
        # key order (PostgresStore's schema 1 held record data as jsonb)
        return dict(sorted(stored_tags(value, where="tags").items()))

    def write(self) -> dict[str, JsonValue]:
        """The record data: what `read_thread_data` reads back (`logs` left out if None)."""
        return cast(
            dict[str, JsonValue],
            self.model_dump(mode="json", exclude={"logs"} if self.logs is None else None),
        )


DataT = TypeVar("DataT", bound=ThreadData)


def read_thread_data(record: Record, schema: type[DataT]) -> DataT:
    """The record's data as `schema` (ThreadData or a thread type's extension of it).

    Raises:
        StoreCorruptedError: a field is missing or malformed, naming the thread and field.
    """
    data: Mapping[str, object] = record.data
    if "tags" not in data and data.get("schema_version") in (1, 2):
        data = {**data, "tags": _tags_of_labels(record)}  # see SCHEMA_VERSION
    try:
        return schema.model_validate(data)
    except ValidationError as exc:
        detail = validation_problems(exc)
        raise StoreCorruptedError(f"thread {record.id!r} record", detail=detail) from exc


def _tags_of_labels(record: Record) -> dict[str, str]:
    """The tags of a record of version 1 or 2: its labels, each `{label: ""}`."""
    where = f"thread {record.id!r} record"
    try:
        return labels_to_tags(record.tags, where=where)
    except InvalidValueError as exc:
        raise StoreCorruptedError(where, detail=str(exc)) from exc


def validation_problems(error: ValidationError) -> str:
    """A pydantic error as one line: each field at fault and what is wrong with it."""
    return "; ".join(
        f"{'.'.join(map(str, e['loc'])) or 'data'}: {e['msg']}" for e in error.errors()[:5]
    )
