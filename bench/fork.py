"""Benchmark: fork cost against thread length, next to a deepcopy of the message list.

Run: .venv/bin/python bench/fork.py   (writes bench/results/fork.md)
"""

from __future__ import annotations

import copy
import statistics
import time
from pathlib import Path

import anyio

from agent_threads import ChatMessageThread, MemoryStore, Message, Usage

SIZES = (1_000, 10_000, 100_000)
FORK_REPEATS = 300
COPY_REPEATS = 3
RESULTS = Path(__file__).parent / "results" / "fork.md"


def message(i: int) -> Message:
    if i % 2:
        return Message.assistant(
            f"answer {i} " + "lorem ipsum " * 20, usage=Usage(output_tokens=60)
        )
    return Message.user(f"question {i} " + "dolor sit amet " * 10)


async def build(size: int) -> ChatMessageThread:
    thread = await ChatMessageThread.create(MemoryStore(), title=f"bench-{size}")
    for start in range(0, size, 1_000):
        await thread.on_new_messages([message(i) for i in range(start, min(size, start + 1_000))])
    return thread


async def median_fork(thread: ChatMessageThread) -> float:
    middle = thread.messages[len(thread.messages) // 2].id
    timings = []
    for i in range(FORK_REPEATS):
        began = time.perf_counter()
        await thread.fork(message_id=middle if i % 2 else None)
        timings.append(time.perf_counter() - began)
    return statistics.median(timings)


def median_deepcopy(messages: list[Message]) -> float:
    timings = []
    for _ in range(COPY_REPEATS):
        began = time.perf_counter()
        copy.deepcopy(messages)
        timings.append(time.perf_counter() - began)
    return statistics.median(timings)


async def main() -> None:
    rows = []
    for size in SIZES:
        thread = await build(size)
        fork_s = await median_fork(thread)
        copy_s = median_deepcopy(list(thread.messages))
        rows.append((size, fork_s, copy_s))
    base_fork = rows[0][1]
    lines = [
        "| N messages | fork median (µs) | deepcopy median (ms) | deepcopy / fork"
        " | fork vs N=1,000 |",
        "|---:|---:|---:|---:|---:|",
    ]
    for size, fork_s, copy_s in rows:
        lines.append(
            f"| {size:,} | {fork_s * 1e6:,.1f} | {copy_s * 1e3:,.1f} | {copy_s / fork_s:,.0f}x"
            f" | {fork_s / base_fork:.2f}x |"
        )
    size, fork_s, copy_s = rows[-1]
    verdict = [
        "",
        f"Target 1: fork at 100,000 within 2x of fork at 1,000: {fork_s / base_fork:.2f}x"
        f" -> {'PASS' if fork_s / base_fork <= 2 else 'FAIL'}",
        f"Target 2: at least 1,000x faster than deepcopy at 100,000: {copy_s / fork_s:,.0f}x"
        f" -> {'PASS' if copy_s / fork_s >= 1000 else 'FAIL'}",
        "",
        f"MemoryStore, fork median of {FORK_REPEATS} forks (half whole, half at the middle"
        f" message); deepcopy median of {COPY_REPEATS}.",
    ]
    table = "\n".join(["# Fork benchmark", "", *lines, *verdict]) + "\n"
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(table, encoding="utf-8")
    print(table)


if __name__ == "__main__":
    anyio.run(main)
