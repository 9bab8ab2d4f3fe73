"""The app factory: `create_app(store, ...)` builds the service over one store.

The app holds no threading logic: routes (one router per resource, `ROUTERS`) parse
requests into the library's models, call the library on the caller's tenant store
(`auth.Store`) and shape the answer; errors become answers in one place
(`errors.install_error_handlers`). More APIs join as routers: the OpenAI-compatible
`/v1` is one `include_router` in `create_app`.
"""

from __future__ import annotations

import importlib.metadata
import os
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi.middleware.cors import CORSMiddleware

from agent_threads.server.api import ROUTERS
from agent_threads.server.api.handles import KeptHandles
from agent_threads.server.auth import API_KEYS_ENV, Tenants, api_keys_from_env, parse_api_keys
from agent_threads.server.errors import install_error_handlers
from agent_threads.server.middleware import DEFAULT_MAX_BODY_BYTES, BodyLimit, RequestLog
from agent_threads.server.ui import router as inspector_router
from agent_threads.server.v1 import install_v1
from agent_threads.stores.base import ThreadStore
from agent_threads.stores.urls import DEFAULT_STORE_URL, STORE_URL_ENV, open_store

MAX_BODY_ENV = "AGENT_THREADS_MAX_BODY_BYTES"
CORS_ENV = "AGENT_THREADS_CORS_ORIGINS"


def create_app(
    store: ThreadStore,
    *,
    api_keys: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    cors_origins: Sequence[str] = (),
    events_poll_interval: float = 0.5,
    manage_store: bool = False,
) -> FastAPI:
    """The HTTP service over `store` (FastAPI; serve it with any ASGI server).

    `api_keys` are `TENANT:KEY` pairs: each request then needs `Authorization: Bearer
    KEY` and works on its tenant's part of the store only; without keys there is one
    anonymous tenant working on the whole store. Request bodies over `max_body_bytes`
    are answered 413. CORS is off unless `cors_origins` lists origins. With
    `manage_store` the app opens the store when it starts and closes it when it stops;
    otherwise the caller does.

    Raises:
        InvalidValueError: an API key pair is malformed.
    """
    keys = parse_api_keys(api_keys)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not manage_store:
            yield
            return
        async with store:
            yield

    app = FastAPI(
        title="agent-threads",
        version=importlib.metadata.version("agent-threads-framework"),
        summary="Threads of agent messages: append, fork, checkpoint, roll back, view.",
        lifespan=lifespan,
    )
    app.state.tenants = Tenants(store, keys)
    app.state.kept_handles = KeptHandles()
    app.state.events_poll_interval = events_poll_interval
    install_error_handlers(app)
    for router in ROUTERS:
        app.include_router(router)
    install_v1(app)  # the OpenAI-compatible /v1, inside the body limit
    app.include_router(inspector_router)  # the web inspector at /ui, over /api
    if cors_origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(cors_origins),
            allow_methods=["*"],
            allow_headers=["Authorization", "Content-Type", "Idempotency-Key", "Last-Event-ID"],
        )
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(RequestLog)  # outermost: it sees every answer, 413s included
    return app


def app_from_environment() -> FastAPI:
    """`create_app` as the environment configures it (for `uvicorn --factory`, workers).

    `AGENT_THREADS_STORE` (a store URL, default `sqlite:///threads.db`),
    `AGENT_THREADS_API_KEYS` (`TENANT:KEY,...`), `AGENT_THREADS_MAX_BODY_BYTES`,
    `AGENT_THREADS_CORS_ORIGINS` (comma-separated). The app opens and closes the store.
    """
    origins = [o.strip() for o in os.environ.get(CORS_ENV, "").split(",") if o.strip()]
    max_body = os.environ.get(MAX_BODY_ENV)
    keys = api_keys_from_env(os.environ.get(API_KEYS_ENV))
    return create_app(
        open_store(os.environ.get(STORE_URL_ENV) or DEFAULT_STORE_URL),
        api_keys=[f"{tenant}:{key}" for key, tenant in keys.items()],
        max_body_bytes=int(max_body) if max_body else DEFAULT_MAX_BODY_BYTES,
        cors_origins=origins,
        manage_store=True,
    )


__all__ = ["CORS_ENV", "MAX_BODY_ENV", "app_from_environment", "create_app"]
