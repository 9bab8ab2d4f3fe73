"""What SQLiteStore promises beyond the protocol: WAL, schema versions, migrations, `:memory:`."""

from __future__ import annotations

import contextlib
import itertools
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import aiosqlite
import anyio
import anyio.from_thread
import pytest

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    MemoryStore,
    Message,
    Record,
    Row,
    SchemaVersionError,
    SQLiteStore,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores import sqlite as sqlite_module
from agent_threads.stores._sqlite_inline import (
    CACHE_KIB,
    CHECKPOINT_PAGES,
    PAGES_PER_CHUNK,
    PAGES_PER_WRITE,
    Busy,
    InlineConnection,
)
from agent_threads.stores._sqlite_steps import Steps
from tests.ticker import ticks_during

SMALL_WRITES_PER_CHECKPOINT = -(-CHECKPOINT_PAGES // (PAGES_PER_WRITE + PAGES_PER_CHUNK))
"""Inline writes of one small chunk each until the store's WAL checkpoint is due."""


def query(path: Path, sql: str, *params: object) -> list[tuple[object, ...]]:
    connection = sqlite3.connect(path)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def execute(path: Path, sql: str, *params: object) -> None:
    connection = sqlite3.connect(path)
    try:
        connection.execute(sql, params)
        connection.commit()
    finally:
        connection.close()


async def saved_thread(path: Path, texts: list[str]) -> ChatMessageThread:
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        await thread.on_new_messages([Message.user(t) for t in texts])
        return thread


async def test_a_new_database_is_in_wal_mode_at_the_current_schema_version(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    await saved_thread(path, ["a"])
    assert query(path, "PRAGMA journal_mode") == [("wal",)]
    assert query(path, "SELECT version FROM schema_version") == [(sqlite_module.SCHEMA_VERSION,)]


async def test_a_database_written_by_a_newer_version_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    thread = await saved_thread(path, ["a"])
    execute(path, "UPDATE schema_version SET version = 99")
    with pytest.raises(SchemaVersionError, match=re.escape(str(path))) as caught:
        async with SQLiteStore(path):
            pass
    assert (caught.value.found, caught.value.supported) == (99, sqlite_module.SCHEMA_VERSION)
    assert query(path, "SELECT version FROM schema_version") == [(99,)]
    assert query(path, "SELECT id FROM records") == [(thread.id,)]


async def test_migrations_run_in_order_from_the_stored_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "threads.db"
    thread = await saved_thread(path, ["a", "b"])
    extra = ("CREATE TABLE notes (text TEXT)", "INSERT INTO notes VALUES ('migrated')")
    monkeypatch.setattr(sqlite_module, "MIGRATIONS", [*sqlite_module.MIGRATIONS, extra])
    async with SQLiteStore(path) as store:
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in loaded.messages] == ["a", "b"]
    async with SQLiteStore(path):  # already at the new version: runs nothing twice
        pass
    assert query(path, "SELECT version FROM schema_version") == [
        (sqlite_module.SCHEMA_VERSION + 1,)
    ]
    assert query(path, "SELECT text FROM notes") == [("migrated",)]


async def test_memory_databases_work_and_are_private_to_their_store() -> None:
    async with SQLiteStore(":memory:") as first, SQLiteStore(":memory:") as second:
        thread = await ChatMessageThread.create(first)
        await thread.on_new_messages([Message.user("only here")])
        loaded = await ChatMessageThread.load(thread.id, store=first)
        assert [m.text for m in loaded.messages] == ["only here"]
        assert await second.list_records() == []


async def test_a_file_that_is_not_a_database_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    path.write_bytes(b"this is a text file, not SQLite" * 100)
    with pytest.raises(StoreCorruptedError, match=re.escape(str(path))):
        async with SQLiteStore(path):
            pass


async def test_rows_are_unique_by_segment_and_position_in_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    thread = await saved_thread(path, ["a", "b"])
    segment_id = thread.ranges[0].segment_id
    for start in (0, 1):  # where a chunk begins, and inside one
        with pytest.raises(sqlite3.IntegrityError, match="already written"):
            execute(
                path,
                "INSERT INTO appends (segment, start, count, message_ids, data, written_at)"
                " VALUES (?, ?, 1, 'intruder', '{}', 0)",
                segment_id,
                start,
            )


async def test_an_undecodable_record_is_reported_by_key(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:
        await store.put_record(Record(kind="thread", id="t1"), expected_version=0)
        execute(path, "UPDATE records SET body = 'garbage' WHERE id = 't1'")
        with pytest.raises(StoreCorruptedError, match="thread/t1"):
            await store.get_record("thread", "t1")


async def test_an_unopened_store_says_how_to_open_it_and_touched_nothing(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "threads.db")
    with pytest.raises(RuntimeError, match="async with"):
        await store.list_records()
    assert not (tmp_path / "threads.db").exists()


async def test_positions_beyond_the_key_space_are_refused(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "threads.db") as store:
        last = sqlite_module.POSITIONS - 1
        await store.append_rows("seg", last, [Row("m", "{}")])
        assert await store.read_rows("seg", last, last + 1) == ["{}"]
        with pytest.raises(ValueError, match="seg"):
            await store.append_rows("seg", last, [Row("a", "{}"), Row("b", "{}")])
        assert await store.locate_message("m") == [("seg", last)]


async def test_a_write_lock_held_past_the_busy_timeout_raises_store_unavailable(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path, busy_timeout=0.05) as store:
        stored = await store.put_record(Record(kind="k", id="r"), expected_version=0)
        other = sqlite3.connect(path, isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            with pytest.raises(StoreUnavailableError, match="locked") as caught:
                await store.delete_record("k", "r")
            assert isinstance(caught.value.__cause__, sqlite3.OperationalError)
            assert (caught.value.store, caught.value.operation) == (repr(store), "delete_record")
        finally:
            other.close()
        assert await store.get_record("k", "r") == stored  # nothing was deleted
        assert await store.delete_record("k", "r")  # and the store works again


async def test_a_write_finding_the_lock_taken_waits_for_it_off_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:  # the default busy timeout
        thread = await ChatMessageThread.create(store)
        await thread.on_new_messages([Message.user("before")])
        other = sqlite3.connect(path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        ticks: list[float] = []

        async def tick() -> None:
            while True:
                ticks.append(anyio.current_time())
                await anyio.sleep(0.01)

        async def release() -> None:
            await anyio.sleep(0.3)
            other.execute("COMMIT")

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(tick)
                group.start_soon(release)
                await anyio.sleep(0.05)  # the ticks have begun
                await thread.on_new_messages([Message.user("after")])
                group.cancel_scope.cancel()
        finally:
            other.close()
        # the event loop ran all the while the append waited (the release came from it):
        # an append waiting for the lock on the loop would stop it for a busy timeout
        assert len(ticks) >= 10
        assert max(b - a for a, b in itertools.pairwise(ticks)) < 1.0
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in loaded.messages] == ["before", "after"]


async def test_the_wal_is_checkpointed_while_appends_run_on_the_event_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        for i in range(2_000):  # each commit writes a few whole pages to the WAL
            await thread.on_new_messages([Message.user(f"message {i}")])
        wal = path.with_name(path.name + "-wal").stat().st_size
    # unchecked it would hold every page of every commit (~40 MB); SQLite's own
    # auto-checkpoint keeps it near 1,000 pages (4 MB)
    assert wal < 8 * 2**20, wal
    assert query(path, "SELECT count(*) FROM chunks") == [(2_000,)]


@pytest.mark.parametrize("stores", [1, 2])
async def test_the_wal_stays_bounded_with_writers_appending_side_by_side(
    tmp_path: Path, stores: int
) -> None:
    """Writers go on while a checkpoint copies: the WAL must still start over."""
    path = tmp_path / "threads.db"
    async with contextlib.AsyncExitStack() as stack:
        opened = [await stack.enter_async_context(SQLiteStore(path)) for _ in range(stores)]
        threads = [await ChatMessageThread.create(opened[i % stores]) for i in range(8)]

        async def write(thread: ChatMessageThread) -> None:
            for i in range(500):
                await thread.on_new_messages([Message.user(f"message {i}")])

        async with anyio.create_task_group() as group:
            for thread in threads:
                group.start_soon(write, thread)
        wal = path.with_name(path.name + "-wal").stat().st_size
    # each checkpoint copying only what was there when it began, the WAL would hold
    # every page of every commit (72-74 MB at schema 5, 87-89 MB at schema 4, measured
    # with the checkpoint copying nothing); appends go on while one runs, so it reaches
    # 1-5x what SQLite's own auto-checkpoint lets it hold (4 MB) on a loaded machine
    # (7-21 MB in 28 runs of each schema), and more while its disk stalls (43 MB, seen
    # once at each schema in ~30 runs): bounded, but by the machine, so
    # the test asks for less than three quarters of what a WAL that never starts over
    # would hold
    assert wal < 54 * 2**20, wal
    assert query(path, "SELECT count(*) FROM chunks") == [(4_000,)]


async def test_an_append_does_not_wait_for_the_wal_checkpoint_it_made_due(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    release, started, finished = threading.Event(), list[str](), list[str]()
    checkpoint_file = sqlite_module._checkpoint_file

    def slow_checkpoint(uri: str) -> None:
        started.append(uri)
        release.wait(10)  # a checkpoint syncing a slow disk
        checkpoint_file(uri)
        finished.append(uri)

    monkeypatch.setattr(sqlite_module, "_checkpoint_file", slow_checkpoint)
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        due = SMALL_WRITES_PER_CHECKPOINT
        for i in range(2 * due):
            await thread.on_new_messages([Message.user(f"m{i}")])
        assert (len(started), finished) == (1, [])  # the appends went on while it ran
        release.set()
    assert finished == started  # the close waited for it
    assert query(path, "SELECT count(*) FROM chunks") == [(2 * due,)]


async def test_an_append_succeeds_when_no_thread_can_be_started_for_the_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    refused: list[str] = []

    def no_thread(self: threading.Thread) -> None:
        refused.append(self.name)
        raise RuntimeError("can't start new thread")  # as at the process's thread limit

    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as store:
        thread = await ChatMessageThread.create(store)
        due = SMALL_WRITES_PER_CHECKPOINT
        with monkeypatch.context() as patch:
            patch.setattr(threading.Thread, "start", no_thread)
            for i in range(due + 10):
                await thread.on_new_messages([Message.user(f"m{i}")])
        assert refused  # each write tried, none failed
    assert query(path, "SELECT count(*) FROM chunks") == [(due + 10,)]


async def test_an_event_loop_may_end_while_a_wal_checkpoint_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store is used from one event loop, then another (one at a time)."""
    release = threading.Event()
    checkpoint_file = sqlite_module._checkpoint_file

    def slow_checkpoint(uri: str) -> None:
        release.wait(10)
        checkpoint_file(uri)

    monkeypatch.setattr(sqlite_module, "_checkpoint_file", slow_checkpoint)
    path = tmp_path / "threads.db"
    store = SQLiteStore(path)
    due = SMALL_WRITES_PER_CHECKPOINT

    async def first() -> str:
        await store.__aenter__()
        thread = await ChatMessageThread.create(store)
        for i in range(due + 1):
            await thread.on_new_messages([Message.user(f"m{i}")])
        return thread.id

    async def second(thread_id: str) -> list[str]:
        with anyio.fail_after(10):
            release.set()
            thread = await ChatMessageThread.load(thread_id, store=store)
            for i in range(due + 1, 2 * due):
                await thread.on_new_messages([Message.user(f"m{i}")])
            await store.aclose()
        async with SQLiteStore(path) as again:
            loaded = await ChatMessageThread.load(thread_id, store=again)
            return [m.text or "" for m in loaded.messages]

    with anyio.from_thread.start_blocking_portal() as portal:  # an event loop that ends
        thread_id = portal.call(first)
    assert await second(thread_id) == [f"m{i}" for i in range(2 * due)]


async def test_a_loop_of_appends_lets_other_tasks_run(tmp_path: Path) -> None:
    async with SQLiteStore(tmp_path / "threads.db") as store:
        thread = await ChatMessageThread.create(store)

        async def append() -> None:
            # each append runs inline, yet yields now and then; fewer than make a WAL
            # checkpoint due (whose lock sends a write through aiosqlite's thread)
            for i in range(SMALL_WRITES_PER_CHECKPOINT // 2):
                await thread.on_new_messages([Message.user(f"m{i}")])

        during = await ticks_during(append)
        # once INLINE_TURN (1 ms) passed since the last time: 20 appends take longer anywhere
        assert during >= SMALL_WRITES_PER_CHECKPOINT // 2 // 20


async def test_the_wal_stays_bounded_with_short_lived_writers_beside_a_long_lived_store(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    async with SQLiteStore(path) as service:  # held open all along (a service), reading only
        thread = await ChatMessageThread.create(service)
        for job in range(20):  # a store per command: each writes a little, then closes
            async with SQLiteStore(path) as store:
                handle = await ChatMessageThread.load(thread.id, store=store)
                for i in range(100):
                    await handle.on_new_messages([Message.user(f"{job}/{i}")])
        assert len((await ChatMessageThread.load(thread.id, store=service)).messages) == 2_000
        wal = path.with_name(path.name + "-wal").stat().st_size
    assert wal < 8 * 2**20, wal  # the commands' pages were checkpointed as they closed


@pytest.mark.parametrize("operation", ["read", "write"])
async def test_an_operation_racing_the_close_says_the_store_is_not_open(
    tmp_path: Path, operation: str
) -> None:
    store = SQLiteStore(tmp_path / "threads.db")
    await store.__aenter__()
    outcome: list[object] = []

    async def call() -> None:
        try:
            if operation == "read":
                outcome.append(await store.get_record("k", "r"))
            else:
                await store.append_rows("seg", 0, [Row("m", '"x"')])
                outcome.append("appended")
        except RuntimeError as exc:  # what any call on a closed store raises
            outcome.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(call)
        await anyio.lowlevel.checkpoint()  # the call waits at its checkpoint
        await store.aclose()
    assert len(outcome) == 1
    assert isinstance(outcome[0], RuntimeError) and "not open" in str(outcome[0])


async def test_an_append_cut_short_by_a_deadline_is_stored_only_if_it_returned(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "threads.db") as store:
        long = [Row(f"long{i}", '"' + "x" * 500 + '"') for i in range(20_000)]
        await store.append_rows("long", 0, long)  # ~10 MB: through aiosqlite's thread
        due = SMALL_WRITES_PER_CHECKPOINT
        for i in range(due - 5):
            await store.append_rows("seg", i, [Row(f"m{i}", '"x"')])
        appended: list[int] = []
        async with anyio.create_task_group() as group:
            group.start_soon(store.read_rows, "long", 0, 20_000)  # holds the connection
            await anyio.lowlevel.checkpoint()  # the read is under way
            for i in range(due - 5, due + 5):  # each inline; one makes the checkpoint due
                with anyio.move_on_after(0.005):
                    await store.append_rows("seg", i, [Row(f"m{i}", '"x"')])
                    appended.append(i)
        tried = range(due - 5, due + 5)
        stored = [p for i in tried for _, p in await store.locate_message(f"m{i}")]
        assert stored == appended  # none cancelled after it was written


# -- migration from schema 3 ----------------------------------------------------------------

SCHEMA_3_COMMIT = (  # a record as SQLiteStore wrote it at schema 3: no expected version
    "INSERT INTO commits (segment, start, count, message_ids, data, written_at,"
    " kind, id, version, owner, body) VALUES (NULL, NULL, NULL, NULL, NULL, NULL, ?, ?, ?, ?, ?)"
)


def commit_as_schema_3(connection: sqlite3.Connection, record: Record) -> None:
    """Store `record` at its version as schema-3 code did: if the stored one is the one before."""
    body = record.model_dump_json()
    connection.execute(
        SCHEMA_3_COMMIT, (record.kind, record.id, record.version, record.owner, body)
    )
    connection.commit()


def write_schema_3(path: Path, records: list[Record], rows: dict[str, list[Row]]) -> None:
    """A database as SQLiteStore wrote it at schema version 3 (`rows` by segment, from 0)."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA auto_vacuum = INCREMENTAL")  # as SQLiteStore makes a database
    for statement in itertools.chain.from_iterable(sqlite_module.MIGRATIONS[:3]):
        connection.execute(statement)
    connection.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
    connection.execute("INSERT INTO schema_version VALUES (3)")
    for segment_id, written in rows.items():
        connection.execute(
            "INSERT INTO appends VALUES (?, 0, ?, ?, ?, 0)",
            (
                segment_id,
                len(written),
                "\n".join(r.message_id for r in written),
                "\n".join(r.data for r in written),
            ),
        )
    for record in records:
        commit_as_schema_3(connection, record)
    connection.close()


async def schema_3_thread(path: Path, texts: list[str]) -> ChatMessageThread:
    """A thread with `texts`, written into a new schema-3 database at `path` at version 2."""
    memory = MemoryStore()
    thread = await ChatMessageThread.create(memory)
    await thread.on_new_messages([Message.user(t) for t in texts])
    record = await memory.get_record("thread", thread.id)
    assert record is not None and len(thread.ranges) == 1
    (segment_id, start, end) = thread.ranges[0].to_json()
    data = await memory.read_rows(segment_id, start, end)
    rows = [Row(m.id, d) for m, d in zip(thread.messages, data, strict=True)]
    versions = [record.model_copy(update={"version": v}) for v in (1, 2)]  # created, appended
    write_schema_3(path, versions, {segment_id: rows})
    return thread


async def test_a_schema_3_database_is_upgraded_and_its_threads_write_on(tmp_path: Path) -> None:
    path = tmp_path / "threads.db"
    thread = await schema_3_thread(path, ["a", "b"])
    async with SQLiteStore(path) as store:
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert ([m.text for m in loaded.messages], loaded.version) == (["a", "b"], 2)
        await loaded.on_new_messages([Message.user("c")])
        assert loaded.version == 3
        with pytest.raises(ConflictError):  # the version it had is stale
            await store.put_record(Record(kind="thread", id=thread.id), expected_version=2)
    async with SQLiteStore(path) as store:
        again = await ChatMessageThread.load(thread.id, store=store)
        assert ([m.text for m in again.messages], again.version) == (["a", "b", "c"], 3)
    assert query(path, "SELECT version FROM schema_version") == [(sqlite_module.SCHEMA_VERSION,)]


async def test_a_schema_3_process_still_running_after_the_upgrade_writes_records_as_before(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    write_schema_3(path, [Record(kind="k", id="r", version=1)], {})
    async with SQLiteStore(path):  # upgrades it
        pass
    old = sqlite3.connect(path)  # a process of the schema before, open all along
    try:
        commit_as_schema_3(old, Record(kind="k", id="r", version=2, data={"by": "old"}))
        with pytest.raises(sqlite3.IntegrityError, match="record version changed"):
            commit_as_schema_3(old, Record(kind="k", id="r", version=2, data={"by": "stale"}))
        commit_as_schema_3(old, Record(kind="k", id="new", version=1))  # created at 1, as before
    finally:
        old.close()
    async with SQLiteStore(path) as store:
        assert await store.get_record("k", "r") == Record(
            kind="k", id="r", version=2, data={"by": "old"}
        )
        stored = await store.put_record(Record(kind="k", id="r"), expected_version=2)
        assert stored.version == 3
        assert (await store.put_record(Record(kind="k", id="new"), expected_version=1)).version == 2


SCHEMA_4_DELETE_CHUNKS = (  # a vacuum of schema 4, after it found the segment old enough
    "DELETE FROM chunks WHERE key IN (SELECT key FROM chunks,"
    " (SELECT id * 4294967296 AS base FROM segments WHERE name = ?)"
    " WHERE key >= base AND key < base + 4294967296)"
)


async def test_a_vacuum_of_schema_4_still_running_cannot_delete_chunks_written_since(
    tmp_path: Path,
) -> None:
    """It reads only the segment's time, which a commit of schema 5 leaves as it was."""
    path = tmp_path / "threads.db"
    thread = await saved_thread(path, ["a", "b"])
    segment_id = thread.ranges[0].segment_id
    execute(path, "UPDATE segments SET written_at = written_at - 100")  # made long ago
    old = sqlite3.connect(path)  # a process of schema 4, open all along
    try:
        cutoff = time.time() - 50  # its vacuum's: the segment's time is before it
        found = old.execute(
            "SELECT name FROM segments WHERE written_at <= ? AND name = ?", (cutoff, segment_id)
        ).fetchall()
        assert found == [(segment_id,)]
        with pytest.raises(sqlite3.IntegrityError, match="vacuum from an upgraded process"):
            old.execute(SCHEMA_4_DELETE_CHUNKS, (segment_id,))
        old.rollback()
    finally:
        old.close()
    async with SQLiteStore(path) as store:
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in loaded.messages] == ["a", "b"]
        # this code's deletion marks the segment written last first
        assert await store.delete_segments([segment_id]) == 1


async def test_chunks_an_older_process_writes_after_the_upgrade_take_their_segments_time(
    tmp_path: Path,
) -> None:
    path = tmp_path / "threads.db"
    write_schema_3(path, [Record(kind="k", id="r", version=1)], {"seg": [Row("m0", "{}")]})
    async with SQLiteStore(path) as store:  # upgrades it
        await store.append_rows("seg", 1, [Row("m1", "{}")])
    old = sqlite3.connect(path)  # a process of the schema before, open all along
    try:
        old.execute("INSERT INTO appends VALUES ('seg', 2, 1, 'm2', '{}', 5000000000)")
        old.commit()
    finally:
        old.close()
    assert query(path, "SELECT written_at IS NULL FROM chunks ORDER BY key") == [
        (1,),
        (0,),
        (1,),
    ]
    async with SQLiteStore(path) as store:
        assert await store.list_segments() == {"seg": 5000000000.0}  # its writer's time
        assert await store.delete_segments(["seg"], not_written_since=time.time()) == 0
        assert await store.read_rows("seg", 0, 3) == ["{}"] * 3
        assert await store.delete_segments(["seg"], not_written_since=5000000000.0) == 1


async def test_an_upgrade_frees_its_pages_without_rewriting_a_database_in_incremental_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "threads.db"
    await schema_3_thread(path, ["a"])
    executed: list[str] = []
    execute_statement = aiosqlite.Connection.execute

    async def recording(self: aiosqlite.Connection, sql: str, *args: Any) -> aiosqlite.Cursor:
        executed.append(sql)
        return await execute_statement(self, sql, *args)

    monkeypatch.setattr(aiosqlite.Connection, "execute", recording)
    async with SQLiteStore(path):
        pass
    assert any(sql.startswith("DROP VIEW commits") for sql in executed)  # it did upgrade
    assert "VACUUM" not in executed
    assert query(path, "PRAGMA freelist_count") == [(0,)]


def _held_exclusively(path: str) -> sqlite3.Connection:
    """A connection holding the file so that nobody may even read it (until it closes)."""
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode = EXCLUSIVE")  # readers wait too, even in WAL
    holder.execute("BEGIN EXCLUSIVE")
    return holder


def _insert_one() -> Steps[None]:
    yield ("INSERT INTO t (x) VALUES (1)", (), False)


def test_the_inline_connection_waits_for_a_lock_while_it_opens_and_never_after(
    tmp_path: Path,
) -> None:
    # a store opened while another connection held the file for a moment (as one opening
    # or checkpointing it does) failed "database is locked": its inline connection's first
    # statement, which reads the schema, did not wait
    path = str(tmp_path / "t.db")
    setup = sqlite3.connect(path, isolation_level=None)
    setup.execute("PRAGMA journal_mode = WAL")
    setup.execute("CREATE TABLE t (x)")
    setup.close()
    release = threading.Timer(0.2, _held_exclusively(path).close)
    release.start()
    inline = InlineConnection(path, busy_timeout=30.0)  # the store's default
    release.join()
    assert inline.fetch("SELECT count(*) FROM t", ()) == [(0,)]
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("BEGIN IMMEDIATE")  # the write lock
    release = threading.Timer(2.0, writer.close)  # rolls back
    release.start()
    with pytest.raises(Busy):  # at once: one that waited would write after the release
        inline.transaction(_insert_one(), chunks=0, data_bytes=0)
    release.join()
    assert inline.fetch("SELECT count(*) FROM t", ()) == [(0,)]
    inline.close()


def test_the_inline_connection_caches_more_pages_than_sqlites_default(tmp_path: Path) -> None:
    # a thread loaded again reads its rows from memory, not from the file system
    inline = InlineConnection(str(tmp_path / "t.db"), busy_timeout=1.0)
    try:
        assert inline.fetch("PRAGMA cache_size", ()) == [(-CACHE_KIB,)]  # default: -2000
    finally:
        inline.close()


async def test_a_store_opened_and_cancelled_while_it_opens_closes_what_it_opened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[InlineConnection] = []
    closed: list[InlineConnection] = []
    scope = anyio.CancelScope()

    class Slow(InlineConnection):  # as one waiting for a lock another connection holds
        def __init__(self, path: str, *, busy_timeout: float) -> None:
            anyio.from_thread.run_sync(scope.cancel)  # cancelled while it opens
            time.sleep(0.1)
            super().__init__(path, busy_timeout=busy_timeout)
            made.append(self)

        def close(self) -> None:
            closed.append(self)
            super().close()

    monkeypatch.setattr(sqlite_module, "InlineConnection", Slow)
    store = SQLiteStore(tmp_path / "t.db")
    with scope:
        async with store:
            await anyio.sleep(5)
    assert scope.cancelled_caught
    assert len(made) == 1 and closed == made  # closed on the way out, though cancelled
    with pytest.raises(RuntimeError, match="is not open"):
        await ChatMessageThread.create(store)
