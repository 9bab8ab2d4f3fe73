"""Routes of `/v1/conversations`: create, read, update and delete conversations.

A conversation is a chat thread: its id is `conv_` and 48 hex digits, its metadata is
the thread's, and its items are the thread's messages (`formats.openai_responses`).
"""

from __future__ import annotations

import logging
import secrets
import uuid

import anyio
from fastapi import APIRouter

from agent_threads.core.ids import new_id
from agent_threads.formats.openai_responses import from_items
from agent_threads.server.api import writes
from agent_threads.server.api.handles import chat_thread
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.server.v1.models import (
    Conversation,
    ConversationCreate,
    ConversationDeleted,
    ConversationUpdate,
)
from agent_threads.threads.chat import ChatMessageThread

log = logging.getLogger("agent_threads.server")

router = APIRouter(prefix="/v1/conversations", tags=["openai: conversations"])

_COMMON = error_responses(400, 401, 503)
_ONE = {**_COMMON, **error_responses(404)}


def new_conversation_id() -> str:
    """`conv_` and 48 hex digits: a UUIDv7 (later ids sort later), then random ones."""
    return f"conv_{uuid.UUID(new_id()).hex}{secrets.token_hex(8)}"


@router.post("", responses={**_COMMON, **error_responses(409, 413)})
async def create_conversation(body: ConversationCreate, store: Store) -> Conversation:
    """Create a conversation, with up to 20 first items (all or nothing) and metadata."""
    messages = from_items(body.items or [])
    thread = await ChatMessageThread.create(
        store, id=new_conversation_id(), metadata=body.metadata or {}
    )
    try:
        await writes.append(thread, messages)  # saved before a store failure: kept
    except BaseException:
        with anyio.CancelScope(shield=True):
            await _discard(thread)  # refused or failed: the conversation is not kept either
        raise
    return Conversation.of(thread)  # from memory: no read can fail after the write


async def _discard(thread: ChatMessageThread) -> None:
    try:
        await thread.delete()
    except Exception:  # the error that brought us here is the one to answer
        log.exception("could not delete the unfinished conversation %s", thread.id)


@router.get("/{conversation_id}", responses=_ONE)
async def get_conversation(conversation_id: str, store: Store) -> Conversation:
    """A conversation (its items are under `/items`)."""
    return Conversation.of(await chat_thread(store, conversation_id))


@router.post("/{conversation_id}", responses={**_ONE, **error_responses(409, 413)})
async def update_conversation(
    conversation_id: str, body: ConversationUpdate, store: Store
) -> Conversation:
    """Replace a conversation's metadata (null clears it)."""
    thread = await chat_thread(store, conversation_id)
    await thread.update(metadata=body.metadata or {})
    return Conversation.of(thread)


@router.delete("/{conversation_id}", responses={**_ONE, **error_responses(409)})
async def delete_conversation(conversation_id: str, store: Store) -> ConversationDeleted:
    """Delete a conversation and its items (forks of its thread keep working)."""
    thread = await chat_thread(store, conversation_id)
    await thread.delete()
    return ConversationDeleted(id=conversation_id)
