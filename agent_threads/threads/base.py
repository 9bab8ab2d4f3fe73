"""AgentThread: the handle every kind of thread shares (identity, metadata, state, stats).

A handle is bound to one store and caches the thread's record (with its version). All
writes go through `publish`, a compare-and-set on that record: a writer that loses
the race re-reads the record and tries again, so two handles never overwrite each other.
"""

from __future__ import annotations

import copy as copy_module
import json
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar, Self

import anyio
from pydantic import BaseModel, ConfigDict, JsonValue

from agent_threads.core.clock import now_iso
from agent_threads.core.copies import replaced
from agent_threads.core.ids import new_id, validate_id
from agent_threads.core.pieces import Ranges
from agent_threads.core.records import (
    SCHEMA_VERSION,
    THREAD_KIND,
    ThreadData,
    ThreadStats,
    clean_metadata,
    clean_title,
    put_new,
    read_state,
    read_thread_data,
    thread_exists,
)
from agent_threads.core.retry import RetryPolicy
from agent_threads.core.tags import (
    Tags,
    clean_tags,
    labels_of,
    labels_to_tags,
    pair_label,
    stored_tags,
)
from agent_threads.errors import (
    ConflictError,
    InvalidValueError,
    MessageNotFoundError,
    SchemaVersionError,
    ThreadNotFoundError,
)
from agent_threads.messages import Message
from agent_threads.state import ImmutableState
from agent_threads.stores.base import LOGS_KEY, Record, RowWrite, ThreadStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.timetravel.checkpoint import Checkpoint
from agent_threads.timetravel.checkpoints import (
    delete_checkpoints,
    find_checkpoint,
    list_checkpoints,
    save_checkpoint,
)
from agent_threads.timetravel.history import LoadedHistory, history_section, load_history
from agent_threads.timetravel.lineage import Ancestor, lineage
from agent_threads.timetravel.snapshot import ThreadSnapshot
from agent_threads.timetravel.travel import rollback, snapshot

EXPORT_SCHEMA_VERSION = 2
"""Version of the `to_json` format this code writes (2: `tags` is an object of strings).

A document of version 1 holds `tags` as a list of labels; each label `x` is imported
as the tag `{"x": ""}`.
"""

EXPORT_FORMAT = "agent-threads/thread"


def _export_tags(document: Mapping[str, Any], version: int) -> Tags:
    """The tags of an export document: a list of labels in version 1, an object since.

    Tags as a thread may hold them (`stored_tags`): an export of a thread whose tags
    are labels of an older version imports again.

    Raises:
        InvalidValueError: they are malformed, naming the export and the tag.
    """
    where = f"thread export {document.get('id')!r} tags"
    value = document.get("tags")
    if version == 1 and isinstance(value, list):
        return Tags.of(labels_to_tags(value, where=where))
    return Tags.of(stored_tags(value, where=where))


def _dump(document: dict[str, Any]) -> str:
    return json.dumps(document, ensure_ascii=False, indent=1)


def _origin(data: Mapping[str, JsonValue]) -> JsonValue:
    """The point a thread starts from: its ranges, state and stats at creation or fork.

    `data` is the record data being written, `ranges` a chat thread's content.
    """
    return {"ranges": data.get("ranges") or [], "state": data["state"], "stats": data["stats"]}


_WRITER_LOCKS: weakref.WeakValueDictionary[tuple[int, str], anyio.Lock] = (
    weakref.WeakValueDictionary()
)


def _writer_lock(store: ThreadStore, thread_id: str) -> anyio.Lock:
    """The lock under which every handle of this thread on this store object works.

    Shared, so the writers of one store client queue in turn (the lock is fair) instead
    of racing each other's compare-and-set: only other clients' and processes' writes
    can be lost races. Kept while a handle holds it. Fast to take when free: its holders
    await the store anyway.
    """
    key = (id(store), thread_id)
    lock = _WRITER_LOCKS.get(key)
    if lock is None:
        lock = _WRITER_LOCKS[key] = anyio.Lock(fast_acquire=True)
    return lock


