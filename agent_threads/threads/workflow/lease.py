"""The run lease: which runner owns a workflow run in progress, and until when.

A runner takes the lease before it runs a step and keeps it renewed while it lives; a
second runner finding it held and not expired is refused (`RunInProgressError`) and
never runs a step. The lease lives in the workflow's thread record, next to the
execution state, so the record's compare-and-set arbitrates it like every other write
and every store holds it unchanged. When its owner dies, the lease expires and another
process may take the run over.

Expiry is a wall-clock time (UTC), as other processes compare it with their own clocks:
keep the clocks of the machines that share a store within a fraction of the lease. The
owner itself tracks its lease on the monotonic clock.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, JsonValue

from agent_threads.core.ids import new_id
from agent_threads.core.retry import RetryPolicy
from agent_threads.errors import ConflictError, LeaseLostError, RunInProgressError
from agent_threads.threads.workflow.execution import now

DEFAULT_LEASE_DURATION = 30.0
"""Seconds a run's lease lasts unless its runner renews it (it renews every third of it)."""

RENEW_EVERY = 1 / 3
"""The fraction of the lease duration after which its runner renews it."""

LEASE_KEY = "lease"
"""The key of the lease in the workflow thread record's data."""


class Lease(BaseModel):
    """A run's lease as the workflow record holds it: who runs it, and until when."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    owner: str = Field(min_length=1)
    expires_at: AwareDatetime
    duration: float = Field(gt=0)

    @classmethod
    def start(cls, owner: str, duration: float) -> Lease:
        """A lease for `owner` from now, for `duration` seconds."""
        return cls(owner=owner, expires_at=now() + timedelta(seconds=duration), duration=duration)

    def is_live(self, at: datetime | None = None) -> bool:
        """Whether it has not expired (by this machine's clock)."""
        return (now() if at is None else at) < self.expires_at


def lease_data(lease: Lease | None) -> dict[str, JsonValue]:
    """The record data that stores `lease` (None: releases it)."""
    return {LEASE_KEY: None if lease is None else lease.model_dump(mode="json")}


def new_owner() -> str:
    """A new owner id: host and process (for whoever reads an error), then a unique id."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()}"


def check_duration(duration: float, *, what: str = "lease_duration") -> float:
    """Return `duration` if it is a positive, finite number of seconds, else raise.

    Raises:
        ValueError: naming `what` and the value.
    """
    if not 0 < duration < float("inf"):
        raise ValueError(f"{what} must be a positive number of seconds, not {duration!r}")
    return float(duration)


@dataclass(slots=True)
class HeldLease:
    """The lease a handle holds, as its owner tracks it on the monotonic clock.

    `deadline` is when the lease expires unless renewed, from the start of the write
    that stored it (so the owner's view errs early). `lost` is set once a write found
    that another runner took it over: every later check raises without a store call.
    """

    owner: str
    duration: float
    deadline: float = 0.0
    lost: bool = False

    def renewed_from(self, started: float) -> None:
        """Record a renewal whose write started at `started` (monotonic)."""
        self.deadline = started + self.duration

    def is_due(self) -> bool:
        """Whether the lease should be confirmed before the next write.

        True once less than a third of it is left: the renewal timer, which renews
        every third, has then missed a turn (the process was stalled).
        """
        return time.monotonic() > self.deadline - self.duration * RENEW_EVERY


class LeasedRecord(Protocol):
    """A workflow thread handle as its `LeaseKeeper` sees it.

    `lease` is the lease its record held when last read or written (a `publish` with
    the lease key updates it).
    """

    @property
    def id(self) -> str:
        """The workflow thread's id."""

    @property
    def lease(self) -> Lease | None:
        """The run's lease as last read or written."""

    def retry_policy(self, deadline: float | None = None) -> RetryPolicy:
        """How the handle's writes retry."""

    async def publish(
        self, data: Mapping[str, JsonValue], *, tags: Mapping[str, str] | None = None
    ) -> None:
        """Compare-and-set the record with `data` merged in; ConflictError if someone won."""

    async def reread_after_lost_write(self) -> None:
        """Re-read the record after a lost compare-and-set."""

    async def refresh_unlocked(self) -> None:
        """Re-read the record (the caller holds the handle's lock)."""


class LeaseKeeper:
    """One workflow handle's part in its run's lease. Callers hold the handle's lock.

    Every write of the lease is a compare-and-set on the workflow record, so of two
    runners taking an expired lease at once one wins, and a runner whose lease was
    taken over finds out at its next write, which fails, instead of overwriting.
    """

    __slots__ = ("_workflow", "held")

    def __init__(self, workflow: LeasedRecord) -> None:
        self._workflow = workflow
        self.held: HeldLease | None = None

    def blocking(self, owner: str | None = None) -> Lease | None:
        """The live lease of a runner other than `owner` (default: this handle's), if any."""
        lease = self._workflow.lease
        if owner is None and self.held is not None:
            owner = self.held.owner
        if lease is None or lease.owner == owner or not lease.is_live():
            return None
        return lease

    def refused(self, lease: Lease) -> RunInProgressError:
        """The error for a runner that finds `lease` held by another."""
        return RunInProgressError(self._workflow.id, owner=lease.owner, expires_at=lease.expires_at)

    async def take(self, owner: str, duration: float) -> Lease | None:
        """Take the lease for `owner`; or return the live lease another runner holds.

        A lease seen live is confirmed by a re-read before it counts (the handle may be
        stale); an expired or released one is taken by compare-and-set.
        """
        workflow = self._workflow
        reread = False
        backoff = workflow.retry_policy().start()
        while True:
            holder = self.blocking(owner)
            if holder is not None:
                if reread:
                    return holder
                await workflow.refresh_unlocked()
                reread = True
                continue
            lease = Lease.start(owner, duration)
            started = time.monotonic()
            try:
                await workflow.publish(lease_data(lease))
            except ConflictError:
                await workflow.reread_after_lost_write()
                reread = True
                if not await backoff.wait():
                    raise backoff.exhausted(workflow.id, "its lease was taken") from None
                continue
            self.held = HeldLease(owner, duration)
            self.held.renewed_from(started)
            return None

    def check_held(self) -> HeldLease:
        """The held lease, if the record (as last read) still names its owner.

        Raises:
            LeaseLostError: the record names another runner or none.
            RuntimeError: this handle holds no lease.
        """
        held = self.held
        if held is None:
            raise RuntimeError(f"workflow {self._workflow.id!r}: this handle holds no lease")
        lease = self._workflow.lease
        if held.lost or lease is None or lease.owner != held.owner:
            held.lost = True
            holder = None if lease is None or lease.owner == held.owner else lease.owner
            raise LeaseLostError(self._workflow.id, owner=held.owner, holder=holder)
        return held

    async def renew(self) -> Lease:
        """Extend the held lease by its duration from now.

        Raises:
            LeaseLostError: another runner took the run over.
        """
        workflow = self._workflow
        backoff = workflow.retry_policy().start()
        while True:
            held = self.check_held()
            lease = Lease.start(held.owner, held.duration)
            started = time.monotonic()
            try:
                await workflow.publish(lease_data(lease))
            except ConflictError:
                await workflow.reread_after_lost_write()
                if not await backoff.wait():
                    raise backoff.exhausted(workflow.id, "its lease was renewed") from None
                continue
            held.renewed_from(started)
            return lease

    async def confirm(self) -> None:
        """Check the held lease is still ours; renew it first if the timer fell behind.

        Free while the runner's renewal timer keeps up (no store call).

        Raises:
            LeaseLostError: another runner took the run over.
        """
        if self.check_held().is_due():
            await self.renew()

    async def guard(self) -> None:
        """Before a write of the execution state: raise unless this handle may make it.

        The holder confirms its lease; any other handle is refused while another runner
        holds a live lease (confirmed by a re-read, which may change the handle).

        Raises:
            LeaseLostError: this handle's lease was taken over.
            RunInProgressError: another runner holds a live lease.
        """
        if self.held is not None:
            await self.confirm()
        elif self.blocking() is not None:
            await self._workflow.refresh_unlocked()
            self.check_read()

    def check_read(self) -> None:
        """After a re-read (a lost write's): raise if the lease says this handle may not write.

        Raises:
            LeaseLostError: this handle's lease was taken over.
            RunInProgressError: this handle holds no lease, and another runner a live one.
        """
        if self.held is not None:
            self.check_held()
            return
        holder = self.blocking()
        if holder is not None:
            raise self.refused(holder)

    async def release(self) -> None:
        """Give the held lease back (a no-op if there is none or it was lost)."""
        held, self.held = self.held, None
        workflow = self._workflow
        backoff = workflow.retry_policy().start()
        while held is not None and not held.lost:
            lease = workflow.lease
            if lease is None or lease.owner != held.owner:
                return  # taken over meanwhile: not ours to clear
            try:
                await workflow.publish(lease_data(None))
                return
            except ConflictError:
                await workflow.reread_after_lost_write()
                if not await backoff.wait():
                    raise backoff.exhausted(workflow.id, "its lease was released") from None


__all__ = [
    "DEFAULT_LEASE_DURATION",
    "LEASE_KEY",
    "RENEW_EVERY",
    "HeldLease",
    "Lease",
    "LeaseKeeper",
    "LeasedRecord",
    "check_duration",
    "lease_data",
    "new_owner",
]
