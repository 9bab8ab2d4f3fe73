"""Appends reuse a handle kept between requests: it must answer as a fresh one would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
from fastapi import FastAPI

from agent_threads import (
    ChatMessageThread,
    MemoryStore,
    Message,
    Record,
    SQLiteStore,
    WorkflowThread,
)
from agent_threads.server import create_app
from agent_threads.server.api import handles
from agent_threads.stores.tenant import TenantStore
from tests.counting_store import CountingStore

from .conftest import error_of, new_thread, text


async def texts(client: httpx.AsyncClient, thread_id: str, limit: int = 100) -> list[str]:
    answer = await client.get(f"/api/threads/{thread_id}/messages", params={"limit": limit})
    assert answer.status_code == 200, answer.text
    return [m["contents"][0]["text"] for m in answer.json()["messages"]]


async def append(client: httpx.AsyncClient, thread_id: str, *values: str) -> httpx.Response:
    return await send(client, thread_id, *(text(v) for v in values))


async def send(client: httpx.AsyncClient, thread_id: str, *messages: Any) -> httpx.Response:
    """Append messages given as JSON (as the API answered them: with their ids)."""
    return await client.post(f"/api/threads/{thread_id}/messages", json={"messages": messages})


async def test_an_append_after_another_writer_lands_after_its_messages(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    assert (await append(client, thread_id, "b")).status_code == 201  # the handle is kept now
    mine = await ChatMessageThread.load(thread_id, store=TenantStore(store, "acme"))
    await mine.on_new_messages([Message.user("from elsewhere")])
    answer = await append(client, thread_id, "c")
    assert answer.json()["head"] == 4
    assert await texts(client, thread_id) == ["a", "b", "from elsewhere", "c"]


async def test_an_append_after_a_rollback_continues_from_the_rolled_back_head(
    client: httpx.AsyncClient,
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    first = (await append(client, thread_id, "b")).json()["messages"][0]["id"]
    await append(client, thread_id, "c")
    back = await client.post(f"/api/threads/{thread_id}/rollback", json={"message_id": first})
    assert back.status_code == 200, back.text
    assert (await append(client, thread_id, "d")).json()["head"] == 3
    assert await texts(client, thread_id) == ["a", "b", "d"]


async def test_a_thread_deleted_and_made_again_gets_only_its_own_messages(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    await new_thread(client, "old", id="again")
    await append(client, "again", "old two")
    assert (await client.delete("/api/threads/again")).status_code == 200
    # made again elsewhere, with as many writes as the kept handle saw (a new record starts
    # at a random version, so the kept handle's compare-and-set fails: it never overwrites)
    again = await ChatMessageThread.create(TenantStore(store, "acme"), id="again")
    await again.on_new_messages([Message.user("new")])
    await again.on_new_messages([Message.user("new two")])
    assert (await append(client, "again", "new three")).json()["head"] == 3
    assert await texts(client, "again") == ["new", "new two", "new three"]


async def test_an_id_a_workflow_took_over_answers_404(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    await new_thread(client, "a", id="taken")
    await append(client, "taken", "b")
    tenant = TenantStore(store, "acme")
    await (await ChatMessageThread.load("taken", store=tenant)).delete()
    await WorkflowThread.create(tenant, id="taken")
    error_of(await append(client, "taken", "c"), 404)


async def test_a_message_id_already_in_the_thread_is_refused_through_a_kept_handle(
    client: httpx.AsyncClient,
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    kept = (await append(client, thread_id, "b")).json()["messages"][0]
    again = await send(client, thread_id, kept)
    assert kept["id"] in error_of(again, 409)["message"]
    assert await texts(client, thread_id) == ["a", "b"]


async def test_a_message_a_rollback_took_out_may_be_sent_again_with_its_id(
    client: httpx.AsyncClient,
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    first = (await append(client, thread_id, "b")).json()["messages"][0]
    removed = (await append(client, thread_id, "c")).json()["messages"][0]
    back = await client.post(f"/api/threads/{thread_id}/rollback", json={"message_id": first["id"]})
    assert back.status_code == 200, back.text
    again = await send(client, thread_id, removed)
    assert again.status_code == 201, again.text  # the kept handle's stale head held it
    assert await texts(client, thread_id) == ["a", "b", "c"]


async def test_a_message_popped_elsewhere_may_be_sent_again_with_its_id(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    last = (await append(client, thread_id, "b")).json()["messages"][0]
    elsewhere = await ChatMessageThread.load(thread_id, store=TenantStore(store, "acme"))
    assert (await elsewhere.pop()) is not None
    again = await send(client, thread_id, last)
    assert again.status_code == 201, again.text
    assert await texts(client, thread_id) == ["a", "b"]


async def test_sending_again_to_a_thread_deleted_through_the_app_answers_404(
    client: httpx.AsyncClient,
) -> None:
    thread_id = (await new_thread(client, "a"))["id"]
    sent = (await append(client, thread_id, "b")).json()["messages"][0]
    assert (await client.delete(f"/api/threads/{thread_id}")).status_code == 200
    again = await send(client, thread_id, sent)
    assert thread_id in error_of(again, 404)["message"]
    error_of(await append(client, thread_id, "c"), 404)


async def test_a_thread_made_again_with_auto_checkpoint_gets_its_auto_checkpoints(
    client: httpx.AsyncClient, store: MemoryStore
) -> None:
    await new_thread(client, "old", id="again")
    await append(client, "again", "old two")
    assert (await client.delete("/api/threads/again")).status_code == 200
    await ChatMessageThread.create(TenantStore(store, "acme"), id="again", auto_checkpoint=True)
    assert (await append(client, "again", "new")).status_code == 201
    answer = await client.get("/api/threads/again/checkpoints")
    assert answer.status_code == 200, answer.text
    assert [c["reason"] for c in answer.json()["checkpoints"]] == ["auto"]


async def test_handles_kept_are_bounded_the_least_recently_used_dropped(
    client: httpx.AsyncClient, app: FastAPI, store: MemoryStore
) -> None:
    kept: handles.KeptHandles = app.state.kept_handles
    kept.limit = 2
    ids = [(await new_thread(client))["id"] for _ in range(3)]
    for thread_id in ids:
        await append(client, thread_id, "x")
    await append(client, ids[1], "y")
    acme = app.state.tenants.store_for("Bearer key-acme")
    assert kept.held(acme) == [ids[2], ids[1]]
    for thread_id in ids:  # dropped or kept, every thread answers alike
        assert (await append(client, thread_id, "z")).status_code == 201


async def test_appends_through_one_app_read_no_record_while_nobody_else_writes() -> None:
    store = CountingStore()
    async with _anonymous(create_app(store)) as client:
        thread_id = (await new_thread(client, "a"))["id"]
        await append(client, thread_id, "b")  # the handle is kept now
        read = store.records_read
        for value in "cdefg":
            assert (await append(client, thread_id, value)).status_code == 201
        assert store.records_read == read  # each append one write, its compare-and-set
        assert await texts(client, thread_id) == list("abcdefg")


async def test_a_kept_handle_reads_first_after_another_writer_until_none_wrote_a_few_times() -> (
    None
):
    store = CountingStore()
    async with _anonymous(create_app(store)) as client:
        thread_id = (await new_thread(client, "a"))["id"]
        await append(client, thread_id, "b")
        elsewhere = await ChatMessageThread.load(thread_id, store=store)
        await elsewhere.on_new_messages([Message.user("from elsewhere")])
        assert (await append(client, thread_id, "c")).json()["head"] == 4  # lost, re-read
        read = store.records_read
        for value in "def":  # each reads the record first: another may write
            await append(client, thread_id, value)
        assert store.records_read == read + handles.TRUSTED_AFTER
        await append(client, thread_id, "g")  # the last ones found nobody else wrote
        assert store.records_read == read + handles.TRUSTED_AFTER
        expected = ["a", "b", "from elsewhere", *"cdefg"]
        assert await texts(client, thread_id) == expected


async def test_a_thread_another_writer_writes_between_appends_is_read_first_each_time() -> None:
    store = CountingStore()
    async with _anonymous(create_app(store)) as client:
        thread_id = (await new_thread(client))["id"]
        await append(client, thread_id, "0")
        elsewhere = await ChatMessageThread.load(thread_id, store=store)
        await elsewhere.on_new_messages([Message.user("x")])
        await append(client, thread_id, "1")  # lost its first write: reads first from now
        for value in "23456789":
            await elsewhere.on_new_messages([Message.user("x")])
            read = store.records_read
            await append(client, thread_id, value)
            assert store.records_read == read + 1  # one read, and no write lost to re-read
        assert await texts(client, thread_id) == ["0", "x", *"123456789".replace("", "x")[1:-1]]


class _CountingSQLiteStore(SQLiteStore):
    records_read = 0

    async def get_record(self, kind: str, record_id: str) -> Record | None:
        self.records_read += 1
        return await super().get_record(kind, record_id)


async def test_concurrent_appends_through_one_app_share_one_handle(tmp_path: Path) -> None:
    store = _CountingSQLiteStore(tmp_path / "t.db")  # its writes wait: requests interleave
    async with store, _anonymous(create_app(store)) as client:
        thread_id = (await new_thread(client))["id"]
        read = store.records_read

        async def writer(name: str) -> None:
            for i in range(10):
                assert (await append(client, thread_id, f"{name}{i}")).status_code == 201

        async with anyio.create_task_group() as group:
            for name in "abcd":
                group.start_soon(writer, name)
        # at most a load per writer: appends at once through one app take turns on one
        # handle, so none is taken for another writer's (each would read first), and a
        # handle per writer would lose races and re-read after them
        assert store.records_read - read <= 4
        assert sorted(await texts(client, thread_id, limit=100)) == sorted(
            f"{name}{i}" for name in "abcd" for i in range(10)
        )


def _anonymous(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_each_app_keeps_its_own_handles(store: MemoryStore) -> None:
    first, second = create_app(store), create_app(store)
    async with _anonymous(first) as one, _anonymous(second) as two:
        await new_thread(one, "a", id="shared")
        assert (await append(one, "shared", "b")).status_code == 201
        assert (await append(two, "shared", "c")).status_code == 201
        assert (await append(one, "shared", "d")).status_code == 201  # after the other app's
        assert await texts(two, "shared") == ["a", "b", "c", "d"]
    assert first.state.kept_handles.held(store) == ["shared"]
    assert second.state.kept_handles.held(store) == ["shared"]
