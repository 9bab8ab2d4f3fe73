"""The OpenAI Conversations API under `/v1`, for the `openai` client and the Agents SDK.

Eight routes, as the `openai` client calls them: conversations create, retrieve, update
(POST) and delete; items create, list, retrieve and delete. A conversation is a chat
thread and its items are the thread's messages (`formats.openai_responses`); each
tenant sees its own. Errors have the common body (OpenAI's envelope) and say whether
the client may retry (`retries`); writes with an `Idempotency-Key` run once
(`idempotency`).
"""

from fastapi import APIRouter, FastAPI

from agent_threads.server.v1 import conversations, items
from agent_threads.server.v1.idempotency import Idempotency
from agent_threads.server.v1.retries import RetryAdvice

ROUTERS: tuple[APIRouter, ...] = (conversations.router, items.router)
"""The routers of `/v1`, in the order the app includes them."""


def install_v1(app: FastAPI) -> None:
    """Add the `/v1` routes to `app`, with `Idempotency-Key` and `x-should-retry`.

    Call it before adding the body limit: the middlewares it adds read bodies already
    limited.
    """
    for router in ROUTERS:
        app.include_router(router)
    app.add_middleware(Idempotency)
    app.add_middleware(RetryAdvice)  # outer: it advises on Idempotency's answers too


__all__ = ["ROUTERS", "install_v1"]
