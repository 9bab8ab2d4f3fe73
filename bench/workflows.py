"""Benchmark: per-superstep overhead of the workflow runner on SQLiteStore, with no-op steps.

Each run has `supersteps` supersteps of `fanout` concurrent no-op steps (each step routes
back to itself until the last superstep), so everything measured is the runner: step
records stored as running and completed, the patch merge and routing, the step log
append and the workflow checkpoint written at the end of every superstep.

Run: .venv/bin/python bench/workflows.py   (writes bench/results/workflows.md)
"""

from __future__ import annotations

import itertools
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

# Run as a script, this file's folder leads sys.path and its name would shadow the
# `workflows` package: drop the folder before importing it.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]

from agent_threads import ImmutableState, SQLiteStore, StepRecord  # noqa: E402
from agent_threads.workflows import END, Router, Step, StepContext, Workflow, step  # noqa: E402

SUPERSTEPS = (100, 1_000)
FANOUTS = (1, 10, 100)
RESULTS = Path(__file__).parent / "results" / "workflows.md"
TARGET = 1.5
TAIL = 50
REPEATS = 3


async def noop(ctx: StepContext) -> int:
    return int(ctx.record.superstep)


def looping(fanout: int, supersteps: int) -> Workflow:
    """`fanout` steps that each run again until `supersteps` supersteps have run."""
    steps: list[Step] = [step(name=f"w{i}")(noop) for i in range(fanout)]
    workflow = Workflow(f"loop-{fanout}", start=steps).add(*steps)
    for item in steps:
        workflow.branch(item, again(item.name, supersteps))
    return workflow


def again(name: str, supersteps: int) -> Router:
    """Route back to `name` until the last superstep."""

    def route(state: ImmutableState, done: Any) -> str:
        return name if int(done) + 1 < supersteps else END

    return route


@dataclass(frozen=True)
class Timing:
    """Seconds per superstep in one run: wall and CPU, over the run and over its end."""

    wall_mean: float
    wall_tail: float
    cpu_mean: float
    cpu_tail: float


async def measure(fanout: int, supersteps: int) -> Timing:
    """Time one run on a fresh SQLite file.

    The tail figures cover the last `TAIL` supersteps (where growth with run length
    would show), without the one-off creation of the sub-threads at the start: wall
    time is the median gap between their checkpoints, CPU time (this process, its
    SQLite thread included) is read as each superstep's first step completes.
    """
    marks: dict[int, float] = {}

    def mark(record: StepRecord) -> None:
        if record.step == "w0" and record.status == "completed":
            marks[record.superstep] = time.process_time()

    with tempfile.TemporaryDirectory() as directory:
        async with SQLiteStore(Path(directory) / "bench.db") as store:
            wall, cpu = time.perf_counter(), time.process_time()
            run = await looping(fanout, supersteps).run(store=store, on_step=mark)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            assert run.execution.status == "completed", run.execution.error
            assert len(run.execution.history) == fanout * supersteps
            stamps = [c.created_at for c in await run.checkpoints() if c.reason == "auto"]
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)]
    last = supersteps - 1
    return Timing(
        wall_mean=wall / supersteps,
        wall_tail=statistics.median(gaps[-TAIL:]),
        cpu_mean=cpu / supersteps,
        cpu_tail=(marks[last] - marks[last - TAIL]) / TAIL,
    )


async def best_of(fanout: int, supersteps: int) -> Timing:
    """The least disturbed of a few runs (the machine is shared): each figure's minimum."""
    repeats = 1 if fanout * supersteps >= 100_000 else REPEATS
    runs = [await measure(fanout, supersteps) for _ in range(repeats)]
    return Timing(*(min(getattr(r, f) for r in runs) for f in Timing.__dataclass_fields__))


def table(results: dict[tuple[int, int], Timing]) -> tuple[str, float]:
    """The markdown table, and the worst CPU-time ratio of long runs to short ones."""
    short, long = SUPERSTEPS
    lines = [
        f"| fan-out | wall ms/superstep, {short:,} | wall, {long:,}"
        f" | CPU ms/superstep, last {TAIL} of {short:,} | CPU, last {TAIL} of {long:,}"
        f" | CPU {long:,} vs {short:,} | wall median, last {TAIL} of {short:,}"
        f" | wall median, last {TAIL} of {long:,} | wall {long:,} vs {short:,} |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    worst = 0.0
    for fanout in FANOUTS:
        a, b = results[fanout, short], results[fanout, long]
        worst = max(worst, b.cpu_tail / a.cpu_tail)
        lines.append(
            f"| {fanout} | {a.wall_mean * 1e3:,.2f} | {b.wall_mean * 1e3:,.2f}"
            f" | {a.cpu_tail * 1e3:,.2f} | {b.cpu_tail * 1e3:,.2f}"
            f" | {b.cpu_tail / a.cpu_tail:.2f}x | {a.wall_tail * 1e3:,.2f}"
            f" | {b.wall_tail * 1e3:,.2f} | {b.wall_tail / a.wall_tail:.2f}x |"
        )
    verdict = "PASS" if worst <= TARGET else "FAIL"
    lines += [
        "",
        f"Target: per-superstep overhead at the end of a {long:,}-superstep run within"
        f" {TARGET}x of a {short:,}-superstep run (no growth with run length), in CPU time:"
        f" worst {worst:.2f}x -> {verdict}",
    ]
    return "\n".join(lines), worst


HEADER = f"""# Workflow runner overhead (SQLiteStore, no-op steps)

Each run has N supersteps of F concurrent no-op steps, so all the time is the runner's:
storing every attempt as running and completed (group-committed), merging and routing,
appending the step log and writing one workflow checkpoint per superstep, on a fresh
SQLite file. *Wall ms/superstep* is the run's wall time / N (it includes creating the F
sub-threads once). The *last {TAIL}* figures cover the end of each run, where growth with
run length would show: CPU time of the process (its SQLite thread included), and the
median wall-clock gap between superstep checkpoints. CPU time is the verdict's measure:
this 2-core machine is shared, and wall time there swings with other work's load and
disk flushes (every figure is the best of {REPEATS} runs, one run for 100 x 1,000).
Written by `bench/workflows.py`.

"""


async def main() -> None:
    results: dict[tuple[int, int], Timing] = {}
    for fanout in FANOUTS:
        for supersteps in SUPERSTEPS:
            timing = results[fanout, supersteps] = await best_of(fanout, supersteps)
            print(
                f"fan-out {fanout:>3}, {supersteps:>5} supersteps:"
                f" wall {timing.wall_mean * 1e3:7.2f} ms,"
                f" CPU at the end {timing.cpu_tail * 1e3:7.2f} ms per superstep",
                flush=True,
            )
    text, _ = table(results)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(HEADER + text + "\n", encoding="utf-8")
    print("\n" + text)


if __name__ == "__main__":
    anyio.run(main)
