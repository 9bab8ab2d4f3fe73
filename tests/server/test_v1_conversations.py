"""`/v1/conversations` in-process: create, retrieve, update (POST), delete; shapes and limits."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from agent_threads import MemoryStore, count_threads
from agent_threads.stores.tenant import TenantStore
from tests.server.conftest import error_of
from tests.server.v1_helpers import text_item


async def create(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await client.post("/v1/conversations", json=body)
    assert answer.status_code == 200, answer.text
    created: dict[str, Any] = answer.json()
    return created


async def test_create_answers_a_conversation_object(client: httpx.AsyncClient) -> None:
    before = int(time.time())
    conversation = await create(client, metadata={"topic": "billing"})
    assert set(conversation) == {"id", "object", "created_at", "metadata"}
    assert conversation["object"] == "conversation"
    assert conversation["id"].startswith("conv_") and len(conversation["id"]) == 5 + 48
    assert before <= conversation["created_at"] <= int(time.time())
    assert conversation["metadata"] == {"topic": "billing"}


async def test_create_with_items_stores_them_in_order(client: httpx.AsyncClient) -> None:
    conversation = await create(client, items=[text_item("one"), text_item("two", "assistant")])
    listed = await client.get(f"/v1/conversations/{conversation['id']}/items?order=asc")
    texts = [item["content"][0]["text"] for item in listed.json()["data"]]
    assert texts == ["one", "two"]


async def test_a_conversation_is_a_thread_of_the_native_api(client: httpx.AsyncClient) -> None:
    conversation = await create(client, items=[text_item("hello")], metadata={"a": "b"})
    thread = (await client.get(f"/api/threads/{conversation['id']}")).json()
    assert thread["metadata"] == {"a": "b"}
    page = (await client.get(f"/api/threads/{conversation['id']}/messages")).json()
    assert [m["contents"][0]["text"] for m in page["messages"]] == ["hello"]


async def test_retrieve_update_and_delete(client: httpx.AsyncClient) -> None:
    conversation = await create(client, metadata={"a": "1"})
    path = f"/v1/conversations/{conversation['id']}"
    assert (await client.get(path)).json() == conversation

    updated = (await client.post(path, json={"metadata": {"b": "2"}})).json()
    assert updated == {**conversation, "metadata": {"b": "2"}}  # replaced, not merged
    cleared = (await client.post(path, json={"metadata": None})).json()
    assert cleared["metadata"] == {}

    deleted = await client.delete(path)
    assert deleted.json() == {
        "id": conversation["id"],
        "object": "conversation.deleted",
        "deleted": True,
    }
    assert error_of(await client.get(path), 404)["param"] == conversation["id"]


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"items": [text_item(str(i)) for i in range(21)]}, "body.items"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "body.metadata"),
        ({"metadata": {"k" * 65: "v"}}, "body.metadata"),
        ({"metadata": {"k": "v" * 513}}, "body.metadata.k"),
        ({"metadata": {"k": 1}}, "body.metadata.k"),
        ({"unknown": 1}, "body.unknown"),
    ],
)
async def test_limits_are_answered_400_and_nothing_is_stored(
    client: httpx.AsyncClient, store: MemoryStore, body: dict[str, Any], param: str
) -> None:
    error = error_of(await client.post("/v1/conversations", json=body), 400)
    assert error["param"].startswith(param)
    assert await count_threads(store) == 0


async def test_the_limits_themselves_are_accepted(client: httpx.AsyncClient) -> None:
    await create(
        client,
        items=[text_item(str(i)) for i in range(20)],
        metadata={f"{i:064d}": "v" * 512 for i in range(16)},
    )


async def test_a_refused_item_leaves_no_conversation(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    bad = [text_item("fine"), {"type": "function_call", "name": "f", "arguments": "{}"}]
    error = error_of(await client.post("/v1/conversations", json={"items": bad}), 400)
    assert "call_id" in error["message"]
    duplicate = [{"id": "msg_1", **text_item("a")}, {"id": "msg_1", **text_item("b")}]
    error_of(await client.post("/v1/conversations", json={"items": duplicate}), 409)
    assert await count_threads(TenantStore(store, "acme")) == 0


async def test_unknown_and_malformed_ids(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/conversations/conv_missing")
    assert error_of(missing, 404)["type"] == "not_found"
    assert missing.headers["x-should-retry"] == "false"
    error_of(await client.post("/v1/conversations/conv_missing", json={"metadata": {}}), 404)
    error_of(await client.delete("/v1/conversations/conv_missing"), 404)
    error_of(await client.get("/v1/conversations/bad%20id"), 400)


async def test_a_key_is_needed(anonymous: httpx.AsyncClient) -> None:
    answer = await anonymous.post("/v1/conversations", json={})
    assert error_of(answer, 401)["type"] == "unauthorized"
    assert answer.headers["x-should-retry"] == "false"


async def test_update_needs_the_metadata_field(client: httpx.AsyncClient) -> None:
    conversation = await create(client)
    error_of(await client.post(f"/v1/conversations/{conversation['id']}", json={}), 400)
