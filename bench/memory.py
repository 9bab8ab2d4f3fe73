"""Benchmark: memory of one handle appending 100,000 messages, lazy against eager.

A lazy handle (`load(..., lazy=True)`) keeps only its newest messages in memory (about
`LAZY_CACHE_LIMIT`), so its memory must stay flat as it appends; an eager handle holds
the whole thread by design. Memory is what `tracemalloc` counts as allocated by Python
while the handle appends on SQLiteStore, 10 messages per call.

Run: .venv/bin/python bench/memory.py   (writes bench/results/memory.md)
"""

from __future__ import annotations

import gc
import tempfile
import time
import tracemalloc
from pathlib import Path

import anyio

from agent_threads import ChatMessageThread, Message, SQLiteStore
from agent_threads.threads.chat import LAZY_CACHE_LIMIT

TOTAL = 100_000
BATCH = 10
MARKS = (10_000, 50_000, 100_000)
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


async def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for lazy in (True, False):
            held, peak, elapsed = await run(Path(tmp), lazy=lazy)
            rows.append((lazy, held, peak, elapsed))
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
    table = "\n".join(lines)
    print(table)
    RESULTS.write_text(f"# Memory of a lazy handle that keeps appending\n\n{table}\n")


if __name__ == "__main__":
    anyio.run(main)
