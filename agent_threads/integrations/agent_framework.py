"""ThreadHistoryProvider: a Microsoft Agent Framework history provider on a `ChatMessageThread`.

`Agent(client, context_providers=[ThreadHistoryProvider(store)])` keeps each agent
session's conversation in a thread of any store: the thread id is the session id
(`AgentSession.session_id`), and each Agent Framework `Message` is one message of the
thread, so the thread reads like any other (views, provider formats, the service, the
inspector) and gains what Agent Framework lacks: `fork()` of a session at a message or
a checkpoint, `checkpoint()` and `rollback()`.

Messages are mapped both ways without loss. A message's role, author and contents that
have a counterpart here (text, reasoning, function calls and results, data and URIs,
usage) become native parts; whatever that mapping cannot give back (a content's id or
annotations, `additional_properties`, a custom role, the message's own `message_id`)
is kept with the message: its metadata under `FRAMEWORK_KEY` holds the message's
`to_dict()` whenever the native parts alone would read back differently. A message
read back therefore has the `to_dict()` it was saved with, except that a message saved
without a `message_id` (as an agent run leaves them) reads back with the thread
message's id as its `message_id`, the id `fork(..., message_id=...)` and
`rollback(..., message_id=...)` take. What Agent Framework itself does not serialize
(`raw_representation`, a content's `exception` text, which `to_dict()` replaces by a
marker) is not kept either. Messages appended to the thread by other means are read as
the Agent Framework messages their parts stand for.

`save_messages` skips the messages the thread already ends with, as Agent Framework's
own providers do (a replayed transcript, or per-service-call persistence saving the
inputs again): a message with a `message_id` matches by id, one without by role and
contents; a single repeated user input without an id is kept (asked twice). The
remaining messages are appended in one store write, all or none.

`session_id` None (Agent Framework's type allows it; an agent always passes its
session's id, and a run without a session gets a fresh one, hence a new thread per
such run) is refused with `InvalidIdError`: no thread is shared by accident.

Needs the `agent-framework-core` package: `pip install 'agent-threads-framework[agent-framework]'`.
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from pydantic import JsonValue, ValidationError

from agent_threads.core.ids import validate_id
from agent_threads.errors import (
    InvalidIdError,
    InvalidValueError,
    MessageNotFoundError,
    ThreadNotFoundError,
)
from agent_threads.messages import (
    DataPart,
    Message,
    Part,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agent_threads.stores.base import ThreadStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.timetravel.checkpoint import Checkpoint

try:
    from agent_framework import AgentSession, Content, HistoryProvider, UsageDetails
    from agent_framework import Message as FrameworkMessage
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_threads.integrations.agent_framework needs Microsoft Agent Framework:"
        " pip install 'agent-threads-framework[agent-framework]'"
    ) from exc

__all__ = ["FRAMEWORK_KEY", "ThreadHistoryProvider", "from_framework", "to_framework"]

FRAMEWORK_KEY = "agent_framework"
"""The message metadata key holding an Agent Framework message's `to_dict()`.

Present only when the message's native parts would not read back as it was; without
`message_id` when the message had none (the thread message's id stands in for it).
"""

_ROLES: dict[str, Role] = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
}
"""Native roles of Agent Framework roles; any other (a custom role) reads as "user"."""

# -- messages ------------------------------------------------------------------------------


def _data_part(content: Content) -> DataPart | None:
    """The data part of a `data` content (a base64 data URI) or a `uri` content."""
    uri = content.uri
    if not uri:
        return None
    media_type = content.media_type or "application/octet-stream"
    if content.type == "uri":
        return DataPart(media_type=media_type, uri=uri)
    head, comma, payload = uri.partition(",")
    if not (comma and head.startswith("data:") and head.endswith(";base64")):
        return None
    return DataPart(media_type=media_type, data=payload)


def _arguments(content: Content) -> dict[str, JsonValue]:
    """A function call's arguments as a dict ({} when they are not a JSON object)."""
    arguments = content.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments) if arguments.strip() else {}
        except ValueError:
            return {}
    return dict(arguments) if isinstance(arguments, Mapping) else {}


def _native_part(content: Content) -> Part | None:
    """The native part standing for a content, or None if there is none."""
    kind = content.type
    if kind == "text" and content.text is not None:
        return TextPart(text=content.text)
    if kind == "text_reasoning":
        return ThinkingPart(text=content.text or "", signature=content.protected_data)
    if kind == "function_call" and content.call_id and content.name:
        return ToolCallPart(
            call_id=content.call_id, name=content.name, arguments=_arguments(content)
        )
    if kind == "function_result" and content.call_id:
        return ToolResultPart(
            call_id=content.call_id, result=content.result, is_error=content.exception is not None
        )
    if kind in ("data", "uri"):
        return _data_part(content)
    return None


