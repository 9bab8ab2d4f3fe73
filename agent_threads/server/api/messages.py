"""Routes of `/api/threads/{id}/messages`: pages of messages, appends, one message."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request

from agent_threads.messages import Message, note_minted
from agent_threads.server.api.handles import chat_thread, kept_handles
from agent_threads.server.api.models import (
    AppendResult,
    MessageBatch,
    MessagePage,
    Order,
    PageLimit,
)
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.server.lean_route import lean_post
from agent_threads.threads.chat import ChatMessageThread

router = APIRouter(prefix="/api/threads/{thread_id}/messages", tags=["messages"])

_READ = error_responses(401, 404, 422, 503)


# first of this router's routes (matched first): the request a busy service answers most
@lean_post(router, "", status_code=201, responses={**_READ, **error_responses(409, 413)})
async def append_messages(
    thread_id: str, body: MessageBatch, store: Store, request: Request
) -> AppendResult:
    """Append messages to a chat thread, in order, all or nothing."""
    note_minted(body.messages)  # those sent without an id: no lookup for theirs
    thread = await kept_handles(request).append(store, thread_id, body.messages)
    return AppendResult(messages=body.messages, head=thread.head)


async def _bounds(
    thread: ChatMessageThread, after: str | None, before: str | None
) -> tuple[int, int]:
    """The indexes `[start, end)` strictly between the messages `after` and `before`."""
    start = 0 if after is None else await thread.index_of(after) + 1
    end = thread.head if before is None else await thread.index_of(before)
    return start, max(start, end)


@router.get("", responses=_READ)
async def get_messages(
    thread_id: str,
    store: Store,
    limit: PageLimit = 20,
    after: Annotated[str | None, Query(description="only messages after this message id")] = None,
    before: Annotated[str | None, Query(description="only messages before this message id")] = None,
    order: Order = "asc",
) -> MessagePage:
    """A page of a chat thread's messages: oldest first, or newest first with `order=desc`."""
    thread = await chat_thread(store, thread_id)
    start, end = await _bounds(thread, after, before)
    if order == "asc":
        low, high = start, min(end, start + limit)
        more = high < end
    else:
        low, high = max(start, end - limit), end
        more = low > start
    messages = await thread.get_messages(low, high)
    if order == "desc":
        messages.reverse()
    return MessagePage(
        messages=messages,
        first_index=low if messages else None,
        first_id=messages[0].id if messages else None,
        last_id=messages[-1].id if messages else None,
        has_more=more,
        head=thread.head,
    )


@router.get("/{message_id}", responses=_READ)
async def get_message(thread_id: str, message_id: str, store: Store) -> Message:
    """One message of a chat thread."""
    thread = await chat_thread(store, thread_id)
    index = await thread.index_of(message_id)
    return (await thread.get_messages(index, index + 1))[0]
