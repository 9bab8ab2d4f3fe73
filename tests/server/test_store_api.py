"""The raw store API (`/api/store`) through HttpStore: errors, tenants, vacuum, limits.

The store conformance suite runs on HttpStore too (tests/stores, id `http`); here is what
the protocol does not say: the error classes raised again from the service's answers,
the tenants' parts of the store, vacuum under API keys, keys and addresses refused.
"""

from __future__ import annotations

import hashlib
import json
import socket
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    MemoryStore,
    Message,
    Record,
    Row,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.server import create_app
from agent_threads.stores.base import DEFAULT_VACUUM_GRACE
from agent_threads.stores.http import API_KEY_ENV, HttpStore
from agent_threads.stores.urls import open_store

from .conftest import KEYS, MAX_BODY


def http_store(app: FastAPI, key: str | None = KEYS["acme"]) -> HttpStore:
    return HttpStore("http://test", key, transport=httpx.ASGITransport(app=app))


@pytest.fixture
async def acme(app: FastAPI) -> AsyncIterator[HttpStore]:
    async with http_store(app) as opened:
        yield opened


@pytest.fixture
async def beta(app: FastAPI) -> AsyncIterator[HttpStore]:
    async with http_store(app, KEYS["beta"]) as opened:
        yield opened


def row(message_id: str) -> Row:
    return Row(message_id, json.dumps({"id": message_id}))


async def test_a_lost_compare_and_set_is_the_same_conflict_error(acme: HttpStore) -> None:
    stored = await acme.put_record(Record(kind="thing", id="r1"), expected_version=0)
    with pytest.raises(ConflictError) as caught:
        await acme.put_record(Record(kind="thing", id="r1"), expected_version=0)
    assert caught.value.key == "thing 'r1'"
    assert str(caught.value) == (
        f"conflict on thing 'r1': expected version 0, stored version {stored.version}"
    )


async def test_a_taken_position_in_a_commit_is_a_conflict_and_keeps_nothing(
    acme: HttpStore,
) -> None:
    await acme.append_rows("s1", 0, [row("m0")])
    with pytest.raises(ConflictError):
        await acme.append_rows("s1", 0, [row("m1")])
    assert await acme.read_rows("s1", 0, 1) == [row("m0").data]


async def test_missing_rows_are_store_corrupted_naming_the_segment(acme: HttpStore) -> None:
    with pytest.raises(StoreCorruptedError) as caught:
        await acme.read_rows("nowhere", 0, 2)
    assert caught.value.where == "segment 'nowhere'"
    assert "positions 0..1 requested, 0 rows found" in str(caught.value)


async def test_an_id_too_long_for_the_tenant_is_the_same_invalid_id_error(
    acme: HttpStore,
) -> None:
    with pytest.raises(InvalidIdError) as caught:
        await acme.get_record("thing", "x" * 128)  # valid alone, too long with "acme:"
    assert caught.value.what == "thing id" and "tenant 'acme'" in str(caught.value)


async def test_tenants_see_only_their_own_records_rows_and_locations(
    acme: HttpStore, beta: HttpStore
) -> None:
    await acme.put_record(Record(kind="thing", id="same", data={"who": "acme"}), expected_version=0)
    await beta.put_record(Record(kind="thing", id="same", data={"who": "beta"}), expected_version=0)
    await acme.append_rows("seg", 0, [row("m0")])
    theirs = await beta.get_record("thing", "same")
    assert theirs is not None and theirs.data == {"who": "beta"}
    assert [r.data for r in await acme.list_records("thing")] == [{"who": "acme"}]
    assert await beta.locate_message("m0") == []
    assert await beta.list_segments() == {}
    assert await beta.delete_record("thing", "nobody") is False
    assert await acme.delete_record("thing", "same") is True
    assert await beta.get_record("thing", "same") is not None


