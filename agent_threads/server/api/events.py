"""Route of `/api/threads/{id}/events`: server-sent events as a chat thread grows.

Each new message is an event `message` (its id is the event id, its data the message);
a thread moved back by a rollback (or rewritten below what was sent) sends `reset`
with its new `head`, then goes on from there; a deleted thread sends `deleted` and
ends the stream. The thread is polled in the store (so appends through any process or
replica show), every `events_poll_interval` seconds of `create_app`. A client that
reconnects with `Last-Event-ID` (or `after`) gets what it missed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Annotated

import anyio
from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent

from agent_threads.errors import ThreadNotFoundError
from agent_threads.server.api.handles import chat_thread
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.threads.chat import ChatMessageThread

router = APIRouter(prefix="/api/threads/{thread_id}", tags=["events"])


@dataclass
class _Follower:
    """Where a stream stands: the thread, how many messages were sent, the last one's id."""

    thread: ChatMessageThread
    sent: int
    last_id: str | None
    poll: float

    async def news(self) -> list[ServerSentEvent]:
        """The events of what changed since the last call (after a refresh)."""
        head = self.thread.head
        if self.sent > head or (self.sent and not await self._same_past()):
            self.sent = head
            self.last_id = None
            return [ServerSentEvent(event="reset", data={"head": head})]
        if self.sent == head:
            return []
        messages = await self.thread.get_messages(self.sent, head)
        self.sent, self.last_id = head, messages[-1].id
        return [ServerSentEvent(event="message", id=m.id, data=m) for m in messages]

    async def _same_past(self) -> bool:
        if self.last_id is None:
            return True
        found = await self.thread.get_messages(self.sent - 1, self.sent)
        return bool(found) and found[0].id == self.last_id


async def _follower(
    thread_id: str,
    store: Store,
    request: Request,
    after: Annotated[
        str | None, Query(description="send the messages after this one first")
    ] = None,
    last_event_id: Annotated[str | None, Header()] = None,
) -> _Follower:
    """Open the thread before the stream starts (so an unknown one is answered 404)."""
    thread = await chat_thread(store, thread_id)
    since = last_event_id or after
    sent = thread.head if since is None else await thread.index_of(since) + 1
    poll: float = request.app.state.events_poll_interval
    return _Follower(thread, sent, since, poll)


@router.get(
    "/events",
    response_class=EventSourceResponse,
    responses=error_responses(401, 404, 422, 503),
)
async def follow_thread(
    follower: Annotated[_Follower, Depends(_follower)],
    seconds: Annotated[
        float | None,
        Query(alias="timeout", gt=0, description="end the stream after this many seconds"),
    ] = None,
) -> AsyncIterator[ServerSentEvent]:
    """Server-sent events of a chat thread's new messages (`message`, `reset`, `deleted`)."""
    end = None if seconds is None else anyio.current_time() + seconds
    while True:
        for event in await follower.news():
            yield event
        left = None if end is None else end - anyio.current_time()
        if left is not None and left <= 0:
            return
        await anyio.sleep(follower.poll if left is None else min(follower.poll, left))
        try:
            await follower.thread.refresh()
        except ThreadNotFoundError:
            yield ServerSentEvent(event="deleted", data={"id": follower.thread.id})
            return
