"""ThreadSaver: a LangGraph checkpointer (`BaseCheckpointSaver`) on any agent-threads store.

`graph.compile(checkpointer=ThreadSaver(store))` keeps each LangGraph thread (a
`thread_id` and `checkpoint_ns`) in a `ChatMessageThread`:

- the graph's messages channel (`messages_channel`, default "messages") is stored as
  appends to the thread: each checkpoint appends only the messages its parent did not
  have (a delta), and refers to its whole list as ranges of the thread's append-only
  log, so storage grows with the conversation, not with the number of checkpoints
  times its length. A list that is not its parent's plus new messages (a message
  replaced or removed by `add_messages`) is appended whole, once;
- every other channel value is a content-addressed blob (`store.put_blob`): an
  unchanged value is stored once whatever the number of checkpoints;
- each LangGraph checkpoint is a checkpoint of the thread, labelled with the LangGraph
  checkpoint id, whose metadata holds the message ranges and the digest of a blob with
  the rest (LangGraph's checkpoint without its values, its metadata, and the channel
  blob digests). `get_state_history`, `update_state` on an old checkpoint (a fork) and
  resuming from it work as with LangGraph's own savers;
- pending writes are one store record per checkpoint, and so is the list of the blobs a
  checkpoint uses (a record's `blobs`, which `store.vacuum()` keeps);
- `copy_thread` puts the checkpoints again, oldest first (the copy's messages are stored
  once too); `prune(strategy="keep_latest")` and `delete_for_runs` hide checkpoints
  behind a later thread checkpoint marking them deleted (like a thread's pop, nothing is
  erased: the messages stay in the thread's log); `delete_thread` deletes the threads.

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
import copy
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import ExitStack
from datetime import datetime
from typing import Any, cast

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from pydantic import JsonValue

from agent_threads.core.records import THREAD_KIND
from agent_threads.errors import ConflictError, InvalidValueError
from agent_threads.messages import Message, Role, TextPart
from agent_threads.stores.base import Record, ThreadStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.timetravel.checkpoint import Checkpoint as ThreadCheckpoint

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


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return False
    return True


def from_langchain(message: BaseMessage, serde: SerializerProtocol | None = None) -> Message:
    """The agent-threads message for a LangChain message (a new id; the original kept).

    Its role and text are read from the LangChain message; the message's serialized form
    (`message_to_dict`, else LangGraph's serde, base64) is kept under `LANGCHAIN_KEY` so
    `to_langchain` gives it back unchanged.
    """
    role = _ROLES.get(message.type, "user")
    text = message.text
    contents = (TextPart(text=text),) if text else ()
    dumped = message_to_dict(message)
    metadata: dict[str, Any]
    if _jsonable(dumped):
        metadata = {LANGCHAIN_KEY: dumped}
    else:
        kind, data = (serde or _serde()).dumps_typed(message)
        metadata = {_SERDE_KEY: [kind, base64.b64encode(data).decode()]}
    return Message(role=role, contents=contents, metadata=metadata)


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


def _fingerprint(message: BaseMessage) -> bytes:
    try:
        text = json.dumps(message_to_dict(message), sort_keys=True, default=repr)
    except (TypeError, ValueError):
        text = repr(message)
    return hashlib.sha256(text.encode()).digest()


def _prefix_hashes(messages: Sequence[BaseMessage]) -> list[str]:
    """hashes[i]: the hash of the first i messages."""
    running = hashlib.sha256()
    hashes = [running.hexdigest()]
    for message in messages:
        running.update(_fingerprint(message))
        hashes.append(running.hexdigest())
    return hashes


def _is_message_list(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(m, BaseMessage) for m in value)


def _serde() -> JsonPlusSerializer:
    return JsonPlusSerializer(pickle_fallback=False)


# -- the saver -----------------------------------------------------------------------------


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
        self._docs: dict[str, dict[str, Any]] = {}
        self._entry_cache: dict[str, tuple[tuple[datetime, int], dict[str, dict[str, Any]]]] = {}
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
        thread = await self._thread(thread_id, ns)
        if thread is None:
            return None
        wanted = get_checkpoint_id(config)
        entries = await self._entries(thread)
        if wanted is not None:
            entries = [e for e in entries if e[0] == wanted]
        if not entries:
            return None
        return await self._tuple(thread, thread_id, ns, *entries[0])

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        threads = await self._threads_for(config)
        wanted = get_checkpoint_id(config) if config is not None else None
        bound = get_checkpoint_id(before) if before is not None else None
        found_tuples: builtins.list[CheckpointTuple] = []
        for thread_id, ns, thread in threads:
            for cid, entry in await self._entries(thread):
                if wanted is not None and cid != wanted:
                    continue
                if bound is not None and cid >= bound:
                    continue
                tup = await self._tuple(thread, thread_id, ns, cid, entry)
                if filter and any(tup.metadata.get(k) != v for k, v in filter.items()):
                    continue
                found_tuples.append(tup)
        found_tuples.sort(key=lambda t: t.checkpoint["id"], reverse=True)
        for count, tup in enumerate(found_tuples):
            if limit is not None and count >= limit:
                return
            yield tup

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, ns = _ids(config)
        parent_id = get_checkpoint_id(config)
        async with self._lock:
            thread = await ChatMessageThread.get_or_create(
                thread_key(thread_id, ns),
                store=self.store,
                tags={_META_KEY: _digest(thread_id)},
                metadata={_META_KEY: {"thread_id": thread_id, "ns": ns}},
                lazy=True,
            )
            entries = dict(await self._entries(thread))
            parent = entries.get(parent_id) if parent_id is not None else None
            channels, messages_entry = await self._store_channels(
                thread, checkpoint, new_versions, parent
            )
            skeleton = {k: v for k, v in checkpoint.items() if k != "channel_values"}
            doc = {
                "checkpoint": skeleton,
                "metadata": get_serializable_checkpoint_metadata(config, metadata),
                "channels": channels,
            }
            doc_digest = await self._put_value(doc)
            # the blobs a checkpoint uses, listed where `vacuum()` sees them (kept alive)
            digests = [doc_digest, *(d for _, d in channels.values() if d is not None)]
            await self._hold_blobs(thread.id, checkpoint["id"], digests)
            new_entry: dict[str, Any] = {"id": checkpoint["id"], "doc": doc_digest}
            if parent_id is not None:
                new_entry["parent"] = parent_id
            if messages_entry is not None:
                new_entry["messages"] = messages_entry
            before = (thread.created_at, thread.version)
            await thread.checkpoint(_label(checkpoint["id"]), metadata={_META_KEY: new_entry})
            if thread.version == before[1] + 1:  # nobody else wrote meanwhile
                self._remember(thread, {**entries, checkpoint["id"]: new_entry})
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
            while True:
                record = await self.store.get_record(_WRITES_KIND, record_id)
                held: builtins.list[Any] = (
                    list(cast(builtins.list[Any], record.data["writes"])) if record else []
                )
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
                new = Record(
                    kind=_WRITES_KIND,
                    id=record_id,
                    owner=key,
                    version=record.version if record is not None else 0,
                    data={"writes": held},
                )
                try:
                    await self.store.put_record(
                        new, expected_version=record.version if record is not None else 0
                    )
                except ConflictError:  # another writer won: read its writes again
                    continue
                return

    async def adelete_thread(self, thread_id: str) -> None:
        async with self._lock:
            tags = {_META_KEY: _digest(thread_id)}
            for key in await ChatMessageThread.find(self.store, tags=tags):
                thread = await ChatMessageThread.load(key, store=self.store, lazy=True)
                where = thread.metadata.get(_META_KEY)
                if not isinstance(where, dict) or where.get("thread_id") != thread_id:
                    continue
                for kind in (_WRITES_KIND, _BLOBS_KIND):
                    for record in await self.store.list_records(kind, owner=key):
                        await self.store.delete_record(kind, record.id)
                await thread.delete()

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Drop the checkpoints (and their writes) whose metadata `run_id` is in `run_ids`.

        Like a thread's pop, nothing is erased: each is hidden by a later thread
        checkpoint marking it deleted, and the messages stay in the thread's log (other
        checkpoints may share them).
        """
        runs = set(run_ids)
        async with self._lock:
            for _, _, thread in await self._threads_for(None):
                doomed = []
                for cid, entry in await self._entries(thread):
                    doc = await self._doc(str(entry["doc"]))
                    if doc["metadata"].get("run_id") in runs:
                        doomed.append(cid)
                await self._hide(thread, doomed)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint and pending write of a thread (all namespaces) to another.

        The checkpoints are put again oldest first, each after its parent, so the copy
        stores its messages once too.
        """
        for ns in await self._namespaces(source_thread_id):
            thread = await self._thread(source_thread_id, ns)
            if thread is None:
                continue
            for cid, entry in reversed(await self._entries(thread)):
                tup = await self._tuple(thread, source_thread_id, ns, cid, entry)
                target: RunnableConfig = {
                    "configurable": {"thread_id": target_thread_id, "checkpoint_ns": ns}
                }
                if tup.parent_config is not None:
                    parent = tup.parent_config["configurable"]["checkpoint_id"]
                    target["configurable"]["checkpoint_id"] = parent
                versions = tup.checkpoint["channel_versions"]
                stored = await self.aput(target, tup.checkpoint, tup.metadata, dict(versions))
                await self._copy_writes(thread.id, cid, stored)

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
                for ns in await self._namespaces(thread_id):
                    thread = await self._thread(thread_id, ns)
                    if thread is not None:
                        entries = await self._entries(thread)
                        await self._hide(thread, [cid for cid, _ in entries[1:]])

    async def _hold_blobs(self, key: str, checkpoint_id: str, digests: Sequence[str]) -> None:
        record_id = f"{key}.{_digest(checkpoint_id)}"
        existing = await self.store.get_record(_BLOBS_KIND, record_id)
        version = existing.version if existing is not None else 0
        refs: builtins.list[JsonValue] = list(dict.fromkeys(digests))
        held = Record(kind=_BLOBS_KIND, id=record_id, owner=key, data={"blobs": refs})
        await self.store.put_record(
            held.model_copy(update={"version": version}), expected_version=version
        )

    async def _hide(self, thread: ChatMessageThread, checkpoint_ids: Sequence[str]) -> None:
        for cid in checkpoint_ids:
            tombstone = {"id": cid, "deleted": True}
            await thread.checkpoint(_label(cid), metadata={_META_KEY: tombstone})
            await self.store.delete_record(_WRITES_KIND, f"{thread.id}.{_digest(cid)}")
            await self.store.delete_record(_BLOBS_KIND, f"{thread.id}.{_digest(cid)}")

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
        await self.store.put_record(
            copy.model_copy(update={"version": version}), expected_version=version
        )

    # -- helpers ---------------------------------------------------------------------------

    async def _threads_for(
        self, config: RunnableConfig | None
    ) -> builtins.list[tuple[str, str, ChatMessageThread]]:
        """The (thread_id, namespace, thread) a `list` call reads."""
        threads: builtins.list[tuple[str, str, ChatMessageThread]] = []
        if config is None:
            for record in await self.store.list_records(THREAD_KIND, tags=[_META_KEY]):
                thread = await ChatMessageThread.load(record.id, store=self.store, lazy=True)
                where = thread.metadata.get(_META_KEY)
                if isinstance(where, dict):
                    threads.append((str(where["thread_id"]), str(where["ns"]), thread))
        else:
            thread_id = str(config["configurable"]["thread_id"])
            namespaces = _namespaces(config)
            for ns in namespaces if namespaces is not None else await self._namespaces(thread_id):
                found = await self._thread(thread_id, ns)
                if found is not None:
                    threads.append((thread_id, ns, found))
        return threads

    async def _store_channels(
        self,
        thread: ChatMessageThread,
        checkpoint: Checkpoint,
        new_versions: ChannelVersions,
        parent: dict[str, Any] | None,
    ) -> tuple[dict[str, builtins.list[Any]], dict[str, Any] | None]:
        """Store the channel values: blob digests by channel, and the messages' ranges.

        A channel not in `new_versions` and not given keeps its parent's value when the
        parent has it at the same version (as LangGraph's own savers load it).
        """
        parent_doc = await self._doc(parent["doc"]) if parent is not None else None
        values = dict(checkpoint["channel_values"])
        versions = checkpoint["channel_versions"]
        channels: dict[str, builtins.list[Any]] = {}
        messages_entry: dict[str, Any] | None = None
        for channel, version in versions.items():
            inherited = _inherit(parent_doc, parent, channel, version, self.messages_channel)
            if channel not in new_versions and channel not in values and inherited:
                if channel == self.messages_channel and isinstance(inherited, dict):
                    messages_entry = inherited
                else:
                    channels[channel] = cast(builtins.list[Any], inherited)
                continue
            if channel not in values:
                continue
            value = values[channel]
            if channel == self.messages_channel and _is_message_list(value):
                messages_entry = await self._put_messages(
                    thread, cast(builtins.list[BaseMessage], value), parent, version
                )
            else:
                channels[channel] = [version, await self._put_value(value)]
        return channels, messages_entry

    async def _thread(self, thread_id: str, ns: str) -> ChatMessageThread | None:
        key = thread_key(thread_id, ns)
        if await self.store.get_record(THREAD_KIND, key) is None:
            return None
        return await ChatMessageThread.load(key, store=self.store, lazy=True)

    async def _namespaces(self, thread_id: str) -> builtins.list[str]:
        found = []
        tags = {_META_KEY: _digest(thread_id)}
        for key in await ChatMessageThread.find(self.store, tags=tags):
            record = await self.store.get_record(THREAD_KIND, key)
            if record is None:
                continue
            thread = await ChatMessageThread.load(key, store=self.store, lazy=True)
            where = thread.metadata.get(_META_KEY)
            if isinstance(where, dict) and where.get("thread_id") == thread_id:
                found.append(str(where["ns"]))
        return found

    async def _entries(
        self, thread: ChatMessageThread
    ) -> builtins.list[tuple[str, dict[str, Any]]]:
        """The thread's LangGraph checkpoints, newest id first (the last put of an id wins).

        Kept for the thread's record version: the log is read again only when the thread
        changed since (by another saver or process).
        """
        key = (thread.created_at, thread.version)
        cached = self._entry_cache.get(thread.id)
        if cached is not None and cached[0] == key:
            latest = cached[1]
        else:
            latest = {}
            checkpoints: Sequence[ThreadCheckpoint] = await thread.checkpoints()
            for cp in checkpoints:
                entry = cp.metadata.get(_META_KEY)
                if isinstance(entry, dict):
                    latest[str(entry["id"])] = cast(dict[str, Any], entry)
            self._remember(thread, latest)
        live = [(cid, entry) for cid, entry in latest.items() if not entry.get("deleted")]
        return sorted(live, key=lambda item: item[0], reverse=True)

    def _remember(self, thread: ChatMessageThread, entries: dict[str, dict[str, Any]]) -> None:
        if len(self._entry_cache) > 256:
            self._entry_cache.clear()
        self._entry_cache[thread.id] = ((thread.created_at, thread.version), entries)

    async def _tuple(
        self,
        thread: ChatMessageThread,
        thread_id: str,
        ns: str,
        checkpoint_id: str,
        entry: dict[str, Any],
    ) -> CheckpointTuple:
        # LangGraph changes the checkpoint it is given in place: give it a copy
        doc = copy.deepcopy(await self._doc(str(entry["doc"])))
        values: dict[str, Any] = {}
        for channel, (_, digest) in doc["channels"].items():
            values[channel] = await self._value(digest)
        held = entry.get("messages")
        if isinstance(held, dict):
            messages: builtins.list[BaseMessage] = []
            for start, end in held["ranges"]:
                for message in await thread.get_messages(start, end):
                    messages.append(to_langchain(message, self.serde))
            values[self.messages_channel] = messages
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
        record = await self.store.get_record(_WRITES_KIND, f"{thread.id}.{_digest(checkpoint_id)}")
        pending: builtins.list[tuple[str, str, Any]] = []
        if record is not None:
            rows = sorted(
                cast(builtins.list[builtins.list[Any]], record.data["writes"]),
                key=lambda w: (w[0], w[1]),
            )
            for task_id, _, channel, kind, data, _path in rows:
                value = self.serde.loads_typed((kind, base64.b64decode(data)))
                pending.append((task_id, channel, value))
        return CheckpointTuple(
            config=config,
            checkpoint=checkpoint,
            metadata=cast(CheckpointMetadata, doc["metadata"]),
            parent_config=parent_config,
            pending_writes=pending,
        )

    async def _put_value(self, value: Any) -> str:
        kind, data = self.serde.dumps_typed(value)
        return await self.store.put_blob(kind.encode() + b"\n" + data)

    async def _value(self, digest: str | None) -> Any:
        if digest is None:
            return None
        blob = await self.store.get_blob(digest)
        if blob is None:
            raise InvalidValueError(f"LangGraph blob {digest!r}", reason="missing from the store")
        kind, _, data = blob.partition(b"\n")
        return self.serde.loads_typed((kind.decode(), data))

    async def _doc(self, digest: str) -> dict[str, Any]:
        doc = self._docs.get(digest)
        if doc is None:
            doc = cast(dict[str, Any], await self._value(digest))
            if len(self._docs) > 1024:
                self._docs.clear()
            self._docs[digest] = doc
        return doc

    async def _put_messages(
        self,
        thread: ChatMessageThread,
        messages: builtins.list[BaseMessage],
        parent: dict[str, Any] | None,
        version: Any,
    ) -> dict[str, Any]:
        """Append what the parent's list lacks; the ranges of the whole list in the log."""
        hashes = _prefix_hashes(messages)
        before = parent.get("messages") if parent is not None else None
        ranges: Ranges = []
        start = 0
        if isinstance(before, dict):
            count = int(before["count"])
            if count <= len(messages) and hashes[count] == before["hash"]:
                ranges = [list(r) for r in before["ranges"]]
                start = count
        new = messages[start:]
        if new:
            batch = [from_langchain(m, self.serde) for m in new]
            await thread.on_new_messages(batch)
            end = thread.head
            first = end - len(batch)
            if ranges and ranges[-1][1] == first:
                ranges[-1][1] = end
            else:
                ranges.append([first, end])
        return {
            "ranges": ranges,
            "count": len(messages),
            "hash": hashes[-1],
            "version": version,
        }


def _inherit(
    parent_doc: dict[str, Any] | None,
    parent: dict[str, Any] | None,
    channel: str,
    version: Any,
    messages_channel: str,
) -> Any:
    """The parent's stored value of `channel` if it is at `version` (else None)."""
    if parent_doc is None or parent is None:
        return None
    if channel == messages_channel:
        held = parent.get("messages")
        if isinstance(held, dict) and held.get("version") == version:
            return held
    stored = parent_doc["channels"].get(channel)
    if stored is not None and stored[0] == version:
        return stored
    return None


def _ids(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns", ""))


def _namespaces(config: RunnableConfig) -> list[str] | None:
    ns = config["configurable"].get("checkpoint_ns")
    return None if ns is None else [str(ns)]


def _label(checkpoint_id: str) -> str:
    return checkpoint_id if len(checkpoint_id) <= 128 else _digest(checkpoint_id)
