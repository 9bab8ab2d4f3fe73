"""The OpenAI Conversations API under `/v1`, for the `openai` client and the Agents SDK.

Eight routes, as the `openai` client calls them: conversations create, retrieve, update
(POST) and delete; items create, list, retrieve and delete. A conversation is a chat
thread and its items are the thread's messages (`formats.openai_responses`); each
tenant sees its own. Errors have the common body (OpenAI's envelope) and say whether
the client may retry (`retries`); writes with an `Idempotency-Key` run once
(`idempotency`).
"""

from typing import Any

from fastapi import APIRouter, FastAPI

from agent_threads.server.errors import OPENAI_PREFIX
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
    _document_as_openai(app)
    app.add_middleware(Idempotency)
    app.add_middleware(RetryAdvice)  # outer: it advises on Idempotency's answers too


def _document_as_openai(app: FastAPI) -> None:
    """Leave FastAPI's own 422 out of `/v1`'s documented answers.

    A malformed request is answered 400 there (see `errors`), which each route documents.
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            for path, operations in generate()["paths"].items():
                if path.startswith(OPENAI_PREFIX):
                    for operation in operations.values():
                        operation["responses"].pop("422", None)
        return app.openapi_schema or generate()

    setattr(app, "openapi", openapi)  # noqa: B010 - FastAPI documents replacing the method


__all__ = ["ROUTERS", "install_v1"]
