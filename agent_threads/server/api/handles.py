"""Opening the thread a route names, in the caller's tenant store.

Each request opens its own handle, except appends: `KeptHandles.appending` keeps a lazy
handle per thread between requests (up to `KEPT_HANDLES` per store, the least recently
used dropped), brought up to date with one record read before each use. A kept handle is
what a fresh lazy load would give (`refresh` re-reads the record, and a handle never
trusts a cached record when it writes: its commit is a compare-and-set), but it skips
building the handle again, and appends to one thread from several requests queue on
one handle instead of racing each other through the store.
"""

from __future__ import annotations

from collections import OrderedDict

from fastapi import Request

from agent_threads.errors import ThreadNotFoundError
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


class KeptHandles:
    """The handles an app keeps between requests, per store and thread, least recent out.

    One per app (`create_app` makes it; `kept_handles(request)` finds it), so the handles
    go when the app goes. Its stores are the app's tenant stores, which live as long.
    """

    def __init__(self, limit: int = KEPT_HANDLES) -> None:
        self.limit = limit
        # by the store's identity (a store need not be hashable); the app holds its stores
        self._kept: dict[int, OrderedDict[str, ChatMessageThread]] = {}

    def held(self, store: ThreadStore) -> list[str]:
        """The ids of the threads whose handles are kept for `store`, least recent first."""
        return list(self._kept.get(id(store), ()))

    async def appending(self, store: ThreadStore, thread_id: str) -> ChatMessageThread:
        """A lazy handle on a chat thread to append to, kept between requests, up to date.

        Raises:
            ThreadNotFoundError: no chat thread has this id (any more).
        """
        kept = self._kept.setdefault(id(store), OrderedDict())
        handle = kept.get(thread_id)
        if handle is None:
            handle = await ChatMessageThread.load(
                thread_id, store=store, lazy=True, cache_limit=KEPT_MESSAGES
            )
        else:
            try:
                await handle.refresh()
            except ThreadNotFoundError:  # deleted, or a workflow holds the id now
                kept.pop(thread_id, None)
                raise
        kept[thread_id] = handle
        kept.move_to_end(thread_id)
        while len(kept) > self.limit:
            kept.popitem(last=False)
        return handle


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
