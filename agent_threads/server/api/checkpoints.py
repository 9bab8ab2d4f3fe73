"""Routes of time travel: `/api/threads/{id}/checkpoints` and `/rollback`."""

from __future__ import annotations

from fastapi import APIRouter

from agent_threads.errors import InvalidValueError
from agent_threads.server.api.handles import any_thread, chat_thread
from agent_threads.server.api.models import (
    CheckpointInfo,
    CheckpointList,
    CheckpointRequest,
    MessagePage,
    PageLimit,
    RollbackRequest,
    RollbackResult,
)
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.threads.listing import ThreadSummary

router = APIRouter(prefix="/api/threads/{thread_id}", tags=["time travel"])

_READ = error_responses(401, 404, 422, 503)


@router.post("/checkpoints", status_code=201, responses={**_READ, **error_responses(409, 413)})
async def create_checkpoint(
    thread_id: str, body: CheckpointRequest, store: Store
) -> CheckpointInfo:
    """Record the thread as it is now; `at` and `rollback` return to it."""
    thread = await any_thread(store, thread_id)
    return CheckpointInfo.of(await thread.checkpoint(body.label, metadata=body.metadata))


@router.get("/checkpoints", responses=_READ)
async def get_checkpoints(thread_id: str, store: Store) -> CheckpointList:
    """Every checkpoint of the thread, oldest first (automatic and rollback ones included)."""
    thread = await any_thread(store, thread_id)
    return CheckpointList(checkpoints=[CheckpointInfo.of(c) for c in await thread.checkpoints()])


@router.get("/checkpoints/{checkpoint}/messages", responses=_READ)
async def get_checkpoint_messages(
    thread_id: str, checkpoint: str, store: Store, offset: int = 0, limit: PageLimit = 20
) -> MessagePage:
    """The messages of a chat thread as they were at a checkpoint (id or label), by index."""
    if offset < 0:
        raise InvalidValueError("offset", reason=f"must be 0 or more, not {offset}")
    snapshot = await (await chat_thread(store, thread_id)).at(checkpoint)
    high = min(snapshot.message_count, offset + limit)
    messages = await snapshot.get_messages(offset, high) if offset < high else []
    return MessagePage(
        messages=messages,
        first_index=offset if messages else None,
        first_id=messages[0].id if messages else None,
        last_id=messages[-1].id if messages else None,
        has_more=high < snapshot.message_count,
        head=snapshot.message_count,
    )


@router.post("/rollback", responses={**_READ, **error_responses(409, 413)})
async def rollback_thread(thread_id: str, body: RollbackRequest, store: Store) -> RollbackResult:
    """Move the thread back to a checkpoint or a message; `undo` is its old head's checkpoint."""
    if (body.checkpoint is None) == (body.message_id is None):
        raise InvalidValueError(
            "checkpoint", reason="give exactly one of checkpoint and message_id"
        )
    thread = await any_thread(store, thread_id)
    undo = await thread.rollback(body.checkpoint, message_id=body.message_id)
    return RollbackResult(thread=ThreadSummary.of(thread.record), undo=CheckpointInfo.of(undo))
