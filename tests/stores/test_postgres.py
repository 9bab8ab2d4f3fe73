"""PostgresStore beyond the protocol: schema, migrations, JSON, racing clients, cut connections."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any
from urllib.parse import urlencode, urlparse

import anyio
import asyncpg
import pytest
from anyio.abc import SocketAttribute, SocketStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    MemoryStore,
    Message,
    Record,
    Row,
    RowWrite,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores import postgres
from agent_threads.stores.postgres import SCHEMA_VERSION, PostgresStore

from ._silent import (
    BOUND,
    TIMEOUT,
    StallingProxy,
    closed_port,
    silent_server,
    unaccepting_server,
)
from .conftest import POSTGRES_DSN, needs_server

pytestmark = needs_server("postgres")


def texts(messages: object) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


def fresh_schema() -> str:
    return f"test_{uuid.uuid4().hex}"


_PARSED = urlparse(POSTGRES_DSN)
_SERVER = (_PARSED.hostname or "127.0.0.1", _PARSED.port or 5432)
"""The test server's address, for a proxy in front of it."""


def _dsn_through(port: int) -> str:
    """POSTGRES_DSN, reaching the server through loopback `port` (a proxy, a fake server)."""
    userinfo = _PARSED.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return _PARSED._replace(netloc=netloc).geturl()


@pytest.fixture
async def admin() -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(POSTGRES_DSN)
    try:
        yield connection
    finally:
        await connection.close()


@pytest.fixture
async def schema(admin: asyncpg.Connection) -> AsyncIterator[str]:
    """A schema name no one uses; dropped after the test."""
    name = fresh_schema()
    yield name
    await admin.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


@pytest.fixture
async def store(schema: str) -> AsyncIterator[PostgresStore]:
    async with PostgresStore(POSTGRES_DSN, schema=schema, max_size=4) as opened:
        yield opened


# -- schema and migrations ------------------------------------------------------------------


