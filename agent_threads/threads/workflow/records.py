"""The records of a workflow thread: its keys, new sub-threads, and helpers they share."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import JsonValue

from agent_threads.errors import InvalidIdError
from agent_threads.stores.base import ThreadStore, validate_tag
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData
from agent_threads.threads.workflow.step_log import StepLog

MAIN = "main"
"""The default sub-thread key."""

CREATED_LABEL = "created"
"""The label of the checkpoint a sub-thread gets when a workflow creates it (empty)."""


def agent_name(agent: object) -> str:
    """The name of an agent given as a string or as an object with a `name`."""
    name = agent if isinstance(agent, str) else getattr(agent, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"an agent is a non-empty name or has a `name` attribute, got {agent!r}")
    return name


def check_key(key: object) -> str:
    """Return `key` if it can name a sub-thread (1-128 characters, no control characters)."""
    try:
        return validate_tag(key)
    except InvalidIdError as exc:
        raise InvalidIdError(key, what="sub-thread key", reason=exc.reason) from None


def initial_data(
    keys: Mapping[str, str], execution: ExecutionData, step_log: StepLog
) -> dict[str, JsonValue]:
    """The workflow-specific keys of a new workflow record."""
    return {
        "sub_threads": dict(keys),
        "execution": execution.model_dump(mode="json"),
        **step_log.to_data(),
    }


async def new_sub_thread(
    store: ThreadStore, key: str, agent: str, title: str | None
) -> ChatMessageThread:
    """A new sub-thread, checkpointed empty (a crashed first step rolls back to it)."""
    sub = await ChatMessageThread.create(
        store,
        title=f"{title} / {key}" if title else key,
        metadata={"agent": agent, "key": key},
    )
    await sub.checkpoint(CREATED_LABEL)
    return sub
