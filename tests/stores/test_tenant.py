"""TenantStore: what the protocol does not promise: namespaces, isolation, shared blobs."""

from __future__ import annotations

import pytest

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    MemoryStore,
    Message,
    Record,
    Row,
    ThreadNotFoundError,
    WorkflowThread,
    list_threads,
)
from agent_threads.core.records import THREAD_KIND
from agent_threads.stores.tenant import TenantStore


@pytest.fixture
def inner() -> MemoryStore:
    return MemoryStore()


async def test_the_same_id_in_two_tenants_is_two_threads(inner: MemoryStore) -> None:
    acme, beta = TenantStore(inner, "acme"), TenantStore(inner, "beta")
    mine = await ChatMessageThread.create(acme, id="t1", title="acme's")
    await mine.on_new_messages([Message.user("for acme")])
    theirs = await ChatMessageThread.create(beta, id="t1", title="beta's")
    assert (await ChatMessageThread.load("t1", store=acme)).title == "acme's"
    assert (await ChatMessageThread.load("t1", store=beta)).messages == []
    assert theirs.title == "beta's"
    assert {r.id for r in await inner.list_records(THREAD_KIND)} == {"acme:t1", "beta:t1"}


async def test_another_tenants_thread_is_not_found_nor_listed(inner: MemoryStore) -> None:
    acme, beta = TenantStore(inner, "acme"), TenantStore(inner, "beta")
    secret = await ChatMessageThread.create(beta, tags={"env": "prod"})
    await secret.on_new_messages([Message.user("secret")])
    await WorkflowThread.create(beta)
    with pytest.raises(ThreadNotFoundError, match=secret.id):
        await ChatMessageThread.load(secret.id, store=acme)
    assert (await list_threads(acme)).threads == ()
    assert await acme.list_records() == []
    assert await acme.list_segments() == {}
    assert await acme.locate_message(secret.messages[0].id) == []
    assert len((await list_threads(beta)).threads) == 2


async def test_errors_name_the_tenants_ids(inner: MemoryStore) -> None:
    acme = TenantStore(inner, "acme")
    await acme.put_record(Record(kind="k", id="r1"), expected_version=0)
    with pytest.raises(ConflictError) as caught:
        await acme.put_record(Record(kind="k", id="r1"), expected_version=0)
    assert "'r1'" in str(caught.value) and "acme:" not in str(caught.value)
    await ChatMessageThread.create(acme, id="taken")
    with pytest.raises(ConflictError, match="'taken'"):
        await ChatMessageThread.create(acme, id="taken")


async def test_a_tenants_ids_are_shorter_by_its_prefix(inner: MemoryStore) -> None:
    acme = TenantStore(inner, "acme")
    assert acme.max_id_length == 128 - len("acme:")
    await ChatMessageThread.create(acme, id="x" * acme.max_id_length)
    with pytest.raises(InvalidIdError, match=f"longer than {acme.max_id_length}"):
        await ChatMessageThread.create(acme, id="x" * (acme.max_id_length + 1))
    with pytest.raises(InvalidIdError, match="segment id"):
        await acme.append_rows("s" * 124, 0, [Row("m", "{}")])


@pytest.mark.parametrize("name", ["", "a:b", "a b", "-lead", "x" * 33, "é"])
def test_a_bad_tenant_name_is_refused(inner: MemoryStore, name: str) -> None:
    with pytest.raises(InvalidIdError, match="tenant"):
        TenantStore(inner, name)


async def test_blobs_other_tenants_use_are_neither_listed_nor_deleted(inner: MemoryStore) -> None:
    acme, beta = TenantStore(inner, "acme"), TenantStore(inner, "beta")
    theirs = await ChatMessageThread.create(beta)
    await theirs.update_state({"secret": 1})
    their_blob = theirs.state_digest
    assert their_blob is not None
    loose = await acme.put_blob(b"loose")
    assert set(await acme.list_blobs()) == {loose}
    assert await acme.delete_blobs([their_blob, loose]) == 1
    assert await inner.get_blob(their_blob) is not None
    assert (await ChatMessageThread.load(theirs.id, store=beta)).state.to_dict() == {"secret": 1}


async def test_vacuum_keeps_every_tenants_checkpointed_history(inner: MemoryStore) -> None:
    tenants = [TenantStore(inner, name) for name in ("acme", "beta")]
    for store in tenants:
        thread = await ChatMessageThread.create(store, id="same")
        await thread.checkpoint("empty")
        await thread.on_new_messages([Message.user("gone from the head")])
        await thread.checkpoint("full")
        await thread.rollback("empty")
        fork = await thread.fork()
        await fork.on_new_messages([Message.user("fork")])
    await tenants[0].vacuum(grace=0)
    for store in tenants:
        thread = await ChatMessageThread.load("same", store=store)
        assert [m.text for m in (await thread.at("full")).messages] == ["gone from the head"]


async def test_opening_and_closing_leave_the_inner_store_alone(inner: MemoryStore) -> None:
    async with TenantStore(inner, "acme") as acme:
        await ChatMessageThread.create(acme)
    assert not inner.is_closed
    assert repr(acme) == "TenantStore(MemoryStore(), tenant='acme')"
