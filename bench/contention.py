"""Benchmark: concurrent writers on one thread (and on threads of their own), default settings.

For each store: W writers (1, 4, 16, 32), each with its own thread handle, append one
message per call to the same thread, as fast as they can; then 32 writers on 32 different
threads. Writers share up to four clients of the store (connections, as several app
servers would); every write uses the default retry policy, so a lost race waits and tries
again. Reports appends per second over all writers, the p50 and p99 latency of one
append (waits for lost races included), and errors (there must be none).

Run: .venv/bin/python bench/contention.py   (writes bench/results/contention.md)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: find bench/

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    MemoryStore,
    Message,
    ThreadStore,
)
from bench.stores import STORES, BenchStore


async def _no_size(directory: Path, store: ThreadStore) -> int:
    return 0


MEMORY = BenchStore("MemoryStore", lambda directory: MemoryStore(), _no_size)
"""One client only: a MemoryStore lives in its process, so writers share the one."""

WRITERS = (1, 4, 16, 32)
APPENDS = 25
"""Appends per writer."""
CLIENTS = 4
RESULTS = Path(__file__).parent / "results" / "contention.md"


class Run:
    """The latencies and errors of one configuration."""

    def __init__(self) -> None:
        self.latencies: list[float] = []
        self.errors = 0


async def writer(handle: ChatMessageThread, tag: str, run: Run) -> None:
    for i in range(APPENDS):
        began = time.perf_counter()
        try:
            await handle.on_new_messages([Message.user(f"{tag} {i} " + "lorem ipsum " * 8)])
        except ConflictError:
            run.errors += 1
        run.latencies.append(time.perf_counter() - began)


async def measure(
    bench: BenchStore, directory: Path, writers: int, *, shared: bool
) -> tuple[float, float, float, int]:
    """Appends/s, p50 and p99 latency (ms), errors, for `writers` on one or many threads."""
    run = Run()
    async with AsyncExitStack() as stack:
        clients: list[ThreadStore] = []
        for _ in range(1 if bench is MEMORY else min(writers, CLIENTS)):
            clients.append(await stack.enter_async_context(bench.open(directory)))
        first = await ChatMessageThread.create(clients[0])
        handles = []
        for n in range(writers):
            client = clients[n % len(clients)]
            thread_id = first.id if shared else (await ChatMessageThread.create(client)).id
            handles.append(await ChatMessageThread.load(thread_id, store=client))
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for n, handle in enumerate(handles):
                group.start_soon(writer, handle, f"w{n}", run)
        elapsed = time.perf_counter() - began
        if shared:
            landed = (await ChatMessageThread.load(first.id, store=clients[0])).head
            assert landed == writers * APPENDS - run.errors, (landed, run.errors)
    latencies = sorted(run.latencies)
    p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
    return (
        writers * APPENDS / elapsed,
        statistics.median(latencies) * 1000,
        p99 * 1000,
        run.errors,
    )


async def main() -> None:
    lines = [
        f"Each writer appends {APPENDS} messages, one per call, with the default retry policy;"
        f" writers share up to {CLIENTS} clients of the store.",
        "",
        "| store | writers | threads | appends/s | p50 (ms) | p99 (ms) | errors |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    configs = [(w, True) for w in WRITERS] + [(32, False)]
    for bench in [MEMORY, *STORES]:
        for writers, shared in configs:
            with tempfile.TemporaryDirectory() as tmp:
                directory = Path(tmp)
                try:
                    rate, p50, p99, errors = await measure(bench, directory, writers, shared=shared)
                finally:
                    if bench.discard is not None:
                        await bench.discard(directory)
            where = "one" if shared else "one each"
            row = f"| {bench.name} | {writers} | {where} | {rate:,.0f} | {p50:.1f} | {p99:.1f}"
            lines.append(f"{row} | {errors} |")
            print(lines[-1], flush=True)
    table = "\n".join(lines)
    print(table)
    RESULTS.write_text(f"# Concurrent writers at default settings\n\n{table}\n")


if __name__ == "__main__":
    anyio.run(main)
