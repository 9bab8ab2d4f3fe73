"""Checkpoints, the messages at one, and rollback (to a checkpoint or message, undoable)."""

from __future__ import annotations

import httpx

from .conftest import error_of, new_thread, text


async def test_checkpoints_are_listed_and_show_the_thread_as_it_was(
    client: httpx.AsyncClient,
) -> None:
    thread = await new_thread(client, "a", "b")
    path = f"/api/threads/{thread['id']}"
    made = await client.post(f"{path}/checkpoints", json={"label": "two", "metadata": {"k": 1}})
    assert made.status_code == 201
    checkpoint = made.json()
    assert (checkpoint["label"], checkpoint["message_count"], checkpoint["metadata"]) == (
        "two",
        2,
        {"k": 1},
    )
    await client.post(f"{path}/messages", json={"messages": [text("c")]})
    listed = (await client.get(f"{path}/checkpoints")).json()["checkpoints"]
    assert [c["id"] for c in listed] == [checkpoint["id"]]
    for name in (checkpoint["id"], "two"):
        then = (await client.get(f"{path}/checkpoints/{name}/messages")).json()
        assert [m["contents"][0]["text"] for m in then["messages"]] == ["a", "b"]
        assert (then["head"], then["has_more"]) == (2, False)
    paged = (await client.get(f"{path}/checkpoints/two/messages?offset=1&limit=1")).json()
    assert [m["contents"][0]["text"] for m in paged["messages"]] == ["b"]
    error_of(await client.get(f"{path}/checkpoints/nothing/messages"), 404)
    error_of(await client.get(f"{path}/checkpoints/two/messages?offset=-1"), 422)


async def test_rollback_to_a_checkpoint_or_message_is_undone_by_its_checkpoint(
    client: httpx.AsyncClient,
) -> None:
    thread = await new_thread(client, "a")
    path = f"/api/threads/{thread['id']}"
    await client.post(f"{path}/checkpoints", json={"label": "one"})
    await client.post(f"{path}/messages", json={"messages": [text("b"), text("c")]})
    back = await client.post(f"{path}/rollback", json={"checkpoint": "one"})
    assert back.status_code == 200
    assert back.json()["thread"]["message_count"] == 1
    undo = back.json()["undo"]
    assert (undo["label"], undo["reason"], undo["message_count"]) == (
        "before-rollback",
        "rollback",
        3,
    )
    again = await client.post(f"{path}/rollback", json={"checkpoint": undo["id"]})
    assert again.json()["thread"]["message_count"] == 3
    messages = (await client.get(f"{path}/messages")).json()["messages"]
    to_message = await client.post(f"{path}/rollback", json={"message_id": messages[1]["id"]})
    assert to_message.json()["thread"]["message_count"] == 2


async def test_rollback_needs_exactly_one_target_that_exists(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a")
    path = f"/api/threads/{thread['id']}/rollback"
    assert error_of(await client.post(path, json={}), 422)["param"] == "checkpoint"
    both = await client.post(path, json={"checkpoint": "x", "message_id": "y"})
    error_of(both, 422)
    error_of(await client.post(path, json={"checkpoint": "nothing"}), 404)
    error_of(await client.post(path, json={"message_id": "nowhere"}), 404)
    bad_label = await client.post(f"/api/threads/{thread['id']}/checkpoints", json={"label": ""})
    assert error_of(bad_label, 422)["param"] == "checkpoint label"