def _usage(contents: Sequence[Content]) -> Usage | None:
    """The tokens the message's `usage` contents count (None if it has none)."""
    details = [c.usage_details for c in contents if c.type == "usage" and c.usage_details]
    if not details:
        return None
    spent_in = sum(int(d.get("input_token_count") or 0) for d in details)
    spent_out = sum(int(d.get("output_token_count") or 0) for d in details)
    return Usage(input_tokens=max(spent_in, 0), output_tokens=max(spent_out, 0))


def _native(message: FrameworkMessage) -> Message:
    """The thread message holding what has a native counterpart (a new id)."""
    parts: list[Part] = []
    for content in message.contents:
        try:
            part = _native_part(content)
        except (ValidationError, TypeError, ValueError):  # e.g. a result that is not JSON
            part = None
        if part is not None:
            parts.append(part)
    return Message(
        role=_ROLES.get(message.role, "user"),
        author=message.author_name,
        contents=tuple(parts),
        usage=_usage(message.contents),
    )


def from_framework(message: FrameworkMessage) -> Message:
    """The thread message for an Agent Framework message (a new id; nothing lost).

    Raises:
        InvalidValueError: the message holds what a thread message cannot store (a value
            that is not JSON, NaN), naming it.
    """
    native = _native(message)
    given = message.to_dict()
    wanted = given if "message_id" in given else {**given, "message_id": native.id}
    if to_framework(native).to_dict() == wanted:
        return native
    try:
        return Message.model_validate({**native.model_dump(), "metadata": {FRAMEWORK_KEY: given}})
    except ValidationError as exc:
        where = f"agent framework message {message.message_id or native.id!r}"
        raise InvalidValueError(where, reason=f"not JSON: {exc}") from exc


def _content(part: Part) -> Content | None:
    """The Agent Framework content a native part stands for."""
    if isinstance(part, TextPart | SummaryPart):
        return Content.from_text(part.text)
    if isinstance(part, ThinkingPart):
        return Content.from_text_reasoning(text=part.text, protected_data=part.signature)
    if isinstance(part, ToolCallPart):
        return Content.from_function_call(part.call_id, part.name, arguments=dict(part.arguments))
    if isinstance(part, ToolResultPart):
        error = str(part.result) if part.is_error else None
        return Content.from_function_result(part.call_id, result=part.result, exception=error)
    if part.data is not None:
        uri = f"data:{part.media_type};base64,{part.data}"
        return Content.from_uri(uri, media_type=part.media_type)
    return Content.from_uri(part.uri or "", media_type=part.media_type)


def to_framework(message: Message) -> FrameworkMessage:
    """The Agent Framework message a thread message holds.

    The one it was saved from (`FRAMEWORK_KEY`) if kept, else one built from its parts;
    its `message_id` is the saved one, else the thread message's id.
    """
    kept = message.metadata.get(FRAMEWORK_KEY)
    if isinstance(kept, dict):
        return FrameworkMessage.from_dict({"message_id": message.id, **kept})
    contents: list[Content] = []
    for part in message.contents:
        try:
            content = _content(part)
        except (ValueError, binascii.Error):  # a URI Agent Framework refuses: its text is kept
            content = Content.from_text(part.uri or "") if isinstance(part, DataPart) else None
        if content is not None:
            contents.append(content)
    if message.usage is not None:
        tokens = UsageDetails(
            input_token_count=message.usage.input_tokens,
            output_token_count=message.usage.output_tokens,
        )
        contents.append(Content.from_usage(tokens))
    return FrameworkMessage(
        message.role, contents, author_name=message.author, message_id=message.id
    )


# -- which messages are new ----------------------------------------------------------------


def _identity(message: FrameworkMessage) -> tuple[str, ...]:
    """What makes two messages the same: the id if any, else role and contents."""
    if message.message_id is not None:
        return ("id", message.message_id)
    contents = json.dumps([c.to_dict() for c in message.contents], sort_keys=True, default=str)
    return ("content", message.role, contents)


def _stored_identities(message: Message) -> set[tuple[str, ...]]:
    """The identities a stored message matches: its id, and its contents if it had no id."""
    framework = to_framework(message)
    identities: set[tuple[str, ...]] = {("id", framework.message_id or message.id)}
    kept = message.metadata.get(FRAMEWORK_KEY)
    if not isinstance(kept, dict) or "message_id" not in kept:  # saved without an id
        framework.message_id = None
        identities.add(_identity(framework))
    return identities


def _repeated_input(message: FrameworkMessage) -> bool:
    return message.role == "user" and message.message_id is None


