"""Tenants: another tenant's thread or run is not found on any route, nor listed; keys."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from agent_threads import MemoryStore
from agent_threads.server import create_app
from agent_threads.stores.tenant import TenantStore

from .conftest import KEYS, error_of, new_thread, text
from .test_runs import paused_run

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/api/threads/{tid}", None),
    ("PATCH", "/api/threads/{tid}", {"title": "mine now"}),
    ("DELETE", "/api/threads/{tid}", None),
    ("POST", "/api/threads/{tid}/fork", {}),
    ("GET", "/api/threads/{tid}/messages", None),
    ("POST", "/api/threads/{tid}/messages", {"messages": [text("intrusion")]}),
    ("GET", "/api/threads/{tid}/messages/{mid}", None),
    ("POST", "/api/threads/{tid}/checkpoints", {"label": "x"}),
    ("GET", "/api/threads/{tid}/checkpoints", None),
    ("GET", "/api/threads/{tid}/checkpoints/{cid}/messages", None),
    ("POST", "/api/threads/{tid}/rollback", {"checkpoint": "{cid}"}),
    ("GET", "/api/threads/{tid}/view", None),
    ("GET", "/api/threads/{tid}/export", None),
    ("GET", "/api/threads/{tid}/events?timeout=0.05", None),
    ("GET", "/api/runs/{rid}", None),
    ("GET", "/api/runs/{rid}/sub-threads", None),
    ("GET", "/api/runs/{rid}/interrupts", None),
    ("GET", "/v1/conversations/{vid}", None),
    ("POST", "/v1/conversations/{vid}", {"metadata": {"mine": "now"}}),
    ("DELETE", "/v1/conversations/{vid}", None),
    ("GET", "/v1/conversations/{vid}/items", None),
    ("POST", "/v1/conversations/{vid}/items", {"items": [{"role": "user", "content": "x"}]}),
    ("GET", "/v1/conversations/{vid}/items/{iid}", None),
    ("DELETE", "/v1/conversations/{vid}/items/{iid}", None),
    ("GET", "/api/store/records/{kind}/{rec}", None),
    ("DELETE", "/api/store/records/{kind}/{rec}", None),
]
SHARED_BY_CONTENT = {("GET", "/api/store/blobs/{digest}")}
"""Blobs are content-addressed and shared by the tenants (see `TenantStore`): reading one
takes its SHA-256 digest, that is, knowing its content."""


def test_the_route_list_covers_every_route_with_an_id(app: FastAPI) -> None:
    paths = {
        (method.upper(), path)
        for path, item in app.openapi()["paths"].items()
        if "{" in path
        for method in item
    }
    names = {
        "{tid}": "{thread_id}",
        "{mid}": "{message_id}",
        "{cid}": "{checkpoint}",
        "{rid}": "{run_id}",
        "{vid}": "{conversation_id}",
        "{iid}": "{item_id}",
        "{rec}": "{record_id}",
    }
    listed = set(SHARED_BY_CONTENT)
    for method, path, _ in ROUTES:
        for short, long in names.items():
            path = path.replace(short, long)
        listed.add((method, path.partition("?")[0]))
    assert paths == listed


@pytest.mark.parametrize(("method", "path", "body"), ROUTES, ids=[f"{m} {p}" for m, p, _ in ROUTES])
async def test_another_tenants_ids_are_not_found(
    store: MemoryStore,
    client: httpx.AsyncClient,
    other: httpx.AsyncClient,
    method: str,
    path: str,
    body: dict[str, Any] | None,
) -> None:
    theirs = await new_thread(other, "secret", id="shared")
    message = (await other.get("/api/threads/shared/messages")).json()["first_id"]
    checkpoint = (await other.post("/api/threads/shared/checkpoints", json={"label": "c"})).json()
    run_id = await paused_run(TenantStore(store, "beta"))
    ids = {
        "{tid}": theirs["id"],
        "{mid}": message,
        "{cid}": checkpoint["id"],
        "{rid}": run_id,
        "{vid}": theirs["id"],  # a conversation is a thread
        "{iid}": message,
        "{kind}": "thread",
        "{rec}": theirs["id"],
    }
    for short, value in ids.items():
        path = path.replace(short, value)
    if body is not None:
        body = {k: ids.get(v, v) if isinstance(v, str) else v for k, v in body.items()}
    answer = await client.request(method, path, json=body)
    error_of(answer, 404)
    after = (await other.get("/api/threads/shared/messages")).json()
    assert [m["contents"][0]["text"] for m in after["messages"]] == ["secret"]
    assert (await other.get("/api/threads/shared")).json()["title"] is None


async def test_each_tenant_lists_and_imports_only_its_own(
    client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    await new_thread(client, id="same", title="acme's")
    await new_thread(other, id="same", title="beta's")
    await new_thread(other, title="beta only")
    mine = (await client.get("/api/threads")).json()["threads"]
    assert [t["title"] for t in mine] == ["acme's"]
    assert len((await other.get("/api/threads")).json()["threads"]) == 2
    assert (await client.get("/api/runs")).json()["threads"] == []


async def test_requests_without_a_valid_key_are_401(
    anonymous: httpx.AsyncClient, client: httpx.AsyncClient
) -> None:
    await new_thread(client, id="t1")
    for headers in (
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": f"Basic {KEYS['acme']}"},
    ):
        answer = await anonymous.get("/api/threads/t1", headers=headers)
        assert error_of(answer, 401)["type"] == "unauthorized"
        assert answer.headers["www-authenticate"].startswith("Bearer")
    assert (await anonymous.get("/openapi.json")).status_code == 200


async def test_without_keys_one_anonymous_tenant_sees_the_whole_store() -> None:
    store = MemoryStore()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(store)), base_url="http://test"
    ) as client:
        created = await new_thread(client, "a", id="plain")
    assert (await store.get_record("thread", "plain")) is not None
    assert created["id"] == "plain"
