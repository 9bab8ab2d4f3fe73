"""`agent-threads serve` end to end: a real server process on a free loopback port."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

COMMAND = [sys.executable, "-m", "agent_threads.cli"]
KEY = "e2e-key"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENT_THREADS_")}


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[tuple[str, Path]]:
    """The base URL of a served SQLite store (tenant acme, key KEY) and its log file."""
    port = free_port()
    log = tmp_path / "serve.log"
    command = [*COMMAND, "serve", "--store", "sqlite:///threads.db", "--port", str(port)]
    command += ["--api-key", f"acme:{KEY}"]
    with log.open("wb") as sink:
        process = await anyio.open_process(
            command, cwd=tmp_path, stdout=sink, stderr=subprocess.STDOUT, env=environment()
        )
    url = f"http://127.0.0.1:{port}"
    try:
        with anyio.fail_after(30):
            while True:
                try:
                    async with httpx.AsyncClient() as probe:
                        await probe.get(f"{url}/openapi.json")
                    break
                except httpx.TransportError:
                    assert process.returncode is None, log.read_text()
                    await anyio.sleep(0.1)
        yield url, log
    finally:
        process.terminate()
        with anyio.fail_after(15):
            await process.wait()
        await process.aclose()


async def test_a_served_store_answers_and_streams_new_messages(
    server: tuple[str, Path], tmp_path: Path
) -> None:
    url, log = server
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=10) as client:
        created = await client.post("/api/threads", json={"id": "live", "title": "live"})
        assert created.status_code == 201
        received: list[dict[str, object]] = []

        async def follow() -> None:
            async with client.stream("GET", "/api/threads/live/events") as stream:
                async for line in stream.aiter_lines():
                    if line.startswith("data: "):
                        received.append(json.loads(line[len("data: ") :]))
                        if len(received) == 2:
                            return

        with anyio.fail_after(20):
            async with anyio.create_task_group() as group:
                group.start_soon(follow)
                await anyio.sleep(0.5)  # the stream is open: what comes now is new
                body = {
                    "messages": [
                        {"role": "user", "contents": [{"type": "text", "text": t}]}
                        for t in ("one", "two")
                    ]
                }
                appended = await client.post("/api/threads/live/messages", json=body)
                assert appended.status_code == 201
        assert [m["contents"] for m in received] == [
            [{"type": "text", "text": "one"}],
            [{"type": "text", "text": "two"}],
        ]
        wrong = {"Authorization": "Bearer wrong"}
        assert (await client.get("/api/threads/live", headers=wrong)).status_code == 401
    assert (tmp_path / "threads.db").exists()
    lines = log.read_text()
    assert "POST /api/threads 201" in lines and "tenant=acme" in lines


def test_serve_refuses_other_addresses_without_keys_and_bad_urls(tmp_path: Path) -> None:
    for extra, says in (
        (["--host", "0.0.0.0"], "loopback"),
        (["--store", "ftp://x"], "unknown scheme 'ftp'"),
        (["--api-key", "no-colon"], "TENANT:KEY"),
    ):
        done = subprocess.run(
            [*COMMAND, "serve", *extra],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            env=environment(),
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert says in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
