"""Benchmark: the HTTP service on localhost against the same operations in-process.

`agent-threads serve` runs in a process of its own over a SQLite file, on a loopback port;
an httpx client calls it. In this process, the library does the same operations on
another SQLite file of the same shape. Three operations, their calls interleaved (one
in-process, one over HTTP, and again) so that a busy machine slows both alike:

- append: one message to a thread of 100 (`POST /api/threads/{id}/messages`; in-process
  `on_new_messages` on a handle held, and on a handle loaded first, as the route does);
- fork: the whole thread (`POST /api/threads/{id}/fork`; `thread.fork()`);
- list: the 20 threads updated last (`GET /api/threads?limit=20`; `list_threads`).

Then throughput: 1, 8 and 32 HTTP clients at once, each appending to a thread of its own,
for a bounded number of requests each. Bounded in time: about a minute.

Run: .venv/bin/python bench/service.py   (writes bench/results/service.md)
"""

from __future__ import annotations

import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import httpx
import uvicorn

from agent_threads import ChatMessageThread, Message, SQLiteStore
from agent_threads.threads.listing import list_threads

RESULTS = Path(__file__).parent / "results" / "service.md"
CALLS = {"append": 600, "fork": 200, "list": 200}
HISTORY = 100
CLIENTS = (1, 8, 32)
REQUESTS_PER_LEVEL = 640
TARGET = 3.0

Call = Callable[[], Awaitable[object]]


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


async def noop_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An ASGI app answering 201 `{}` at once: what HTTP alone costs (the floor)."""
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": b"{}"})


@asynccontextmanager
async def serve(path: Path | None) -> AsyncIterator[str]:
    """`agent-threads serve` over a SQLite file (None: `noop_app`); its URL once it answers."""
    port = _free_port()
    if path is None:
        command = [sys.executable, __file__, "--noop", str(port)]
    else:
        command = [str(Path(sys.executable).with_name("agent-threads")), "serve"]
        command += ["--store", f"sqlite:///{path}", "--port", str(port)]
    process = await anyio.open_process(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{port}"
    try:
        with anyio.fail_after(30):
            while True:  # a process to start: nothing to wait on but its port
                if await _answers(url):
                    break
                await anyio.sleep(0.1)
        yield url
    finally:
        process.terminate()
        await process.wait()


async def floor(url: str) -> tuple[float, float]:
    """p50 and p99 (µs) of a one-message append body POSTed to `noop_app`."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        body = {"messages": [text(0)]}
        for _ in range(10):
            await ok(client.post("/noop", json=body))
        return quantiles(
            [await timed(lambda: ok(client.post("/noop", json=body))) for _ in range(300)]
        )


def text(i: int) -> dict[str, Any]:
    return {"role": "user", "contents": [{"type": "text", "text": f"message {i} " + "x" * 80}]}


def message(i: int) -> Message:
    return Message.user(f"message {i} " + "x" * 80)


async def timed(call: Call) -> float:
    began = time.perf_counter()
    await call()
    return time.perf_counter() - began


def quantiles(samples: list[float]) -> tuple[float, float]:
    """p50 and p99, in microseconds."""
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1e6, cuts[98] * 1e6


async def ok(answer: Awaitable[httpx.Response]) -> httpx.Response:
    response = await answer
    response.raise_for_status()
    return response


