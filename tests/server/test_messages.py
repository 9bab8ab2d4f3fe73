"""/api/threads/{id}/messages: pages in both orders, around message ids; appends; one message."""

from __future__ import annotations

import httpx

from .conftest import error_of, new_thread, text


async def test_messages_page_forward_and_backward(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, *"abcde")
    path = f"/api/threads/{thread['id']}/messages"
    first = (await client.get(path, params={"limit": 2})).json()
    assert [m["contents"][0]["text"] for m in first["messages"]] == ["a", "b"]
    assert (first["has_more"], first["head"], first["first_index"]) == (True, 5, 0)
    rest = (await client.get(path, params={"after": first["last_id"]})).json()
    assert [m["contents"][0]["text"] for m in rest["messages"]] == ["c", "d", "e"]
    assert not rest["has_more"]
    newest = (await client.get(path, params={"order": "desc", "limit": 2})).json()
    assert [m["contents"][0]["text"] for m in newest["messages"]] == ["e", "d"]
    assert (newest["has_more"], newest["first_index"]) == (True, 3)
    older = (
        await client.get(path, params={"order": "desc", "before": newest["last_id"], "limit": 9})
    ).json()
    assert [m["contents"][0]["text"] for m in older["messages"]] == ["c", "b", "a"]
    between = await client.get(
        path, params={"after": first["first_id"], "before": newest["last_id"]}
    )
    assert [m["contents"][0]["text"] for m in between.json()["messages"]] == ["b", "c"]


async def test_a_batch_is_appended_in_order_and_read_back_whole(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client)
    call = {
        "role": "assistant",
        "contents": [
            {"type": "tool_call", "call_id": "c1", "name": "search", "arguments": {"q": 1}}
        ],
        "usage": {"input_tokens": 10, "output_tokens": 3, "cost": 0.5},
    }
    result = {"role": "tool", "contents": [{"type": "tool_result", "call_id": "c1", "result": [1]}]}
    appended = await client.post(
        f"/api/threads/{thread['id']}/messages", json={"messages": [text("q"), call, result]}
    )
    assert appended.status_code == 201
    body = appended.json()
    assert body["head"] == 3 and [m["role"] for m in body["messages"]] == [
        "user",
        "assistant",
        "tool",
    ]
    one = await client.get(f"/api/threads/{thread['id']}/messages/{body['messages'][1]['id']}")
    assert one.json() == body["messages"][1]
    stats = (await client.get(f"/api/threads/{thread['id']}")).json()["stats"]
    assert (stats["input_tokens"], stats["output_tokens"], stats["cost"]) == (10, 3, 0.5)


async def test_appends_are_refused_whole_naming_the_field(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a")
    path = f"/api/threads/{thread['id']}/messages"
    bad_role = await client.post(path, json={"messages": [text("ok"), text("x", role="robot")]})
    assert error_of(bad_role, 422)["param"] == "body.messages.1.role"
    empty = await client.post(path, json={"messages": []})
    assert error_of(empty, 422)["param"] == "body.messages"
    nan = await client.post(
        path,
        content=b'{"messages": [{"role": "user", "metadata": {"x": NaN}}]}',
        headers={"content-type": "application/json"},
    )
    assert error_of(nan, 422)["type"] == "invalid_request"
    assert (await client.get(path)).json()["head"] == 1


async def test_unknown_threads_and_messages_are_404(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a")
    error_of(await client.get("/api/threads/nobody/messages"), 404)
    error_of(await client.post("/api/threads/nobody/messages", json={"messages": [text("x")]}), 404)
    missing = await client.get(f"/api/threads/{thread['id']}/messages/nowhere")
    assert error_of(missing, 404)["param"] == "nowhere"
    after = await client.get(f"/api/threads/{thread['id']}/messages", params={"after": "nowhere"})
    error_of(after, 404)
    bad_id = await client.get("/api/threads/bad%20id/messages")
    assert error_of(bad_id, 422)["param"] == "thread id"


async def test_an_id_the_service_minted_is_refused_when_sent_again(
    client: httpx.AsyncClient,
) -> None:
    thread = await new_thread(client, "a")
    path = f"/api/threads/{thread['id']}/messages"
    minted = (await client.post(path, json={"messages": [text("b"), text("c")]})).json()
    ids = [m["id"] for m in minted["messages"]]
    assert len(set(ids)) == 2
    again = {**text("b again"), "id": ids[0]}
    error_of(await client.post(path, json={"messages": [again]}), 409)
    listed = (await client.get(path)).json()
    assert [m["contents"][0]["text"] for m in listed["messages"]] == ["a", "b", "c"]
