"""Routes of `/v1/conversations/{id}/items`: add, page through, read and delete items.

Items are the thread's messages as `formats.openai_responses` writes them: one item per
message added here; a message appended through the native API that mixes parts is
several items, `"{message_id}:{n}"` after the first (read and listed like any other;
deleting one of those answers 400: delete its message, the first item, instead).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import anyio
from fastapi import APIRouter, Query, Request

from agent_threads.errors import InvalidValueError, MessageNotFoundError
from agent_threads.formats.openai_responses import from_items, message_items, split_item_id
from agent_threads.messages import Message
from agent_threads.server.api.handles import chat_thread, kept_handles
from agent_threads.server.api.models import Order, PageLimit
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.server.v1.models import Conversation, ItemList, ItemsCreate
from agent_threads.threads.chat import ChatMessageThread

log = logging.getLogger("agent_threads.server")

router = APIRouter(prefix="/v1/conversations/{conversation_id}/items", tags=["openai: items"])

_READ = error_responses(400, 401, 404, 503)
Include = Annotated[
    list[str], Query(alias="include[]", description="accepted for compatibility, ignored")
]

Item = dict[str, Any]


@router.post("", responses={**_READ, **error_responses(409, 413)})
async def create_items(
    conversation_id: str,
    body: ItemsCreate,
    store: Store,
    request: Request,
    include: Include = [],  # noqa: B006 - FastAPI copies query defaults
) -> ItemList:
    """Add up to 20 items at the end of a conversation, in order, all or nothing."""
    messages = from_items(body.items)
    await kept_handles(request).append(store, conversation_id, messages)
    return ItemList.of([item for m in messages for item in message_items(m)])


@router.get("", responses=_READ)
async def list_items(
    conversation_id: str,
    store: Store,
    limit: PageLimit = 20,
    order: Order = "desc",
    after: Annotated[str | None, Query(description="list the items after this item id")] = None,
    include: Include = [],  # noqa: B006
) -> ItemList:
    """A page of a conversation's items: newest first by default, `order=asc` oldest first."""
    thread = await chat_thread(store, conversation_id)
    if order == "asc":
        items = await _page_forward(thread, after, limit)
    else:
        items = await _page_backward(thread, after, limit)
    return ItemList.of(items[:limit], has_more=len(items) > limit)


@router.get("/{item_id}", responses=_READ)
async def get_item(
    conversation_id: str,
    item_id: str,
    store: Store,
    include: Include = [],  # noqa: B006
) -> Item:
    """One item of a conversation."""
    thread = await chat_thread(store, conversation_id)
    index, position = await _locate(thread, item_id)
    items = message_items(await _message_at(thread, index))
    if position >= len(items):
        raise MessageNotFoundError(item_id, thread_id=thread.id)
    return items[position]


@router.delete("/{item_id}", responses={**_READ, **error_responses(409)})
async def delete_item(conversation_id: str, item_id: str, store: Store) -> Conversation:
    """Take an item out of a conversation; answers the conversation.

    Nothing is deleted from the thread's history: the conversation is rolled back to
    the item before it (the old head saved as a checkpoint, "before-rollback"; cleared,
    "before-clear", for the first item) and the items after it appended again.
    """
    thread = await chat_thread(store, conversation_id)
    index, position = await _locate(thread, item_id)
    if position:
        raise InvalidValueError(
            f"item {item_id!r}",
            reason="it is part of a message holding several items: delete the message,"
            f" item {split_item_id(item_id)[0]!r}, to take them all out",
        )
    await _take_out(thread, index)
    return Conversation.of(thread)


# -- finding items --------------------------------------------------------------------------


async def _locate(thread: ChatMessageThread, item_id: str) -> tuple[int, int]:
    """`(message index, item position in the message)` of an item id.

    Raises:
        MessageNotFoundError: the conversation holds no such item.
    """
    try:
        return await thread.index_of(item_id), 0
    except MessageNotFoundError:
        message_id, position = split_item_id(item_id)
        if not position:
            raise
    try:
        return await thread.index_of(message_id), position
    except MessageNotFoundError:
        raise MessageNotFoundError(item_id, thread_id=thread.id) from None


async def _message_at(thread: ChatMessageThread, index: int) -> Message:
    return (await thread.get_messages(index, index + 1))[0]


async def _page_forward(thread: ChatMessageThread, after: str | None, limit: int) -> list[Item]:
    """Up to `limit + 1` items after `after` (an item id), oldest first."""
    start, skip = 0, 0
    if after is not None:
        start, position = await _locate(thread, after)
        skip = position + 1
    items: list[Item] = []
    while start < thread.head and len(items) <= limit:
        end = min(thread.head, start + limit + 1)
        for message in await thread.get_messages(start, end):
            items.extend(message_items(message)[skip:])
            skip = 0
        start = end
    return items


async def _page_backward(thread: ChatMessageThread, after: str | None, limit: int) -> list[Item]:
    """Up to `limit + 1` items before `after` (an item id), newest first."""
    end, keep = thread.head, None
    if after is not None:
        index, keep = await _locate(thread, after)
        end = index + 1
    items: list[Item] = []
    while end > 0 and len(items) <= limit:
        start = max(0, end - limit - 1)
        for message in reversed(await thread.get_messages(start, end)):
            ones = message_items(message)
            items.extend(reversed(ones[:keep] if keep is not None else ones))
            keep = None
        end = start
    return items


# -- taking an item out --------------------------------------------------------------------


async def _take_out(thread: ChatMessageThread, index: int) -> None:
    """Remove the message at `index` from the thread's head, keeping it in its history.

    One write when it is the last message; else the cut and an append of the messages
    after it, the cut undone if the append fails. The cut is a rollback to the message
    before (not `pop`, which would take whatever message is last by then), or `clear`
    for the first message; either saves the old head as a checkpoint in the same write.
    """
    rest = await thread.get_messages(index + 1, thread.head)
    if index == 0:
        undo = await thread.clear()
    else:
        undo = await thread.rollback(message_id=(await _message_at(thread, index - 1)).id)
    if not rest or undo is None:
        return
    try:
        await thread.on_new_messages(rest)
    except BaseException:
        with anyio.CancelScope(shield=True):
            try:
                await thread.rollback(undo)
            except Exception:  # the messages stay one rollback away, in checkpoint `undo`
                log.exception("could not undo rollback %s of thread %s", undo.id, thread.id)
        raise
