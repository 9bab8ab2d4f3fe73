"""Benchmark: the HTTP service on localhost against the same operations in-process.

`agent-threads serve` runs in a process of its own over a SQLite file, on a loopback port;
two clients call it: aiohttp, and httpx (what HttpStore uses; its own cost per request
is several times aiohttp's, so the service's cost reads best through the first). In this
process, the library does the same operations on another SQLite file of the same shape.
Three operations, their calls interleaved (one in-process, one over HTTP with each
client, and again) so that a busy machine slows all alike:

- append: one message to a thread of 100 (`POST /api/threads/{id}/messages`; in-process
  `on_new_messages` on a handle held, and on a handle loaded first, as the route does);
- fork: the whole thread (`POST /api/threads/{id}/fork`; `thread.fork()`);
- list: the 20 threads updated last (`GET /api/threads?limit=20`; `list_threads`).

Then throughput: 1, 8 and 32 HTTP clients at once, each appending to a thread of its own,
for a bounded number of requests each. Bounded in time: about a minute.

Run: .venv/bin/python bench/service.py   (writes bench/results/service.md)
"""

from __future__ import annotations

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

import aiohttp
import anyio
import httpx
import uvicorn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: find bench/

from agent_threads import ChatMessageThread, Message, SQLiteStore
from agent_threads.threads.listing import list_threads
from bench.machine import machine_line

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


async def floor(url: str) -> dict[str, tuple[float, float]]:
    """p50 and p99 (µs) of a one-message append body POSTed to `noop_app`, per client."""
    body = {"messages": [text(0)]}
    async with (
        httpx.AsyncClient(base_url=url, timeout=60) as client,
        aiohttp.ClientSession(url) as lean,
    ):
        calls = {
            "aiohttp": lambda: lean_post(lean, "/noop", body),
            "httpx": lambda: ok(client.post("/noop", json=body)),
        }
        samples: dict[str, list[float]] = {name: [] for name in calls}
        for round_ in range(310):
            for name, call in calls.items():
                took = await timed(call)
                if round_ >= 10:
                    samples[name].append(took)
        return {name: quantiles(taken) for name, taken in samples.items()}


async def lean_post(session: aiohttp.ClientSession, path: str, body: dict[str, Any]) -> None:
    async with session.post(path, json=body) as response:
        response.raise_for_status()
        await response.read()


async def lean_get(session: aiohttp.ClientSession, path: str, params: dict[str, Any]) -> None:
    async with session.get(path, params=params) as response:
        response.raise_for_status()
        await response.read()


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


CLIENT_NAMES = ("aiohttp", "httpx")


class Sides:
    """The same thread and operations in-process and over HTTP (through each client)."""

    def __init__(
        self, store: SQLiteStore, client: httpx.AsyncClient, lean: aiohttp.ClientSession
    ) -> None:
        self.store = store
        self.client = client
        self.lean = lean
        self.thread: ChatMessageThread | None = None
        self.thread_id = ""
        self.n = 0

    async def setup(self) -> None:
        self.thread = await ChatMessageThread.create(self.store, id="local")
        await self.thread.on_new_messages([message(i) for i in range(HISTORY)])
        body = {"id": "remote", "messages": [text(i) for i in range(HISTORY)]}
        await ok(self.client.post("/api/threads", json=body))
        self.thread_id = "remote"

    def calls(self) -> dict[str, tuple[Call, Call, Call]]:
        """Per operation: in-process, over HTTP with aiohttp, over HTTP with httpx."""
        assert self.thread is not None
        thread = self.thread
        appends = f"/api/threads/{self.thread_id}/messages"

        async def local_append() -> None:
            self.n += 1
            await thread.on_new_messages([message(self.n)])

        async def local_loaded_append() -> None:
            self.n += 1
            handle = await ChatMessageThread.load("local", store=self.store, lazy=True)
            await handle.on_new_messages([message(self.n)])

        async def lean_append() -> None:
            self.n += 1
            await lean_post(self.lean, appends, {"messages": [text(self.n)]})

        async def httpx_append() -> None:
            self.n += 1
            await ok(self.client.post(appends, json={"messages": [text(self.n)]}))

        async def local_list() -> None:
            await list_threads(self.store, limit=20)

        fork = f"/api/threads/{self.thread_id}/fork"
        return {
            "append": (local_append, lean_append, httpx_append),
            "append (loaded)": (local_loaded_append, lean_append, httpx_append),
            "fork": (
                thread.fork,
                lambda: lean_post(self.lean, fork, {}),
                lambda: ok(self.client.post(fork, json={})),
            ),
            "list": (
                local_list,
                lambda: lean_get(self.lean, "/api/threads", {"limit": 20}),
                lambda: ok(self.client.get("/api/threads", params={"limit": 20})),
            ),
        }


