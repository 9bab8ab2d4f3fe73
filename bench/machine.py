"""The machine a benchmark ran on, in one line: what reading its tables across runs needs.

Ratios measured in one run compare like with like; absolute figures, and ratios between
work that is mostly Python and work that is mostly C or the kernel (a raw driver's insert),
move with the machine. The line names the CPU and cores, and times a fixed stretch of pure
Python (`python_loop_seconds`), so two runs' tables can be told apart by the machine.
"""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path

LOOP_STEPS = 5_000_000
"""Steps of the timed Python loop (about 0.3-0.9 s on the machines this project runs on)."""


def python_loop_seconds(steps: int = LOOP_STEPS) -> float:
    """Seconds a plain `for` loop summing `steps` integers takes (the best of three)."""
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        total = 0
        for i in range(steps):
            total += i
        best = min(best, time.perf_counter() - began)
    return best


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_line() -> str:
    """`Machine: <CPU>, <n> cores, Python <version>; a 5,000,000-step Python loop: <s> s`."""
    return (
        f"Machine: {_cpu_model()} ({platform.machine()}), {os.cpu_count()} cores, Python"
        f" {platform.python_version()}; a {LOOP_STEPS:,}-step Python loop (`for i in range(n):"
        f" total += i`) takes {python_loop_seconds():.2f} s here."
    )
