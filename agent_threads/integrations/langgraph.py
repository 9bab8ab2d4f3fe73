"""ThreadSaver: a LangGraph checkpointer (`BaseCheckpointSaver`) on any agent-threads store.

`graph.compile(checkpointer=ThreadSaver(store))` keeps each LangGraph thread (a
`thread_id` and `checkpoint_ns`) in a `ChatMessageThread`:

- the graph's messages channel (`messages_channel`, default "messages") is stored as
  appends to the thread: each checkpoint appends only the messages its parent did not
  have (a delta), and refers to its whole list as ranges of the thread's append-only
  log, so storage grows with the conversation, not with the number of checkpoints
  times its length. When `add_messages` replaced or removed a message, the longest
  start the list shares with its parent's is kept and the rest appended;
- each LangGraph checkpoint is a checkpoint of the thread, labelled with the LangGraph
  checkpoint id, whose metadata holds the message ranges and, serialized, LangGraph's
  checkpoint without its values, its metadata and the other channels: a value of up to
  `_INLINE_BYTES` serialized is kept there, a larger one is a content-addressed blob
  (`store.put_blob`, stored once whatever the number of checkpoints using it) listed in
  a record of the checkpoint (a record's `blobs`, which `store.vacuum()` keeps). A
  channel LangGraph did not give a new version keeps its parent's value, as LangGraph's
  own savers read it. So a `put` is one store write (the new messages, the checkpoint
  row and the thread record, `on_new_messages(..., checkpoint=...)`), plus blobs for
  large values. `get_state_history`, `update_state` on an old checkpoint (a fork) and
  resuming from it work as with LangGraph's own savers;
- pending writes are one store record per checkpoint;
- `copy_thread` puts the checkpoints again, oldest first (the copy's messages are stored
  once too); `prune(strategy="keep_latest")` and `delete_for_runs` hide checkpoints
  behind a later thread checkpoint marking them deleted (like a thread's pop, nothing is
  erased: the messages stay in the thread's log); `delete_thread` deletes the threads.

A saver keeps in memory what it wrote and read of the threads it used last (their
checkpoints and messages) and reads a thread's record once per `get_tuple`; another
saver's or process's writes are read from the store when the record moved.

Values are serialized by LangGraph's serde (`JsonPlusSerializer` without its pickle
fallback); messages are kept as `agent_threads.Message` (role and text) with the
LangChain message's own serialized form in their metadata under `LANGCHAIN_KEY`, so they
come back as they were. The thread's log is managed by the saver: rolling the thread
back or popping from it breaks the LangGraph checkpoints that refer to it.

The sync methods run the async ones in an event loop of their own (an anyio blocking
portal started on first use, stopped by `close()`): use one saver either from sync code
or from async code, and a store opened in that loop.

Needs LangGraph: `pip install 'agent-threads-framework[langgraph]'`.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from pydantic import JsonValue

from agent_threads.core.records import THREAD_KIND
from agent_threads.errors import ConflictError, InvalidValueError, ThreadNotFoundError
from agent_threads.messages import Message, Role, TextPart
from agent_threads.stores.base import Record, ThreadStore
from agent_threads.threads.chat import ChatMessageThread

try:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
        message_to_dict,
        messages_from_dict,
    )
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import (
        WRITES_IDX_MAP,
        BaseCheckpointSaver,
        ChannelVersions,
        Checkpoint,
        CheckpointMetadata,
        CheckpointTuple,
        get_checkpoint_id,
        get_serializable_checkpoint_metadata,
    )
    from langgraph.checkpoint.serde.base import SerializerProtocol
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "agent_threads.integrations.langgraph needs LangGraph:"
        " pip install 'agent-threads-framework[langgraph]'"
    ) from exc

__all__ = ["LANGCHAIN_KEY", "ThreadSaver", "from_langchain", "to_langchain"]

LANGCHAIN_KEY = "langchain"
"""The message metadata key holding the LangChain message's serialized form."""

_SERDE_KEY = "langchain_serde"
_META_KEY = "langgraph"
_WRITES_KIND = "langgraph-writes"
_BLOBS_KIND = "langgraph-blobs"
_ROLES: dict[str, Role] = {"human": "user", "ai": "assistant", "system": "system", "tool": "tool"}