def _new_messages(
    stored: Sequence[Message], incoming: Sequence[FrameworkMessage], *, whole: bool
) -> list[FrameworkMessage]:
    """The incoming messages after those the thread already ends with.

    `stored` is the thread's tail (its last `len(incoming)` messages), the whole thread
    if `whole`. A transcript replayed whole (the thread inside `incoming`) or a batch
    starting with the thread's last messages gives only what follows; a lone repeated
    user input without an id is kept.
    """
    held = [_stored_identities(m) for m in stored]
    given = [_identity(m) for m in incoming]

    def matches(offset: int, count: int) -> bool:
        tail = held[len(held) - count :]
        return all(given[offset + i] in tail[i] for i in range(count))

    if whole and held:
        for offset in range(1, len(given) - len(held) + 1):  # offset 0 is the overlap below
            if matches(offset, len(held)):
                return list(incoming[offset + len(held) :])
    for count in range(min(len(held), len(given)), 0, -1):
        if matches(0, count) and not (count == 1 and _repeated_input(incoming[0])):
            return list(incoming[count:])
    return list(incoming)


# -- the provider -------------------------------------------------------------------------


def _session_key(session: AgentSession | str | None) -> str:
    """The thread id of a session (its session id), validated."""
    session_id = session.session_id if isinstance(session, AgentSession) else session
    if session_id is None:  # an agent always passes one: a direct call without a session
        reason = "None names no thread: give the session's id (AgentSession.session_id)"
        raise InvalidIdError(None, what="agent session id", reason=reason)
    return validate_id(session_id, what="agent session id")


