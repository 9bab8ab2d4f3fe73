"""ThreadSession: the OpenAI Agents SDK's `Session` protocol on a `ChatMessageThread`.

`Runner.run(agent, input, session=ThreadSession("user-42", store=store))` keeps the
conversation in a thread of any store: each session item is one message (the thread id
is the session id), so the thread reads like any other (views, provider formats, the
service) and gains what threads have and sessions lack: `fork()`, checkpoints and
`rollback()`. `pop_item()` and `clear_session()` delete nothing: the thread's old head
stays reachable as a checkpoint (labelled "before-pop" / "before-clear").

Items come back exactly as they were added (the SDK compares them as dicts). A message
holds the item as `formats.openai_responses` reads it, and its metadata under
`ITEM_KEY` holds what that format would write differently (the item's own id, a string
`content`, a missing `type` or `status`): usually a few bytes, the whole item only when
the format cannot read it. Messages appended to the thread by other means are given as
the Responses items `formats.openai_responses.to_items` writes for them.

Token usage: the Runner passes its `RunContextWrapper` to sessions whose methods take a
`wrapper` keyword, as these do; `add_items` puts the tokens the run spent since its last
write on the last assistant message written, so the thread's stats add up the run's
`usage` (items themselves carry none).

Limits follow the SDK's `SQLiteSession`: `get_items(limit=N)` gives the newest N items in
order, `limit=None` the session's `session_settings.limit` (None: all), 0 none, and a
negative limit all of them.

Needs the `openai-agents` package: `pip install 'agent-threads-framework[openai-agents]'`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import Any, cast

import anyio.to_thread
from pydantic import ValidationError

from agent_threads.core.ids import validate_id
from agent_threads.errors import (
    InvalidIdError,
    InvalidValueError,
    ThreadNotFoundError,
)
from agent_threads.formats import openai_responses
from agent_threads.messages import Message, Usage
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.timetravel.checkpoint import Checkpoint

try:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
    from agents.run_context import RunContextWrapper
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_threads.integrations.openai_agents needs the OpenAI Agents SDK:"
        " pip install 'agent-threads-framework[openai-agents]'"
    ) from exc

ITEM_KEY = "openai_agents_item"
"""The message metadata key holding how its session item differs from the message's item.

