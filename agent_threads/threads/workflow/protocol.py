"""WorkflowParts: what a workflow's checkpoints, time travel and export read of it.

Those modules sit below `thread.py`. `WorkflowThread` implements this protocol with
public, documented members, so no module reads a workflow thread's private attributes;
what changes a workflow (a rollback, a fork's handle) is applied by the thread itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, Self

from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData, StepRecord
from agent_threads.threads.workflow.step_log import StepLog
from agent_threads.timetravel.checkpoint import Checkpoint
from agent_threads.timetravel.protocol import CheckpointedThread


class WorkflowParts(CheckpointedThread, Protocol):
    """A workflow thread handle as its checkpoints, time travel and export see it.

    Read-only: every member reflects the handle's last read or write.
    """

    @property
    def sub_threads(self) -> Mapping[str, ChatMessageThread]:
        """The sub-thread handles by key, in creation order."""

    @property
    def execution_data(self) -> ExecutionData:
        """The inline execution data, as the workflow record holds it."""

    @property
    def step_log(self) -> StepLog:
        """The ranges of the step log (and the segment the handle may extend)."""

    @property
    def closed_steps(self) -> Sequence[StepRecord]:
        """The step log's records, in memory, oldest first (it only grows, or is replaced)."""

    async def fork(
        self,
        message_id: str | None = None,
        *,
        checkpoint: Checkpoint | str | None = None,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> Self:
        """A new stored workflow from now, a checkpoint, or a message of a sub-thread."""


__all__ = ["WorkflowParts"]
