"""Appends whose answer tells what the store holds, even when the store failed mid-write.

A store that fails while committing (a connection lost after the commit was sent) may
have saved the append: its reply, not its work, is what was lost. Answering 503 then
would make a client that retries (the `openai` client retries 5xx, even a POST) append
the same messages again. So after such a failure the route re-reads the thread: if the
append is there it answers as for any append; if it is not, 503 is safe to retry; if the
store still cannot be read, 503 is all that can be said.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_threads.errors import MessageNotFoundError, StoreUnavailableError
from agent_threads.messages import Message
from agent_threads.threads.chat import ChatMessageThread


async def append(thread: ChatMessageThread, messages: Sequence[Message]) -> None:
    """`thread.on_new_messages(messages)`; after a store failure, succeed if it was saved.

    Raises:
        StoreUnavailableError: the store failed and the append is not in the thread (or
            the thread cannot be read to tell).
        AgentThreadsError: as `on_new_messages` otherwise.
    """
    try:
        await thread.on_new_messages(messages)
    except StoreUnavailableError:
        if not messages or not await _saved(thread, messages[-1]):
            raise


async def _saved(thread: ChatMessageThread, last: Message) -> bool:
    """Whether the append ending with `last` is in the thread (all or nothing: one id tells).

    Raises:
        StoreUnavailableError: the store cannot be read either.
    """
    await thread.refresh()
    try:
        await thread.index_of(last.id)
    except MessageNotFoundError:
        return False
    return True
