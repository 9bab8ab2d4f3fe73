"""`/v1/conversations/{id}/items` in-process: add, page, read, delete (keeping history)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from agent_threads import ChatMessageThread, Message, ThinkingPart, tool_call
from agent_threads.stores.base import ThreadStore
from agent_threads.stores.tenant import TenantStore
from tests.server.conftest import error_of, text
from tests.server.v1_helpers import ControlledStore, text_item


@pytest.fixture
def store() -> ControlledStore:
    return ControlledStore()


async def conversation_of(client: httpx.AsyncClient, *texts: str) -> str:
    """A new conversation holding these user texts (20 in its creation, the rest added)."""
    items = [text_item(t) for t in texts]
    answer = await client.post("/v1/conversations", json={"items": items[:20]})
    assert answer.status_code == 200, answer.text
    conversation_id: str = answer.json()["id"]
    for start in range(20, len(items), 20):
        added = await client.post(
            f"/v1/conversations/{conversation_id}/items", json={"items": items[start : start + 20]}
        )
        assert added.status_code == 200, added.text
    return conversation_id


async def items_of(client: httpx.AsyncClient, cid: str, **query: Any) -> dict[str, Any]:
    answer = await client.get(f"/v1/conversations/{cid}/items", params=query)
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    return page


def texts_of(page: dict[str, Any]) -> list[str]:
    return [item["content"][0]["text"] for item in page["data"]]


async def test_create_answers_the_list_of_items_added(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client)
    answer = await client.post(
        f"/v1/conversations/{cid}/items",
        json={
            "items": [
                text_item("a"),
                {"type": "function_call_output", "call_id": "c", "output": "x"},
            ]
        },
    )
    body = answer.json()
    assert answer.status_code == 200
    assert body["object"] == "list" and body["has_more"] is False
    assert [i["type"] for i in body["data"]] == ["message", "function_call_output"]
    assert (body["first_id"], body["last_id"]) == (body["data"][0]["id"], body["data"][1]["id"])
    assert body["data"][0]["id"].startswith("msg_") and body["data"][1]["id"].startswith("fco_")


async def test_list_is_newest_first_20_by_default(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client, *(str(i) for i in range(25)))
    page = await items_of(client, cid)
    assert texts_of(page) == [str(i) for i in range(24, 4, -1)]
    assert page["has_more"] is True
    assert (page["first_id"], page["last_id"]) == (page["data"][0]["id"], page["data"][-1]["id"])


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_pages_follow_after_to_the_end(client: httpx.AsyncClient, order: str) -> None:
    cid = await conversation_of(client, *(str(i) for i in range(7)))
    seen: list[str] = []
    after: str | None = None
    while True:
        query = {"order": order, "limit": 3, **({"after": after} if after else {})}
        page = await items_of(client, cid, **query)
        seen += texts_of(page)
        if not page["has_more"]:
            break
        after = page["last_id"]
    expected = [str(i) for i in range(7)]
    assert seen == (expected if order == "asc" else expected[::-1])


async def test_an_empty_page_has_no_ids(client: httpx.AsyncClient) -> None:
    page = await items_of(client, await conversation_of(client))
    assert page == {
        "object": "list",
        "data": [],
        "first_id": None,
        "last_id": None,
        "has_more": False,
    }


@pytest.mark.parametrize("query", [{"limit": 0}, {"limit": 101}, {"order": "sideways"}])
async def test_bad_paging_is_answered_400(client: httpx.AsyncClient, query: dict[str, Any]) -> None:
    cid = await conversation_of(client, "x")
    error_of(await client.get(f"/v1/conversations/{cid}/items", params=query), 400)


async def test_include_is_accepted_and_ignored(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client, "x")
    query = {"include[]": ["message.output_text.logprobs"]}
    assert texts_of(await items_of(client, cid, **query)) == ["x"]
    item_id = (await items_of(client, cid))["first_id"]
    got = await client.get(f"/v1/conversations/{cid}/items/{item_id}", params=query)
    assert got.json()["id"] == item_id


async def test_retrieve_one_item(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client, "a", "b")
    first = (await items_of(client, cid, order="asc"))["data"][0]
    assert (await client.get(f"/v1/conversations/{cid}/items/{first['id']}")).json() == first
    missing = await client.get(f"/v1/conversations/{cid}/items/msg_missing")
    assert error_of(missing, 404)["param"] == "msg_missing"
    error_of(await client.get(f"/v1/conversations/{cid}/items/x", params={"after": "y"}), 404)
    error_of(await client.get(f"/v1/conversations/{cid}/items", params={"after": "msg_no"}), 404)


async def test_an_item_id_given_twice_is_a_conflict_not_to_retry(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client)
    item = {"id": "msg_mine", **text_item("a")}
    await client.post(f"/v1/conversations/{cid}/items", json={"items": [item]})
    again = await client.post(f"/v1/conversations/{cid}/items", json={"items": [item]})
    assert error_of(again, 409)["param"] == "msg_mine"
    assert again.headers["x-should-retry"] == "false"
    assert texts_of(await items_of(client, cid)) == ["a"]


# -- delete ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("index", "left"), [(0, "bcd"), (1, "acd"), (2, "abd"), (3, "abc")])
async def test_delete_takes_one_item_out_and_answers_the_conversation(
    client: httpx.AsyncClient, index: int, left: str
) -> None:
    cid = await conversation_of(client, "a", "b", "c", "d")
    before = (await items_of(client, cid, order="asc"))["data"]
    answer = await client.delete(f"/v1/conversations/{cid}/items/{before[index]['id']}")
    assert answer.status_code == 200
    assert answer.json() == (await client.get(f"/v1/conversations/{cid}")).json()
    after = (await items_of(client, cid, order="asc"))["data"]
    assert [i["content"][0]["text"] for i in after] == list(left)
    assert after == [i for k, i in enumerate(before) if k != index]  # same ids, same items
    error_of(await client.get(f"/v1/conversations/{cid}/items/{before[index]['id']}"), 404)


async def test_a_deleted_item_stays_in_the_thread_history(
    client: httpx.AsyncClient, store: ThreadStore
) -> None:
    cid = await conversation_of(client, "a", "b", "c")
    middle = (await items_of(client, cid, order="asc"))["data"][1]["id"]
    await client.delete(f"/v1/conversations/{cid}/items/{middle}")
    checkpoints = (await client.get(f"/api/threads/{cid}/checkpoints")).json()["checkpoints"]
    undo = next(c for c in checkpoints if c["label"] == "before-rollback")
    restored = await client.post(f"/api/threads/{cid}/rollback", json={"checkpoint": undo["id"]})
    assert restored.status_code == 200, restored.text
    assert texts_of(await items_of(client, cid, order="asc")) == ["a", "b", "c"]


async def test_a_delete_whose_append_fails_is_undone(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    cid = await conversation_of(client, "a", "b", "c")
    before = (await items_of(client, cid, order="asc"))["data"]
    store.plan = [False, True]  # the rollback is written, the append of "c" is not
    failed = await client.delete(f"/v1/conversations/{cid}/items/{before[1]['id']}")
    assert error_of(failed, 503)["type"] == "store_unavailable"
    assert (await items_of(client, cid, order="asc"))["data"] == before


async def test_the_thread_stats_lose_the_deleted_item(client: httpx.AsyncClient) -> None:
    cid = await conversation_of(client, "a", "b", "c")
    first = (await items_of(client, cid, order="asc"))["first_id"]
    await client.delete(f"/v1/conversations/{cid}/items/{first}")
    assert (await client.get(f"/api/threads/{cid}")).json()["stats"]["message_count"] == 2


async def test_the_first_item_of_a_native_thread_can_be_deleted(client: httpx.AsyncClient) -> None:
    created = await client.post("/api/threads", json={"messages": [text("a"), text("b")]})
    cid = created.json()["id"]
    first = (await items_of(client, cid, order="asc"))["first_id"]
    assert (await client.delete(f"/v1/conversations/{cid}/items/{first}")).status_code == 200
    assert texts_of(await items_of(client, cid)) == ["b"]
    checkpoints = (await client.get(f"/api/threads/{cid}/checkpoints")).json()["checkpoints"]
    assert [c["label"] for c in checkpoints] == ["before-clear"]


# -- messages that are several items -----------------------------------------------------


@pytest.fixture
async def mixed(store: ThreadStore) -> tuple[str, Message]:
    """A conversation (acme's) holding a native message that is three items, then a user's."""
    call = tool_call("weather", {"city": "Lisbon"}, call_id="call_1")
    reply = Message.assistant("Checking.", tool_calls=[call], thinking=ThinkingPart(text="hm"))
    thread = await ChatMessageThread.create(TenantStore(store, "acme"))
    await thread.on_new_messages([Message.user("Weather?"), reply, Message.user("Thanks")])
    return thread.id, reply


async def test_a_native_message_mixing_parts_is_several_items(
    client: httpx.AsyncClient, mixed: tuple[str, Message]
) -> None:
    cid, reply = mixed
    data = (await items_of(client, cid, order="asc"))["data"]
    assert [i["type"] for i in data] == [
        "message",
        "reasoning",
        "message",
        "function_call",
        "message",
    ]
    assert [i["id"] for i in data[1:4]] == [reply.id, f"{reply.id}:1", f"{reply.id}:2"]
    got = await client.get(f"/v1/conversations/{cid}/items/{reply.id}:2")
    assert got.json() == data[3]
    error_of(await client.get(f"/v1/conversations/{cid}/items/{reply.id}:3"), 404)


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_pages_can_stop_inside_a_message(
    client: httpx.AsyncClient, mixed: tuple[str, Message], order: str
) -> None:
    cid, _ = mixed
    every = (await items_of(client, cid, order=order))["data"]
    seen: list[dict[str, Any]] = []
    after: str | None = None
    for _ in range(10):
        page = await items_of(
            client, cid, order=order, limit=2, **({"after": after} if after else {})
        )
        seen += page["data"]
        after = page["last_id"]
        if not page["has_more"]:
            break
    assert seen == every


async def test_deleting_part_of_a_message_is_refused_naming_the_message(
    client: httpx.AsyncClient, mixed: tuple[str, Message]
) -> None:
    cid, reply = mixed
    error = error_of(await client.delete(f"/v1/conversations/{cid}/items/{reply.id}:1"), 400)
    assert reply.id in error["message"]
    assert (await client.delete(f"/v1/conversations/{cid}/items/{reply.id}")).status_code == 200
    assert [i["type"] for i in (await items_of(client, cid))["data"]] == ["message", "message"]
