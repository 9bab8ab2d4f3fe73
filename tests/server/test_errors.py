"""Errors as answers: 413, 422, 503 and 500 with the common body and never a stack trace."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from agent_threads import MemoryStore, Record, StoreUnavailableError
from agent_threads.server import create_app

from .conftest import MAX_BODY, error_of, new_thread, text


async def test_a_body_over_the_limit_is_413_and_writes_nothing(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a")
    big = {"messages": [text("x" * MAX_BODY)]}
    answer = await client.post(f"/api/threads/{thread['id']}/messages", json=big)
    assert "larger than" in error_of(answer, 413)["message"]

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: counted as it comes
        yield b'{"messages": [{"role": "user", "metadata": {"x": "'
        for _ in range(MAX_BODY // 1024 + 1):
            yield b"y" * 1024
        yield b'"}}]}'

    streamed = await client.post(
        f"/api/threads/{thread['id']}/messages",
        content=chunks(),
        headers={"content-type": "application/json"},
    )
    error_of(streamed, 413)
    assert (await client.get(f"/api/threads/{thread['id']}")).json()["message_count"] == 1


async def test_malformed_json_and_unknown_routes(client: httpx.AsyncClient) -> None:
    answer = await client.post(
        "/api/threads", content=b"{not json", headers={"content-type": "application/json"}
    )
    error_of(answer, 422)
    assert error_of(await client.get("/api/nothing"), 404)["type"] == "not_found"
    error_of(await client.put("/api/threads"), 405)


class _Down(MemoryStore):
    async def _do_get_record(self, kind: str, record_id: str) -> None:
        raise StoreUnavailableError("MemoryStore()", operation="get_record", detail="down")


class _Broken(MemoryStore):
    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        raise RuntimeError("a bug with a secret path /etc/x")


@pytest.mark.parametrize(("store", "status"), [(_Down(), 503), (_Broken(), 500)])
async def test_store_failures_are_answered_without_a_stack_trace(
    store: MemoryStore, status: int
) -> None:
    app: FastAPI = create_app(store)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        answer = await client.get("/api/threads/t1" if status == 503 else "/api/threads")
    error = error_of(answer, status)
    assert "/etc/x" not in answer.text
    if status == 503:
        assert answer.headers["retry-after"] == "1"
    else:
        assert error["type"] == "internal_error"
