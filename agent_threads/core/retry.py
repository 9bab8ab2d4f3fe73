"""Backoff: how a compare-and-set write waits and tries again while other writers win.

Every write to a thread (append, checkpoint, rollback, state and metadata updates) is a
compare-and-set on the thread record: a writer that loses re-reads the thread and tries
again. Under contention, trying again at once makes the writers collide again, so each
retry first sleeps a random time up to a bound that doubles with each attempt ("full
jitter"), capped, until a deadline; only past it does the write raise `ConflictError`.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import anyio

from agent_threads.errors import ConflictError, InvalidValueError

DEFAULT_WRITE_DEADLINE = 30.0
"""Seconds a write keeps retrying before it gives up with `ConflictError`."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How long a write retries (`deadline`, seconds) and how it spaces its attempts.

    The sleep before retry `n` is random in `[0, min(max_delay, first_delay * 2**n)]`.
    A deadline of 0 tries once.
    """

    deadline: float = DEFAULT_WRITE_DEADLINE
    first_delay: float = 0.001
    max_delay: float = 0.1

    def __post_init__(self) -> None:
        if not self.deadline >= 0 or not 0 <= self.first_delay <= self.max_delay:
            raise InvalidValueError(
                f"retry policy ({self.deadline}, {self.first_delay}, {self.max_delay})",
                reason="needs deadline >= 0 and 0 <= first_delay <= max_delay",
            )

    def start(self) -> Backoff:
        """The attempts of one write, starting now."""
        return Backoff(self)


DEFAULT_RETRY = RetryPolicy()
"""The policy of writes that name no deadline, unless their store sets its own."""


class Backoff:
    """The attempts of one write: `await backoff.wait()` before each retry."""

    __slots__ = ("_began", "_policy", "attempts")

    def __init__(self, policy: RetryPolicy) -> None:
        self._policy = policy
        self._began = time.monotonic()
        self.attempts = 1

    @property
    def elapsed(self) -> float:
        """Seconds since the first attempt."""
        return time.monotonic() - self._began

    async def wait(self) -> bool:
        """Sleep before the next attempt; False (no sleep) once the deadline has passed."""
        left = self._policy.deadline - self.elapsed
        if left <= 0:
            return False
        bound = min(self._policy.max_delay, self._policy.first_delay * 2 ** (self.attempts - 1))
        self.attempts += 1
        await anyio.sleep(min(random.uniform(0, bound), left))
        return True

    def exhausted(self, thread_id: str, what: str) -> ConflictError:
        """The error for a write that other writers kept beating until the deadline."""
        return ConflictError(
            f"thread {thread_id!r}",
            detail=f"other writers kept changing the thread while {what}: gave up after"
            f" {self.attempts} attempts in {self.elapsed:.2f} s (deadline"
            f" {self._policy.deadline:g} s); try again, or pass a longer deadline",
        )
