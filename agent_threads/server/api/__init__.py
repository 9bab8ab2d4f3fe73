"""The native API under `/api`: one router per resource."""

from fastapi import APIRouter

from agent_threads.server.api import (
    checkpoints,
    events,
    messages,
    runs,
    store,
    threads,
    transfer,
    views,
)

ROUTERS: tuple[APIRouter, ...] = (
    # first: a request is matched against each route in turn (~10 us a route with
    # FastAPI 0.163), and appends are the requests a busy service answers most
    messages.router,
    transfer.router,  # before threads: POST /api/threads/import is not a thread id
    threads.router,
    checkpoints.router,
    views.router,
    events.router,
    runs.router,
    store.router,  # the raw store API of HttpStore
)
"""The routers of the native API, in the order the app includes them."""

__all__ = ["ROUTERS"]
