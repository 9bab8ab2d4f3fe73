"""Benchmark: a context view per step, cached incrementally vs rebuilt from the history.

A run of N steps; each step appends two messages (a tool call and its result every third
step, else a user question and an answer) and asks for a view of max_tokens=8,000 with the
system prompt kept first. The cached view is `thread.view(...)`; the baseline rebuilds the
same view from every message each step (`build_view(await thread.get_messages(), ...)`),
as systems without a cached view do. Only the view calls are timed: the appends are the
same in both.

The baseline is O(history) per step, so it is timed at every k-th step (k = N / 200:
200 samples a run, 20 in each tenth) and its total is k x the sum of those samples. At
each sampled step the two views are checked to be equal.

Run: .venv/bin/python bench/views.py   (writes bench/results/views.md)
"""

from __future__ import annotations

import gc
import statistics
import time
from pathlib import Path

import anyio

from agent_threads import ChatMessageThread, ContextView, MemoryStore, Message, tool_call
from agent_threads.views.context import build_view

SIZES = (1_000, 5_000, 20_000)
MAX_TOKENS = 8_000
SAMPLES = 200
RESULTS = Path(__file__).parent / "results" / "views.md"


def step_messages(i: int) -> list[Message]:
    if i % 3 == 0:
        call = tool_call("search", {"query": f"step {i} sources", "limit": 5})
        return [
            Message.assistant(f"Looking up step {i}.", tool_calls=[call]),
            Message.tool_result(call.call_id, f"result {i}: " + "found text " * 15),
        ]
    return [
        Message.user(f"question {i}: " + "what about this detail " * 5),
        Message.assistant(f"answer {i}: " + "here is what I found " * 8),
    ]


def window_median(samples: list[tuple[int, float]], lo: int, hi: int) -> float:
    return statistics.median(t for step, t in samples if lo <= step < hi)


SYSTEM = Message.system("You are a careful research assistant.")


async def new_thread() -> ChatMessageThread:
    gc.collect()  # start each run clean: the other run's garbage is not timed here
    thread = await ChatMessageThread.create(MemoryStore())
    await thread.on_new_messages([SYSTEM])
    return thread


async def run_cached(
    steps: list[list[Message]],
) -> tuple[list[tuple[int, float]], list[ContextView]]:
    """Time `thread.view` at every step; keep the views of the steps the baseline samples."""
    thread = await new_thread()
    every = max(1, len(steps) // SAMPLES)
    timings: list[tuple[int, float]] = []
    sampled: list[ContextView] = []
    for i, batch in enumerate(steps):
        await thread.on_new_messages(batch)
        began = time.perf_counter()
        view = await thread.view(max_tokens=MAX_TOKENS, keep_first=1)
        timings.append((i, time.perf_counter() - began))
        if i % every == 0:
            sampled.append(view)
    if thread._view_cache().rebuilds != 1:
        raise AssertionError("the cached view was rebuilt from scratch more than once")
    return timings, sampled


async def run_rebuilt(
    steps: list[list[Message]], cached_views: list[ContextView]
) -> list[tuple[int, float]]:
    """Time a from-scratch rebuild at every k-th step; check it equals the cached view."""
    thread = await new_thread()
    every = max(1, len(steps) // SAMPLES)
    timings: list[tuple[int, float]] = []
    for i, batch in enumerate(steps):
        await thread.on_new_messages(batch)
        if i % every == 0:
            began = time.perf_counter()
            view = build_view(await thread.get_messages(), max_tokens=MAX_TOKENS, keep_first=1)
            timings.append((i, time.perf_counter() - began))
            check(cached_views[i // every], view, i)
    return timings


async def run(n: int) -> dict[str, float]:
    steps = [step_messages(i) for i in range(n)]  # the same messages in both runs
    cached, views = await run_cached(steps)
    rebuilt = await run_rebuilt(steps, views)
    every, tenth = max(1, n // SAMPLES), n // 10
    return {
        "n": n,
        "every": every,
        "cached_total": sum(t for _, t in cached),
        "cached_first": window_median(cached, 0, tenth),
        "cached_last": window_median(cached, n - tenth, n),
        "rebuilt_total": every * sum(t for _, t in rebuilt),
        "rebuilt_first": window_median(rebuilt, 0, tenth),
        "rebuilt_last": window_median(rebuilt, n - tenth, n),
        "view_messages": len(views[-1]),
    }


def check(view: ContextView, baseline: ContextView, step: int) -> None:
    if view != baseline:
        raise AssertionError(f"step {step}: the cached view differs from the rebuilt one")


def table(rows: list[dict[str, float]]) -> list[str]:
    lines = [
        "| N steps | view | total (s) | median per step, first 10% (µs)"
        " | median per step, last 10% (µs)"
        " | last / first |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for r in rows:
        for name, key in (("cached", "cached"), ("rebuild", "rebuilt")):
            estimated = " (est.)" if key == "rebuilt" and r["every"] > 1 else ""
            first, last = r[f"{key}_first"], r[f"{key}_last"]
            lines.append(
                f"| {int(r['n']):,} | {name} | {r[f'{key}_total']:,.3f}{estimated}"
                f" | {first * 1e6:,.1f} | {last * 1e6:,.1f} | {last / first:,.2f}x |"
            )
    return lines


def verdicts(rows: list[dict[str, float]]) -> list[str]:
    worst = max(r["cached_last"] / r["cached_first"] for r in rows)
    big = rows[-1]
    speedup = big["rebuilt_total"] / big["cached_total"]
    last_speedup = big["rebuilt_last"] / big["cached_last"]
    return [
        f"Target 1: cached per-step time at the last 10% within 2x of the first 10%:"
        f" worst {worst:.2f}x -> {'PASS' if worst <= 2 else 'FAIL'}",
        f"Target 2: at N = {int(big['n']):,} the cached run at least 50x faster than the"
        f" rebuild baseline: {speedup:,.0f}x in total ({last_speedup:,.0f}x per step at the"
        f" last 10%) -> {'PASS' if speedup >= 50 else 'FAIL'}",
    ]


async def main() -> None:
    rows = [await run(n) for n in SIZES]
    notes = [
        "",
        f"Each step appends 2 messages and asks for a view of max_tokens={MAX_TOKENS:,},"
        " keep_first=1 (approximate counter). Only view calls are timed. The rebuild"
        f" baseline was timed at every k-th step (k = N / {SAMPLES}); its total is k x the"
        " sum (est.). Per-step figures are medians (a GC pass or another process can stall"
        " any one step). The two runs build identical threads one after the other; their"
        " views were equal at every sampled step, and each cached run built from scratch"
        f" once. Final view: {int(rows[-1]['view_messages'])} messages.",
        "",
        *verdicts(rows),
    ]
    text = "\n".join(["# Context views: cached vs rebuilt per step", "", *table(rows), *notes])
    print(text)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    anyio.run(main)
