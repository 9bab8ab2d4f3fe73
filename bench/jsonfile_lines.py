"""Benchmark: JsonFileStore with one long line, a message of 20 / 50 / 100 MB.

A segment file holds a message per line, so one message of many megabytes is one
line. For each size, in a fresh store: write that message (`append_rows`), read it back
(`read_rows`, then parsing it as a `Message`, as loading a thread does), locate a
message written after it (the message-id index reads every line) and append a row
after it (the append reads the last line's position). Each figure is the median of
REPEATS runs. Reading was quadratic in the line's length before (fixed 64 KiB reads
joined one by one; appends after it probed back 4 KiB at a time); `BEFORE` keeps what
that code measured, on the same machine, for comparison.

Run: .venv/bin/python bench/jsonfile_lines.py [MB ...]   (default 20 50 100; writes
bench/results/jsonfile_lines.md)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio

from agent_threads import JsonFileStore, Message, Row

SIZES_MB = (20, 50, 100)
REPEATS = 3
RESULTS = Path(__file__).parent / "results" / "jsonfile_lines.md"

BEFORE: dict[int, dict[str, float]] = {
    20: {"write": 0.11, "read": 10.40, "parse": 10.30, "locate": 2.13, "append": 38.74},
    50: {"write": 0.34, "read": 87.47, "parse": 88.62, "locate": 20.07, "append": 306.19},
}
"""Seconds this benchmark measured (one run each) with the reading code of commit 2b99ed2,
before reads grew with the line, on the machine of the committed results."""

COLUMNS = {
    "write": "write it",
    "read": "read_rows",
    "parse": "read_rows + parse",
    "locate": "locate a later message",
    "append": "append after it",
}


async def timed(work: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await work()
    return time.perf_counter() - started


async def one_run(directory: Path, message: Message) -> dict[str, float]:
    """Seconds for each operation on a fresh store holding `message` as row 0."""
    row = Row(message.id, message.model_dump_json())
    after = Message.user("after")
    async with JsonFileStore(directory) as store:
        times = {"write": await timed(lambda: store.append_rows("long", 0, [row]))}
        times["read"] = await timed(lambda: store.read_rows("long", 0, 1))

        async def read_and_parse() -> Message:
            (text,) = await store.read_rows("long", 0, 1)
            return Message.model_validate_json(text)

        times["parse"] = await timed(read_and_parse)
        await store.append_rows("other", 0, [Row(after.id, after.model_dump_json())])
    async with JsonFileStore(directory) as store:  # a new index: it reads every line
        times["locate"] = await timed(lambda: store.locate_message(after.id))
        times["append"] = await timed(
            lambda: store.append_rows("long", 1, [Row(after.id, after.model_dump_json())])
        )
    return times


async def measure(megabytes: int) -> dict[str, float]:
    message = Message.user("x" * (megabytes * 1_000_000))
    runs = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as directory:
            runs.append(await one_run(Path(directory), message))
    return {name: statistics.median(run[name] for run in runs) for name in COLUMNS}


def table(results: dict[int, dict[str, float]]) -> str:
    header = "| line | " + " | ".join(f"{title} (s)" for title in COLUMNS.values()) + " |"
    lines = [header, "|---|" + "---:|" * len(COLUMNS)]
    for megabytes, times in results.items():
        cells = [f"{times[name]:.2f}" for name in COLUMNS]
        lines.append(f"| {megabytes} MB | " + " | ".join(cells) + " |")
        before = BEFORE.get(megabytes, {})
        if before:
            old = [f"{before[name]:.2f}" if name in before else "" for name in COLUMNS]
            lines.append(f"| {megabytes} MB, *before* | " + " | ".join(old) + " |")
    return "\n".join(lines)


def verdict(results: dict[int, dict[str, float]]) -> str:
    per_100 = max(times["parse"] / megabytes * 100 for megabytes, times in results.items())
    passed = "PASS" if per_100 < 1.0 else "FAIL"
    return (
        f"Target: reading and parsing take under 1 s per 100 MB of line: {per_100:.2f} s, {passed}"
    )


async def main(sizes: list[int]) -> None:
    results = {}
    for megabytes in sizes:
        results[megabytes] = await measure(megabytes)
        print(megabytes, "MB:", {k: round(v, 3) for k, v in results[megabytes].items()})
    text = (
        "# JsonFileStore: one long line\n\n"
        f"One message of N MB (one line of its segment file) in a fresh JsonFileStore; median"
        f" of {REPEATS} runs, in seconds. `read_rows + parse` also parses the row as a"
        " `Message`, as loading a thread does; `locate` builds the message-id index of a"
        " store just opened (it reads every line); `append after it` finds the position of"
        " the last line first. Rows marked *before* were measured at commit 2b99ed2, when"
        " reading a line took time quadratic in its length (one run each; 100 MB: not"
        " measured, it would take an hour).\n\n"
        f"{table(results)}\n\n{verdict(results)}\n"
    )
    print(text)
    if list(results) == list(SIZES_MB):
        RESULTS.write_text(text)


if __name__ == "__main__":
    anyio.run(main, [int(arg) for arg in sys.argv[1:]] or list(SIZES_MB))
