"""Lineage: the threads a thread descends from by forks, read from their records."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from agent_threads.core.ids import validate_id
from agent_threads.core.records import THREAD_KIND, ThreadData, read_thread_data
from agent_threads.errors import InvalidIdError, StoreCorruptedError
from agent_threads.timetravel.protocol import CheckpointedThread


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
