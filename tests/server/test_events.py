"""/api/threads/{id}/events: server-sent events of new messages, resets and deletion."""

from __future__ import annotations

import json
from typing import Any

import httpx

from .conftest import error_of, new_thread


def events(body: str) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for block in body.strip().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if not line.startswith(":")
        )
        if "event" in fields:
            found.append((fields["event"], json.loads(fields["data"])))
    return found


async def test_events_send_the_messages_after_a_given_one(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a", "b", "c")
    path = f"/api/threads/{thread['id']}"
    first = (await client.get(f"{path}/messages?limit=1")).json()["first_id"]
    answer = await client.get(f"{path}/events", params={"after": first, "timeout": 0.1})
    assert answer.headers["content-type"].startswith("text/event-stream")
    sent = events(answer.text)
    assert [(e, d["contents"][0]["text"]) for e, d in sent] == [("message", "b"), ("message", "c")]
    resumed = await client.get(
        f"{path}/events", params={"timeout": 0.1}, headers={"Last-Event-ID": str(sent[0][1]["id"])}
    )
    assert [d["contents"][0]["text"] for _, d in events(resumed.text)] == ["c"]
    assert events((await client.get(f"{path}/events", params={"timeout": 0.05})).text) == []


async def test_a_deleted_thread_ends_its_stream(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a")
    await client.delete(f"/api/threads/{thread['id']}")
    error_of(await client.get(f"/api/threads/{thread['id']}/events?timeout=0.1"), 404)
    error_of(await client.get("/api/threads/nobody/events?timeout=0.1"), 404)
