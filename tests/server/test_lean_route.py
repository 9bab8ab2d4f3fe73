"""`LeanRoute` answers as FastAPI's own handler does, and refuses endpoints it cannot serve."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import APIRouter, FastAPI, Query, Request
from fastapi.routing import APIRoute
from pydantic import BaseModel

from agent_threads import MemoryStore
from agent_threads.server import create_app
from agent_threads.server.api import messages
from agent_threads.server.auth import Store
from agent_threads.server.lean_route import LeanRoute

from .conftest import KEYS, MAX_BODY, error_of, text

APPEND = "/api/threads/t1/messages"


def _app(route_class: type[APIRoute]) -> FastAPI:
    """The service, its append route handled by `route_class`."""
    app = create_app(
        MemoryStore(), api_keys=[f"{t}:{k}" for t, k in KEYS.items()], max_body_bytes=MAX_BODY
    )
    app.router.routes.insert(
        0,
        route_class(
            APPEND.replace("t1", "{thread_id}"),
            messages.append_messages,
            methods=["POST"],
            status_code=201,
        ),
    )
    return app


@pytest.fixture(params=[APIRoute, LeanRoute], ids=["fastapi", "lean"])
async def either(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=_app(request.param))
    headers = {"Authorization": f"Bearer {KEYS['acme']}"}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://test", headers=headers
    ) as client:
        assert (await client.post("/api/threads", json={"id": "t1"})).status_code == 201
        yield client


def _message(value: str, **fields: Any) -> dict[str, Any]:
    return text(value, id=f"m-{value}", created_at="2026-01-02T03:04:05Z", **fields)


REQUESTS: list[tuple[str, dict[str, str], bytes]] = [
    ("ok", {}, b'{"messages": [%s]}'),
    ("bad role", {}, b'{"messages": [{"role": "robot"}]}'),
    ("empty", {}, b'{"messages": []}'),
    ("extra field", {}, b'{"messages": [], "more": 1}'),
    ("not json", {}, b"{not json"),
    ("not utf-8", {}, b'{"messages": ["\xff"]}'),
    ("no body", {}, b""),
    ("a list", {}, b"[]"),
    ("text/plain", {"content-type": "text/plain"}, b'{"messages": [%s]}'),
    ("no key", {"authorization": ""}, b'{"messages": []}'),
]


@pytest.mark.parametrize(("case", "headers", "body"), REQUESTS, ids=[r[0] for r in REQUESTS])
async def test_an_append_is_answered_alike(case: str, headers: dict[str, str], body: bytes) -> None:
    message = json.dumps(_message("a")).encode()
    answers = []
    for route_class in (APIRoute, LeanRoute):
        transport = httpx.ASGITransport(app=_app(route_class))
        auth = {"Authorization": f"Bearer {KEYS['acme']}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            await client.post("/api/threads", json={"id": "t1"}, headers=auth)
            sent = {"content-type": "application/json", **auth, **headers}
            answer = await client.post(APPEND, content=body.replace(b"%s", message), headers=sent)
        answers.append(answer)
    fastapi, lean = answers
    assert lean.status_code == fastapi.status_code, (fastapi.text, lean.text)
    assert lean.headers["content-type"] == fastapi.headers["content-type"]
    if lean.status_code == 201:
        assert lean.json() == fastapi.json()
    else:  # the same field named; the wording of a message may differ
        assert lean.json()["error"]["param"] == fastapi.json()["error"]["param"]
        assert lean.json()["error"]["type"] == fastapi.json()["error"]["type"]


async def test_a_chunked_body_over_the_limit_is_413(either: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"messages": [{"role": "user", "metadata": {"x": "'
        for _ in range(MAX_BODY // 1024 + 1):
            yield b"y" * 1024
        yield b'"}}]}'

    answer = await either.post(
        APPEND, content=chunks(), headers={"content-type": "application/json"}
    )
    error_of(answer, 413)
    assert (await either.get("/api/threads/t1")).json()["message_count"] == 0


def test_the_lean_append_is_documented_with_its_models() -> None:
    operation = create_app(MemoryStore()).openapi()["paths"]["/api/threads/{thread_id}/messages"][
        "post"
    ]
    assert "MessageBatch" in str(operation["requestBody"])
    assert "AppendResult" in str(operation["responses"]["201"])
    assert {"401", "404", "409", "413", "422", "503"} <= set(operation["responses"])


class _Body(BaseModel):
    value: int


async def _with_query(limit: int = Query(1)) -> _Body:
    return _Body(value=limit)


async def _plain(thread_id: str, body: _Body) -> _Body:
    return body


def _sync(thread_id: str) -> _Body:
    return _Body(value=1)


async def _two_bodies(first: _Body, second: _Body) -> _Body:
    return first


async def _deep(store: Store, request: Request) -> _Body:
    return _Body(value=1)


@pytest.mark.parametrize(
    ("path", "endpoint"),
    [
        ("/q", _with_query),
        ("/{thread_id:int}", _plain),
        ("/{thread_id}/sync", _sync),
        ("/two", _two_bodies),
    ],
    ids=["query parameter", "int path", "sync endpoint", "two bodies"],
)
def test_an_endpoint_it_cannot_serve_is_refused_when_the_route_is_made(
    path: str, endpoint: Any
) -> None:
    router = APIRouter(route_class=LeanRoute)
    with pytest.raises(TypeError, match="LeanRoute"):
        router.add_api_route(path, endpoint, methods=["POST"], status_code=200)


def test_a_dependency_on_the_request_alone_is_served() -> None:
    router = APIRouter(route_class=LeanRoute)
    router.add_api_route("/deep", _deep, methods=["POST"], status_code=200)
    assert isinstance(router.routes[0], LeanRoute)