async def test_first_use_creates_the_schema_at_the_current_version(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    versions = await admin.fetch(f'SELECT version FROM "{store.schema}".schema_version')
    assert [v["version"] for v in versions] == list(range(1, SCHEMA_VERSION + 1))
    tables = await admin.fetch(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = $1", store.schema
    )
    assert {t["table_name"] for t in tables} == {
        "schema_version",
        "records",
        "segments",
        "segment_rows",
        "blobs",
    }


async def test_reopening_keeps_data_and_migrates_nothing(schema: str) -> None:
    async with PostgresStore(POSTGRES_DSN, schema=schema) as first:
        await first.put_record(Record(kind="k", id="r", data={"n": 1}), expected_version=0)
    async with PostgresStore(POSTGRES_DSN, schema=schema) as second:
        stored = await second.get_record("k", "r")
    assert stored is not None and stored.data == {"n": 1}


async def test_a_newer_schema_is_refused_and_left_alone(
    store: PostgresStore, admin: asyncpg.Connection, schema: str
) -> None:
    await store.put_record(Record(kind="k", id="r"), expected_version=0)
    newer = SCHEMA_VERSION + 1
    await admin.execute(f'INSERT INTO "{schema}".schema_version (version) VALUES ($1)', newer)
    with pytest.raises(SchemaVersionError, match=schema) as caught:
        async with PostgresStore(POSTGRES_DSN, schema=schema):
            pass
    assert (caught.value.found, caught.value.supported) == (newer, SCHEMA_VERSION)
    assert await admin.fetchval(f'SELECT count(*) FROM "{schema}".records') == 1


async def test_an_older_schema_is_migrated_in_order_keeping_its_data(
    store: PostgresStore, admin: asyncpg.Connection, schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.put_record(Record(kind="k", id="r", data={"n": 1}), expected_version=0)
    await store.aclose()
    extra = ("ALTER TABLE records ADD COLUMN note text DEFAULT 'v2'",)
    monkeypatch.setattr(postgres, "MIGRATIONS", (*postgres.MIGRATIONS, extra))
    monkeypatch.setattr(postgres, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    async with PostgresStore(POSTGRES_DSN, schema=schema) as upgraded:
        stored = await upgraded.get_record("k", "r")
    assert stored is not None and stored.data == {"n": 1}
    assert await admin.fetchval(f'SELECT note FROM "{schema}".records') == "v2"
    assert await admin.fetchval(f'SELECT max(version) FROM "{schema}".schema_version') == (
        SCHEMA_VERSION + 1
    )


async def test_records_written_as_jsonb_by_version_1_read_back_after_the_upgrade(
    schema: str, admin: asyncpg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as version_1:
        version_1.setattr(postgres, "MIGRATIONS", postgres.MIGRATIONS[:1])
        version_1.setattr(postgres, "SCHEMA_VERSION", 1)
        async with PostgresStore(POSTGRES_DSN, schema=schema):
            pass
    # as version 1 wrote it: JSONB, floats past 1e16 with a fraction so they stay floats
    text = f'{{"title": "hi", "big": {int(1e300)}.0, "n": {2**70}, "x": 0.5}}'
    await admin.execute(
        f'INSERT INTO "{schema}".records (kind, id, version, data) VALUES ($1, $2, 1, $3::jsonb)',
        "k",
        "r",
        text,
    )
    async with PostgresStore(POSTGRES_DSN, schema=schema) as upgraded:
        stored = await upgraded.get_record("k", "r")
        assert stored is not None and stored.version == 1
        assert stored.data == {"title": "hi", "big": 1e300, "n": 2**70, "x": 0.5}
        assert isinstance(stored.data["big"], float) and isinstance(stored.data["n"], int)
        again = await upgraded.commit(
            [RowWrite("s", 0, [Row("m", "{}")])], stored, expected_version=1
        )
        assert again.version == 2
    column = await admin.fetchval(
        "SELECT data_type FROM information_schema.columns"
        " WHERE table_schema = $1 AND table_name = 'records' AND column_name = 'data'",
        schema,
    )
    assert column == "json"


async def test_stores_opening_a_new_schema_at_once_migrate_it_once(
    schema: str, admin: asyncpg.Connection
) -> None:
    stores = [PostgresStore(POSTGRES_DSN, schema=schema, max_size=1) for _ in range(5)]
    try:
        async with anyio.create_task_group() as group:
            for opening in stores:
                group.start_soon(opening.__aenter__)
    finally:
        for opened in stores:
            await opened.aclose()
    versions = await admin.fetch(f'SELECT version FROM "{schema}".schema_version')
    assert [v["version"] for v in versions] == list(range(1, SCHEMA_VERSION + 1))


@pytest.mark.parametrize("bad", ["", 'x"; DROP SCHEMA public; --', "1abc", "a-b", "a" * 64])
def test_bad_schema_names_are_rejected_before_any_sql(bad: str) -> None:
    with pytest.raises(InvalidIdError, match="schema"):
        PostgresStore(POSTGRES_DSN, schema=bad)


# -- how data is kept ------------------------------------------------------------------------


async def test_records_are_json_and_queryable(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    await store.put_record(Record(kind="k", id="r", data={"title": "hi"}), expected_version=0)
    row = await admin.fetchrow(
        f"SELECT json_typeof(data), data->>'title' FROM \"{store.schema}\".records"
    )
    assert row is not None and tuple(row) == ("object", "hi")


async def test_the_database_itself_refuses_a_second_row_at_a_position(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    await store.append_rows("s", 0, [Row("m", "{}")])
    with pytest.raises(asyncpg.UniqueViolationError):
        await admin.execute(
            f'INSERT INTO "{store.schema}".segment_rows VALUES ($1, 0, $2, $3)', "s", "x", "{}"
        )


async def test_hostile_text_is_stored_as_plain_values(store: PostgresStore) -> None:
    hostile = "'); DROP TABLE records; --"
    record = Record(kind="k", id="r", tags=(hostile,), data={hostile: hostile})
    await store.put_record(record, expected_version=0)
    await store.append_rows("s", 0, [Row("m", hostile)])
    assert [r.data for r in await store.list_records(tags=[hostile])] == [{hostile: hostile}]
    assert await store.read_rows("s", 0, 1) == [hostile]


TEXT = st.text(st.characters(codec="utf-8", exclude_characters="\x00"))  # what JSON can carry
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=12,
)


def _same(a: Any, b: Any) -> bool:
    """Equal, with the same types all the way down (1.0 is not 1)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b or (isinstance(a, float) and math.isnan(a) and math.isnan(b)))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON_VALUES)
async def test_record_data_reads_back_as_from_the_memory_store(
    store: PostgresStore, value: Any
) -> None:
    record = Record(kind="k", id=uuid.uuid4().hex, data={"v": value})
    reference = MemoryStore()
    await reference.put_record(record, expected_version=0)
    await store.put_record(record, expected_version=0)
    expected = await reference.get_record("k", record.id)
    got = await store.get_record("k", record.id)
    assert expected is not None and got is not None
    assert _same(got.data, expected.data)


async def test_nul_characters_in_rows_are_refused_clearly_and_nothing_is_kept(
    store: PostgresStore,
) -> None:
    with pytest.raises(ValueError, match="NUL"):
        await store.append_rows("s", 0, [Row("m0", "ok"), Row("m1", "x\x00y")])
    with pytest.raises(ValueError, match="NUL"):
        await store.commit(
            [RowWrite("s", 0, [Row("m2", "x\x00y")])], Record(kind="k", id="r"), expected_version=0
        )
    assert await store.get_record("k", "r") is None
    assert await store.locate_message("m0") == [] and await store.locate_message("m2") == []


async def test_nul_characters_in_record_data_read_back(store: PostgresStore) -> None:
    record = Record(kind="k", id="r", data={"a\x00": "x\x00y"})
    await store.put_record(record, expected_version=0)
    stored = await store.get_record("k", "r")
    assert stored is not None and stored.data == {"a\x00": "x\x00y"}


async def test_an_undecodable_record_is_reported_as_corruption(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    await store.put_record(Record(kind="k", id="r"), expected_version=0)
    await admin.execute(f"UPDATE \"{store.schema}\".records SET data = '[1, 2]'")
    with pytest.raises(StoreCorruptedError, match="k/r"):
        await store.get_record("k", "r")


# -- one round trip per write ----------------------------------------------------------------


class RecordingProxy:
    """A loopback TCP proxy to PostgreSQL keeping every byte its clients send."""

    def __init__(self, target: tuple[str, int]) -> None:
        self._target = target
        self.sent = bytearray()
        self.port = 0

    @asynccontextmanager
    async def running(self) -> AsyncIterator[RecordingProxy]:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(SocketAttribute.local_port)
        async with listener, anyio.create_task_group() as group:
            group.start_soon(listener.serve, self._serve)
            yield self
            group.cancel_scope.cancel()

    async def _serve(self, client: SocketStream) -> None:
        upstream = await anyio.connect_tcp(*self._target)
        async with client, upstream, anyio.create_task_group() as group:
            group.start_soon(self._forward, client, upstream, True)
            await self._forward(upstream, client, False)
            group.cancel_scope.cancel()

    async def _forward(self, source: SocketStream, sink: SocketStream, record: bool) -> None:
        with suppress(anyio.BrokenResourceError, anyio.EndOfStream, anyio.ClosedResourceError):
            async for chunk in source:
                if record:
                    self.sent += chunk
                await sink.send(chunk)


def round_trips(sent: bytes) -> int:
    """How many times a client waited for the server: its Sync and simple Query messages.

    `sent` starts at a message boundary (recorded while the connection was idle): each
    message is a type byte and a 4-byte length counting itself.
    """
    count = offset = 0
    while offset < len(sent):
        count += sent[offset : offset + 1] in (b"S", b"Q")
        offset += 1 + int.from_bytes(sent[offset + 1 : offset + 5], "big")
    return count


async def test_every_write_is_one_round_trip(schema: str) -> None:
    proxy = RecordingProxy(_SERVER)
    record = Record(kind="thread", id="t", tags=("a",), data={"n": 1})
    async with proxy.running(), _quick_store(proxy.port, schema) as store:
        writes = [RowWrite("s", 0, [Row("m0", "{}")]), RowWrite("log", 0, [Row("c0", "{}")])]
        first = (await store.commit(writes, record, expected_version=0)).version
        for n in (1, 2):  # the statements are prepared once per connection
            await store.commit(
                [RowWrite("s", n, [Row(f"m{n}", "{}")])], record, expected_version=first + n - 1
            )
            await store.append_rows("other", n, [Row(f"o{n}", "{}")])
            await store.put_blob(b"blob %d" % n)
        last = [RowWrite("s", 3, [Row("m3", "{}")])]
        measured: dict[str, Callable[[], Awaitable[object]]] = {
            "commit": lambda: store.commit(last, record, expected_version=first + 2),
            "put_record": lambda: store.put_record(record, expected_version=first + 3),
            "append_rows": lambda: store.append_rows("other", 3, [Row("o3", "{}")]),
            "put_blob": lambda: store.put_blob(b"blob 3"),
        }
        trips = {}
        for name, write in measured.items():
            proxy.sent.clear()
            await write()
            trips[name] = round_trips(bytes(proxy.sent))
        assert trips == dict.fromkeys(measured, 1)
        assert await store.read_rows("s", 0, 4) == ["{}"] * 4
        assert await store.read_rows("log", 0, 1) == ["{}"]
        stored = await store.get_record("thread", "t")
        assert stored is not None and stored.version == first + 4


async def test_a_refused_commit_names_the_position_or_the_versions(store: PostgresStore) -> None:
    first = (await store.put_record(Record(kind="k", id="r"), expected_version=0)).version
    await store.append_rows("seg.1:x", 3, [Row("m", "{}")])
    taken = [RowWrite("a", 0, [Row("q", "{}")]), RowWrite("seg.1:x", 2, [Row("x", "{}")] * 2)]
    with pytest.raises(ConflictError, match=r"segment 'seg\.1:x'.*position 3 is already written"):
        await store.commit(taken, Record(kind="k", id="r"), expected_version=first)
    with pytest.raises(
        ConflictError, match=f"expected version {first + 4}, stored version {first}"
    ):
        await store.commit(
            [RowWrite("a", 0, [Row("q", "{}")])],
            Record(kind="k", id="r"),
            expected_version=first + 4,
        )
    with pytest.raises(ConflictError, match=f"expected version 0, stored version {first}"):
        await store.commit([], Record(kind="k", id="r"), expected_version=0)
    assert await store.locate_message("q") == [] and await store.locate_message("x") == []
    assert (await store.list_segments()).keys() == {"seg.1:x"}


@pytest.mark.parametrize("count", [1, 2, postgres.LISTED_ROWS, postgres.LISTED_ROWS + 1, 40])
async def test_a_commit_of_any_size_writes_its_rows_or_names_the_position_taken(
    store: PostgresStore, count: int
) -> None:
    rows = [Row(f"m{i}", f'{{"i":{i}}}') for i in range(count)]
    half = count // 2  # the first half in two writes into one segment, the rest in another
    writes = [
        RowWrite("a", 0, rows[: half // 2]),
        RowWrite("a", half // 2, rows[half // 2 : half]),
        RowWrite("b", 7, rows[half:]),
    ]
    record = await store.commit(writes, Record(kind="k", id="r"), expected_version=0)
    written = await store.read_rows("a", 0, half) + await store.read_rows("b", 7, 7 + count - half)
    assert written == [row.data for row in rows]
    more = [Row(f"x{i}", "{}") for i in range(count - half + 1)]
    again = [RowWrite("c", 0, more[:1]), RowWrite("b", 6, more)]
    with pytest.raises(ConflictError, match=r"segment 'b'.*position 7 is already written"):
        await store.commit(again, record, expected_version=record.version)
    assert await store.locate_messages(["x0", "x1"]) == {"x0": [], "x1": []}
    assert (await store.get_record("k", "r")) == record


async def test_an_operation_cancelled_mid_statement_leaves_its_connection_to_no_one(
    schema: str, admin: asyncpg.Connection
) -> None:
    async with PostgresStore(POSTGRES_DSN, schema=schema, max_size=1) as store:
        first = await store.put_record(Record(kind="k", id="r"), expected_version=0)
        locker = await asyncpg.connect(POSTGRES_DSN)
        try:
            async with locker.transaction():
                await locker.execute(
                    f'SELECT 1 FROM "{schema}".records WHERE id = $1 FOR UPDATE', "r"
                )
                with anyio.move_on_after(0.3) as waited:  # waits for the row lock, cancelled
                    await store.put_record(Record(kind="k", id="r"), expected_version=first.version)
                assert waited.cancelled_caught
        finally:
            await locker.close()
        assert await store.get_record("k", "r") == first  # the only connection: a new one
        second = await store.put_record(Record(kind="k", id="r"), expected_version=first.version)
        assert second.version == first.version + 1


# -- racing clients ------------------------------------------------------------------------


async def test_deleting_a_segment_after_a_write_it_waited_for_deletes_that_write_s_rows_too(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    name = f"vacuum-{uuid.uuid4().hex[:12]}"
    await store.append_rows("s", 0, [Row("m0", "{}")])
    deleted: list[int] = []
    async with PostgresStore(_named_dsn(name), schema=store.schema) as vacuuming:

        async def delete() -> None:
            deleted.append(await vacuuming.delete_segments(["s"]))

        async with anyio.create_task_group() as group:
            writing = admin.transaction()
            await writing.start()
            # a write into the segment as a commit makes it: the segment's row, then rows
            await admin.execute(
                f'UPDATE "{store.schema}".segments SET written_at = written_at'
                " WHERE segment_id = 's'"
            )
            await admin.execute(
                f"INSERT INTO \"{store.schema}\".segment_rows VALUES ('s', 1, 'm1', '{{}}')"
            )
            group.start_soon(delete)
            with anyio.fail_after(10):
                # the server's state, which no in-process event can signal: poll it
                while not await _backends(admin, name, waiting=True):  # noqa: ASYNC110
                    await anyio.sleep(0.01)
            await writing.commit()
    assert deleted == [1]
    assert await store.locate_messages(["m0", "m1"]) == {"m0": [], "m1": []}
    assert await store.list_segments() == {}


# -- cut connections -------------------------------------------------------------------------


def _named_dsn(name: str, port: int | None = None) -> str:
    """The test server's DSN, its connections named `name`, reached through `port` if given."""
    parsed = urlparse(POSTGRES_DSN if port is None else _dsn_through(port))
    query = f"{parsed.query}&" if parsed.query else ""
    return parsed._replace(query=query + urlencode({"application_name": name})).geturl()


async def _backends(admin: asyncpg.Connection, name: str, *, waiting: bool) -> list[int]:
    rows = await admin.fetch(
        "SELECT pid FROM pg_stat_activity WHERE application_name = $1"
        " AND (NOT $2 OR wait_event_type = 'Lock')",
        name,
        waiting,
    )
    return [row["pid"] for row in rows]


async def test_connection_cut_mid_append_fails_clearly_then_recovers(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    name = f"cut-{uuid.uuid4().hex[:12]}"
    async with PostgresStore(_named_dsn(name), schema=store.schema, max_size=2) as cut_store:
        thread = await ChatMessageThread.create(cut_store)
        await thread.on_new_messages([Message.user("a"), Message.user("b")])
        failures: list[BaseException] = []

        async def append() -> None:
            try:
                await thread.on_new_messages([Message.user("in flight")])
            except StoreUnavailableError as exc:
                failures.append(exc)

        locker = await asyncpg.connect(POSTGRES_DSN)
        try:
            async with locker.transaction(), anyio.create_task_group() as group:
                # hold the thread's row: the append's rows commit, its record update waits
                await locker.execute(
                    f'SELECT 1 FROM "{store.schema}".records WHERE id = $1 FOR UPDATE', thread.id
                )
                group.start_soon(append)
                with anyio.fail_after(10):
                    # the server's state, which no in-process event can signal: poll it
                    while not (pids := await _backends(admin, name, waiting=True)):  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", pids[0])
        finally:
            await locker.close()

        assert len(failures) == 1
        cause = failures[0].__cause__
        assert isinstance(cause, asyncpg.PostgresError | asyncpg.InterfaceError | OSError)
        assert "terminat" in str(failures[0]).lower() or "closed" in str(failures[0]).lower()
        reloaded = await ChatMessageThread.load(thread.id, store=store)
        assert texts(reloaded.messages) == ["a", "b"]  # the record was never half-updated
        await thread.on_new_messages([Message.user("after")])  # the same handle recovers
        reloaded = await ChatMessageThread.load(thread.id, store=cut_store)
        assert texts(reloaded.messages) == ["a", "b", "after"]


async def test_connection_killed_between_calls_is_replaced(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    name = f"idle-{uuid.uuid4().hex[:12]}"
    async with PostgresStore(_named_dsn(name), schema=store.schema, max_size=1) as named:
        await named.put_record(Record(kind="k", id="r"), expected_version=0)
        for pid in await _backends(admin, name, waiting=False):  # wait until it is gone
            assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
        assert (await named.get_record("k", "r")) is not None


async def test_a_connection_ended_while_idle_is_replaced_before_its_close_arrives(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    # the server's farewell (an error message) has reached the idle connection, its close
    # has not (as happens on a busy machine): the next call must not fail on it
    proxy = StallingProxy(_SERVER, hold_closes=True)
    name = f"ended-{uuid.uuid4().hex[:12]}"
    async with (
        proxy.running(),
        PostgresStore(_named_dsn(name, proxy.port), schema=store.schema, max_size=1) as named,
    ):
        try:
            stored = await named.put_record(Record(kind="k", id="r"), expected_version=0)
            for pid in await _backends(admin, name, waiting=False):
                assert await admin.fetchval("SELECT pg_terminate_backend($1, 5000)", pid)
            with anyio.fail_after(BOUND):
                await proxy.close_held.wait()  # the farewell is sent on to the client
            await anyio.sleep(0.1)  # which reads it at the event loop's next poll of its socket
            assert await named.get_record("k", "r") == stored
            deleted = await named.delete_record("k", "r", expected_version=stored.version)
            assert deleted  # and a write on the new connection
        finally:
            proxy.release_closes()  # else closing the store waits for the held close


async def test_a_connection_cut_during_a_write_raises_store_unavailable_then_recovers(
    store: PostgresStore, admin: asyncpg.Connection
) -> None:
    name = f"cut-{uuid.uuid4().hex[:12]}"
    async with PostgresStore(_named_dsn(name), schema=store.schema) as cut_store:
        first = await cut_store.put_record(Record(kind="k", id="r"), expected_version=0)
        failures: list[StoreUnavailableError] = []

        async def write() -> None:
            try:
                await cut_store.put_record(Record(kind="k", id="r"), expected_version=first.version)
            except StoreUnavailableError as exc:
                failures.append(exc)

        locker = await asyncpg.connect(POSTGRES_DSN)
        try:
            async with locker.transaction(), anyio.create_task_group() as group:
                await locker.execute(  # the write waits for this row lock, in flight
                    f'SELECT 1 FROM "{store.schema}".records WHERE id = $1 FOR UPDATE', "r"
                )
                group.start_soon(write)
                with anyio.fail_after(10):
                    # the server's state, which no in-process event can signal: poll it
                    while not (pids := await _backends(admin, name, waiting=True)):  # noqa: ASYNC110
                        await anyio.sleep(0.01)
                assert await admin.fetchval("SELECT pg_terminate_backend($1)", pids[0])
        finally:
            await locker.close()

        [failure] = failures
        assert isinstance(failure.__cause__, asyncpg.PostgresError | asyncpg.InterfaceError)
        assert (failure.store, failure.operation) == (repr(cut_store), "put_record")
        assert await cut_store.get_record("k", "r") == first  # nothing half-written
        second = await cut_store.put_record(
            Record(kind="k", id="r"), expected_version=first.version
        )
        assert second.version == first.version + 1  # the same store recovers


async def test_an_unreachable_server_raises_store_unavailable_naming_no_password() -> None:
    dsn = f"postgresql://postgres:hunter2@127.0.0.1:{closed_port()}/test"
    with pytest.raises(StoreUnavailableError) as caught:
        async with PostgresStore(dsn):
            pass
    assert isinstance(caught.value.__cause__, OSError)
    assert caught.value.operation == "open"
    assert "127.0.0.1" in str(caught.value) and "hunter2" not in str(caught.value)


# -- timeouts: a server that stops answering never hangs a call ------------------------------


def _quick_store(port: int, schema: str) -> PostgresStore:
    """A store with short timeouts, reaching the server through loopback `port`."""
    return PostgresStore(
        _dsn_through(port),
        schema=schema,
        max_size=1,
        connect_timeout=TIMEOUT,
        command_timeout=TIMEOUT,
    )


async def test_a_server_that_never_answers_fails_the_open_after_the_connect_timeout() -> None:
    async with silent_server() as port:
        store = _quick_store(port, fresh_schema())
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            async with store:
                pass
    assert (caught.value.store, caught.value.operation) == (repr(store), "open")
    assert isinstance(caught.value.__cause__, TimeoutError)
    assert "no answer in time" in str(caught.value)


async def test_a_server_that_accepts_no_connection_fails_after_the_connect_timeout() -> None:
    with unaccepting_server() as port:
        store = _quick_store(port, fresh_schema())
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            async with store:
                pass
    assert (caught.value.store, caught.value.operation) == (repr(store), "open")


async def test_a_server_gone_silent_fails_a_statement_after_the_command_timeout(
    store: PostgresStore,
) -> None:
    proxy = StallingProxy(_SERVER)
    async with proxy.running():
        slow = _quick_store(proxy.port, store.schema)
        with anyio.fail_after(4 * BOUND):
            async with slow:
                stored = await slow.put_record(Record(kind="k", id="r"), expected_version=0)
                proxy.stall()
                with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
                    await slow.get_record("k", "r")
                assert (caught.value.store, caught.value.operation) == (repr(slow), "get_record")
                proxy.resume()
                assert await slow.get_record("k", "r") == stored  # the same store recovers


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "5"])
def test_bad_timeouts_are_refused_by_name(bad: Any) -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        PostgresStore(POSTGRES_DSN, connect_timeout=bad)
    with pytest.raises(ValueError, match="command_timeout"):
        PostgresStore(POSTGRES_DSN, command_timeout=bad)
    nothing: Any = None  # waiting forever to connect is never wanted
    with pytest.raises(ValueError, match="connect_timeout"):
        PostgresStore(POSTGRES_DSN, connect_timeout=nothing)
