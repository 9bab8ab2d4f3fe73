"""FairLock and FairSemaphore: so many holders at a time, waiters served in order, cancelled
waiters never lose a slot."""

from __future__ import annotations

import anyio
import anyio.lowlevel
import pytest

from agent_threads.core.locks import FairLock, FairSemaphore
from tests.ticker import ticks_during

BACKENDS = ["asyncio", "trio"]


def _run(main: object, backend: str) -> None:
    anyio.run(main, backend=backend)  # type: ignore[arg-type]


@pytest.mark.parametrize("backend", BACKENDS)
def test_one_task_at_a_time_in_the_order_they_came(backend: str) -> None:
    order: list[str] = []

    async def main() -> None:
        lock = FairLock()
        inside = 0

        async def work(name: str) -> None:
            nonlocal inside
            async with lock:
                inside += 1
                assert inside == 1
                order.append(name)
                await anyio.sleep(0.001)
                inside -= 1

        async with anyio.create_task_group() as group:
            for name in "abcde":
                group.start_soon(work, name)
                await anyio.lowlevel.checkpoint()  # each starts, and queues, in turn
        assert not lock.locked()

    _run(main, backend)
    assert order == list("abcde")


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_waiter_cancelled_in_the_queue_leaves_it(backend: str) -> None:
    async def main() -> None:
        lock = FairLock()
        served: list[str] = []
        await lock.acquire()

        async def wait(name: str) -> None:
            async with lock:
                served.append(name)

        async with anyio.create_task_group() as group:
            with anyio.CancelScope() as scope:
                group.start_soon(wait, "early")
                await anyio.lowlevel.checkpoint()
            cancelled = anyio.CancelScope()

            async def cancellable() -> None:
                with cancelled:
                    await wait("cancelled")

            group.start_soon(cancellable)
            await anyio.lowlevel.checkpoint()
            group.start_soon(wait, "late")
            await anyio.lowlevel.checkpoint()
            cancelled.cancel()
            await anyio.sleep(0.01)  # the cancelled waiter has left the queue
            lock.release()
        assert not scope.cancel_called
        assert served == ["early", "late"]
        assert not lock.locked()

    _run(main, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_waiter_cancelled_as_the_lock_reaches_it_never_loses_it(backend: str) -> None:
    async def main() -> None:
        lock = FairLock()
        served: list[str] = []
        await lock.acquire()
        handed = anyio.CancelScope()

        async def first() -> None:
            with handed:
                async with lock:
                    served.append("first")
                    await anyio.sleep(1)  # cancelled here, if not before

        async def second() -> None:
            async with lock:
                served.append("second")

        async with anyio.create_task_group() as group:
            group.start_soon(first)
            await anyio.lowlevel.checkpoint()
            group.start_soon(second)
            await anyio.lowlevel.checkpoint()
            lock.release()  # hands the lock to `first`, which has not run yet ...
            handed.cancel()  # ... and is cancelled before it does
        # it ran, holding the lock, or left at once: either way `second` got it next
        assert served in (["first", "second"], ["second"])
        assert not lock.locked()

    _run(main, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_free_lock_is_taken_without_yielding(backend: str) -> None:
    async def main() -> None:
        lock = FairLock()

        async def take_it() -> None:
            for _ in range(100):
                async with lock:
                    pass

        assert await ticks_during(take_it) == 0

    _run(main, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_semaphore_lets_so_many_in_at_once(backend: str) -> None:
    order: list[str] = []

    async def main() -> None:
        slots = FairSemaphore(2)
        inside = most = 0

        async def work(name: str) -> None:
            nonlocal inside, most
            async with slots:
                inside += 1
                most = max(most, inside)
                order.append(name)
                await anyio.sleep(0.001)
                inside -= 1

        async with anyio.create_task_group() as group:
            for name in "abcdef":
                group.start_soon(work, name)
                await anyio.lowlevel.checkpoint()
        assert most == 2

    _run(main, backend)
    # all served (in what order two woken at once run is the scheduler's: trio shuffles)
    assert sorted(order) == list("abcdef")


def test_a_semaphore_needs_a_slot() -> None:
    with pytest.raises(ValueError, match="at least one slot"):
        FairSemaphore(0)
