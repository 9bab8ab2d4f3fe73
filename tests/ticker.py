"""How often other tasks run while some work runs: whether, and how often, the work yields."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel


async def ticks_during(work: Callable[[], Awaitable[None]]) -> int:
    """How many times a task that does nothing but yield ran while `work` ran.

    0: `work` never let another task run.
    """
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        await anyio.lowlevel.checkpoint()  # the ticker has begun
        before = ticks
        await work()
        during = ticks - before
        group.cancel_scope.cancel()
    return during
