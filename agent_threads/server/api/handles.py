"""Opening the thread a route names, in the caller's tenant store.

Each request opens its own handle, except appends: `KeptHandles.append` keeps a lazy
handle per thread between requests (up to `KEPT_HANDLES` per store, the least recently
used dropped). A kept handle appends as it stands while it finds itself up to date: its
commit is a compare-and-set of the record it holds (the version, which a thread deleted
and created again does not repeat: a new record starts at a random version), so when
anyone else wrote meanwhile the append re-reads the thread and tries again, as after any
lost race (an id the client sent that the handle's head holds is looked up again after
a re-read: the head may be stale). Then the handle reads the record first (one read
instead of a write that fails and a back-off) until `TRUSTED_AFTER` appends in a row
found that nobody else wrote the thread since the one before. So a thread appended
through one app costs one store write per append; one that several apps or processes
append to costs a record read and a write, as a fresh lazy handle would. Requests
appending to one thread at once through one app take turns on one handle (the first
kept, if several loaded one at once) instead of racing each other through the store, and
do not count as another writer.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio
from fastapi import Request

from agent_threads.errors import ThreadNotFoundError
from agent_threads.messages import Message
from agent_threads.server.api import writes
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.thread import WorkflowThread


async def chat_thread(store: ThreadStore, thread_id: str) -> ChatMessageThread:
    """A lazy handle on a chat thread: its record read, its messages read when asked.

    Raises:
        ThreadNotFoundError: no chat thread has this id (a workflow's id included).
    """
    return await ChatMessageThread.load(thread_id, store=store, lazy=True)


KEPT_HANDLES = 1024
"""How many appended-to threads' handles a store's requests keep."""

KEPT_MESSAGES = 64
"""About how many of its newest messages a kept handle holds (an append needs none of them:
its id check asks the store), so all kept handles of a store hold at most about
`KEPT_HANDLES * KEPT_MESSAGES` messages (~90 MB of 1.4 KB messages)."""


TRUSTED_AFTER = 3
"""How many appends in a row must find that nobody else wrote the thread since this app's
last append before its kept handle appends without reading the record first (a wrong
guess costs a failed write and a back-off)."""


@dataclass(slots=True)
class _Kept:
    """A kept handle and how many appends in a row found that nobody else wrote.

    This app's appends to the thread take turns on `turn`, so that none is taken for
    another writer's.
    """

    handle: ChatMessageThread
    alone: int = TRUSTED_AFTER  # just loaded: as fresh as a read
    turn: anyio.Lock = field(default_factory=lambda: anyio.Lock(fast_acquire=True))


class KeptHandles:
    """The handles an app keeps between requests, per store and thread, least recent out.

    One per app (`create_app` makes it; `kept_handles(request)` finds it), so the handles
    go when the app goes. Its stores are the app's tenant stores, which live as long.
    """

    def __init__(self, limit: int = KEPT_HANDLES) -> None:
        self.limit = limit
        # by the store's identity (a store need not be hashable); the app holds its stores
        self._kept: dict[int, OrderedDict[str, _Kept]] = {}

    def held(self, store: ThreadStore) -> list[str]:
        """The ids of the threads whose handles are kept for `store`, least recent first."""
        return list(self._kept.get(id(store), ()))

    async def append(
        self, store: ThreadStore, thread_id: str, messages: Sequence[Message]
    ) -> ChatMessageThread:
        """Append `messages` to a chat thread through its kept handle (`writes.append`).

        Returns the handle, up to date with the append.

        Raises:
            ThreadNotFoundError: no chat thread has this id (any more); its handle goes.
            StoreUnavailableError, AgentThreadsError: as `writes.append`.
        """
        kept = self._kept.setdefault(id(store), OrderedDict())
        entry = kept.get(thread_id)
        if entry is None:
            handle = await ChatMessageThread.load(
                thread_id, store=store, lazy=True, cache_limit=KEPT_MESSAGES
            )
            # one handle per thread: a request that loaded one meanwhile kept it first
            entry = kept.setdefault(thread_id, _Kept(handle))
        kept.move_to_end(thread_id)
        while len(kept) > self.limit:
            kept.popitem(last=False)
        async with entry.turn:
            try:
                trusted = entry.alone >= TRUSTED_AFTER
                held = entry.handle.version
                if not trusted:
                    await entry.handle.refresh()
                before = entry.handle.version
                await writes.append(entry.handle, messages)
            except ThreadNotFoundError:  # deleted, or a workflow holds the id now
                if kept.get(thread_id) is entry:
                    del kept[thread_id]
                raise
            except BaseException:
                entry.alone = 0
                raise
            # nobody else wrote: the append lost no race (a trusted handle), or the refresh
            # found no newer record
            alone = entry.handle.version == before + 1 if trusted else before == held
            entry.alone = entry.alone + 1 if alone else 0
            return entry.handle


def kept_handles(request: Request) -> KeptHandles:
    """The app's kept handles."""
    kept: KeptHandles = request.app.state.kept_handles
    return kept


async def any_thread(store: ThreadStore, thread_id: str) -> AgentThread:
    """A handle on a thread of any kind (a chat thread's is lazy).

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    try:
        return await chat_thread(store, thread_id)
    except ThreadNotFoundError:
        return await AgentThread.load(thread_id, store=store)


async def workflow_thread(store: ThreadStore, thread_id: str) -> WorkflowThread:
    """A handle on a workflow thread (a run), with its sub-threads and step history.

    Raises:
        ThreadNotFoundError: no workflow thread has this id.
    """
    return await WorkflowThread.load(thread_id, store=store)
