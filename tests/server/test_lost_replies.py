"""No 5xx after a write was saved: an append whose store reply was lost answers as saved."""

from __future__ import annotations

import httpx
import pytest

from tests.server.v1_helpers import ControlledStore

from .conftest import error_of, new_thread, text


@pytest.fixture
def store() -> ControlledStore:
    return ControlledStore()


async def texts(client: httpx.AsyncClient, thread_id: str) -> list[str]:
    answer = await client.get(f"/api/threads/{thread_id}/messages")
    return [m["contents"][0]["text"] for m in answer.json()["messages"]]


async def test_an_append_saved_before_the_store_failed_is_answered_201(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    store.lose_next_reply()
    answer = await client.post(
        f"/api/threads/{thread_id}/messages", json={"messages": [text("b"), text("c")]}
    )
    assert answer.status_code == 201, answer.text
    assert answer.json()["head"] == 3
    assert await texts(client, thread_id) == ["a", "b", "c"]


async def test_an_append_the_store_did_not_save_is_answered_503_and_kept_out(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    store.fail_next_commit = True
    answer = await client.post(f"/api/threads/{thread_id}/messages", json={"messages": [text("b")]})
    assert "unplugged" in error_of(answer, 503)["message"]
    assert answer.headers["Retry-After"] == "1"
    assert await texts(client, thread_id) == ["a"]
    again = await client.post(f"/api/threads/{thread_id}/messages", json={"messages": [text("b")]})
    assert again.status_code == 201 and await texts(client, thread_id) == ["a", "b"]


async def test_a_resend_whose_check_failed_is_answered_503_not_taken_for_saved(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    """The batch's last message is in the thread, but the new one before it is not."""
    thread_id = (await new_thread(client, "a"))["id"]
    sent = await client.post(f"/api/threads/{thread_id}/messages", json={"messages": [text("m")]})
    m = sent.json()["messages"][0]
    store.fail_reads = 1  # the kept handle's look at the thread, after it finds m in its head
    answer = await client.post(
        f"/api/threads/{thread_id}/messages", json={"messages": [text("new"), m]}
    )
    error_of(answer, 503)
    assert store.fail_reads == 0  # the failure was met
    assert await texts(client, thread_id) == ["a", "m"]
    again = await client.post(
        f"/api/threads/{thread_id}/messages", json={"messages": [text("new"), m]}
    )
    error_of(again, 409)  # m is a duplicate: refused whole, nothing lost or written twice
    assert await texts(client, thread_id) == ["a", "m"]


async def test_a_resend_of_a_stored_batch_whose_check_failed_is_a_duplicate_not_saved(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    """Every message of the batch is in the thread already: found there, nothing written."""
    thread_id = (await new_thread(client, "a"))["id"]
    sent = await client.post(
        f"/api/threads/{thread_id}/messages", json={"messages": [text("m"), text("n")]}
    )
    batch = sent.json()["messages"]
    store.fail_reads = 1  # the kept handle's look at the thread, after it finds m in its head
    answer = await client.post(f"/api/threads/{thread_id}/messages", json={"messages": batch})
    assert error_of(answer, 409)["param"] == batch[0]["id"]
    assert store.fail_reads == 0  # the failure was met
    assert await texts(client, thread_id) == ["a", "m", "n"]


async def test_a_thread_created_with_messages_saved_before_the_store_failed_is_kept(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    store.lose_next_reply()  # of the first commit: the first messages (creation is a put)
    answer = await client.post("/api/threads", json={"messages": [text("a"), text("b")]})
    assert answer.status_code == 201, answer.text
    assert await texts(client, answer.json()["id"]) == ["a", "b"]


async def test_a_thread_whose_first_messages_were_not_saved_is_not_kept(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    store.fail_next_commit = True
    answer = await client.post("/api/threads", json={"id": "gone", "messages": [text("a")]})
    error_of(answer, 503)
    error_of(await client.get("/api/threads/gone"), 404)
