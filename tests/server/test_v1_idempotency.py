"""`Idempotency-Key` on `/v1` writes: a retry answers the first answer and writes nothing."""

from __future__ import annotations

import hashlib
import time
from types import SimpleNamespace

import anyio
import httpx
import pytest

from agent_threads import count_threads
from agent_threads.server import create_app
from agent_threads.server.v1 import idempotency
from agent_threads.stores.tenant import TenantStore
from tests.server.conftest import KEYS, error_of
from tests.server.v1_helpers import ControlledStore, text_item


@pytest.fixture
def store() -> ControlledStore:
    return ControlledStore()


def keyed(key: str) -> dict[str, str]:
    return {"Idempotency-Key": key}


async def new_conversation(client: httpx.AsyncClient) -> str:
    conversation_id: str = (await client.post("/v1/conversations", json={})).json()["id"]
    return conversation_id


async def count_items(client: httpx.AsyncClient, cid: str) -> int:
    return len((await client.get(f"/v1/conversations/{cid}/items")).json()["data"])


async def test_the_same_key_twice_answers_the_first_answer_and_writes_once(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    cid = await new_conversation(client)
    body = {"items": [text_item("once")]}
    first = await client.post(f"/v1/conversations/{cid}/items", json=body, headers=keyed("k1"))
    commits = store.commits
    again = await client.post(f"/v1/conversations/{cid}/items", json=body, headers=keyed("k1"))
    assert (again.status_code, again.json()) == (first.status_code, first.json())
    assert again.headers["idempotent-replayed"] == "true"
    assert "idempotent-replayed" not in first.headers
    assert store.commits == commits
    assert await count_items(client, cid) == 1


async def test_a_retried_create_makes_one_conversation(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    body = {"items": [text_item("hello")], "metadata": {"a": "b"}}
    first = await client.post("/v1/conversations", json=body, headers=keyed("new-1"))
    again = await client.post("/v1/conversations", json=body, headers=keyed("new-1"))
    assert again.json() == first.json()
    assert await count_threads(TenantStore(store, "acme")) == 1


async def test_a_retried_delete_answers_as_the_first(client: httpx.AsyncClient) -> None:
    cid = await new_conversation(client)
    first = await client.delete(f"/v1/conversations/{cid}", headers=keyed("del"))
    again = await client.delete(f"/v1/conversations/{cid}", headers=keyed("del"))
    assert again.status_code == 200 and again.json() == first.json()
    error_of(await client.delete(f"/v1/conversations/{cid}"), 404)  # without the key: it is gone


async def test_the_key_with_another_request_is_refused(client: httpx.AsyncClient) -> None:
    cid = await new_conversation(client)
    path = f"/v1/conversations/{cid}/items"
    await client.post(path, json={"items": [text_item("a")]}, headers=keyed("k"))
    other = await client.post(path, json={"items": [text_item("b")]}, headers=keyed("k"))
    assert error_of(other, 400)["param"] == "Idempotency-Key"
    assert other.headers["x-should-retry"] == "false"
    assert await count_items(client, cid) == 1


async def test_an_error_is_not_kept_so_a_retry_runs_again(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    cid = await new_conversation(client)
    path = f"/v1/conversations/{cid}/items"
    store.fail_next_commit = True
    failed = await client.post(path, json={"items": [text_item("a")]}, headers=keyed("k"))
    assert error_of(failed, 503)["type"] == "store_unavailable"
    assert failed.headers["x-should-retry"] == "true"  # the key makes the retry safe
    retried = await client.post(path, json={"items": [text_item("a")]}, headers=keyed("k"))
    assert retried.status_code == 200 and "idempotent-replayed" not in retried.headers
    assert await count_items(client, cid) == 1


async def test_a_request_still_running_answers_409_to_retry(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    cid = await new_conversation(client)
    path = f"/v1/conversations/{cid}/items"
    body = {"items": [text_item("slow")]}
    store.gate = anyio.Event()
    answers: list[httpx.Response] = []

    async def first() -> None:
        answers.append(await client.post(path, json=body, headers=keyed("slow")))

    with anyio.fail_after(5):
        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await store.entered.wait()
            busy = await client.post(path, json=body, headers=keyed("slow"))
            store.gate.set()
    assert error_of(busy, 409)["param"] == "Idempotency-Key"
    assert busy.headers["x-should-retry"] == "true"
    replayed = await client.post(path, json=body, headers=keyed("slow"))
    assert replayed.json() == answers[0].json()
    assert await count_items(client, cid) == 1


async def test_keys_belong_to_a_tenant(
    client: httpx.AsyncClient, other: httpx.AsyncClient, store: ControlledStore
) -> None:
    mine = await client.post("/v1/conversations", json={}, headers=keyed("same"))
    theirs = await other.post("/v1/conversations", json={}, headers=keyed("same"))
    assert mine.json()["id"] != theirs.json()["id"]
    assert "idempotent-replayed" not in theirs.headers
    assert await count_threads(TenantStore(store, "beta")) == 1


async def test_another_server_process_on_the_store_answers_the_retry(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    first = await client.post("/v1/conversations", json={}, headers=keyed("moved"))
    second_app = create_app(store, api_keys=[f"{t}:{k}" for t, k in KEYS.items()])
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=second_app),
        base_url="http://other-process",
        headers={"Authorization": f"Bearer {KEYS['acme']}"},
    ) as elsewhere:
        again = await elsewhere.post("/v1/conversations", json={}, headers=keyed("moved"))
    assert again.json() == first.json()
    assert await count_threads(TenantStore(store, "acme")) == 1


async def test_kept_answers_expire_and_are_swept(
    client: httpx.AsyncClient, store: ControlledStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await client.post("/v1/conversations", json={}, headers=keyed("old"))
    tenant = TenantStore(store, "acme")
    assert len(await tenant.list_records(idempotency.KIND)) == 1
    later = time.time() + idempotency.DEFAULT_TTL + idempotency.DEFAULT_SWEEP_INTERVAL + 1
    monkeypatch.setattr(idempotency, "time", SimpleNamespace(time=lambda: later))
    again = await client.post("/v1/conversations", json={}, headers=keyed("old"))
    assert "idempotent-replayed" not in again.headers  # expired: a new request
    await client.post("/v1/conversations", json={}, headers=keyed("newer"))
    records = await tenant.list_records(idempotency.KIND)
    kept = {hashlib.sha256(k.encode()).hexdigest() for k in ("old", "newer")}
    assert {r.id for r in records} == kept  # the first "old" answer was replaced, none piled up
    assert await count_threads(tenant) == 3


async def test_writes_without_a_key_and_reads_are_untouched(
    client: httpx.AsyncClient, store: ControlledStore
) -> None:
    await client.post("/v1/conversations", json={})
    await client.get("/v1/conversations/conv_x", headers=keyed("read"))
    assert await TenantStore(store, "acme").list_records(idempotency.KIND) == []


@pytest.mark.parametrize("key", ["", "x" * 256])
async def test_a_malformed_key_is_refused(client: httpx.AsyncClient, key: str) -> None:
    answer = await client.post("/v1/conversations", json={}, headers={"Idempotency-Key": key})
    assert error_of(answer, 400)["param"] == "Idempotency-Key"


async def test_without_a_valid_api_key_the_answer_is_401(anonymous: httpx.AsyncClient) -> None:
    answer = await anonymous.post("/v1/conversations", json={}, headers=keyed("k"))
    error_of(answer, 401)
