"""Exceptions agent_threads raises on purpose.

AgentThreadsError
├── ThreadNotFoundError, MessageNotFoundError, CheckpointNotFoundError   (+ LookupError)
├── SubThreadNotFoundError                                               (+ LookupError)
├── InvalidIdError, DuplicateMessageError                                (+ ValueError)
├── InvalidValueError                                        (+ ValueError, TypeError)
├── UnansweredToolCallError                                              (+ ValueError)
├── ConflictError, StateConflictError
├── ReadOnlyError                                                        (+ TypeError)
├── NotLoadedError                                                       (+ RuntimeError)
├── ContextOverflowError
├── StoreCorruptedError, SchemaVersionError
├── StoreUnavailableError
├── RunInProgressError, LeaseLostError
└── WorkflowFailedError
    └── StepFailedError

Every error names what is at fault (thread, message, checkpoint, key, file) both in its
message and as an attribute, so callers can react without parsing text.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


class AgentThreadsError(Exception):
    """Root of every exception agent_threads raises on purpose."""


class ThreadNotFoundError(AgentThreadsError, LookupError):
    """No thread with this id exists in the store."""

    def __init__(self, thread_id: str, *, detail: str = "") -> None:
        self.thread_id = thread_id
        suffix = f": {detail}" if detail else ""
        super().__init__(f"thread {thread_id!r} not found{suffix}")


class MessageNotFoundError(AgentThreadsError, LookupError):
    """The thread holds no message with this id."""

    def __init__(self, message_id: str, *, thread_id: str) -> None:
        self.message_id = message_id
        self.thread_id = thread_id
        super().__init__(f"message {message_id!r} not found in thread {thread_id!r}")


class CheckpointNotFoundError(AgentThreadsError, LookupError):
    """The thread has no checkpoint with this id or label."""

    def __init__(self, checkpoint: str, *, thread_id: str) -> None:
        self.checkpoint = checkpoint
        self.thread_id = thread_id
        super().__init__(f"checkpoint {checkpoint!r} not found in thread {thread_id!r}")


class SubThreadNotFoundError(AgentThreadsError, LookupError):
    """The workflow has no sub-thread under this key (or it was deleted)."""

    def __init__(
        self, key: str, *, workflow_id: str, known: tuple[str, ...] = (), detail: str = ""
    ) -> None:
        self.key = key
        self.workflow_id = workflow_id
        reason = detail or f"its keys are {list(known)}"
        super().__init__(f"workflow {workflow_id!r} has no sub-thread {key!r}: {reason}")


class InvalidIdError(AgentThreadsError, ValueError):
    """An id that would reach a file path or a store key is not acceptable."""

    def __init__(self, value: object, *, what: str, reason: str) -> None:
        self.value = value
        self.what = what
        self.reason = reason
        super().__init__(f"invalid {what} {value!r}: {reason}")


class InvalidValueError(AgentThreadsError, ValueError, TypeError):
    """A value cannot be stored as given: not JSON, NaN or Infinity, nested too deep, too large.

    Raised before anything is written, so nothing already stored changes. `where` names
    the thread and field (e.g. "thread 'abc' message 'm1' metadata.scores[3]").
    """

    def __init__(self, where: str, *, reason: str) -> None:
        self.where = where
        self.reason = reason
        super().__init__(f"{where}: {reason}")


class DuplicateMessageError(AgentThreadsError, ValueError):
    """A message id is already present in the thread (ids must be unique per thread)."""

    def __init__(self, message_id: str, *, thread_id: str) -> None:
        self.message_id = message_id
        self.thread_id = thread_id
        super().__init__(f"message {message_id!r} is already in thread {thread_id!r}")


class UnansweredToolCallError(AgentThreadsError, ValueError):
    """A view or request would send a tool call that has no result (policy "error").

    A process stopped between a tool call and its result leaves the call unanswered;
    providers reject a request holding it. Names the thread (None for a plain list of
    messages), the message holding the call and the call_id.
    """

    def __init__(self, call_id: str, *, message_id: str, thread_id: str | None) -> None:
        self.call_id = call_id
        self.message_id = message_id
        self.thread_id = thread_id
        where = "the messages" if thread_id is None else f"thread {thread_id!r}"
        super().__init__(
            f"tool call {call_id!r} of message {message_id!r} in {where} has no result"
            " (pass unanswered_tool_calls='interrupt' or 'drop' to send it anyway)"
        )


class ConflictError(AgentThreadsError):
    """Another writer changed the same record or row first (compare-and-set lost)."""

    def __init__(self, key: str, *, detail: str) -> None:
        self.key = key
        super().__init__(f"conflict on {key}: {detail}")


class StateConflictError(AgentThreadsError):
    """Two states being merged with policy "raise" hold different values for a key."""

    def __init__(self, key: str, ours: object, theirs: object) -> None:
        self.key = key
        self.ours = ours
        self.theirs = theirs
        super().__init__(f"state conflict at key {key!r}: {ours!r} != {theirs!r}")


class ReadOnlyError(AgentThreadsError, TypeError):
    """A write was attempted on something that is read-only (a snapshot, a lazy handle)."""

    def __init__(self, what: str, *, hint: str) -> None:
        self.what = what
        super().__init__(f"{what} is read-only: {hint}")


class NotLoadedError(AgentThreadsError, RuntimeError):
    """Content a lazy handle has not read was asked for synchronously."""

    def __init__(self, thread_id: str, *, what: str, hint: str) -> None:
        self.thread_id = thread_id
        super().__init__(
            f"thread {thread_id!r} was loaded lazily, so {what} is not in memory: {hint}"
        )


class StoreCorruptedError(AgentThreadsError):
    """Stored data could not be decoded or is inconsistent; names the file, key or row."""

    def __init__(self, where: str, *, detail: str) -> None:
        self.where = where
        super().__init__(f"store data corrupted at {where}: {detail}")


class StoreUnavailableError(AgentThreadsError):
    """The store could not be reached: a connection refused, lost or timed out, a busy lock.

    Names the store (its location, never a password) and the operation; the driver's
    error is the `__cause__`. A write cut short may or may not have taken effect (its
    reply, not its work, may be what was lost): re-read before trying again. The store
    reconnects on its next call.
    """

    def __init__(self, store: str, *, operation: str, detail: str) -> None:
        self.store = store
        self.operation = operation
        super().__init__(f"{store} is unavailable during {operation}: {detail}")


class RunInProgressError(AgentThreadsError):
    """Another runner holds the lease of this workflow run, so this one does not run it.

    A run in progress holds a lease in its workflow record (an owner and an expiry),
    renewed while its runner lives. `run` or `resume` of a run whose lease is held and
    not expired raises this at once, before any step runs; `resume(...,
    wait_for_lease=seconds)` waits for the lease to be released or to expire instead.
    Names the run (`workflow_id`), the `owner` (host:pid:id) and `expires_at` (UTC).
    """

    def __init__(self, workflow_id: str, *, owner: str, expires_at: datetime) -> None:
        self.workflow_id = workflow_id
        self.owner = owner
        self.expires_at = expires_at
        super().__init__(
            f"workflow run {workflow_id!r} is in progress: runner {owner!r} holds its lease"
            f" until {expires_at.isoformat(timespec='milliseconds')} unless it renews it;"
            " resume it once the lease is released or expired, or pass wait_for_lease=seconds"
        )


class LeaseLostError(AgentThreadsError):
    """A runner's lease on a workflow run expired and another runner took the run over.

    The runner that lost it (stalled longer than the lease: a blocked event loop, a
    suspended process) raises this at its next write, which it does not make; the run
    goes on under its new owner. Names the run, the `owner` that lost the lease and the
    `holder` holding it now (None when that runner has already released it).
    """

    def __init__(self, workflow_id: str, *, owner: str, holder: str | None) -> None:
        self.workflow_id = workflow_id
        self.owner = owner
        self.holder = holder
        now = "no runner holds it now" if holder is None else f"runner {holder!r} holds it now"
        super().__init__(
            f"workflow run {workflow_id!r}: the lease of runner {owner!r} expired and the"
            f" run was taken over ({now}); this runner stopped without writing"
        )


class WorkflowFailedError(AgentThreadsError):
    """A workflow run ended as failed; `resume` runs it again from where it stopped.

    The run's status `failed` and its error (`execution.error`) are stored before this
    is raised. Names the run (`workflow_id`) and the `workflow`; `run` is the run's
    `WorkflowThread` (typed loosely, as errors sit below threads), to read or resume.
    """

    def __init__(self, workflow_id: str, *, workflow: str, error: str, run: Any = None) -> None:
        self.workflow_id = workflow_id
        self.workflow = workflow
        self.error = error
        self.run = run
        super().__init__(f"workflow {workflow!r} failed in run {workflow_id!r}: {error}")


class StepFailedError(WorkflowFailedError):
    """A step failed on its last attempt, so its workflow run failed.

    The step's exception is the `__cause__` (when the attempt ran in this process).
    Names the `step`, the `attempt`, the run and the workflow; `error` is the step's
    error as stored in its step record.
    """

    def __init__(
        self,
        step: str,
        *,
        attempt: int,
        workflow_id: str,
        workflow: str,
        error: str,
        run: Any = None,
    ) -> None:
        super().__init__(
            workflow_id,
            workflow=workflow,
            error=f"step {step!r} failed on attempt {attempt}: {error}",
            run=run,
        )
        self.step = step
        self.attempt = attempt
        self.error = error


class SchemaVersionError(AgentThreadsError):
    """Data was written by an unknown or newer schema version, or names an unknown kind."""

    def __init__(self, where: str, *, found: object, supported: object) -> None:
        self.where = where
        self.found = found
        self.supported = supported
        super().__init__(f"{where}: found {found!r}, this version supports {supported!r}")

    @classmethod
    def check(cls, found: object, where: str, *, newest: int, oldest: int = 1) -> int:
        """Return `found` if it is a schema version from `oldest` to `newest`, else raise."""
        if type(found) is not int or not oldest <= found <= newest:
            raise cls(where, found=found, supported=newest)
        return found


class ContextOverflowError(AgentThreadsError):
    """A context view cannot fit: the kept-first messages and the newest group are too big.

    Raised instead of returning a view a provider would reject (one that cuts a tool call
    from its result or drops the newest message). `over` says by how much.
    """

    def __init__(
        self,
        thread_id: str | None,
        *,
        needed: int,
        limit: int,
        unit: str,
        kept: int,
        group: int,
    ) -> None:
        self.thread_id = thread_id
        self.needed = needed
        self.limit = limit
        self.over = needed - limit
        self.unit = unit
        where = "the messages" if thread_id is None else f"thread {thread_id!r}"
        super().__init__(
            f"a view of {where} cannot fit: the {kept} kept-first message(s) and the newest"
            f" {group} (a tool call stays with its results) need {needed:,} {unit},"
            f" max_{unit} is {limit:,}: {self.over:,} {unit} over"
        )
