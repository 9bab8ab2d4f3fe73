"""Thread listing: pages of thread summaries, newest update first, with a cursor.

`list_threads(store, ...)` filters the threads of a store by kind, tags, title text and
update time, sorts them by `updated_at` (ties broken by id) and returns one page and a
cursor to the next. The cursor names the last thread of the page by its sort key, so
the next page starts right after it whatever was written meanwhile: a thread updated
between two pages moves to the front and is not listed twice, and none of the others
is skipped. Workflow sub-threads (the threads a workflow record maps its keys to) are
left out unless asked for.

Stores keep no index by update time, so a page reads the records of every thread the
store lists for the tags asked (all of them without tags): O(threads) per page.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, JsonValue

from agent_threads.core.ids import validate_id
from agent_threads.core.records import (
    SCHEMA_VERSION,
    THREAD_KIND,
    ThreadData,
    ThreadStats,
    read_thread_data,
)
from agent_threads.core.tags import clean_tags, pair_label
from agent_threads.errors import InvalidValueError, SchemaVersionError, ThreadNotFoundError
from agent_threads.stores.base import Record, ThreadStore
from agent_threads.threads.workflow.execution import RunStatus
from agent_threads.threads.workflow.records import read_workflow_data
from agent_threads.threads.workflow.thread import WorkflowThread

Order = Literal["asc", "desc"]
"""The order of a listing by `updated_at`: oldest first or newest first."""

MAX_LIMIT = 1000
"""The most threads one page may hold."""


class ThreadSummary(BaseModel):
    """What a listing shows of one thread (its record, without its messages).

    `run_status` and `workflow` are a workflow thread's (its run's status and the
    workflow definition running it); None for other threads.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str
    kind: str
    title: str | None = None
    tags: dict[str, str]
    metadata: dict[str, JsonValue]
    created_at: AwareDatetime
    updated_at: AwareDatetime
    message_count: int
    stats: ThreadStats
    parent_id: str | None = None
    fork_point: str | None = None
    run_status: RunStatus | None = None
    workflow: str | None = None

    @classmethod
    def of(cls, record: Record) -> ThreadSummary:
        """The summary of a thread record.

        Raises:
            SchemaVersionError: the record was written by a newer version.
            StoreCorruptedError: its data is malformed, naming the thread.
        """
        SchemaVersionError.check(
            record.data.get("schema_version"),
            f"thread {record.id!r} record",
            newest=SCHEMA_VERSION,
        )
        data = read_thread_data(record, ThreadData)
        run = None
        if data.type == WorkflowThread.type_name:
            run = read_workflow_data(record).execution
        return cls(
            id=record.id,
            kind=data.type,
            title=data.title,
            tags=data.tags,
            metadata=data.metadata,
            created_at=datetime.fromisoformat(data.created_at),
            updated_at=datetime.fromisoformat(data.updated_at),
            message_count=data.stats.message_count,
            stats=data.stats,
            parent_id=data.parent_id,
            fork_point=data.fork_point,
            run_status=None if run is None else run.status,
            workflow=None if run is None else run.workflow,
        )