async def post(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> httpx.Response:
    return await ok(client.post(path, json=body))


class Sides:
    """The same thread and operations in-process and over HTTP."""

    def __init__(self, store: SQLiteStore, client: httpx.AsyncClient) -> None:
        self.store = store
        self.client = client
        self.thread: ChatMessageThread | None = None
        self.thread_id = ""
        self.n = 0

    async def setup(self) -> None:
        self.thread = await ChatMessageThread.create(self.store, id="local")
        await self.thread.on_new_messages([message(i) for i in range(HISTORY)])
        body = {"id": "remote", "messages": [text(i) for i in range(HISTORY)]}
        await ok(self.client.post("/api/threads", json=body))
        self.thread_id = "remote"

    def calls(self) -> dict[str, tuple[Call, Call]]:
        assert self.thread is not None
        thread = self.thread

        async def local_append() -> None:
            self.n += 1
            await thread.on_new_messages([message(self.n)])

        async def local_loaded_append() -> None:
            self.n += 1
            handle = await ChatMessageThread.load("local", store=self.store, lazy=True)
            await handle.on_new_messages([message(self.n)])

        async def remote_append() -> None:
            self.n += 1
            body = {"messages": [text(self.n)]}
            await ok(self.client.post(f"/api/threads/{self.thread_id}/messages", json=body))

        async def local_list() -> None:
            await list_threads(self.store, limit=20)

        return {
            "append": (local_append, remote_append),
            "append (loaded)": (local_loaded_append, remote_append),
            "fork": (
                thread.fork,
                lambda: ok(self.client.post("/api/threads/remote/fork", json={})),
            ),
            "list": (local_list, lambda: ok(self.client.get("/api/threads", params={"limit": 20}))),
        }


async def compare(sides: Sides) -> list[tuple[str, tuple[float, float], tuple[float, float]]]:
    rows = []
    for name, (local, remote) in sides.calls().items():
        count = CALLS[name.split()[0]]
        for _ in range(10):  # warm both up
            await local()
            await remote()
        local_s, remote_s = [], []
        for _ in range(count):
            local_s.append(await timed(local))
            remote_s.append(await timed(remote))
        rows.append((name, quantiles(local_s), quantiles(remote_s)))
    return rows


async def throughput(url: str, clients: int) -> tuple[float, float, float]:
    """Requests per second, p50 and p99 (µs) of appends by `clients` at once."""
    each = max(20, REQUESTS_PER_LEVEL // clients)
    latencies: list[float] = []

    async def client(number: int) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            thread_id = f"load-{clients}-{number}"
            await ok(http.post("/api/threads", json={"id": thread_id}))
            await start.wait()
            for i in range(each):
                path = f"/api/threads/{thread_id}/messages"
                latencies.append(await timed(partial(post, http, path, {"messages": [text(i)]})))

    start = anyio.Event()
    async with anyio.create_task_group() as group:
        for number in range(clients):
            group.start_soon(client, number)
        await anyio.sleep(0.5)  # every client has made its thread
        began = time.perf_counter()
        start.set()
    elapsed = time.perf_counter() - began
    p50, p99 = quantiles(latencies)
    return len(latencies) / elapsed, p50, p99


def report(
    rows: list[tuple[str, tuple[float, float], tuple[float, float]]],
    levels: list[tuple[int, tuple[float, float, float]]],
    noop: tuple[float, float],
    seconds: float,
) -> str:
    lines = [
        "# Service benchmark: HTTP on localhost against in-process",
        "",
        "| operation | in-process p50 (µs) | in-process p99 (µs) | HTTP p50 (µs) | HTTP p99 (µs)"
        " | HTTP / in-process (p50) |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, (lp50, lp99), (rp50, rp99) in rows:
        lines.append(
            f"| {name} | {lp50:,.0f} | {lp99:,.0f} | {rp50:,.0f} | {rp99:,.0f}"
            f" | {rp50 / lp50:.2f}x |"
        )
    lines.append(f"| HTTP alone: a POST to a no-op app | | | {noop[0]:,.0f} | {noop[1]:,.0f} | |")
    verdicts = []
    for name, (lp50, _), (rp50, _) in rows:
        if name.startswith("append"):
            ratio = rp50 / lp50
            verdicts.append(
                f"- against {name} in-process: {ratio:.2f}x"
                f" -> {'PASS' if ratio <= TARGET else 'FAIL'}"
            )
    lines += [
        "",
        f"Target: HTTP append p50 at most {TARGET:.0f}x in-process:",
        *verdicts,
        "",
        "| clients | appends / s | p50 (µs) | p99 (µs) |",
        "|---:|---:|---:|---:|",
    ]
    for clients, (rate, p50, p99) in levels:
        lines.append(f"| {clients} | {rate:,.0f} | {p50:,.0f} | {p99:,.0f} |")
    lines += [
        "",
        "`agent-threads serve --store sqlite:///...` (one uvicorn worker, its own process) on"
        " 127.0.0.1, httpx clients in this process; in-process: SQLiteStore in this process."
        f" Calls interleaved: {CALLS['append']} appends of one message to a thread of"
        f" {HISTORY}+ (in-process on a handle held, and loaded per call as the route does),"
        f" {CALLS['fork']} whole-thread forks, {CALLS['list']} lists of 20 threads. Throughput:"
        f" each client appends to its own thread, {REQUESTS_PER_LEVEL} requests per level"
        " (at least 20 per client).",
        f"Machine: {platform.machine()}, Python {platform.python_version()}, run took"
        f" {seconds:.0f} s; the machine is shared, so absolute numbers vary between runs.",
    ]
    return "\n".join(lines) + "\n"


async def main() -> None:
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        async with (
            serve(root / "served.db") as url,
            SQLiteStore(root / "local.db") as store,
            httpx.AsyncClient(base_url=url, timeout=60) as client,
        ):
            sides = Sides(store, client)
            await sides.setup()
            rows = await compare(sides)
            levels = [(n, await throughput(url, n)) for n in CLIENTS]
        async with serve(None) as noop_url:
            noop = await floor(noop_url)
    text_out = report(rows, levels, noop, time.perf_counter() - began)
    RESULTS.write_text(text_out)
    print(text_out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--noop"]:
        uvicorn.run(noop_app, host="127.0.0.1", port=int(sys.argv[2]), log_level="warning")
    else:
        anyio.run(main)
