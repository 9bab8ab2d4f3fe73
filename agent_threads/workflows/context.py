"""StepContext: what a running step sees (its sub-thread, the shared state, its input)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from agent_threads.messages import Message
from agent_threads.state import ImmutableState
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import StepRecord
from agent_threads.threads.workflow.thread import WorkflowThread


@dataclass(frozen=True, slots=True)
class StepResult:
    """What a step returns when it also changes the shared state.

    `patch` is a JSON merge patch applied to the state at the end of the superstep,
    merged with the patches of the steps that ran alongside.
    """

    output: Any = None
    patch: Mapping[str, Any] | None = None


class StepInterrupt(BaseException):
    """Raised by `StepContext.interrupt` to stop a step until a person replies.

    A `BaseException`, so a step's `except Exception` cannot swallow it by accident.
    The runner catches it; a step never needs to.
    """

    def __init__(self, step: str, prompt: JsonValue) -> None:
        self.step = step
        self.prompt = prompt
        super().__init__(f"step {step!r} is waiting for a reply to {prompt!r}")


@dataclass(eq=False)
class StepContext:
    """Everything a step may use while it runs.

    Attributes:
        workflow: the workflow thread of the run (read it; the runner writes it).
        thread: the sub-thread of this step's agent; `emit` appends to it.
        state: the shared workflow state as of the start of the superstep.
        input: the step's input: the previous step's output, a dict of outputs by
            source step for a fan-in, or the run's input for a first step.
        record: this attempt's step record (step name, agent, attempt, superstep).
    """

    workflow: WorkflowThread
    thread: ChatMessageThread
    state: ImmutableState
    input: Any
    record: StepRecord
    _replies_used: int = field(default=0, repr=False)

    @property
    def step(self) -> str:
        """The name of the running step."""
        return self.record.step

    @property
    def agent(self) -> str:
        """The agent the step runs as (its sub-thread's agent)."""
        return self.record.agent

    @property
    def attempt(self) -> int:
        """Which attempt this is, from 1 (crashes, failures and interrupts start new ones)."""
        return self.record.attempt

    @property
    def idempotency_key(self) -> str:
        """A key that is the same for every attempt of this step in this superstep.

        Pass it to external services so a step re-run after a crash does not repeat a
        side effect (a payment, an e-mail) that its first attempt already caused.
        """
        return f"{self.workflow.id}/{self.record.superstep}/{self.record.step}"

    async def emit(self, *messages: Message | Iterable[Message]) -> None:
        """Append messages to this step's sub-thread, in one write.

        Messages without an author are attributed to the step's agent.

        Raises:
            LeaseLostError: this runner was stalled past its lease and another one took
                the run over; the messages are not written (the step should stop).
        """
        batch: list[Message] = []
        for item in messages:
            batch.extend([item] if isinstance(item, Message) else item)
        await self.workflow.check_lease()
        await self.thread.on_new_messages(
            [m if m.author else m.model_copy(update={"author": self.agent}) for m in batch]
        )

    async def interrupt(self, prompt: JsonValue) -> JsonValue:
        """Wait for a person: pause the run with `prompt`, and return their reply.

        The first time, this stops the step and the run pauses (status `paused`) once
        the other steps of the superstep finish. `await workflow.resume(run,
        reply=...)`, in this process or another one, runs the step again from its
        start, and this call then returns the reply. A step may interrupt several
        times; each call gets the reply to its own prompt.
        """
        replies = self.record.replies
        if self._replies_used < len(replies):
            reply = replies[self._replies_used]
            self._replies_used += 1
            return reply
        raise StepInterrupt(self.step, prompt)
