"""Routes of export and import: a thread as the versioned JSON document of `to_json`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from agent_threads.server.api.handles import any_thread
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.threads.base import AgentThread
from agent_threads.threads.listing import ThreadSummary

router = APIRouter(prefix="/api/threads", tags=["export and import"])

_DOCUMENT = {
    "type": "object",
    "description": "an agent-threads thread export (format, schema_version, ...)",
}


@router.get(
    "/{thread_id}/export",
    response_class=Response,
    responses={
        200: {"content": {"application/json": {"schema": _DOCUMENT}}},
        **error_responses(401, 404, 422, 503),
    },
)
async def export_thread(thread_id: str, store: Store) -> Response:
    """The thread with its whole history and checkpoints, as `AgentThread.from_json` reads it."""
    thread = await any_thread(store, thread_id)
    return Response(await thread.export(), media_type="application/json")


@router.post("/import", status_code=201, responses=error_responses(401, 409, 413, 422, 503))
async def import_thread(
    store: Store, document: Annotated[dict[str, Any], Body(description="an export document")]
) -> ThreadSummary:
    """Import an exported thread under its own id (409 if the id is taken)."""
    thread = await AgentThread.from_json(document, store)
    return ThreadSummary.of(thread.record)
