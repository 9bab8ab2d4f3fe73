"""/api/threads/{id}/view: budgets, and the native, OpenAI and Anthropic formats."""

from __future__ import annotations

import httpx

from .conftest import error_of, new_thread, text


async def test_a_view_keeps_the_newest_messages_within_budget(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "one", "two", "three")
    view = (await client.get(f"/api/threads/{thread['id']}/view?max_messages=2")).json()
    assert view["format"] == "native" and view["tokens"] > 0
    assert [m["contents"][0]["text"] for m in view["messages"]] == ["two", "three"]
    assert [(d["start"], d["end"]) for d in view["dropped"]] == [(0, 0)]


async def test_a_view_in_the_openai_and_anthropic_formats(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client)
    await client.post(
        f"/api/threads/{thread['id']}/messages",
        json={
            "messages": [
                text("be brief", role="system"),
                text("hi"),
                text("hello", role="assistant"),
            ]
        },
    )
    path = f"/api/threads/{thread['id']}/view"
    openai = (await client.get(path, params={"format": "openai"})).json()
    assert openai["messages"] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    anthropic = (await client.get(path, params={"format": "anthropic"})).json()
    assert anthropic["system"] == "be brief"
    assert [m["role"] for m in anthropic["messages"]] == ["user", "assistant"]
    error_of(await client.get(path, params={"format": "xml"}), 422)
    error_of(await client.get(path, params={"max_tokens": -1}), 422)
    overflow = await client.get(path, params={"max_tokens": 1})
    assert "cannot fit" in error_of(overflow, 422)["message"]
