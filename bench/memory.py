"""Benchmark: memory of one handle appending 100,000 messages, lazy against eager, and of
an eager load of 200,000 messages against their JSON.

A lazy handle (`load(..., lazy=True)`) keeps only its newest messages in memory (about
`LAZY_CACHE_LIMIT`), so its memory must stay flat as it appends; an eager handle holds
the whole thread by design. Memory is what `tracemalloc` counts as allocated by Python
while the handle appends on SQLiteStore, 10 messages per call.

The eager load (`ChatMessageThread.load(id, store=...)`) of a thread of `LOAD_TOTAL`
messages of ~560 bytes of JSON, written 100 per call, is measured the same way, from
before the load until the handle holds them all: its peak must stay within
`LOAD_TARGET` times the messages' JSON bytes (`model_dump_json()`, UTF-8).

Run: .venv/bin/python bench/memory.py   (writes bench/results/memory.md)
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import anyio
from pydantic import BaseModel

from agent_threads import ChatMessageThread, Message, SQLiteStore, Usage
from agent_threads.threads.chat import LAZY_CACHE_LIMIT

TOTAL = 100_000
BATCH = 10
MARKS = (10_000, 50_000, 100_000)
LOAD_TOTAL = 200_000
LOAD_BATCH = 100
LOAD_TARGET = 2.5
RESULTS = Path(__file__).parent / "results" / "memory.md"


def batch(start: int) -> list[Message]:
    return [
        Message.user(f"message {i} " + "lorem ipsum " * 10) for i in range(start, start + BATCH)
    ]


async def run(directory: Path, *, lazy: bool) -> tuple[dict[int, float], float, float]:
    """Held memory (MiB) at each mark, the peak (MiB), and the wall time (s)."""
    async with SQLiteStore(directory / f"{'lazy' if lazy else 'eager'}.db") as store:
        created = await ChatMessageThread.create(store)
        handle = await ChatMessageThread.load(created.id, store=store, lazy=lazy)
        del created
        gc.collect()
        tracemalloc.start()
        began = time.perf_counter()
        held: dict[int, float] = {}
        for start in range(0, TOTAL, BATCH):
            await handle.on_new_messages(batch(start))
            if start + BATCH in MARKS:
                gc.collect()
                held[start + BATCH] = tracemalloc.get_traced_memory()[0] / 2**20
        elapsed = time.perf_counter() - began
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
        assert handle.head == TOTAL
        return held, peak, elapsed


@dataclass(frozen=True)
class Load:
    """An eager load: the messages' JSON, what the handle holds, the peak on the way."""

    json_bytes: int
    held: int
    peak: int
    seconds: float
    message_bytes: int
    """What the messages alone take (their objects, each counted once), of `held`."""


def load_message(i: int) -> Message:
    """Message `i`: about 560 bytes of JSON, alternating user and assistant."""
    words = " ".join(_WORDS[(i + k) % len(_WORDS)] for k in range(52))
    if i % 2:
        return Message.assistant(f"answer {i}: {words}", usage=Usage(output_tokens=90))
    return Message.user(f"question {i}: {words}")


_WORDS = ("lorem", "ipsum", "dolor", "sit", "amet", "consectetur", "adipiscing", "elit", "sed")


async def eager_load(directory: Path) -> Load:
    """Peak and held memory of an eager load of `LOAD_TOTAL` messages on SQLiteStore."""
    json_bytes = 0
    async with SQLiteStore(directory / "load.db") as store:
        thread = await ChatMessageThread.create(store)
        for start in range(0, LOAD_TOTAL, LOAD_BATCH):
            batch = [load_message(i) for i in range(start, start + LOAD_BATCH)]
            json_bytes += sum(len(m.model_dump_json().encode()) for m in batch)
            await thread.on_new_messages(batch)
        thread_id = thread.id
    del thread, batch
    async with SQLiteStore(directory / "load.db") as store:
        gc.collect()
        tracemalloc.start()
        began = time.perf_counter()
        handle = await ChatMessageThread.load(thread_id, store=store)
        seconds = time.perf_counter() - began
        held, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert len(handle.messages) == LOAD_TOTAL
        return Load(json_bytes, held, peak, seconds, _object_bytes(handle.messages))