async def test_threads_work_through_the_service_for_each_tenant(
    acme: HttpStore, beta: HttpStore
) -> None:
    thread = await ChatMessageThread.create(acme, id="chat", tags={"env": "test"})
    await thread.on_new_messages([Message.user("hello"), Message.assistant("hi")])
    await thread.checkpoint("greeted")
    child = await thread.fork()
    await child.on_new_messages([Message.user("more")])
    await thread.rollback("greeted")
    loaded = await ChatMessageThread.load("chat", store=acme)
    assert [m.text for m in loaded.messages] == ["hello", "hi"]
    assert [m.text for m in (await ChatMessageThread.load(child.id, store=acme)).messages] == [
        "hello",
        "hi",
        "more",
    ]
    with pytest.raises(LookupError):
        await ChatMessageThread.load("chat", store=beta)


async def test_blobs_go_as_bytes_and_a_missing_one_is_none(acme: HttpStore) -> None:
    data = bytes(range(256)) * 4
    digest = await acme.put_blob(data)
    assert digest == hashlib.sha256(data).hexdigest()
    assert await acme.get_blob(digest) == data
    assert await acme.get_blob("0" * 64) is None


async def test_a_blob_over_the_body_limit_is_refused_as_invalid(acme: HttpStore) -> None:
    with pytest.raises(InvalidValueError, match="larger than"):
        await acme.put_blob(b"x" * (MAX_BODY + 1))


async def test_a_tenants_vacuum_spares_fresh_garbage_and_other_tenants(
    acme: HttpStore, beta: HttpStore, store: MemoryStore
) -> None:
    await acme.append_rows("orphan", 0, [row("a0")])
    await beta.append_rows("orphan", 0, [row("b0")])
    report = await acme.vacuum(grace=0)  # at least DEFAULT_VACUUM_GRACE under keys
    assert (report.segments_deleted, report.blobs_deleted) == (0, 0)
    assert set(await acme.list_segments()) == {"orphan"}
    assert DEFAULT_VACUUM_GRACE > 0
    await store.vacuum(grace=0)  # the operator's vacuum, on the whole store
    assert await acme.list_segments() == {} and await beta.list_segments() == {}


async def test_without_keys_vacuum_is_the_stores_own(store: MemoryStore) -> None:
    async with http_store(create_app(store), key=None) as anonymous:
        await anonymous.append_rows("orphan", 0, [row("a0")])
        report = await anonymous.vacuum(grace=0)
        assert report.segments_deleted == 1
        assert await store.list_segments() == {}


async def test_a_wrong_key_is_unavailable_naming_the_401(app: FastAPI) -> None:
    async with http_store(app, "wrong") as stranger:
        with pytest.raises(StoreUnavailableError, match="401") as caught:
            await stranger.list_records()
    assert caught.value.operation == "list_records"


async def test_an_address_that_is_not_the_service_is_unavailable(app: FastAPI) -> None:
    store = HttpStore("http://test/elsewhere", transport=httpx.ASGITransport(app=app))
    async with store:
        with pytest.raises(StoreUnavailableError, match="404"):
            await store.get_record("thing", "r1")  # a 404 without the store's code: no None


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_service_that_does_not_answer_is_unavailable() -> None:
    async with HttpStore(f"http://127.0.0.1:{_closed_port()}", connect_timeout=1) as store:
        with pytest.raises(StoreUnavailableError) as caught:
            await store.get_record("thing", "r1")
    assert caught.value.operation == "get_record"
    assert isinstance(caught.value.__cause__, httpx.TransportError)


def test_open_store_makes_an_http_store_with_the_key_of_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(API_KEY_ENV, "key-acme")
    store = open_store("https://threads.example:8443/prefix/")
    assert isinstance(store, HttpStore)
    assert store.url == "https://threads.example:8443/prefix"
    assert repr(store) == "HttpStore('https://threads.example:8443/prefix')"


@pytest.mark.parametrize("url", ["ftp://host", "http://", "http://host?key=1", "localhost:8080"])
def test_a_url_that_is_not_http_is_refused(url: str) -> None:
    with pytest.raises(InvalidValueError, match="http://host:port"):
        HttpStore(url)


def test_a_key_a_header_cannot_carry_is_refused() -> None:
    with pytest.raises(InvalidValueError, match="api_key"):
        HttpStore("http://127.0.0.1:8080", "key\nInjected: yes")
