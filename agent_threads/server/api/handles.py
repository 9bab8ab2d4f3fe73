"""Opening the thread a route names, in the caller's tenant store."""

from __future__ import annotations

from agent_threads.errors import ThreadNotFoundError
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.thread import WorkflowThread


async def chat_thread(store: ThreadStore, thread_id: str) -> ChatMessageThread:
    """A lazy handle on a chat thread: its record read, its messages read when asked.

    Raises:
        ThreadNotFoundError: no chat thread has this id (a workflow's id included).
    """
    return await ChatMessageThread.load(thread_id, store=store, lazy=True)


async def any_thread(store: ThreadStore, thread_id: str) -> AgentThread:
    """A handle on a thread of any kind (a chat thread's is lazy).

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    try:
        return await chat_thread(store, thread_id)
    except ThreadNotFoundError:
        return await AgentThread.load(thread_id, store=store)


async def workflow_thread(store: ThreadStore, thread_id: str) -> WorkflowThread:
    """A handle on a workflow thread (a run), with its sub-threads and step history.

    Raises:
        ThreadNotFoundError: no workflow thread has this id.
    """
    return await WorkflowThread.load(thread_id, store=store)