Ranges = list[list[int]]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def thread_key(thread_id: str, checkpoint_ns: str = "") -> str:
    """The id of the agent-threads thread holding a LangGraph thread and namespace."""
    return "lg-" + _digest(thread_id + "\x00" + checkpoint_ns)


# -- messages ------------------------------------------------------------------------------


def from_langchain(message: BaseMessage, serde: SerializerProtocol | None = None) -> Message:
    """The agent-threads message for a LangChain message (a new id; the original kept).

    Its role and text are read from the LangChain message; the message's serialized form
    (`message_to_dict`, else LangGraph's serde, base64) is kept under `LANGCHAIN_KEY` so
    `to_langchain` gives it back unchanged.
    """
    return _hold(message, serde or _serde()).stored


def to_langchain(message: Message, serde: SerializerProtocol | None = None) -> BaseMessage:
    """The LangChain message an agent-threads message holds (or one made from its text)."""
    dumped = message.metadata.get(LANGCHAIN_KEY)
    if isinstance(dumped, dict):
        return messages_from_dict([dumped])[0]
    typed = message.metadata.get(_SERDE_KEY)
    if isinstance(typed, list) and len(typed) == 2:
        kind, data = typed
        value = (serde or _serde()).loads_typed((str(kind), base64.b64decode(str(data))))
        return cast(BaseMessage, value)
    text = "".join(p.text for p in message.contents if isinstance(p, TextPart))
    if message.role == "assistant":
        return AIMessage(content=text, id=message.id)
    if message.role == "system":
        return SystemMessage(content=text, id=message.id)
    if message.role == "tool":
        return ToolMessage(content=text, id=message.id, tool_call_id=message.id)
    return HumanMessage(content=text, id=message.id)


def _is_message_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)


def _serde() -> JsonPlusSerializer:
    return JsonPlusSerializer(pickle_fallback=False)


# -- what the saver holds in memory --------------------------------------------------------


class _Held(NamedTuple):
    """A message of a thread's log as the saver holds it in memory.

    `pristine` (a LangChain message of its own, never handed out) is what a new
    checkpoint's messages are compared with; `text` (the message's `message_to_dict` as
    JSON), or `stored` for a message whose dict is not JSON, makes a fresh LangChain
    message for each read, so that a caller changing one in place changes nothing here.
    """

    pristine: BaseMessage
    text: str | None
    stored: Message


_CLASSES: dict[str, type[BaseMessage]] = {
    "human": HumanMessage,
    "ai": AIMessage,
    "system": SystemMessage,
    "tool": ToolMessage,
}


def _rebuild(dumped: Any) -> BaseMessage:
    """The LangChain message `message_to_dict` gave `dumped` for (which it now owns).

    One of the four usual types is rebuilt from its own `model_dump` without validating
    it again; others go through `messages_from_dict`.
    """
    cls = _CLASSES.get(dumped["type"])
    if cls is not None and isinstance(dumped.get("data"), dict):
        return cls.model_construct(**dumped["data"])
    return messages_from_dict([dumped])[0]


def _hold(message: BaseMessage, serde: SerializerProtocol) -> _Held:
    """The agent-threads message for a LangChain message (a new id), as held."""
    role = _ROLES.get(message.type, "user")
    text = message.text
    contents = (TextPart(text=text),) if text else ()
    dumped = message_to_dict(message)
    try:
        as_json: str | None = json.dumps(dumped, allow_nan=False)
    except (TypeError, ValueError):
        as_json = None
    metadata: dict[str, Any]
    if as_json is not None:
        metadata = {LANGCHAIN_KEY: dumped}
    else:
        kind, data = serde.dumps_typed(message)
        metadata = {_SERDE_KEY: [kind, base64.b64encode(data).decode()]}
    stored = Message(role=role, contents=contents, metadata=metadata)
    return _held(as_json, stored, serde)


def _held_from(stored: Message, serde: SerializerProtocol) -> _Held:
    """A message read back from the thread, as held."""
    dumped = stored.metadata.get(LANGCHAIN_KEY)
    return _held(json.dumps(dumped) if isinstance(dumped, dict) else None, stored, serde)


def _held(text: str | None, stored: Message, serde: SerializerProtocol) -> _Held:
    pristine = _rebuild(json.loads(text)) if text is not None else to_langchain(stored, serde)
    return _Held(pristine, text, stored)