def _object_bytes(messages: Iterable[Message]) -> int:
    """`sys.getsizeof` of every object the messages hold, each counted once."""
    seen: set[int] = set()
    total = 0

    def add(value: object) -> None:
        nonlocal total
        if id(value) not in seen:
            seen.add(id(value))
            total += sys.getsizeof(value)

    for message in messages:
        for model in (message, *message.contents, message.usage):
            if model is None:
                continue
            add(model)
            add(model.__dict__)
            add(model.model_fields_set)
            for value in model.__dict__.values():
                if not isinstance(value, BaseModel | tuple):
                    add(value)
        add(message.contents)
    return total


def load_lines(load: Load) -> list[str]:
    mib = 2**20
    ratio = load.peak / load.json_bytes
    verdict = "PASS" if ratio <= LOAD_TARGET else "FAIL"
    per = LOAD_TOTAL
    return [
        "",
        f"## Eager load of {LOAD_TOTAL:,} messages",
        "",
        f"`ChatMessageThread.load(id, store=SQLiteStore(...))` of a thread of {LOAD_TOTAL:,}"
        f" messages ({load.json_bytes / per:.0f} bytes of JSON each on average, written"
        f" {LOAD_BATCH} per call), in a fresh store client; memory allocated by Python"
        " (tracemalloc) from before the load until it returns.",
        "",
        "| messages' JSON (MiB) | peak (MiB) | peak / JSON | held after (MiB) | held / JSON"
        " | messages alone / JSON | load (s, traced) |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        f"| {load.json_bytes / mib:.1f} | {load.peak / mib:.1f} | {ratio:.2f}x"
        f" | {load.held / mib:.1f} | {load.held / load.json_bytes:.2f}x"
        f" | {load.message_bytes / load.json_bytes:.2f}x | {load.seconds:.1f} |",
        "",
        f"Per message: {load.json_bytes / per:.0f} bytes of JSON; held"
        f" {load.held / per:.0f} bytes, of which the message objects"
        f" {load.message_bytes / per:.0f} (`sys.getsizeof` of the model instances, their"
        " `__dict__`s, the strings, time, contents tuple and metadata dict, each counted"
        " once: an empty metadata dict is one read-only dict all messages share) and the"
        " cache's lists (its message-id index is built on the first lookup, which a load"
        f" does not make) {(load.held - load.message_bytes) / per:.0f}.",
        "",
        f"Target: peak <= {LOAD_TARGET}x the messages' JSON bytes: {verdict}",
        "",
        *EARLIER_LOADS,
    ]


EARLIER_LOADS = (
    "Before loads validated arrays of rows and shared the fields sets (90541d6, same"
    " measure): peak 731.3 MiB (6.82x), held 495.3 MiB (4.62x).",
    "",
    "Before messages shared one read-only empty dict, the cache built its id index on"
    " first lookup and each row array was let go of once decoded (ea8c713, same measure):"
    " peak 287.5 MiB (2.68x), held 284.0 MiB (2.65x).",
)
"""Earlier figures of the eager load, by hand from earlier runs of this benchmark."""


async def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lazy in (True, False):
            held, peak, elapsed = await run(Path(tmp), lazy=lazy)
            rows.append((lazy, held, peak, elapsed))
        load = await eager_load(Path(tmp))
    lines = [
        f"One handle appends {TOTAL:,} messages ({BATCH} per call) on SQLiteStore;"
        f" memory allocated by Python (tracemalloc) while it does. Lazy handles keep about"
        f" {LAZY_CACHE_LIMIT:,} messages.",
        "",
        "| handle | "
        + " | ".join(f"held at {m:,} (MiB)" for m in MARKS)
        + f" | peak (MiB) | {MARKS[-1]:,} vs {MARKS[0]:,} | wall (s) |",
        "|---|" + "---:|" * (len(MARKS) + 3),
    ]
    for lazy, held, peak, elapsed in rows:
        growth = held[MARKS[-1]] / held[MARKS[0]]
        cells = " | ".join(f"{held[m]:.1f}" for m in MARKS)
        name = "lazy" if lazy else "eager"
        lines.append(f"| {name} | {cells} | {peak:.1f} | {growth:.2f}x | {elapsed:.1f} |")
    lazy_growth = rows[0][1][MARKS[-1]] / rows[0][1][MARKS[0]]
    verdict = "PASS" if lazy_growth < 1.5 else "FAIL"
    lines += ["", f"Target: a lazy handle's memory stays flat (< 1.5x from 10k to 100k): {verdict}"]
    lines += load_lines(load)
    table = "\n".join(lines)
    print(table)
    RESULTS.write_text(f"# Memory: lazy handles that keep appending, eager loads\n\n{table}\n")


if __name__ == "__main__":
    anyio.run(main)
