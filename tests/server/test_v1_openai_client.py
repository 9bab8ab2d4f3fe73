"""`/v1` through the unmodified `openai` client: every method, paging, errors, tenants, retries."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable

import openai
import pytest
from fastapi import FastAPI
from openai.types.conversations import Conversation, ConversationItemList
from openai.types.conversations.message import Message as ItemMessage
from openai.types.responses import (
    ResponseFunctionToolCallItem,
    ResponseInputText,
    ResponseOutputText,
)

from tests.server.conftest import KEYS
from tests.server.v1_helpers import ControlledStore, item, openai_client, text_item


def text_of(listed: object) -> str:
    """The text of a message item the client read."""
    assert isinstance(listed, ItemMessage)
    part = listed.content[0]
    assert isinstance(part, ResponseInputText | ResponseOutputText)
    return part.text


@pytest.fixture
def store() -> ControlledStore:
    return ControlledStore()


@pytest.fixture
async def acme(app: FastAPI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai_client(app, KEYS["acme"]) as client:
        yield client


@pytest.fixture
async def beta(app: FastAPI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai_client(app, KEYS["beta"]) as client:
        yield client


async def test_every_method_of_the_client(acme: openai.AsyncOpenAI) -> None:
    conversations = acme.conversations
    created = await conversations.create(items=[text_item("Hi")], metadata={"user": "ana"})
    assert isinstance(created, Conversation) and created.metadata == {"user": "ana"}
    assert await conversations.retrieve(created.id) == created
    updated = await conversations.update(created.id, metadata={"user": "bo"})
    assert updated.metadata == {"user": "bo"}

    call = item(type="function_call", call_id="c1", name="clock", arguments="{}")
    added = await conversations.items.create(created.id, items=[call])
    assert isinstance(added, ConversationItemList)
    (call_item,) = added.data
    assert isinstance(call_item, ResponseFunctionToolCallItem)
    assert call_item.id.startswith("fc_")
    fetched = await conversations.items.retrieve(call_item.id, conversation_id=created.id)
    assert fetched == call_item

    listed = [i async for i in conversations.items.list(created.id, order="asc")]
    assert isinstance(listed[0], ItemMessage) and listed[0].content[0].type == "input_text"
    assert listed[1] == call_item

    after_delete = await conversations.items.delete(call_item.id, conversation_id=created.id)
    assert after_delete == updated
    assert [i.id async for i in conversations.items.list(created.id)] == [listed[0].id]

    deleted = await conversations.delete(created.id)
    assert (deleted.id, deleted.deleted, deleted.object) == (
        created.id,
        True,
        "conversation.deleted",
    )


@pytest.mark.parametrize("order", ["asc", "desc"])
async def test_auto_pagination_reads_every_item(acme: openai.AsyncOpenAI, order: str) -> None:
    created = await acme.conversations.create(items=[text_item(str(i)) for i in range(20)])
    await acme.conversations.items.create(
        created.id, items=[text_item(str(i)) for i in range(20, 27)]
    )
    pages = acme.conversations.items.list(created.id, order=item(o=order)["o"], limit=4)
    texts = []
    async for listed in pages:
        texts.append(text_of(listed))
    expected = [str(i) for i in range(27)]
    assert texts == (expected if order == "asc" else expected[::-1])


async def test_errors_are_the_clients_exceptions(acme: openai.AsyncOpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        await acme.conversations.retrieve("conv_nobody")
    assert missing.value.code is None and missing.value.param == "conv_nobody"
    assert "conv_nobody" in missing.value.message
    created = await acme.conversations.create()
    with pytest.raises(openai.NotFoundError):
        await acme.conversations.items.retrieve("msg_nobody", conversation_id=created.id)
    with pytest.raises(openai.NotFoundError):
        await acme.conversations.items.delete("msg_nobody", conversation_id=created.id)
    with pytest.raises(openai.BadRequestError) as too_many:
        await acme.conversations.items.create(
            created.id, items=[text_item(str(i)) for i in range(21)]
        )
    assert too_many.value.param == "body.items" and too_many.value.status_code == 400
    assert too_many.value.type == "invalid_request_error"
    with pytest.raises(openai.ConflictError):
        same = item(id="msg_same", role="user", content="x")
        await acme.conversations.items.create(created.id, items=[same, same])


async def test_a_wrong_key_is_an_authentication_error(app: FastAPI) -> None:
    async with openai_client(app, "not-a-key") as stranger:
        with pytest.raises(openai.AuthenticationError):
            await stranger.conversations.create()


async def test_another_tenants_conversation_does_not_exist(
    acme: openai.AsyncOpenAI, beta: openai.AsyncOpenAI
) -> None:
    theirs = await beta.conversations.create(items=[text_item("secret")], metadata={"k": "v"})
    item_id = str((await beta.conversations.items.list(theirs.id)).data[0].id)
    calls: list[Awaitable[object]] = [
        acme.conversations.retrieve(theirs.id),
        acme.conversations.update(theirs.id, metadata={"k": "mine"}),
        acme.conversations.delete(theirs.id),
        acme.conversations.items.list(theirs.id),
        acme.conversations.items.create(theirs.id, items=[text_item("intrusion")]),
        acme.conversations.items.retrieve(item_id, conversation_id=theirs.id),
        acme.conversations.items.delete(item_id, conversation_id=theirs.id),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError):
            await call
    assert await beta.conversations.retrieve(theirs.id) == theirs
    assert [i.id async for i in beta.conversations.items.list(theirs.id)] == [item_id]


async def test_a_refused_write_is_sent_once(
    acme: openai.AsyncOpenAI, store: ControlledStore
) -> None:
    """409 is one of the statuses the client retries; `x-should-retry: false` stops it."""
    created = await acme.conversations.create()
    once = item(id="msg_once", role="user", content="x")
    await acme.conversations.items.create(created.id, items=[once])
    raw = acme.conversations.items.with_raw_response
    with pytest.raises(openai.ConflictError) as raised:
        await raw.create(created.id, items=[once])
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert raised.value.response.request.headers["x-stainless-retry-count"] == "0"


async def test_a_failed_write_without_a_key_is_not_retried(
    acme: openai.AsyncOpenAI, store: ControlledStore
) -> None:
    created = await acme.conversations.create()
    commits = store.commits
    store.fail_next_commit = True
    with pytest.raises(openai.InternalServerError) as raised:
        await acme.conversations.items.create(created.id, items=[text_item("x")])
    assert raised.value.status_code == 503
    assert raised.value.response.headers["x-should-retry"] == "false"
    assert raised.value.response.request.headers["x-stainless-retry-count"] == "0"
    assert store.commits == commits
    assert [i async for i in acme.conversations.items.list(created.id)] == []


async def test_a_write_saved_before_the_store_failed_is_answered_as_saved(
    acme: openai.AsyncOpenAI, store: ControlledStore
) -> None:
    """No 5xx after a write was saved: the client would send it again."""
    created = await acme.conversations.create()
    store.lose_next_reply()
    raw = await acme.conversations.items.with_raw_response.create(
        created.id, items=[text_item("x")]
    )
    assert raw.http_request.headers["x-stainless-retry-count"] == "0"
    assert [text_of(i) for i in raw.parse().data] == ["x"]
    assert [text_of(i) async for i in acme.conversations.items.list(created.id)] == ["x"]


async def test_a_conversation_saved_before_the_store_failed_is_answered_as_created(
    acme: openai.AsyncOpenAI, store: ControlledStore
) -> None:
    store.lose_next_reply()  # of its first items' commit
    raw = await acme.conversations.with_raw_response.create(items=[text_item("x")])
    assert raw.http_request.headers["x-stainless-retry-count"] == "0"
    created = raw.parse()
    assert [text_of(i) async for i in acme.conversations.items.list(created.id)] == ["x"]


async def test_a_failed_write_with_a_key_is_retried_and_written_once(
    app: FastAPI, store: ControlledStore
) -> None:
    async with openai_client(app, KEYS["acme"], max_retries=2) as acme:
        created = await acme.conversations.create()
        store.fail_next_commit = True
        raw = await acme.conversations.items.with_raw_response.create(
            created.id, items=[text_item("x")], extra_headers={"Idempotency-Key": "add-x"}
        )
        assert raw.http_request.headers["x-stainless-retry-count"] == "1"
        texts = [text_of(i) async for i in acme.conversations.items.list(created.id)]
        assert texts == ["x"]