def _unchanged(message: BaseMessage, held: _Held) -> bool:
    """Whether `message` equals the held one (its type and every field, extra ones too)."""
    pristine = held.pristine
    return (
        type(message) is type(pristine)
        and message.__dict__ == pristine.__dict__
        and message.__pydantic_extra__ == pristine.__pydantic_extra__
    )


def _fresh(held: Sequence[_Held], serde: SerializerProtocol) -> builtins.list[BaseMessage]:
    """New LangChain messages for held ones (nothing shared with what the saver holds)."""
    texts = [h.text for h in held if h.text is not None]
    dumped = iter(json.loads("[" + ",".join(texts) + "]"))
    return [
        _rebuild(next(dumped)) if h.text is not None else to_langchain(h.stored, serde)
        for h in held
    ]


@dataclass
class _Known:
    """What the saver knows of one agent-threads thread (a LangGraph thread and namespace).

    `entries` maps each LangGraph checkpoint id to its entry (message ranges resolved),
    tombstones included, as of the handle's record version; `held` maps log positions to
    the messages there, filled as they are written or read (the log is append-only, so a
    position's message never changes). `stale`: another writer moved the thread while
    this saver wrote; `entries` is read again before use.
    """

    thread: ChatMessageThread
    entries: dict[str, dict[str, Any]]
    held: dict[int, _Held] = field(default_factory=dict)
    stale: bool = False

    def live(self) -> builtins.list[tuple[str, dict[str, Any]]]:
        """The checkpoints not deleted, newest id first."""
        found = [(cid, e) for cid, e in self.entries.items() if not e.get("deleted")]
        return sorted(found, key=lambda item: item[0], reverse=True)

    def where(self) -> tuple[str, str] | None:
        """The LangGraph thread id and namespace the thread holds."""
        where = self.thread.metadata.get(_META_KEY)
        if isinstance(where, dict):
            return str(where["thread_id"]), str(where["ns"])
        return None


@dataclass
class _MessagesPlan:
    """A checkpoint's messages: kept ranges of its parent's list, then messages to append."""

    ranges: Ranges
    count: int
    version: Any
    new: builtins.list[_Held]

    def entry(self) -> dict[str, Any]:
        """The messages entry as stored (`new`: the last messages up to the checkpoint)."""
        entry: dict[str, Any] = {"ranges": self.ranges, "count": self.count}
        if self.new:
            entry["new"] = len(self.new)
        entry["version"] = self.version
        return entry


def _resolved(entry: dict[str, Any], message_count: int) -> dict[str, Any]:
    """The entry with its messages' ranges whole: the `new` ones end at `message_count`."""
    held = entry.get("messages")
    if not isinstance(held, dict) or "new" not in held:
        return entry
    ranges: Ranges = [list(r) for r in held["ranges"]]
    first = message_count - int(held["new"])
    if ranges and ranges[-1][1] == first:
        ranges[-1][1] = message_count
    else:
        ranges.append([first, message_count])
    messages = {k: v for k, v in held.items() if k != "new"}
    return {**entry, "messages": {**messages, "ranges": ranges}}


def _positions(ranges: Ranges) -> builtins.list[int]:
    return [p for start, end in ranges for p in range(start, end)]


def _prefix(ranges: Ranges, count: int) -> Ranges:
    """The ranges of the first `count` messages of `ranges`."""
    kept: Ranges = []
    for start, end in ranges:
        if count <= 0:
            break
        take = min(end - start, count)
        kept.append([start, start + take])
        count -= take
    return kept


def _packed(typed: tuple[str, bytes]) -> builtins.list[str]:
    return [typed[0], base64.b64encode(typed[1]).decode()]


def _unpacked(packed: Any) -> tuple[str, bytes]:
    kind, text = packed
    return str(kind), base64.b64decode(str(text))


# -- the saver -----------------------------------------------------------------------------

_INLINE_BYTES = 2048
"""A channel value serialized to at most this many bytes is kept in its checkpoint's row."""

_KNOWN_THREADS = 16
"""Threads whose checkpoints and messages a saver keeps in memory (the ones used last;
each holds its messages, as LangChain objects and JSON, and its thread handle holds them too)."""


class ThreadSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer storing each LangGraph thread in a `ChatMessageThread`.

    Args:
        store: any agent-threads store, opened.
        messages_channel: the channel stored as thread appends (when it holds a list of
            LangChain messages).
        serde: LangGraph's serializer for channel values and metadata (default
            `JsonPlusSerializer(pickle_fallback=False)`: nothing is unpickled).
    """

    def __init__(
        self,
        store: ThreadStore,
        *,
        messages_channel: str = "messages",
        serde: JsonPlusSerializer | None = None,
    ) -> None:
        super().__init__(serde=serde or _serde())
        self.store = store
        self.messages_channel = messages_channel
        self._known: dict[str, _Known] = {}
        self._writes: dict[str, Record] = {}
        self._lock = anyio.Lock()
        self._portal: BlockingPortal | None = None
        self._exits = ExitStack()
        self._portal_lock = threading.Lock()

    # -- sync ------------------------------------------------------------------------------

    def _portal_for_sync(self) -> BlockingPortal:
        with self._portal_lock:
            if self._portal is None:
                self._portal = self._exits.enter_context(start_blocking_portal())
            return self._portal

    def close(self) -> None:
        """Stop the event loop the sync methods run in (if they started it)."""
        with self._portal_lock:
            self._exits.close()
            self._portal = None

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return cast(CheckpointTuple | None, self._portal_for_sync().call(self.aget_tuple, config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        async def collect() -> builtins.list[CheckpointTuple]:
            return [t async for t in self.alist(config, filter=filter, before=before, limit=limit)]

        yield from self._portal_for_sync().call(collect)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        portal = self._portal_for_sync()
        return cast(
            RunnableConfig, portal.call(self.aput, config, checkpoint, metadata, new_versions)
        )

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._portal_for_sync().call(self.aput_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._portal_for_sync().call(self.adelete_thread, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._portal_for_sync().call(self.adelete_for_runs, run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._portal_for_sync().call(self.acopy_thread, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._portal_for_sync().call(lambda: self.aprune(thread_ids, strategy=strategy))

    def get_next_version(self, current: str | None, channel: None) -> str:
        """Versions as LangGraph's own savers write them: a zero-padded counter and a tie."""
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{0.0:016}"

    # -- async -----------------------------------------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, ns = _ids(config)
        wanted = get_checkpoint_id(config)
        async with self._lock:
            known = await self._read(thread_key(thread_id, ns))
            if known is None:
                return None
            if wanted is None:
                live = known.live()
                return await self._tuple(known, thread_id, ns, *live[0]) if live else None
            entry = known.entries.get(wanted)
            if entry is None or entry.get("deleted"):
                return None
            return await self._tuple(known, thread_id, ns, wanted, entry)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        wanted = get_checkpoint_id(config) if config is not None else None
        bound = get_checkpoint_id(before) if before is not None else None
        found: builtins.list[CheckpointTuple] = []
        async with self._lock:
            candidates = []
            for thread_id, ns, known in await self._knowns_for(config):
                for cid, entry in known.live():
                    if (wanted is None or cid == wanted) and (bound is None or cid < bound):
                        candidates.append((cid, thread_id, ns, known, entry))
            candidates.sort(key=lambda c: c[0], reverse=True)
            for cid, thread_id, ns, known, entry in candidates:
                if limit is not None and len(found) >= limit:
                    break
                if filter:
                    metadata = self._doc(entry)["metadata"]
                    if any(metadata.get(k) != v for k, v in filter.items()):
                        continue
                found.append(await self._tuple(known, thread_id, ns, cid, entry))
        for tup in found:
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint: one store write, and blobs for large channel values only.

        The messages its parent lacks are appended to the thread in the same write as
        the thread checkpoint standing for it (`on_new_messages(..., checkpoint=...)`).
        """
        thread_id, ns = _ids(config)
        async with self._lock:
            try:
                await self._put(config, checkpoint, metadata, new_versions)
            except ThreadNotFoundError:  # deleted elsewhere since this saver last wrote
                self._known.pop(thread_key(thread_id, ns), None)
                await self._put(config, checkpoint, metadata, new_versions)
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, ns = _ids(config)
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        key = thread_key(thread_id, ns)
        record_id = f"{key}.{_digest(checkpoint_id)}"
        async with self._lock:
            # as this saver last wrote it (None: new); a lost race reads it again
            record = self._writes.get(record_id)
            while True:
                held = self._merged_writes(record, writes, task_id, task_path)
                version = record.version if record is not None else 0
                new = Record(
                    kind=_WRITES_KIND,
                    id=record_id,
                    owner=key,
                    version=version,
                    data={"writes": held},
                )
                try:
                    stored = await self.store.put_record(new, expected_version=version)
                except ConflictError:  # another writer won: read its writes again
                    record = await self.store.get_record(_WRITES_KIND, record_id)
                    continue
                if len(self._writes) > 1024:
                    self._writes.clear()
                self._writes[record_id] = stored
                return

    def _merged_writes(
        self,
        record: Record | None,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> builtins.list[Any]:
        """The record's writes with these added (a special channel's write is kept once)."""
        held = list(cast(builtins.list[Any], record.data["writes"])) if record else []
        index = {(w[0], w[1]): n for n, w in enumerate(held)}
        for number, (channel, value) in enumerate(writes):
            idx = WRITES_IDX_MAP.get(channel, number)
            if idx >= 0 and (task_id, idx) in index:
                continue
            kind, data = self.serde.dumps_typed(value)
            row = [task_id, idx, channel, kind, base64.b64encode(data).decode(), task_path]
            if (task_id, idx) in index:
                held[index[(task_id, idx)]] = row
            else:
                index[(task_id, idx)] = len(held)
                held.append(row)
        return held

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._lock:
            tags = {_META_KEY: _digest(thread_id)}
            for key in await ChatMessageThread.find(self.store, tags=tags):
                self._known.pop(key, None)
                thread = await ChatMessageThread.load(key, store=self.store, lazy=True)
                where = thread.metadata.get(_META_KEY)
                if not isinstance(where, dict) or where.get("thread_id") != thread_id:
                    continue
                for kind in (_WRITES_KIND, _BLOBS_KIND):
                    for record in await self.store.list_records(kind, owner=key):
                        await self.store.delete_record(kind, record.id)
                        self._writes.pop(record.id, None)
                await thread.delete()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) whose metadata `run_id` is in `run_ids`.

        Like a thread's pop, nothing is erased: each is hidden by a later thread
        checkpoint marking it deleted, and the messages stay in the thread's log (other
        checkpoints may share them).
        """
        runs = set(run_ids)
        async with self._lock:
            for _, _, known in await self._knowns_for(None):
                doomed = [
                    cid
                    for cid, entry in known.live()
                    if self._doc(entry)["metadata"].get("run_id") in runs
                ]
                await self._hide(known, doomed)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of a thread (all namespaces) to another.

        The checkpoints are put again oldest first, each after its parent, so the copy
        stores its messages once too.
        """
        async with self._lock:
            copies = []
            for _, ns, known in await self._knowns_for(
                {"configurable": {"thread_id": source_thread_id}}
            ):
                for cid, entry in reversed(known.live()):
                    tup = await self._tuple(known, source_thread_id, ns, cid, entry)
                    copies.append((known.thread.id, ns, cid, tup))
        for source_key, ns, cid, tup in copies:
            target: RunnableConfig = {
                "configurable": {"thread_id": target_thread_id, "checkpoint_ns": ns}
            }
            if tup.parent_config is not None:
                parent = tup.parent_config["configurable"]["checkpoint_id"]
                target["configurable"]["checkpoint_id"] = parent
            versions = tup.checkpoint["channel_versions"]
            stored = await self.aput(target, tup.checkpoint, tup.metadata, dict(versions))
            async with self._lock:
                await self._copy_writes(source_key, cid, stored)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Keep only the newest checkpoint of each namespace ("keep_latest"), or none ("delete").

        "delete" deletes the threads; "keep_latest" hides the older checkpoints as
        `adelete_for_runs` does (the kept one's messages stay readable).

        Raises:
            InvalidValueError: an unknown strategy.
        """
        if strategy not in ("keep_latest", "delete"):
            raise InvalidValueError("prune strategy", reason=f"unknown: {strategy!r}")
        for thread_id in thread_ids:
            if strategy == "delete":
                await self.adelete_thread(thread_id)
                continue
            async with self._lock:
                for _, _, known in await self._knowns_for(
                    {"configurable": {"thread_id": thread_id}}
                ):
                    await self._hide(known, [cid for cid, _ in known.live()[1:]])

    # -- writing ---------------------------------------------------------------------------

    async def _put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> None:
        """`aput`, with the lock held."""
        thread_id, ns = _ids(config)
        parent_id = get_checkpoint_id(config)
        known = await self._for_write(thread_id, ns, parent_id)
        parent = known.entries.get(parent_id) if parent_id is not None else None
        if parent is not None and parent.get("deleted"):
            parent = None
        plan = await self._plan_messages(known, checkpoint, new_versions, parent)
        skip = self.messages_channel if plan is not None else None
        channels, digests = await self._pack_channels(checkpoint, new_versions, parent, skip)
        doc = {
            "checkpoint": {k: v for k, v in checkpoint.items() if k != "channel_values"},
            "metadata": get_serializable_checkpoint_metadata(config, metadata),
            "channels": channels,
        }
        entry: dict[str, Any] = {
            "id": checkpoint["id"],
            "doc": _packed(self.serde.dumps_typed(doc)),
        }
        if parent_id is not None:
            entry["parent"] = parent_id
        if digests:  # the blobs it uses, listed where `vacuum()` sees them (kept alive)
            await self._hold_blobs(known.thread.id, checkpoint["id"], digests)
        await self._write(known, entry, plan)

    async def _write(
        self, known: _Known, entry: dict[str, Any], plan: _MessagesPlan | None
    ) -> None:
        """The thread checkpoint standing for `entry`, with the plan's new messages."""
        thread = known.thread
        before = thread.version
        label = _label(str(entry["id"]))
        if plan is not None:
            entry["messages"] = plan.entry()
        if plan is not None and plan.new:
            made = await thread.on_new_messages(
                [h.stored for h in plan.new],
                checkpoint=label,
                checkpoint_metadata={_META_KEY: entry},
            )
            assert made is not None  # a checkpoint was asked for
            first = made.message_count - len(plan.new)
            for position, held in enumerate(plan.new, first):
                known.held[position] = held
        else:
            made = await thread.checkpoint(label, metadata={_META_KEY: entry})
        if thread.version == before + 1:  # nobody else wrote meanwhile
            known.entries[str(entry["id"])] = _resolved(entry, made.message_count)
        else:
            known.stale = True

    async def _plan_messages(
        self,
        known: _Known,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        parent: dict[str, Any] | None,
    ) -> _MessagesPlan | None:
        """The checkpoint's messages: the parent's as they are, or what to append.

        None when the messages channel holds no list of messages (it is then stored as
        any other channel). At the parent's version (and not new) the list is the
        parent's, as LangGraph's own savers read it; else the longest common start of
        both lists is kept and the rest appended.
        """
        channel = self.messages_channel
        version = checkpoint["channel_versions"].get(channel)
        if version is None:
            return None
        before = parent.get("messages") if parent is not None else None
        if not isinstance(before, dict):
            before = None
        if channel not in new_versions and before is not None and before["version"] == version:
            return _MessagesPlan(before["ranges"], int(before["count"]), version, [])
        value = checkpoint["channel_values"].get(channel)
        if not _is_message_list(value):
            return None
        messages = cast(builtins.list[BaseMessage], value)
        keep = 0
        kept: Ranges = []
        if before is not None:
            positions = _positions(before["ranges"])
            await self._hold_ranges(known, before["ranges"])
            held = known.held
            limit = min(len(positions), len(messages))
            while keep < limit and _unchanged(messages[keep], held[positions[keep]]):
                keep += 1
            kept = _prefix(before["ranges"], keep)
        new = [_hold(m, self.serde) for m in messages[keep:]]
        return _MessagesPlan(kept, len(messages), version, new)

    async def _pack_channels(
        self,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        parent: dict[str, Any] | None,
        skip: str | None,
    ) -> tuple[dict[str, builtins.list[Any]], builtins.list[str]]:
        """The channel values as stored (by channel), and the blob digests they use.

        A channel not in `new_versions` that the parent has at the same version keeps
        the parent's value, as LangGraph's own savers read it. A value of at most
        `_INLINE_BYTES` serialized is kept in the checkpoint; a larger one is a blob.
        """
        stored_before = self._doc(parent)["channels"] if parent is not None else {}
        values = checkpoint["channel_values"]
        channels: dict[str, builtins.list[Any]] = {}
        digests: builtins.list[str] = []
        for channel, version in checkpoint["channel_versions"].items():
            if channel == skip:
                continue
            stored = stored_before.get(channel)
            if channel in new_versions or stored is None or stored[0] != version:
                if channel not in values:
                    continue
                kind, data = self.serde.dumps_typed(values[channel])
                if len(data) <= _INLINE_BYTES:
                    stored = [version, [kind, data]]
                else:
                    stored = [version, await self.store.put_blob(kind.encode() + b"\n" + data)]
            channels[channel] = stored
            if isinstance(stored[1], str):
                digests.append(stored[1])
        return channels, digests

    async def _hold_blobs(self, key: str, checkpoint_id: str, digests: Sequence[str]) -> None:
        record_id = f"{key}.{_digest(checkpoint_id)}"
        refs: builtins.list[JsonValue] = list(dict.fromkeys(digests))
        held = Record(kind=_BLOBS_KIND, id=record_id, owner=key, data={"blobs": refs})
        version = 0  # a new checkpoint's, usually: read it only if it is there
        while True:
            try:
                await self.store.put_record(
                    held.model_copy(update={"version": version}), expected_version=version
                )
                return
            except ConflictError:
                existing = await self.store.get_record(_BLOBS_KIND, record_id)
                version = existing.version if existing is not None else 0

    async def _hide(self, known: _Known, checkpoint_ids: Sequence[str]) -> None:
        thread = known.thread
        for cid in checkpoint_ids:
            tombstone = {"id": cid, "deleted": True}
            before = thread.version
            await thread.checkpoint(_label(cid), metadata={_META_KEY: tombstone})
            if thread.version == before + 1:
                known.entries[cid] = tombstone
            else:
                known.stale = True
            record_id = f"{thread.id}.{_digest(cid)}"
            await self.store.delete_record(_WRITES_KIND, record_id)
            await self.store.delete_record(_BLOBS_KIND, record_id)
            self._writes.pop(record_id, None)

    async def _copy_writes(
        self, source_key: str, checkpoint_id: str, target: RunnableConfig
    ) -> None:
        record = await self.store.get_record(_WRITES_KIND, f"{source_key}.{_digest(checkpoint_id)}")
        if record is None:
            return
        thread_id, ns = _ids(target)
        key = thread_key(thread_id, ns)
        copy = Record(
            kind=_WRITES_KIND, id=f"{key}.{_digest(checkpoint_id)}", owner=key, data=record.data
        )
        existing = await self.store.get_record(_WRITES_KIND, copy.id)
        version = existing.version if existing is not None else 0
        self._writes.pop(copy.id, None)
        await self.store.put_record(
            copy.model_copy(update={"version": version}), expected_version=version
        )

    # -- reading ---------------------------------------------------------------------------

    async def _for_write(self, thread_id: str, ns: str, parent_id: str | None) -> _Known:
        """The thread to put a checkpoint in (created if new), as this saver knows it.

        Read from the store only when this saver does not know it, another writer moved
        it, or the parent is a checkpoint this saver has not seen; a write on a handle
        that another writer moved since retries after reading it again.
        """
        key = thread_key(thread_id, ns)
        known = self._known.pop(key, None)  # put back last: the threads used last stay
        if known is not None:
            self._known[key] = known
        parent_known = known is not None and (parent_id is None or parent_id in known.entries)
        if known is not None and parent_known and not known.stale:
            return known
        thread = await ChatMessageThread.get_or_create(
            key,
            store=self.store,
            tags={_META_KEY: _digest(thread_id)},
            metadata={_META_KEY: {"thread_id": thread_id, "ns": ns}},
        )
        return await self._adopt(thread)

    async def _read(self, key: str) -> _Known | None:
        """The thread as stored now (one record read), or None; known again if unchanged."""
        record = await self.store.get_record(THREAD_KIND, key)
        if record is None:
            self._known.pop(key, None)
            return None
        known = self._known.pop(key, None)  # put back last: the threads used last stay
        if known is not None:
            self._known[key] = known
        if known is not None and not known.stale and _same(known.thread.record, record):
            return known
        thread = await ChatMessageThread.load(key, store=self.store)
        return await self._adopt(thread)

    async def _adopt(self, thread: ChatMessageThread) -> _Known:
        """Know `thread` as read now: its checkpoints read from its log again."""
        entries: dict[str, dict[str, Any]] = {}
        for cp in await thread.checkpoints():
            entry = cp.metadata.get(_META_KEY)
            if isinstance(entry, dict):  # the last put of an id wins
                entries[str(entry["id"])] = _resolved(entry, cp.message_count)
        old = self._known.pop(thread.id, None)
        same = old is not None and old.thread.created_at == thread.created_at
        known = _Known(thread, entries, old.held if old is not None and same else {})
        if len(self._known) >= _KNOWN_THREADS:
            del self._known[next(iter(self._known))]
        self._known[thread.id] = known
        return known

    async def _knowns_for(
        self, config: RunnableConfig | None
    ) -> builtins.list[tuple[str, str, _Known]]:
        """The (thread_id, namespace, thread) a `list` call reads."""
        keys: builtins.list[str]
        if config is None:
            records = await self.store.list_records(THREAD_KIND, tags=[_META_KEY])
            keys = [r.id for r in records]
        else:
            thread_id = str(config["configurable"]["thread_id"])
            ns = config["configurable"].get("checkpoint_ns")
            if ns is not None:
                keys = [thread_key(thread_id, str(ns))]
            else:
                keys = await ChatMessageThread.find(
                    self.store, tags={_META_KEY: _digest(thread_id)}
                )
        found = []
        for key in keys:
            known = await self._read(key)
            where = known.where() if known is not None else None
            if known is None or where is None:
                continue
            if config is None or where[0] == str(config["configurable"]["thread_id"]):
                found.append((*where, known))
        return found

    async def _hold_ranges(self, known: _Known, ranges: Ranges) -> None:
        """Read into `known.held` the messages of `ranges` it does not hold yet."""
        held = known.held
        for start, end in ranges:
            if all(p in held for p in range(start, end)):
                continue
            for position, message in enumerate(await known.thread.get_messages(start, end), start):
                held[position] = _held_from(message, self.serde)

    def _doc(self, entry: dict[str, Any]) -> dict[str, Any]:
        """The entry's document, decoded anew (LangGraph changes what it is given)."""
        return cast(dict[str, Any], self.serde.loads_typed(_unpacked(entry["doc"])))

    async def _tuple(
        self,
        known: _Known,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        entry: dict[str, Any],
    ) -> CheckpointTuple:
        doc = self._doc(entry)
        values: dict[str, Any] = {}
        for channel, (_, ref) in doc["channels"].items():
            values[channel] = await self._value(ref)
        held = entry.get("messages")
        if isinstance(held, dict):
            await self._hold_ranges(known, held["ranges"])
            messages = [known.held[p] for p in _positions(held["ranges"])]
            values[self.messages_channel] = _fresh(messages, self.serde)
        checkpoint = cast(Checkpoint, {**doc["checkpoint"], "channel_values": values})
        config: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        parent = entry.get("parent")
        parent_config: RunnableConfig | None = None
        if parent is not None:
            parent_config = {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": ns,
                    "checkpoint_id": parent,
                }
            }
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, doc["metadata"]),
            parent_config=parent_config,
            pending_writes=await self._pending(known.thread.id, checkpoint_id),
        )

    async def _pending(self, key: str, checkpoint_id: str) -> builtins.list[tuple[str, str, Any]]:
        record = await self.store.get_record(_WRITES_KIND, f"{key}.{_digest(checkpoint_id)}")
        pending: builtins.list[tuple[str, str, Any]] = []
        if record is not None:
            rows = sorted(
                cast(builtins.list[builtins.list[Any]], record.data["writes"]),
                key=lambda w: (w[0], w[1]),
            )
            for task_id, _, channel, kind, data, _path in rows:
                value = self.serde.loads_typed((kind, base64.b64decode(data)))
                pending.append((task_id, channel, value))
        return pending

    async def _value(self, ref: Any) -> Any:
        """A channel value kept in the checkpoint (`[kind, data]`) or a blob (a digest)."""
        if not isinstance(ref, str):
            kind, data = ref
            return self.serde.loads_typed((str(kind), bytes(data)))
        blob = await self.store.get_blob(ref)
        if blob is None:
            raise InvalidValueError(f"LangGraph blob {ref!r}", reason="missing from the store")
        kind_bytes, _, data = blob.partition(b"\n")
        return self.serde.loads_typed((kind_bytes.decode(), data))


def _same(held: Record, stored: Record) -> bool:
    """Whether a stored thread record is the one a handle holds (same thread, version)."""
    created = held.data.get("created_at") == stored.data.get("created_at")
    return created and held.version == stored.version


def _ids(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _label(checkpoint_id: str) -> str:
    return checkpoint_id if len(checkpoint_id) <= 128 else _digest(checkpoint_id)
