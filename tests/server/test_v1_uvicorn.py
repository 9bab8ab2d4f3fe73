"""`/v1` over real HTTP: two uvicorn servers on loopback ports sharing one SQLite file.

Each server has its own `SQLiteStore` on the file, as two server processes would; the
`openai` client talks to them with its own default HTTP stack.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import anyio.abc
import openai
import pytest
import uvicorn

from agent_threads import SQLiteStore
from agent_threads.server import create_app
from tests.server.v1_helpers import text_item

KEY = "key-acme"


class _Server(uvicorn.Server):
    """A uvicorn server that says when it listens."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = anyio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


async def _serve(path: Path, group: anyio.abc.TaskGroup) -> tuple[_Server, str]:
    app = create_app(SQLiteStore(path), api_keys=[f"acme:{KEY}"], manage_store=True)
    server = _Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    group.start_soon(server.serve)
    with anyio.fail_after(10):
        await server.listening.wait()
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}/v1"


@asynccontextmanager
async def two_servers(path: Path) -> AsyncIterator[tuple[str, str]]:
    """The `/v1` base URLs of two servers on one store file (in the caller's task)."""
    async with anyio.create_task_group() as group:
        first, first_url = await _serve(path, group)
        second, second_url = await _serve(path, group)
        try:
            yield first_url, second_url
        finally:
            first.should_exit = second.should_exit = True


async def test_two_servers_on_one_store_serve_one_conversation(tmp_path: Path) -> None:
    async with two_servers(tmp_path / "threads.db") as (first_url, second_url):
        one = openai.AsyncOpenAI(base_url=first_url, api_key=KEY)
        two = openai.AsyncOpenAI(base_url=second_url, api_key=KEY)
        await _use(one, two)


async def _use(one: openai.AsyncOpenAI, two: openai.AsyncOpenAI) -> None:
    async with one, two:
        created = await one.conversations.create(items=[text_item(str(i)) for i in range(20)])
        await two.conversations.items.create(created.id, items=[text_item("20")])
        items = one.conversations.items.list(created.id, order="asc", limit=7)
        ids = [item.id async for item in items]
        assert len(ids) == 21
        assert ids == [
            item.id async for item in two.conversations.items.list(created.id, order="asc")
        ]

        key = {"Idempotency-Key": "add-21"}
        first = await one.conversations.items.with_raw_response.create(
            created.id, items=[text_item("21")], extra_headers=key
        )
        again = await two.conversations.items.with_raw_response.create(
            created.id, items=[text_item("21")], extra_headers=key
        )
        assert again.headers["idempotent-replayed"] == "true"
        assert again.http_response.json() == first.http_response.json()
        assert len([item async for item in two.conversations.items.list(created.id)]) == 22

        with pytest.raises(openai.NotFoundError):
            await two.conversations.retrieve("conv_missing")