class ThreadHistoryProvider(HistoryProvider):
    """An Agent Framework history provider keeping each session in a thread of a store.

    The thread id is the session id (checked as a thread id: letters, digits and
    `. _ : @ + = -`, at most 128 characters; `AgentSession()`'s UUIDs qualify). The
    thread is created by the session's first save, with `title`, `tags`, `metadata` and
    `auto_checkpoint` (a checkpoint after every save, so every run is a time-travel point).
    Each call reads the thread as the store holds it, so agents in several processes on
    one store see each other's turns.

    Besides `get_messages` and `save_messages` (what the agent calls), the provider gives
    every session what threads have: `get_thread`, `fork`, `checkpoint`, `checkpoints`
    and `rollback`.
    """

    DEFAULT_SOURCE_ID: ClassVar[str] = "agent_threads"

    def __init__(
        self,
        store: ThreadStore | None = None,
        source_id: str | None = None,
        *,
        load_messages: bool = True,
        store_inputs: bool = True,
        store_context_messages: bool = False,
        store_context_from: set[str] | None = None,
        store_outputs: bool = True,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        auto_checkpoint: bool = False,
    ) -> None:
        """A provider on `store` (a new `MemoryStore` if none is given, as `create` does).

        The flags are `HistoryProvider`'s: whether the agent loads the history before a
        run, and which messages it saves after (inputs, outputs, other providers' context).
        """
        super().__init__(
            source_id or self.DEFAULT_SOURCE_ID,
            load_messages=load_messages,
            store_inputs=store_inputs,
            store_context_messages=store_context_messages,
            store_context_from=store_context_from,
            store_outputs=store_outputs,
        )
        self._store = MemoryStore() if store is None else store
        self._fields = (title, tags, metadata, auto_checkpoint)

    def __repr__(self) -> str:
        return f"ThreadHistoryProvider({self._store!r}, source_id={self.source_id!r})"

    @property
    def store(self) -> ThreadStore:
        """The store holding the sessions' threads."""
        return self._store

    # -- the HistoryProvider interface -------------------------------------------------

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[FrameworkMessage]:
        """The session's messages, oldest first ([] for a session never saved).

        Raises:
            InvalidIdError: `session_id` is None or not a valid thread id.
        """
        thread = await self._stored(_session_key(session_id))
        if thread is None:
            return []
        return [to_framework(m) for m in await thread.get_messages()]

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[FrameworkMessage],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        """Append the messages the session's thread does not already end with, in one write.

        Raises:
            InvalidIdError: `session_id` is None or not a valid thread id.
            InvalidValueError: a message holds what cannot be stored (not JSON, NaN, too
                large), naming it; none of them is appended then.
        """
        key = _session_key(session_id)
        if not messages:
            return
        thread = await self._thread_or_new(key)
        whole = thread.head <= len(messages)
        tail = (
            await thread.get_messages(-len(messages)) if not whole else await thread.get_messages()
        )
        new = _new_messages(tail, messages, whole=whole)
        if new:
            await thread.on_new_messages([from_framework(m) for m in new])

    # -- threads -----------------------------------------------------------------------

    async def _stored(self, key: str) -> ChatMessageThread | None:
        try:
            return await ChatMessageThread.load(key, store=self._store, lazy=True)
        except ThreadNotFoundError:
            return None

    async def _thread_or_new(self, key: str) -> ChatMessageThread:
        title, tags, metadata, auto_checkpoint = self._fields
        return await ChatMessageThread.get_or_create(
            key,
            store=self._store,
            title=title,
            tags=tags,
            metadata=metadata,
            auto_checkpoint=auto_checkpoint,
            lazy=True,
        )

    async def get_thread(self, session: AgentSession | str) -> ChatMessageThread:
        """The session's thread as stored now (created, empty, if there is none yet).

        A lazy handle: it reads messages on demand (`await thread.get_messages(...)`).

        Raises:
            InvalidIdError: the session id is not a valid thread id.
            ThreadNotFoundError: the id is held by a thread of another kind.
        """
        return await self._thread_or_new(_session_key(session))

    async def _thread_message_id(self, thread: ChatMessageThread, message_id: str) -> str:
        """The thread message id for a message id as `get_messages` gives it.

        That is the thread message's own id, or the `message_id` Agent Framework gave
        the message (the newest message holding it).

        Raises:
            MessageNotFoundError: no message of the thread has this id.
        """
        try:
            await thread.index_of(message_id)
        except MessageNotFoundError:
            for message in reversed(await thread.get_messages()):
                kept = message.metadata.get(FRAMEWORK_KEY)
                if isinstance(kept, dict) and kept.get("message_id") == message_id:
                    return message.id
            raise
        return message_id

    async def checkpoint(
        self,
        session: AgentSession | str,
        label: str | None = None,
        *,
        metadata: Mapping[str, Any] | None = None,
    ) -> Checkpoint:
        """Record the session's history as stored now; `rollback()` and `fork()` return to it."""
        thread = await self.get_thread(session)
        return await thread.checkpoint(label, metadata=metadata)

    async def checkpoints(self, session: AgentSession | str) -> list[Checkpoint]:
        """Every checkpoint of the session's thread, oldest first (rollbacks' too)."""
        thread = await self._stored(_session_key(session))
        return [] if thread is None else list(await thread.checkpoints())

    async def rollback(
        self,
        session: AgentSession | str,
        checkpoint: Checkpoint | str | None = None,
        *,
        message_id: str | None = None,
    ) -> Checkpoint:
        """Return the session's history to a checkpoint (id or label) or back to a message.

        The agent's next run sees the history as it was there. Nothing is lost: the
        messages after it stay reachable through the returned checkpoint of the old head
        (labelled "before-rollback"). `message_id` is a message's `message_id` as
        `get_messages` gives it.

        Raises:
            CheckpointNotFoundError: the session has no such checkpoint.
            MessageNotFoundError: the session has no such message.
            InvalidValueError: both or neither of `checkpoint` and `message_id` are given.
        """
        _one_point(checkpoint, message_id, allow_none=False)
        thread = await self.get_thread(session)
        if message_id is not None:
            return await thread.rollback(
                message_id=await self._thread_message_id(thread, message_id)
            )
        return await thread.rollback(checkpoint)

    async def fork(
        self,
        session: AgentSession | str,
        *,
        checkpoint: Checkpoint | str | None = None,
        message_id: str | None = None,
        session_id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> AgentSession:
        """A new session whose history is this one's: now, at a checkpoint, or up to a message.

        Costs O(number of ranges of the thread), not O(messages): the two share what they
        have in common and then go their own ways (the fork's thread records this one as
        its parent). Given an `AgentSession`, the new one gets a copy of its `state` (the
        providers' session state) and no `service_session_id`: a service-side conversation
        is not forked with it. `message_id` is as `get_messages` gives it (the fork ends
        with that message).

        Raises:
            ConflictError: a thread with id `session_id` exists.
            CheckpointNotFoundError: the session has no such checkpoint.
            MessageNotFoundError: the session has no such message.
            InvalidValueError: both `checkpoint` and `message_id` are given.
        """
        _one_point(checkpoint, message_id, allow_none=True)
        new_id = None if session_id is None else validate_id(session_id, what="agent session id")
        thread = await self.get_thread(session)
        if message_id is not None:
            at = await self._thread_message_id(thread, message_id)
            child = await thread.fork(at, id=new_id, title=title, tags=tags)
        elif checkpoint is not None:
            child = await (await thread.at(checkpoint)).fork(id=new_id, title=title, tags=tags)
        else:
            child = await thread.fork(id=new_id, title=title, tags=tags)
        if not isinstance(session, AgentSession):
            return AgentSession(session_id=child.id)
        copied = session.to_dict()
        return AgentSession.from_dict(
            {**copied, "session_id": child.id, "service_session_id": None}
        )


def _one_point(checkpoint: object, message_id: object, *, allow_none: bool) -> None:
    given = (checkpoint is not None) + (message_id is not None)
    if given > 1 or (given == 0 and not allow_none):
        raise InvalidValueError(
            "agent session history point", reason="give one of checkpoint or message_id"
        )