`{"set": {...}, "drop": [...], "text": true}` (fields to set, fields to remove, and
whether `content` is the text of its single part as a string), or `{"item": {...}}` (the
whole item, for one `formats.openai_responses` cannot read).
"""

Item = dict[str, Any]


# -- items <-> messages --------------------------------------------------------------------


def item_message(item: Mapping[str, Any]) -> Message:
    """The message holding one session item (a new message id; the item's id is kept).

    Raises:
        InvalidValueError: `item` is not a dict, or holds what a message cannot store
            (not JSON, NaN, too large): raised by the append, naming the message.
    """
    if not isinstance(item, Mapping):
        raise InvalidValueError("session item", reason=f"expected a dict, got {item!r:.60}")
    given = dict(item)
    body = {k: v for k, v in given.items() if k != "id"}  # item ids repeat (e.g. a model's)
    try:
        message = openai_responses.from_items([body])[0]
    except (InvalidValueError, InvalidIdError, ValidationError):  # unknown shape: kept whole
        role = "user" if given.get("role") == "user" else "assistant"
        message = Message(role=role)
        written: list[Item] = []
    else:
        written = openai_responses.message_items(message)
    difference: dict[str, Any] = {"item": given}
    if len(written) == 1:
        patch = _difference(written[0], given)
        if _patched(written[0], patch) == given:
            difference = patch
    try:
        return Message.model_validate(
            {**message.model_dump(), "metadata": {**message.metadata, ITEM_KEY: difference}}
        )
    except ValidationError as exc:
        raise InvalidValueError("session item", reason=f"not JSON: {exc}") from exc


def message_items(message: Message) -> list[Item]:
    """The session items of a message: the item it was added as, else its Responses items."""
    kept = message.metadata.get(ITEM_KEY)
    whole = kept.get("item") if isinstance(kept, dict) else None
    if isinstance(whole, dict):
        return [dict(whole)]
    written = openai_responses.message_items(message)
    if isinstance(kept, dict) and len(written) == 1:
        return [_patched(written[0], kept)]
    return written


def _difference(written: Mapping[str, Any], item: Mapping[str, Any]) -> dict[str, Any]:
    """What turns `written` into `item`: fields to set, fields to drop, text as content."""
    changed = {k: v for k, v in item.items() if k not in written or written[k] != v}
    dropped = [k for k in written if k not in item]
    difference: dict[str, Any] = {}
    if "content" in changed and changed["content"] == _only_text(written):
        del changed["content"]  # a string content: the message holds it already
        difference["text"] = True
    if changed:
        difference["set"] = changed
    if dropped:
        difference["drop"] = dropped
    return difference


def _only_text(item: Mapping[str, Any]) -> str | None:
    """The text of an item whose content is a single text part (else None)."""
    content = item.get("content")
    if isinstance(content, list) and len(content) == 1 and isinstance(content[0], dict):
        text = content[0].get("text")
        return text if isinstance(text, str) else None
    return None


def _patched(written: Mapping[str, Any], difference: Mapping[str, Any]) -> Item:
    dropped = difference.get("drop") or []
    item = {k: v for k, v in written.items() if k not in dropped}
    if difference.get("text"):
        item["content"] = _only_text(written)
    item.update(difference.get("set") or {})
    return item


_CHARGED = "_agent_threads_charged_usage"
"""The attribute of a run's `RunContextWrapper` holding the tokens already written."""


def _charge(
    messages: list[Message], wrapper: RunContextWrapper[Any]
) -> tuple[list[Message], tuple[int, int]] | None:
    """The messages with the run's tokens not yet written on the last assistant one.

    Returns them with the run's totals to record as written; None when no tokens are
    due or no assistant message is there to carry them (they wait for the next write).
    """
    usage = wrapper.usage
    totals = (usage.input_tokens, usage.output_tokens)
    before = getattr(wrapper, _CHARGED, (0, 0))
    spent = (totals[0] - before[0], totals[1] - before[1])
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    if not replies or spent == (0, 0) or min(spent) < 0:
        return None
    with_contents = [i for i in replies if messages[i].contents]
    target = (with_contents or replies)[-1]
    charged = list(messages)
    cost = Usage(input_tokens=spent[0], output_tokens=spent[1])
    charged[target] = Message.model_validate({**messages[target].model_dump(), "usage": cost})
    return charged, totals


def _items(messages: Sequence[Message]) -> list[TResponseInputItem]:
    return [cast(TResponseInputItem, i) for m in messages for i in message_items(m)]


# -- the session -------------------------------------------------------------------------


class ThreadSession:
    """An Agents SDK session stored as a thread: one message per item, on any store.

    Implements the SDK's `Session` protocol (`session_id`, `session_settings`,
    `get_items`, `add_items`, `pop_item`, `clear_session`). Each call reads the thread
    as the store holds it, so sessions of one id in several processes see each other's
    items: `add_items` is one store write (all items or none), and `pop_item` a
    compare-and-set, so two concurrent pops never return the same item. The thread is
    created by the first `add_items` (or `get_thread()`), with `title`, `tags` and
    `metadata`.

    A session may be called from several threads and event loops at once (as
    `Runner.run_sync` in threads does): its calls take turns. Its store is then used
    from several event loops, which every store allows one call at a time; sessions
    sharing a store should share an event loop (or take a store each).
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        *,
        store: ThreadStore,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> None:
        """A session on thread `session_id` of `store` (created when first written).

        Raises:
            InvalidIdError: `session_id` is not a valid thread id.
            TypeError: `session_settings` is a dict with keys `SessionSettings` lacks.
        """
        self.session_id = validate_id(session_id, what="session id")
        self.session_settings = (
            SessionSettings()
            if session_settings is None
            else coerce_session_settings(cast(Any, session_settings))
        )
        self._store = store
        self._fields = (title, tags, metadata)
        self._thread: ChatMessageThread | None = None
        self._guard = threading.Lock()

    @classmethod
    def of(
        cls,
        thread: ChatMessageThread,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> ThreadSession:
        """A session on an existing thread (its id is the session id)."""
        session = cls(thread.id, store=thread.store, session_settings=session_settings)
        session._thread = thread
        return session

    def __repr__(self) -> str:
        return f"ThreadSession({self.session_id!r}, store={self._store!r})"

    @property
    def store(self) -> ThreadStore:
        """The store holding the session's thread."""
        return self._store

    async def get_thread(self) -> ChatMessageThread:
        """The session's thread as stored now (created, empty, if there is none yet).

        A lazy handle: it reads messages on demand (`await thread.get_messages(...)`).

        Raises:
            ThreadNotFoundError: the id is held by a thread of another kind.
        """
        async with self._turn():
            return await self._thread_or_new()

    async def _thread_or_new(self) -> ChatMessageThread:
        thread = await self._stored()
        if thread is None:
            title, tags, metadata = self._fields
            thread = await ChatMessageThread.get_or_create(
                self.session_id,
                store=self._store,
                title=title,
                tags=tags,
                metadata=metadata,
                lazy=True,
            )
            self._thread = thread
        return thread

    async def _stored(self) -> ChatMessageThread | None:
        """The thread re-read from the store, or None if there is none (yet, or any more)."""
        thread = self._thread
        try:
            if thread is None:
                thread = await ChatMessageThread.load(self.session_id, store=self._store, lazy=True)
            else:
                await thread.refresh()
        except ThreadNotFoundError:
            self._thread = None
            return None
        self._thread = thread
        return thread

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """Hold the session's lock: a thread lock, as callers may run in other event loops.

        Taken without blocking the event loop (a worker thread waits for it when it is
        held); a caller cancelled while waiting holds nothing.
        """
        if not self._guard.acquire(blocking=False):
            taken = False

            def take() -> None:
                nonlocal taken
                self._guard.acquire()
                taken = True

            try:
                await anyio.to_thread.run_sync(take)  # returns once take() did: not abandoned
            except BaseException:
                if taken:
                    self._guard.release()
                raise
        try:
            yield
        finally:
            self._guard.release()

    # -- the Session protocol ---------------------------------------------------------

    async def get_items(
        self, limit: int | None = None, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> list[TResponseInputItem]:
        """The session's items, oldest first: the newest `limit` ones if given.

        `limit=None` takes `session_settings.limit` (None: every item); 0 gives none and
        a negative limit every item, as the SDK's `SQLiteSession`. Reads only the newest
        `limit` messages of the thread.
        """
        wanted = resolve_session_limit(limit, self.session_settings)
        if wanted == 0:
            return []
        async with self._turn():
            thread = await self._stored()
            if thread is None:
                return []
            if wanted is None or wanted < 0:
                return _items(await thread.get_messages())
            return _items(await thread.get_messages(-wanted))[-wanted:]

    async def add_items(
        self, items: list[TResponseInputItem], *, wrapper: RunContextWrapper[Any] | None = None
    ) -> None:
        """Append the items, one message each, in one store write (all of them or none).

        Given the run's `wrapper` (the Runner passes it), the tokens the run spent since
        its last write go to the last assistant message written, as its `usage`, so the
        thread's stats count them once.

        Raises:
            InvalidValueError: an item is not a dict or holds what cannot be stored (not
                JSON, NaN, too large), naming it; nothing is written then.
        """
        if not items:
            return
        messages = [item_message(cast(Mapping[str, Any], item)) for item in items]
        charged = None if wrapper is None else _charge(messages, wrapper)
        if charged is not None:
            messages = charged[0]
        async with self._turn():
            thread = await self._thread_or_new()
            try:
                await thread.on_new_messages(messages)
            except ThreadNotFoundError:  # deleted since it was read: start it again
                self._thread = None
                await (await self._thread_or_new()).on_new_messages(messages)
        if charged is not None:
            setattr(wrapper, _CHARGED, charged[1])

    async def pop_item(
        self, *, wrapper: RunContextWrapper[Any] | None = None
    ) -> TResponseInputItem | None:
        """Remove the newest item and return it (None: the session is empty).

        Pops the thread's last message (`ChatMessageThread.pop`: the old head stays
        reachable as a checkpoint labelled "before-pop"). A message appended by other
        means that stands for several items goes whole; its last item is returned.
        """
        async with self._turn():
            thread = await self._stored()
            message = None if thread is None else await thread.pop()
        return None if message is None else cast(TResponseInputItem, message_items(message)[-1])

    async def clear_session(self, *, wrapper: RunContextWrapper[Any] | None = None) -> None:
        """Remove every item (`ChatMessageThread.clear`: a "before-clear" checkpoint keeps them)."""
        async with self._turn():
            thread = await self._stored()
            if thread is not None:
                await thread.clear()

    # -- what threads add: checkpoints, rollback, fork -----------------------------------

    async def checkpoint(
        self, label: str | None = None, *, metadata: Mapping[str, Any] | None = None
    ) -> Checkpoint:
        """Record the session as stored now; `rollback()` and `fork()` return to it."""
        async with self._turn():
            thread = await self._thread_or_new()
            return await thread.checkpoint(label, metadata=metadata)

    async def checkpoints(self) -> list[Checkpoint]:
        """Every checkpoint of the session's thread, oldest first (pops and clears too)."""
        async with self._turn():
            thread = await self._stored()
            return [] if thread is None else list(await thread.checkpoints())

    async def rollback(self, checkpoint: Checkpoint | str) -> Checkpoint:
        """Return the session to a checkpoint (or its id or label); returns the old head's.

        Nothing is lost: the items after it stay reachable through that checkpoint.

        Raises:
            CheckpointNotFoundError: the session has no such checkpoint.
        """
        async with self._turn():
            thread = await self._thread_or_new()
            return await thread.rollback(checkpoint)

    async def fork(
        self,
        checkpoint: Checkpoint | str | None = None,
        *,
        session_id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> ThreadSession:
        """A new session holding this one's items (now, or at `checkpoint`).

        Costs O(number of ranges of the thread), not O(items): the two share what they
        have in common and then go their own ways. The fork's thread records this one as
        its parent; the fork keeps these `session_settings`.

        Raises:
            ConflictError: a thread with id `session_id` exists.
            CheckpointNotFoundError: the session has no such checkpoint.
        """
        async with self._turn():
            thread = await self._thread_or_new()
            if checkpoint is None:
                child = await thread.fork(id=session_id, title=title, tags=tags)
            else:
                snapshot = await thread.at(checkpoint)
                child = await snapshot.fork(id=session_id, title=title, tags=tags)
        return ThreadSession.of(child, session_settings=self.session_settings)


__all__ = ["ITEM_KEY", "ThreadSession", "item_message", "message_items"]
