"""Route of `/api/threads/{id}/view`: the context window a model should see."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query
from pydantic import JsonValue

from agent_threads.formats import anthropic, openai
from agent_threads.server.api.handles import chat_thread
from agent_threads.server.api.models import DroppedRangeInfo, ViewResult
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses

router = APIRouter(prefix="/api/threads/{thread_id}", tags=["views"])


@router.get("/view", responses=error_responses(401, 404, 422, 503))
async def get_view(
    thread_id: str,
    store: Store,
    max_tokens: Annotated[int | None, Query(ge=0)] = None,
    max_messages: Annotated[int | None, Query(ge=0)] = None,
    keep_first: Annotated[int, Query(ge=0)] = 0,
    format: Literal["native", "openai", "anthropic"] = "native",
) -> ViewResult:
    """The newest messages that fit the budgets (tool calls kept with their results)."""
    thread = await chat_thread(store, thread_id)
    view = await thread.view(
        max_tokens=max_tokens, max_messages=max_messages, keep_first=keep_first
    )
    system: str | None = None
    messages: list[JsonValue]
    if format == "openai":
        messages = list(openai.to_messages(view))
    elif format == "anthropic":
        converted = anthropic.to_messages(view)
        messages, system = list(converted.messages), converted.system
    else:
        messages = [m.model_dump(mode="json") for m in view]
    dropped = [
        DroppedRangeInfo(start=d.start, end=d.end, start_id=d.start_id, end_id=d.end_id)
        for d in view.dropped
    ]
    return ViewResult(
        format=format, messages=messages, system=system, tokens=view.tokens, dropped=dropped
    )
