"""Two server processes on one PostgreSQL store take appends to one thread together.

`agent-threads serve` runs twice, on two free loopback ports, over one PostgresStore (a
schema of this test's own, dropped afterwards). Eight HTTP clients, four on each server,
append 100 messages each to one thread at the same time: every answer is 201, the
thread ends with exactly 800 messages, and each client's messages are in its order.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import asyncpg
import httpx

from tests.stores.conftest import POSTGRES_DSN, needs_server

pytestmark = needs_server("postgres")

KEY = "key-acme"
CLIENTS = 8
APPENDS = 100


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def _answers(url: str) -> bool:
    async with httpx.AsyncClient() as client:
        try:
            await client.get(f"{url}/openapi.json", timeout=1)
        except httpx.TransportError:
            return False
    return True


@asynccontextmanager
async def _server(store_url: str, log: Path) -> AsyncIterator[str]:
    """`agent-threads serve` in a process of its own; its base URL once it answers."""
    port = _free_port()
    command = [str(Path(sys.executable).with_name("agent-threads")), "serve", "--store", store_url]
    command += ["--port", str(port), "--api-key", f"acme:{KEY}"]
    with log.open("wb") as output:
        process = await anyio.open_process(command, stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        with anyio.fail_after(30):
            while not await _answers(url):
                if process.returncode is not None:
                    raise AssertionError(await anyio.Path(log).read_text())
                await anyio.sleep(0.1)  # a process to start: nothing to wait on but its port
        yield url
    finally:
        process.terminate()
        with anyio.fail_after(15):
            await process.wait()


@asynccontextmanager
async def _schema() -> AsyncIterator[str]:
    """A fresh PostgreSQL schema's store URL; the schema is dropped afterwards."""
    schema = f"test_{uuid.uuid4().hex}"
    try:
        yield f"{POSTGRES_DSN}?schema={schema}"
    finally:
        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()


async def _append_all(url: str, thread_id: str, client_number: int, failures: list[str]) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
        for i in range(APPENDS):
            text = {"type": "text", "text": f"{client_number}:{i}"}
            body = {"messages": [{"role": "user", "contents": [text]}]}
            answer = await client.post(f"/api/threads/{thread_id}/messages", json=body)
            if answer.status_code != 201:
                failures.append(f"client {client_number} append {i}: {answer.text}")


async def _texts(url: str, thread_id: str) -> list[str]:
    texts: list[str] = []
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as client:
        after: str | None = None
        while True:
            params: dict[str, str | int] = {"limit": 100, **({"after": after} if after else {})}
            page = (await client.get(f"/api/threads/{thread_id}/messages", params=params)).json()
            texts += [m["contents"][0]["text"] for m in page["messages"]]
            if not page["has_more"]:
                return texts
            after = page["last_id"]


async def test_two_servers_on_one_postgres_store_keep_every_append_in_order(
    tmp_path: Path,
) -> None:
    async with (
        _schema() as store_url,
        _server(store_url, tmp_path / "first.log") as first,
        _server(store_url, tmp_path / "second.log") as second,
    ):
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as client:
            created = await client.post(f"{first}/api/threads", json={"id": "shared"})
            assert created.status_code == 201, created.text
        failures: list[str] = []
        with anyio.fail_after(240):
            async with anyio.create_task_group() as group:
                for n in range(CLIENTS):
                    group.start_soon(_append_all, (first, second)[n % 2], "shared", n, failures)
        assert failures == []
        texts = await _texts(second, "shared")
    assert len(texts) == CLIENTS * APPENDS == len(set(texts))
    for n in range(CLIENTS):
        mine = [t for t in texts if t.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(APPENDS)]