Quantiles = tuple[float, float]
Row_ = tuple[str, Quantiles, dict[str, Quantiles]]


async def compare(sides: Sides) -> list[Row_]:
    rows = []
    for name, (local, *remotes) in sides.calls().items():
        count = CALLS[name.split()[0]]
        for _ in range(10):  # warm all up
            await local()
            for remote in remotes:
                await remote()
        local_s: list[float] = []
        remote_s: list[list[float]] = [[] for _ in remotes]
        for _ in range(count):
            local_s.append(await timed(local))
            for taken, remote in zip(remote_s, remotes, strict=True):
                taken.append(await timed(remote))
        by_client = {c: quantiles(t) for c, t in zip(CLIENT_NAMES, remote_s, strict=True)}
        rows.append((name, quantiles(local_s), by_client))
    return rows


async def throughput(url: str, clients: int) -> tuple[float, float, float]:
    """Requests per second, p50 and p99 (µs) of appends by `clients` (aiohttp) at once."""
    each = max(20, REQUESTS_PER_LEVEL // clients)
    latencies: list[float] = []

    async def client(number: int) -> None:
        async with aiohttp.ClientSession(url) as http:
            thread_id = f"load-{clients}-{number}"
            await lean_post(http, "/api/threads", {"id": thread_id})
            await start.wait()
            path = f"/api/threads/{thread_id}/messages"
            for i in range(each):
                body = {"messages": [text(i)]}
                latencies.append(await timed(partial(lean_post, http, path, body)))

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
    rows: list[Row_],
    levels: list[tuple[int, tuple[float, float, float]]],
    noop: dict[str, Quantiles],
    seconds: float,
) -> str:
    head = "| operation | in-process p50 (µs) | in-process p99 (µs) |"
    rule = "|---|---:|---:|"
    for name in CLIENT_NAMES:
        head += f" HTTP, {name}: p50 (µs) | p99 (µs) | / in-process (p50) |"
        rule += "---:|---:|---:|"
    lines = ["# Service benchmark: HTTP on localhost against in-process", "", head, rule]
    for name, (lp50, lp99), by_client in rows:
        cells = "".join(
            f" {p50:,.0f} | {p99:,.0f} | {p50 / lp50:.2f}x |" for p50, p99 in by_client.values()
        )
        lines.append(f"| {name} | {lp50:,.0f} | {lp99:,.0f} |{cells}")
    floors = "".join(f" {p50:,.0f} | {p99:,.0f} | |" for p50, p99 in noop.values())
    lines.append(f"| HTTP alone: a POST to a no-op app | | |{floors}")
    verdicts = []
    for name, (lp50, _), by_client in rows:
        if name.startswith("append"):
            for client, (rp50, _) in by_client.items():
                ratio = rp50 / lp50
                verdicts.append(
                    f"- {client} client, against {name} in-process: {ratio:.2f}x"
                    f" -> {'PASS' if ratio <= TARGET else 'FAIL'}"
                )
    lines += [
        "",
        f"Target: HTTP append p50 at most {TARGET:.0f}x in-process:",
        *verdicts,
        "",
        "Throughput (aiohttp clients):",
        "",
        "| clients | appends / s | p50 (µs) | p99 (µs) |",
        "|---:|---:|---:|---:|",
    ]
    for clients, (rate, p50, p99) in levels:
        lines.append(f"| {clients} | {rate:,.0f} | {p50:,.0f} | {p99:,.0f} |")
    lines += [
        "",
        "`agent-threads serve --store sqlite:///...` (one uvicorn worker, its own process;"
        " uvicorn on httptools and uvloop, as the `server` extra installs them) on"
        " 127.0.0.1, aiohttp and httpx clients in this process, one connection each, kept"
        " alive; in-process: SQLiteStore in this process."
        f" Calls interleaved: {CALLS['append']} appends of one message to a thread of"
        f" {HISTORY}+ (in-process on a handle held, and loaded per call), through each"
        f" client; {CALLS['fork']} whole-thread forks, {CALLS['list']} lists of 20 threads."
        " The no-op row is what each client and the HTTP server alone cost: the difference"
        " between the clients is the client's own cost (httpx's is several times"
        f" aiohttp's). Throughput: each client appends to its own thread,"
        f" {REQUESTS_PER_LEVEL} requests per level (at least 20 per client).",
        "",
        f"{machine_line()} The run took {seconds:.0f} s; the machine is shared, so absolute"
        " numbers vary between runs.",
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
            aiohttp.ClientSession(url) as lean,
        ):
            sides = Sides(store, client, lean)
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
