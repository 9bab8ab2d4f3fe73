"""Fair locks and semaphores that are free to take when nobody waits for them."""

from __future__ import annotations

from collections import deque

import anyio


class FairSemaphore:
    """A first-come, first-served counting semaphore that costs nothing to take when free.

    `anyio.Lock` and `anyio.Semaphore`, even with `fast_acquire`, ask the event loop
    which task runs and whether it was cancelled on every acquire and release (~5 us
    together, 3% of an append to SQLite). This one only counts when a slot is free, and
    queues waiters on `anyio.Event`s otherwise, so it runs on any anyio backend. Taking
    a free slot is not a checkpoint: a cancellation lands at the holder's next await
    instead. Waiters are served in the order they came; a slot given back goes straight
    to the first waiter, and a waiter cancelled after it got one gives it back.

    For `async with` only: it does not check that the task giving a slot back is one
    that took one.
    """

    __slots__ = ("__weakref__", "_free", "_waiters")  # weakref: see `threads.base`

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a semaphore needs at least one slot, not {slots}")
        self._free = slots
        self._waiters: deque[_Waiter] = deque()

    async def acquire(self) -> None:
        if self._free:  # then nobody waits: a slot given back goes to a waiter first
            self._free -= 1
            return
        waiter = _Waiter()
        self._waiters.append(waiter)
        try:
            await waiter.event.wait()
        except BaseException:
            if waiter.handed:  # the slot became this task's as it was cancelled
                self.release()
            else:
                self._waiters.remove(waiter)
            raise

    def release(self) -> None:
        if self._waiters:
            waiter = self._waiters.popleft()
            waiter.handed = True  # the slot passes to it, never free in between
            waiter.event.set()
        else:
            self._free += 1

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(self, *exc_info: object) -> None:
        self.release()


class FairLock(FairSemaphore):
    """A `FairSemaphore` of one slot: one task at a time, in the order they came."""

    __slots__ = ()

    def __init__(self) -> None:
        super().__init__(1)

    def locked(self) -> bool:
        """Whether some task holds the lock."""
        return not self._free


class _Waiter:
    __slots__ = ("event", "handed")

    def __init__(self) -> None:
        self.event = anyio.Event()
        self.handed = False


__all__ = ["FairLock", "FairSemaphore"]
