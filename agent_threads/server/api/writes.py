"""Appends whose answer tells what the store holds, even when the store failed mid-write.

A store that fails while committing (a connection lost after the commit was sent) may
have saved the append: its reply, not its work, is what was lost. Answering 503 then
would make a client that retries (the `openai` client retries 5xx, even a POST) append
the same messages again. So after such a failure the route re-reads the thread: if the
append is there it answers as for any append; if it is not, 503 is safe to retry; if the
store still cannot be read, 503 is all that can be said. A batch found there while the
thread did not move since before the append (its record version is the one the handle
held) was there before it: a resend, refused as a duplicate as it is when nothing fails.
"""

from __future__ import annotations

from collections.abc import Sequence

from agent_threads.errors import (
    DuplicateMessageError,
    MessageNotFoundError,
    StoreUnavailableError,
)
from agent_threads.messages import Message
from agent_threads.threads.chat import ChatMessageThread


async def append(thread: ChatMessageThread, messages: Sequence[Message]) -> None:
    """`thread.on_new_messages(messages)`; after a store failure, succeed if it was saved.

    Raises:
        StoreUnavailableError: the store failed and the append is not in the thread (or
            the thread cannot be read to tell).
        DuplicateMessageError: the store failed, and the batch is in the thread but was
            there before this append (nothing was written since).
        AgentThreadsError: as `on_new_messages` otherwise.
    """
    version = thread.version
    try:
        await thread.on_new_messages(messages)
    except StoreUnavailableError as exc:
        if not messages or not await _saved(thread, messages):
            raise
        if thread.version == version:  # a write bumps it: the batch was there already
            raise DuplicateMessageError(messages[0].id, thread_id=thread.id) from exc


async def _saved(thread: ChatMessageThread, messages: Sequence[Message]) -> bool:
    """Whether the whole batch is in the thread, in order and back to back.

    Its last message alone does not tell: a batch whose last message was already in the
    thread (a resend) is refused as a duplicate, unless the store failed while the
    handle looked again, and then only the last message would be found.

    Raises:
        StoreUnavailableError: the store cannot be read either.
    """
    await thread.refresh()
    try:
        end = await thread.index_of(messages[-1].id) + 1
    except MessageNotFoundError:
        return False
    start = end - len(messages)
    if start < 0:
        return False
    held = await thread.get_messages(start, end)
    return [m.id for m in held] == [m.id for m in messages]