class ThreadPage(BaseModel):
    """One page of a listing: its threads, and the cursor of the next page (None: last)."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    threads: tuple[ThreadSummary, ...]
    next_cursor: str | None = None


@dataclass(frozen=True, slots=True)
class _Filter:
    """What a listing keeps (checked once, before the store is read)."""

    kind: str | None
    tags: dict[str, str]
    title: str | None
    updated_after: datetime | None
    include_sub_threads: bool

    def keeps(self, summary: ThreadSummary) -> bool:
        if self.kind is not None and summary.kind != self.kind:
            return False
        if any(summary.tags.get(key) != value for key, value in self.tags.items()):
            return False
        if self.title is not None and self.title not in (summary.title or "").casefold():
            return False
        return self.updated_after is None or summary.updated_at > self.updated_after

    @property
    def labels(self) -> list[str]:
        """The store labels every thread holding the tags holds (see `AgentThread.find`)."""
        return [*self.tags, *(pair_label(k, v) for k, v in self.tags.items() if v)]


def _filter(
    kind: object,
    tags: Mapping[str, str] | None,
    title_contains: object,
    updated_after: object,
    include_sub_threads: bool,
) -> _Filter:
    if kind is not None and (not isinstance(kind, str) or not kind):
        raise InvalidValueError("kind", reason=f"a thread kind is a non-empty string: {kind!r:.60}")
    if title_contains is not None and not isinstance(title_contains, str):
        raise InvalidValueError(
            "title_contains", reason=f"must be text, not {title_contains!r:.60}"
        )
    if updated_after is not None and (
        not isinstance(updated_after, datetime) or updated_after.tzinfo is None
    ):
        raise InvalidValueError(
            "updated_after", reason=f"must be a timezone-aware datetime, not {updated_after!r:.60}"
        )
    return _Filter(
        kind=kind,
        tags=clean_tags(tags, where="tags"),
        title=None if title_contains is None else title_contains.casefold(),
        updated_after=updated_after,
        include_sub_threads=include_sub_threads,
    )


async def _summaries(store: ThreadStore, wanted: _Filter) -> list[ThreadSummary]:
    """The summaries of the threads `wanted` keeps, in no particular order."""
    labels = wanted.labels
    records = await store.list_records(THREAD_KIND, tags=labels)
    hidden: set[str] = set()
    if not wanted.include_sub_threads and records:
        every = records if not labels else await store.list_records(THREAD_KIND)
        hidden = _sub_thread_ids(every)
    found = (ThreadSummary.of(r) for r in records if r.id not in hidden)
    return [s for s in found if wanted.keeps(s)]


def _sub_thread_ids(records: Iterable[Record]) -> set[str]:
    """The ids of the threads the workflows among `records` hold as sub-threads."""
    ids: set[str] = set()
    for record in records:
        if record.data.get("type") == WorkflowThread.type_name:
            ids.update(read_workflow_data(record).sub_threads.values())
    return ids


def _key(summary: ThreadSummary) -> tuple[datetime, str]:
    return summary.updated_at, summary.id


def _encode_cursor(order: Order, summary: ThreadSummary) -> str:
    text = json.dumps([order, summary.updated_at.isoformat(), summary.id])
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _decode_cursor(cursor: str, order: Order) -> tuple[datetime, str]:
    """The sort key a cursor names (InvalidValueError naming `after` if it is not one)."""
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        cursor_order, updated_at, thread_id = json.loads(text)
        moment = datetime.fromisoformat(updated_at)
        if not isinstance(thread_id, str) or moment.tzinfo is None:
            raise ValueError("not a cursor")
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError) as exc:
        raise InvalidValueError(
            "after", reason=f"{cursor!r:.80} is not a cursor a listing returned"
        ) from exc
    if cursor_order != order:
        raise InvalidValueError(
            "after", reason=f"the cursor is of a listing in order {cursor_order!r}, not {order!r}"
        )
    return moment, thread_id


def _check_page(order: object, limit: object) -> None:
    if order not in ("asc", "desc"):
        raise InvalidValueError("order", reason=f"must be 'asc' or 'desc', not {order!r:.60}")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise InvalidValueError("limit", reason=f"must be 1 to {MAX_LIMIT}, not {limit!r:.60}")


async def list_threads(
    store: ThreadStore,
    *,
    kind: str | None = None,
    tags: Mapping[str, str] | None = None,
    title_contains: str | None = None,
    updated_after: datetime | None = None,
    order: Order = "desc",
    limit: int = 20,
    after: str | None = None,
    include_sub_threads: bool = False,
) -> ThreadPage:
    """One page of the store's threads, sorted by `updated_at` (newest first by default).

    Keeps the threads of `kind` (`"chat"`, `"workflow"`), holding every pair of `tags`
    (matched exactly, as `AgentThread.find`), whose title contains `title_contains`
    (ignoring case), updated after `updated_after`; workflow sub-threads only with
    `include_sub_threads`. `after` is the `next_cursor` of the previous page, which
    is None on the last page.

    Raises:
        InvalidValueError: an argument is malformed (the tags break the rules, `limit`
            is not 1-1000, `after` is not a cursor of this order), naming it.
        SchemaVersionError: a listed record was written by a newer version.
    """
    _check_page(order, limit)
    wanted = _filter(kind, tags, title_contains, updated_after, include_sub_threads)
    start = None if after is None else _decode_cursor(after, order)
    found = sorted(await _summaries(store, wanted), key=_key, reverse=order == "desc")
    if start is not None:
        found = [s for s in found if (_key(s) > start if order == "asc" else _key(s) < start)]
    page = found[:limit]
    more = len(found) > limit
    return ThreadPage(
        threads=tuple(page), next_cursor=_encode_cursor(order, page[-1]) if more else None
    )


async def thread_summary(store: ThreadStore, thread_id: str) -> ThreadSummary:
    """The summary of one thread, read from its record alone (no message is read).

    Raises:
        InvalidIdError: `thread_id` is not a valid id.
        ThreadNotFoundError: no thread has this id.
        SchemaVersionError: its record was written by a newer version.
    """
    record = await store.get_record(THREAD_KIND, validate_id(thread_id, what="thread id"))
    if record is None:
        raise ThreadNotFoundError(thread_id)
    return ThreadSummary.of(record)


async def count_threads(
    store: ThreadStore,
    *,
    kind: str | None = None,
    tags: Mapping[str, str] | None = None,
    title_contains: str | None = None,
    updated_after: datetime | None = None,
    include_sub_threads: bool = False,
) -> int:
    """How many threads `list_threads` with these filters lists over all its pages.

    Raises:
        InvalidValueError: a filter is malformed, naming it.
    """
    wanted = _filter(kind, tags, title_contains, updated_after, include_sub_threads)
    return len(await _summaries(store, wanted))


__all__ = [
    "MAX_LIMIT",
    "Order",
    "ThreadPage",
    "ThreadSummary",
    "count_threads",
    "list_threads",
    "thread_summary",
]