def _export_document(data: object) -> dict[str, Any]:
    """The document `from_json` was given, as a dict of the export format.

    Raises:
        InvalidValueError: it is not JSON, not an object, or not a thread export.
    """
    where = "thread export"
    try:
        document = json.loads(data) if isinstance(data, str | bytes) else data
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidValueError(where, reason=f"not JSON: {exc}") from exc
    if not isinstance(document, Mapping):
        raise InvalidValueError(where, reason=f"a JSON object is needed, not {document!r:.60}")
    if document.get("format") != EXPORT_FORMAT:
        raise InvalidValueError(
            where, reason=f"not an agent-threads thread export (format must be {EXPORT_FORMAT!r})"
        )
    return dict(document)


class _Header(BaseModel):
    """What is read of a thread record before its version is known to be readable."""

    model_config = ConfigDict(frozen=True, extra="ignore")
    schema_version: JsonValue = None
    type: JsonValue = None


class AgentThread(ABC):
    """A thread handle: id, title, tags, metadata, stats, state, and the store it lives in.

    Construct with `await Cls.create(...)`, `await Cls.load(...)` or
    `await AgentThread.from_json(...)`; the constructor is not public.
    """

    type_name: ClassVar[str]
    _types: ClassVar[dict[str, type[AgentThread]]] = {}
    data_schema: ClassVar[type[ThreadData]] = ThreadData
    """The typed form of this type's record data (a subclass extends `ThreadData`)."""

    _store: ThreadStore
    _record: Record
    _data: ThreadData
    """`_record.data`, read as `data_schema` (on every bind, refresh and write)."""
    _state: ImmutableState
    _lock: anyio.Lock
    _history: LoadedHistory | None
    """The history `to_json` writes, if this handle holds one (see `_history.py`)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        name = cls.__dict__.get("type_name")
        if isinstance(name, str):
            AgentThread._types[name] = cls

    def __init__(self, *args: object, **kwargs: object) -> None:
        name = type(self).__name__
        raise TypeError(
            f"{name}() is not public: use `await {name}.create(store=...)` for a new thread"
            f" or `await {name}.load(thread_id, store=...)` for a stored one"
        )

    # -- construction -------------------------------------------------------------

    @classmethod
    def _bind(cls, store: ThreadStore, record: Record, state: ImmutableState) -> Self:
        handle = object.__new__(cls)
        handle._store = store
        handle._state = state
        handle._lock = _writer_lock(store, record.id)
        handle._history = None
        handle._take(record)
        return handle

    def _take(self, record: Record) -> None:
        """Make `record` this handle's, read as the type's `data_schema`."""
        self._data = read_thread_data(record, self.data_schema)
        self._record = record
        self._on_bind()

    def _on_bind(self) -> None:  # noqa: B027 - a hook; most subclasses have fields to read
        """Hook: read the subclass's fields from `self._data` (its `data_schema`).

        Called whenever the handle takes a record: when it is bound, refreshed, rolled
        back, and after each write it publishes.
        """

    @classmethod
    def new_record(
        cls,
        *,
        thread_id: str | None,
        title: str | None,
        tags: Mapping[str, str] | None,
        metadata: Mapping[str, Any] | None,
        parent_id: str | None = None,
        fork_point: str | None = None,
        stats: ThreadStats | None = None,
        state_digest: str | None = None,
        extra: Mapping[str, JsonValue] | None = None,
    ) -> Record:
        """A new, unsaved thread record of this type.

        `tags` are checked by the rules of `core.tags` (a thread's `tags` are taken as
        they are); the record holds them in its data and as its labels.

        Raises:
            InvalidIdError: `thread_id` is not a valid id.
            InvalidValueError: the title, tags or metadata are not acceptable, naming them.
        """
        thread_id = new_id() if thread_id is None else validate_id(thread_id, what="thread id")
        clean = clean_tags(tags, where=f"thread {thread_id!r} tags")
        now = now_iso()
        data: dict[str, JsonValue] = {
            "schema_version": SCHEMA_VERSION,
            "type": cls.type_name,
            "title": clean_title(title, f"thread {thread_id!r} title"),
            "tags": dict(clean),
            "metadata": clean_metadata(metadata, what=f"thread {thread_id!r} metadata"),
            "parent_id": parent_id,
            "fork_point": fork_point,
            "created_at": now,
            "updated_at": now,
            "stats": (stats or ThreadStats()).model_dump(),
            "state": state_digest,
            "blobs": [state_digest] if state_digest else [],
            LOGS_KEY: [],
            **(extra or {}),
        }
        data["origin"] = _origin(data)
        return Record(kind=THREAD_KIND, id=thread_id, tags=labels_of(clean), data=data)

    @classmethod
    async def _read_record(cls, store: ThreadStore, thread_id: str) -> Record:
        validate_id(thread_id, what="thread id")
        record = await store.get_record(THREAD_KIND, thread_id)
        if record is None:
            raise ThreadNotFoundError(thread_id)
        header = _Header.model_validate(record.data)
        where = f"thread {thread_id!r} record"
        SchemaVersionError.check(header.schema_version, where, newest=SCHEMA_VERSION)
        type_name = header.type
        if cls is not AgentThread and type_name != cls.type_name:
            raise ThreadNotFoundError(
                thread_id, detail=f"it is a {type_name!r} thread, not a {cls.type_name!r} one"
            )
        return record

    @staticmethod
    async def _read_state(store: ThreadStore, record: Record) -> ImmutableState:
        digest = read_thread_data(record, ThreadData).state
        return await read_state(store, digest, owner=f"thread {record.id!r}")

    @classmethod
    async def load(cls, thread_id: str, *, store: ThreadStore) -> AgentThread:
        """Open a stored thread, as the subclass its record names.

        Raises:
            ThreadNotFoundError: no thread (of this class) has this id.
            SchemaVersionError: the record was written by a newer version.
        """
        record = await cls._read_record(store, thread_id)
        type_name = _Header.model_validate(record.data).type
        target = AgentThread._types.get(type_name) if isinstance(type_name, str) else None
        if target is None:
            raise SchemaVersionError(
                f"thread {thread_id!r} type", found=type_name, supported=sorted(cls._types)
            )
        return await target._open(store, record)

    @classmethod
    async def find(cls, store: ThreadStore, *, tags: Mapping[str, str]) -> list[str]:
        """The ids of the stored threads of this type holding every pair of `tags`, sorted.

        `AgentThread.find` lists threads of every type; `find(store, tags={})` every
        thread. Matches are exact: the store lists the records by their labels (the keys,
        and `key=value` for a non-empty value, see `core.tags`), then each record's tags
        are compared, so a thread stored by an older version (whose record holds only its
        labels) is found too. Tags are checked as in `update`.

        Raises:
            InvalidValueError: `tags` is not a dict of keys and values following the rules.
            SchemaVersionError: a record holding those labels was written by a newer version.
        """
        wanted = clean_tags(tags, where="find tags")
        labels = [*wanted, *(pair_label(k, v) for k, v in wanted.items() if v)]
        found = []
        for record in await store.list_records(THREAD_KIND, tags=labels):
            header = _Header.model_validate(record.data)
            where = f"thread {record.id!r} record"
            SchemaVersionError.check(header.schema_version, where, newest=SCHEMA_VERSION)
            if cls is not AgentThread and header.type != cls.type_name:
                continue
            held = read_thread_data(record, ThreadData).tags
            if all(held.get(key) == value for key, value in wanted.items()):
                found.append(record.id)
        return found

    @classmethod
    @abstractmethod
    async def _open(cls, store: ThreadStore, record: Record) -> Self:
        """Hook: bind a handle to a record read from the store and load its content.

        Called by `AgentThread.load` once the record's version and type are checked;
        each subclass reads what it holds beyond the record (messages, sub-threads).
        """

    # -- identity and metadata -------------------------------------------------------

    @property
    def id(self) -> str:
        """The thread id."""
        return self._record.id

    @property
    def store(self) -> ThreadStore:
        """The store this thread lives in."""
        return self._store

    @property
    def title(self) -> str | None:
        """The title, if any."""
        return self._data.title

    @property
    def tags(self) -> Mapping[str, str]:
        """The tags, key to value, sorted by key (read-only; see `update(tags=...)`)."""
        return Tags.of(self._data.tags)

    @property
    def metadata(self) -> Mapping[str, JsonValue]:
        """User metadata (read-only; change it with `update(metadata=...)`)."""
        return MappingProxyType(self._data.metadata)

    @property
    def parent_id(self) -> str | None:
        """The id of the thread this one was forked from, if any."""
        return self._data.parent_id

    @property
    def fork_point(self) -> str | None:
        """The id of the last message shared with the parent at fork time, if any."""
        return self._data.fork_point

    @property
    def created_at(self) -> datetime:
        """When the thread was created (UTC)."""
        return datetime.fromisoformat(self._data.created_at)

    @property
    def stats(self) -> ThreadStats:
        """Messages appended and usage summed over them."""
        return self._data.stats

    @property
    def state(self) -> ImmutableState:
        """The thread's agent state."""
        return self._state

    @property
    def state_digest(self) -> str | None:
        """The content address of the state as stored (None: the empty state)."""
        return self._data.state

    @property
    def record_data(self) -> ThreadData:
        """The thread record's data, typed (this handle's last read or write)."""
        return self._data

    @property
    def record(self) -> Record:
        """The thread record this handle last read or wrote (version 0: an unsaved copy).

        For the layers built on threads (time travel, workflows); applications read the
        properties above instead.
        """
        return self._record

    @property
    def version(self) -> int:
        """The stored record version this handle last saw."""
        return self._record.version

    def __repr__(self) -> str:
        return f"<{type(self).__name__} id={self.id!r} title={self.title!r}>"

    # -- writing ----------------------------------------------------------------------

    async def publish(
        self,
        data: Mapping[str, JsonValue],
        *,
        tags: Mapping[str, str] | None = None,
        writes: Sequence[RowWrite] = (),
        typed: Mapping[str, object] | None = None,
    ) -> None:
        """Compare-and-set the record with `data` merged in; ConflictError if someone won.

        `tags` (checked already, see `core.tags.clean_tags`) replace the thread's tags,
        in the data and in the record's labels. With `writes`, their rows are written in
        the same store write (`ThreadStore.commit`): all of it or, on a ConflictError,
        none. A record of an older schema version is written in the current form (see
        `core.records.SCHEMA_VERSION`).

        `typed` holds each value of `data` as `data_schema` reads it (a `ThreadStats`
        for `stats`, tuples for lists), from a caller that built `data` out of values it
        holds typed already (an append): the handle's typed data then takes them as they
        are, instead of validating the whole record written again. It is not used when
        the write changes more than `data` (new tags, a record of an older version).

        For an unsaved copy, a ConflictError means its id is taken (no retry helps), or
        a position of `writes` is. The handle takes the record written, without calling
        `_on_bind`: the caller knows what it changed.
        """
        now = now_iso()
        new_data = {**self._record.data, **data, "updated_at": now}
        labels = self._record.tags
        known = (  # the typed data, updated with `typed`, is what a read of the record gives
            typed is not None
            and tags is None
            and typed.keys() == data.keys()
            and "tags" in self._record.data
            and self._data.schema_version == SCHEMA_VERSION
        )
        if tags is not None or "tags" not in new_data:  # new tags, or labels of version 1-2
            pairs = self._data.tags if tags is None else tags
            new_data["tags"] = dict(pairs)
            labels = labels_of(pairs)
        if new_data.get("schema_version") == 2:  # its tags are in the data now
            new_data["schema_version"] = SCHEMA_VERSION
        record = replaced(self._record, {"data": new_data, "tags": labels})
        if writes:
            stored = await self._commit(writes, record)
        elif self._record.version == 0:  # an unsaved copy: its first write stores it
            stored = await put_new(self._store, record)
        else:
            stored = await self._store.put_record(record, expected_version=self._record.version)
        if known and typed is not None:
            self._data = replaced(self._data, {**typed, "updated_at": now})
        else:
            self._data = read_thread_data(stored, self.data_schema)
        self._record = stored

    async def _commit(self, writes: Sequence[RowWrite], record: Record) -> Record:
        version = self._record.version
        try:
            return await self._store.commit(writes, record, expected_version=version)
        except ConflictError as exc:
            if version == 0 and await self._store.get_record(THREAD_KIND, self.id) is not None:
                raise thread_exists(self.id) from exc
            raise

    def retry_policy(self, deadline: float | None = None) -> RetryPolicy:
        """How this handle's writes retry: the store's `retry` policy, or its `deadline` s."""
        policy = self._store.retry
        return policy if deadline is None else replace(policy, deadline=deadline)

    async def _write_with_retry(
        self,
        write: Callable[[], Awaitable[None]],
        what: str = "it was written",
        deadline: float | None = None,
    ) -> None:
        """Run `write` (which calls `publish`), re-reading and retrying on a lost race.

        Raises:
            ConflictError: other writers kept winning until the deadline.
        """
        backoff = self.retry_policy(deadline).start()
        while True:
            try:
                await write()
                return
            except ConflictError:
                await self.reread_after_lost_write()
                if not await backoff.wait():
                    raise backoff.exhausted(self.id, what) from None

    async def refresh(self) -> None:
        """Re-read the thread from the store, picking up other handles' writes.

        That includes the checkpoints other handles made, which `to_json()` writes.

        Raises:
            ThreadNotFoundError: the thread was deleted.
        """
        async with self._lock:
            await self.refresh_unlocked()
            if self._history is not None:
                await self._read_history()

    async def reread_after_lost_write(self) -> None:
        """Re-read the thread after its record write lost a compare-and-set, to retry.

        Raises:
            ConflictError: this is an unsaved copy, so what it lost to is another thread
                holding its id; no retry can help.
        """
        if self._record.version == 0:
            raise thread_exists(self.id)
        await self.refresh_unlocked()

    async def refresh_unlocked(self) -> None:
        """`refresh()` for a caller that holds the handle's lock."""
        if self._record.version == 0:  # an unsaved copy: nothing stored to re-read
            return
        record = await self._read_record(self._store, self.id)
        if record == self._record:  # nothing moved: the handle is up to date as it is
            return
        state = None
        if read_thread_data(record, ThreadData).state != self._data.state:
            state = await self._read_state(self._store, record)
        await self.adopt(record, state)

    async def adopt(self, record: Record, state: ImmutableState | None = None) -> None:
        """Take `record` (fresher than ours) and `state` (if given) as this handle's.

        Called after a refresh and a rollback; subclasses extend it to bring their
        in-memory content up to the record.
        """
        if state is not None:
            self._state = state
        self._take(record)

    def remember(self, checkpoint: Checkpoint, state: ImmutableState) -> None:
        """Add a checkpoint this handle made to the history it holds for `to_json`, if any."""
        if self._history is not None:
            self._history.add(checkpoint, state)

    async def update(
        self,
        *,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        metadata: Mapping[str, Any] | None = None,
        deadline: float | None = None,
    ) -> None:
        """Change the title, replace the tags, or replace the metadata (None: unchanged).

        `tags` replace all the tags: `update(tags={**thread.tags, "env": "prod"})` adds
        one, `update(tags={})` removes them all. Retries like an append while other
        writers win, for up to `deadline` seconds (default: the store's retry policy).

        Raises:
            InvalidValueError: the title, tags or metadata are not acceptable (tags: not a
                dict, or a key or value breaking the rules of `core.tags`), naming the
                thread and the tag; nothing is written.
        """
        new_tags = None if tags is None else clean_tags(tags, where=f"thread {self.id!r} tags")
        what = f"thread {self.id!r} metadata"
        new_metadata = None if metadata is None else clean_metadata(metadata, what=what)
        title = clean_title(title, f"thread {self.id!r} title")

        async def write() -> None:
            data: dict[str, JsonValue] = {}
            if title is not None:
                data["title"] = title
            if new_metadata is not None:
                data["metadata"] = new_metadata
            await self.publish(data, tags=new_tags)

        async with self._lock:
            await self._write_with_retry(write, "it was updated", deadline)

    async def update_state(
        self, patch: Mapping[str, Any], *, deadline: float | None = None
    ) -> ImmutableState:
        """Apply a JSON merge patch to the state and store it; returns the new state.

        If another handle changed the thread meanwhile, the patch is applied to its
        newer state (a merge patch composes), so no update is lost; it retries for up to
        `deadline` seconds (default: the store's retry policy).

        Raises:
            ConflictError: other writers kept winning until the deadline.
        """
        if not isinstance(patch, Mapping):
            where = f"thread {self.id!r} state patch"
            raise InvalidValueError(where, reason=f"must be a dict, not {patch!r:.60}")

        async def write() -> None:
            try:
                new_state = self._state.apply(patch)
            except InvalidValueError as exc:
                where = f"thread {self.id!r} {exc.where}"
                raise InvalidValueError(where, reason=exc.reason) from exc
            digest = await self._store_state(new_state)
            await self.publish({"state": digest, "blobs": self.blob_refs(digest)})
            self._state = new_state

        async with self._lock:
            await self._write_with_retry(write, "its state was updated", deadline)
            return self._state

    async def _store_state(self, state: ImmutableState) -> str | None:
        if not state:
            return None
        return await self._store.put_blob(state.to_json_bytes())

    def blob_refs(self, state_digest: str | None) -> list[JsonValue]:
        """The `blobs` list of the record: what this thread keeps alive in the blob store.

        That is its state and the state it started from (`at(message_id=...)` may use it).
        """
        started = None if self._data.origin is None else self._data.origin.state
        refs: list[JsonValue] = [d for d in (state_digest, started) if d is not None]
        return list(dict.fromkeys(refs))

    async def delete(self) -> None:
        """Delete the thread's record, and with it its checkpoints. Its forks keep working.

        `vacuum()` frees the segments and blobs nothing references any more (the thread's
        messages and checkpoint log, unless forks or other checkpoints still use them).

        Raises:
            ThreadNotFoundError: it was already deleted.
        """
        async with self._lock:
            if not await self._store.delete_record(THREAD_KIND, self.id):
                raise ThreadNotFoundError(self.id)
            await delete_checkpoints(self)

    # -- copies and forks -----------------------------------------------------------

    def copy(self, *, id: str | None = None, reset_stats: bool = False) -> Self:
        """An in-memory snapshot with a new identity, saved to the store on its first write.

        Immutable parts (messages, state) are shared; mutable ones (the metadata, the
        tags) are copied, so changing one never shows in the other. The copy keeps the
        tags.
        """
        data = self._data_for_copy(copy_module.deepcopy(self._record.data))
        data["created_at"] = data["updated_at"] = now_iso()
        data[LOGS_KEY] = []  # checkpoints stay with the original
        if reset_stats:
            data["stats"] = ThreadStats().model_dump()
            data["origin"] = _origin(data)
        record = Record(
            kind=THREAD_KIND,
            id=new_id() if id is None else validate_id(id, what="thread id"),
            tags=self._record.tags,
            data=data,
        )
        twin = type(self)._bind(self._store, record, self._state)
        self._share_into(twin)
        return twin

    def _data_for_copy(self, data: dict[str, JsonValue]) -> dict[str, JsonValue]:
        """Hook: adjust a deep copy of the record data for `copy()`.

        Called once per copy, before it is bound; a subclass drops what the copy must not
        share (the segment a chat thread extends, say).
        """
        return data

    def _share_into(self, twin: Self) -> None:  # noqa: B027 - a hook, empty by default
        """Hook: give a copy the in-memory content it shares with this handle.

        Called by `copy()` right after the copy is bound (messages cache, sub-threads).
        """

    @abstractmethod
    async def fork(
        self,
        message_id: str | None = None,
        *,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        reset_stats: bool = True,
    ) -> AgentThread:
        """A new thread holding this one's content (up to `message_id`, inclusive).

        Its tags are `tags` (checked as in `update`), else this thread's.
        """

    # -- checkpoints and time travel (the logic is in agent_threads.timetravel) ----------

    async def checkpoint(
        self, label: str | None = None, *, metadata: Mapping[str, Any] | None = None
    ) -> Checkpoint:
        """Record the thread as this handle sees it now; `at()` and `rollback()` return to it.

        Stores its ranges, state digest (an unchanged state costs nothing), stats and a
        timestamp as one compact row of the thread's checkpoint log: O(number of ranges),
        whatever the history length. Call `refresh()` first to include other handles'
        writes.

        Raises:
            InvalidIdError: the label is empty, over 128 characters or has control characters.
            ConflictError: other writers kept moving the thread until the store's retry
                deadline, or this is an unsaved copy whose id another thread took.
        """
        async with self._lock:
            return await save_checkpoint(self, label=label, metadata=metadata)

    async def checkpoints(self) -> Sequence[Checkpoint]:
        """Every checkpoint of the thread, oldest first (automatic ones included).

        A list; typed as a sequence so a subclass can list its own kind of checkpoint.
        """
        return await list_checkpoints(self)

    async def get_checkpoint(self, id_or_label: str) -> Checkpoint:
        """The checkpoint with this id, else the newest one with this label.

        Raises:
            CheckpointNotFoundError: the thread has no such checkpoint.
        """
        return await find_checkpoint(self, id_or_label)

    async def at(
        self, checkpoint: Checkpoint | str | None = None, *, message_id: str | None = None
    ) -> ThreadSnapshot[Self]:
        """The thread as it was at a checkpoint (or its id or label), or at a message.

        The snapshot holds the messages, state and stats exactly as they were, whatever
        happened since. `at(message_id=m)` holds the messages up to and including `m`;
        its state is the one recorded at the nearest known point before it on the same
        path (a checkpoint, the thread's start, or now), and its stats are that point's
        plus the messages after it. A checkpoint costs O(number of ranges); a message
        also reads the thread's checkpoint list to find that point.

        Raises:
            CheckpointNotFoundError: the thread has no such checkpoint.
            MessageNotFoundError: the thread holds no message `message_id`.
        """
        async with self._lock:
            return await snapshot(self, checkpoint, message_id)

    async def rollback(
        self, checkpoint: Checkpoint | str | None = None, *, message_id: str | None = None
    ) -> Checkpoint:
        """Move the thread to a checkpoint or back to a message; returns the old head's checkpoint.

        Messages after the point leave the thread's head; state and stats return to it
        (for a message, as `at(message_id=...)` shows them). Nothing is deleted: the old
        head is first saved as a checkpoint labelled `"before-rollback"`, and rolling
        back to it restores everything. Later appends go to a new segment, never over the
        abandoned messages. A compare-and-set on the thread record, like an append: if
        another handle moved the thread meanwhile, its head is what gets saved.

        Raises:
            CheckpointNotFoundError: the thread has no such checkpoint.
            MessageNotFoundError: the thread holds no message `message_id`.
            ConflictError: other writers kept moving the thread.
        """
        async with self._lock:
            return await rollback(self, checkpoint, message_id)

    async def lineage(self) -> list[Ancestor]:
        """The threads this one descends from by forks, parent first, up to the root.

        Stops at a deleted ancestor (listed with `deleted=True`: its own parent is unknown).
        """
        return await lineage(self)

    # The content half of timetravel's CheckpointedThread protocol: hooks a subclass with
    # messages overrides. Time travel calls them with the handle's lock held; the defaults
    # describe a thread without messages.

    def content_ranges(self) -> Ranges:
        """The thread's piece table (what a checkpoint records)."""
        return ()

    async def read_ranges(self, ranges: Ranges) -> Sequence[Message]:
        """The messages of `ranges`, read from the store if not in memory."""
        return ()

    def held_messages(self, ranges: Ranges) -> Sequence[Message]:
        """The messages of `ranges`, all in memory (for the synchronous `to_json`)."""
        return ()

    def messages_in_memory(self) -> bool:
        """Whether snapshots of this handle load their messages eagerly (not lazy)."""
        return True

    async def index_of(self, message_id: str) -> int:
        """The index of a message in the thread (MessageNotFoundError if absent)."""
        raise MessageNotFoundError(message_id, thread_id=self.id)

    def rollback_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        """The record data that makes `ranges` the thread's content (for a rollback)."""
        return {}

    def fork_data(self, ranges: Ranges) -> dict[str, JsonValue]:
        """The record data of a new thread whose content is `ranges` (for a fork)."""
        return {}

    def bind_fork(self, record: Record, state: ImmutableState) -> Self:
        """A handle on a fork of this thread, sharing what this one holds in memory."""
        return type(self)._bind(self._store, record, state)

    # -- JSON export ----------------------------------------------------------------

    def to_json(self) -> str:
        """The thread with its whole history, as a JSON document a person can read.

        `AgentThread.from_json` loads it back, checkpoints included, so time travel and
        rollback work the same in the store it is imported into. The `"history"`
        section holds each checkpoint (id, label, time, metadata, state, stats) and
        every message a checkpoint reaches that the thread no longer holds (e.g.
        abandoned by a rollback), each stored once.

        Synchronous: it writes what this handle holds in memory. Its own checkpoints
        and rollbacks are in at once; other handles' checkpoints appear after
        `refresh()`, as their messages do (or use `await thread.export()`).

        Raises:
            NotLoadedError: the handle was loaded with `lazy=True`.
        """
        return _dump(self._export_document())

    async def export(self) -> str:
        """`to_json()` as the store holds the thread now: re-reads it and its history first.

        Works on handles loaded with `lazy=True` too (it reads every message then).

        Raises:
            ThreadNotFoundError: the thread was deleted.
        """
        async with self._lock:
            await self.refresh_unlocked()
            document = self._export_document(await self._read_history())
        return _dump(document)

    async def _read_history(self) -> LoadedHistory:
        """Read the history from the store, and hold it if this handle holds one."""
        held = self._history
        history = await load_history(self, None if held is None else held.states)
        if held is not None:
            self._history = history
        return history

    def _held_history(self) -> LoadedHistory | None:
        """Hook: the history `to_json()` writes (None: this handle holds none).

        Called by `to_json()`; a subclass raises `NotLoadedError` where a handle cannot
        write one (a lazy chat handle).
        """
        return self._history

    def _export_document(self, history: LoadedHistory | None = None) -> dict[str, Any]:
        """The export document, with `history` (default: the one this handle holds)."""
        history = self._held_history() if history is None else history
        document: dict[str, Any] = {
            "format": EXPORT_FORMAT,
            "schema_version": EXPORT_SCHEMA_VERSION,
            "kind": self.type_name,
            "id": self.id,
            "title": self.title,
            "tags": dict(self.tags),
            "metadata": dict(self.metadata),
            "parent_id": self.parent_id,
            "fork_point": self.fork_point,
            "created_at": self._data.created_at,
            "stats": self.stats.model_dump(),
            "state": self._state.to_dict(),
            **self._export_content(),
        }
        if history is not None:
            document["history"] = history_section(self, history)
        return document

    @abstractmethod
    def _export_content(self) -> dict[str, Any]:
        """Hook: the subclass's content in the export document (messages, sub-threads).

        Called by `to_json()` and `export()`, after the fields every thread has.
        """

    @classmethod
    async def from_json(
        cls,
        data: str | bytes | Mapping[str, Any],
        store: ThreadStore | None = None,
        *,
        id: str | None = None,
    ) -> AgentThread:
        """Import a thread written by `to_json` into `store` (default: a new MemoryStore).

        The thread keeps its id, or takes `id` (a chat thread only): a second copy of a
        thread in the store it came from, with the same messages, history and
        checkpoints (their ids too). `AgentThread.from_json` imports any kind; a subclass's
        `from_json` (e.g. `ChatMessageThread.from_json`) only its own kind. A document
        of an older version is read as that version wrote it (version 1: `tags` is a
        list of labels, each label `x` becoming the tag `{"x": ""}`).

        Raises:
            SchemaVersionError: the document is from a newer version or of an unknown kind.
            ConflictError: the store already holds a thread with this id.
            InvalidIdError: `id` is not a valid id.
            InvalidValueError: the document is not JSON, not a thread export, of another kind
                than `cls`, or a field is malformed (also a ValueError); `id` is given for
                a workflow, whose sub-threads keep their ids.
        """
        import_id = None if id is None else validate_id(id, what="thread id")
        document = _export_document(data)
        version = SchemaVersionError.check(
            document.get("schema_version"), "thread export", newest=EXPORT_SCHEMA_VERSION
        )
        kind = document.get("kind")
        target = AgentThread._types.get(kind) if isinstance(kind, str) else None
        if target is None:
            raise SchemaVersionError(
                "thread export kind", found=kind, supported=sorted(AgentThread._types)
            )
        if not issubclass(target, cls):
            raise InvalidValueError(
                f"thread export {document.get('id')!r}",
                reason=f"it holds a {kind!r} thread, not a {cls.type_name!r} one: import it"
                f" with {target.__name__}.from_json or AgentThread.from_json",
            )
        document["tags"] = _export_tags(document, version)  # a thread's: taken as they are
        if import_id is not None:
            document = target._renamed_export(document, import_id)
        return await target._import(document, MemoryStore() if store is None else store)

    @classmethod
    def _renamed_export(cls, document: dict[str, Any], thread_id: str) -> dict[str, Any]:
        """Hook: the export document, to be imported under `thread_id` instead of its id.

        Called by `from_json(..., id=...)`. A kind whose export names other threads by
        id (a workflow's sub-threads) refuses, by default.

        Raises:
            InvalidValueError: this kind is imported under its own ids only.
        """
        raise InvalidValueError(
            f"thread export {document.get('id')!r}",
            reason=f"a {cls.type_name!r} thread is imported under its own id (leave out id=)",
        )

    @classmethod
    @abstractmethod
    async def _import(cls, document: dict[str, Any], store: ThreadStore) -> Self:
        """Hook: create a stored thread from an export document of this type.

        Called by `from_json` once the document's format, version and kind are checked,
        with its `tags` read into a `Tags` (whatever the document's version).
        """
