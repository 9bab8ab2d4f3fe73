"""The service in-process: an app over a MemoryStore with two tenants, and their clients."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent_threads import MemoryStore
from agent_threads.server import create_app

KEYS = {"acme": "key-acme", "beta": "key-beta"}
MAX_BODY = 64 * 1024


def text(value: str, role: str = "user", **fields: Any) -> dict[str, Any]:
    """A message body holding one text part."""
    return {"role": role, "contents": [{"type": "text", "text": value}], **fields}


@pytest.fixture
def store() -> MemoryStore:
    return MemoryStore()


@pytest.fixture
def app(store: MemoryStore) -> FastAPI:
    return create_app(
        store,
        api_keys=[f"{tenant}:{key}" for tenant, key in KEYS.items()],
        max_body_bytes=MAX_BODY,
        events_poll_interval=0.02,
    )


def _client(app: FastAPI, key: str | None) -> httpx.AsyncClient:
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://test", headers=headers
    )


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Tenant acme's client."""
    async with _client(app, KEYS["acme"]) as opened:
        yield opened


@pytest.fixture
async def other(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """Tenant beta's client."""
    async with _client(app, KEYS["beta"]) as opened:
        yield opened


@pytest.fixture
async def anonymous(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """A client without a key."""
    async with _client(app, None) as opened:
        yield opened


async def new_thread(client: httpx.AsyncClient, *texts: str, **fields: Any) -> dict[str, Any]:
    """Create a thread holding `texts` as user messages; its summary."""
    answer = await client.post(
        "/api/threads", json={"messages": [text(t) for t in texts], **fields}
    )
    assert answer.status_code == 201, answer.text
    body: dict[str, Any] = answer.json()
    return body


def error_of(answer: httpx.Response, status: int) -> dict[str, Any]:
    """The error of an answer that must have `status` and the common error body."""
    assert answer.status_code == status, answer.text
    body = answer.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    assert "Traceback" not in answer.text
    error: dict[str, Any] = body["error"]
    return error
