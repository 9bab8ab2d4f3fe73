"""Server processes on one shared store take appends to one thread together.

`agent-threads serve` runs twice, on two free loopback ports, over one PostgresStore (a
schema of this test's own, dropped afterwards). Eight HTTP clients, four on each server,
append 100 messages each to one thread at the same time: every answer is 201, the
thread ends with exactly 800 messages, and each client's messages are in its order. The
same holds for one server with `--workers 2` (two processes behind one port), on
PostgreSQL and on Redis (a key prefix of the test's own, deleted afterwards).
"""

from __future__ import annotations

import re
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
import pytest
import redis.asyncio as redis

from tests.stores.conftest import POSTGRES_DSN, REDIS_URL, needs_server

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
async def _server(store_url: str, log: Path, *, workers: int = 1) -> AsyncIterator[str]:
    """`agent-threads serve` in a process of its own; its base URL once it answers."""
    port = _free_port()
    command = [str(Path(sys.executable).with_name("agent-threads")), "serve", "--store", store_url]
    command += ["--port", str(port), "--api-key", f"acme:{KEY}", "--workers", str(workers)]
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
async def _prefix() -> AsyncIterator[str]:
    """A fresh Redis key prefix's store URL; its keys are deleted afterwards."""
    prefix = f"test-{uuid.uuid4().hex}"
    try:
        yield f"{REDIS_URL}?prefix={prefix}"
    finally:
        async with redis.Redis.from_url(REDIS_URL) as client:
            keys = [key async for key in client.scan_iter(match=f"{prefix}*", count=1000)]
            if keys:
                await client.delete(*keys)


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


async def _race(urls: tuple[str, str]) -> None:
    """Eight clients, alternating between `urls`, append to one thread; all kept, in order."""
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}) as client:
        created = await client.post(f"{urls[0]}/api/threads", json={"id": "shared"})
        assert created.status_code == 201, created.text
    failures: list[str] = []
    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for n in range(CLIENTS):
                group.start_soon(_append_all, urls[n % 2], "shared", n, failures)
    assert failures == []
    texts = await _texts(urls[1], "shared")
    assert len(texts) == CLIENTS * APPENDS == len(set(texts))
    for n in range(CLIENTS):
        mine = [t for t in texts if t.startswith(f"{n}:")]
        assert mine == [f"{n}:{i}" for i in range(APPENDS)]


@needs_server("postgres")
async def test_two_servers_on_one_postgres_store_keep_every_append_in_order(
    tmp_path: Path,
) -> None:
    async with (
        _schema() as store_url,
        _server(store_url, tmp_path / "first.log") as first,
        _server(store_url, tmp_path / "second.log") as second,
    ):
        await _race((first, second))


def _worker_pids(log: Path) -> set[str]:
    """The processes that logged serving (uvicorn: "Started server process [PID]")."""
    return set(re.findall(r"Started server process \[(\d+)\]", log.read_text()))


@pytest.mark.parametrize(
    "kind", [pytest.param(k, marks=needs_server(k)) for k in ("postgres", "redis")]
)
async def test_one_server_with_two_workers_keeps_every_append_in_order(
    tmp_path: Path, kind: str
) -> None:
    log = tmp_path / "workers.log"
    async with (
        _schema() if kind == "postgres" else _prefix() as store_url,
        _server(store_url, log, workers=2) as url,
    ):
        await _race((url, url))
    assert len(_worker_pids(log)) == 2, log.read_text()
