"""RedisStore beyond the protocol: key layout, namespaces, racing clients, cut connections."""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlparse

import anyio
import anyio.lowlevel
import pytest
import redis.asyncio as redis
from anyio.abc import SocketAttribute, SocketStream, TaskGroup
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent_threads import (
    ChatMessageThread,
    InvalidIdError,
    Message,
    Record,
    Row,
    RowWrite,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores.redis import RedisStore

from ._silent import (
    BOUND,
    TIMEOUT,
    StallingProxy,
    closed_port,
    silent_server,
    unaccepting_server,
)
from .conftest import REDIS_URL, needs_server

pytestmark = needs_server("redis")


def texts(messages: object) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


@pytest.fixture
async def admin() -> AsyncIterator[redis.Redis]:
    async with redis.Redis.from_url(REDIS_URL, decode_responses=True) as client:
        yield client


@pytest.fixture
async def store(admin: redis.Redis) -> AsyncIterator[RedisStore]:
    opened = RedisStore(REDIS_URL, prefix=f"test-{uuid.uuid4().hex}")
    async with opened:
        yield opened
    await _drop(admin, opened)


async def _drop(admin: redis.Redis, store: RedisStore) -> None:
    keys = [key async for key in admin.scan_iter(match=store.key_pattern, count=1000)]
    if keys:
        await admin.delete(*keys)


async def _keys(admin: redis.Redis, store: RedisStore) -> dict[str, str]:
    """Every key of the store, without the `{prefix}:` part, with its Redis type."""
    found = {}
    async for key in admin.scan_iter(match=store.key_pattern, count=1000):
        found[str(key)[len(store.prefix) + 3 :]] = str(await admin.type(key))
    return found


# -- layout -----------------------------------------------------------------------------


async def test_keys_follow_the_documented_layout(store: RedisStore, admin: redis.Redis) -> None:
    stored = await store.put_record(
        Record(kind="thread", id="t1", owner="o", tags=("a", "b c")), expected_version=0
    )
    await store.append_rows("s1", 0, [Row("m1", '{"x": 1}')])
    digest = await store.put_blob(b"state")
    assert await _keys(admin, store) == {
        "record:thread/t1": "hash",
        "records": "zset",
        "owner:o": "set",
        "tag:a": "set",
        "tag:b c": "set",
        "segment:s1": "hash",
        "segments": "zset",
        "messages": "hash",
        f"blob:{digest}": "string",
        "blobs": "zset",
    }
    base = "{" + store.prefix + "}:"
    assert await admin.hget(base + "segment:s1", "0") == 'm1\n{"x": 1}'
    assert await admin.hget(base + "messages", "m1") == "s1/0"
    assert await admin.hget(base + "record:thread/t1", "version") == str(stored.version)


async def test_deleting_everything_leaves_only_the_score_sets_empty(
    store: RedisStore, admin: redis.Redis
) -> None:
    await store.put_record(
        Record(kind="thread", id="t1", owner="o", tags=("a",)), expected_version=0
    )
    await store.append_rows("s1", 0, [Row("m1", "{}")])
    digest = await store.put_blob(b"state")
    assert await store.delete_record("thread", "t1")
    await store.delete_segments(["s1"])
    await store.delete_blobs([digest])
    assert await _keys(admin, store) == {}


async def test_deleting_a_segment_keeps_a_message_s_other_places(
    store: RedisStore, admin: redis.Redis
) -> None:
    await store.append_rows("s1", 0, [Row("m", "{}")])
    await store.append_rows("s2", 7, [Row("m", "{}")])
    await store.delete_segments(["s1"])
    assert await store.locate_message("m") == [("s2", 7)]
    assert await admin.hget("{" + store.prefix + "}:messages", "m") == "s2/7"


async def test_a_message_in_several_rows_of_one_commit_is_indexed_at_each(
    store: RedisStore, admin: redis.Redis
) -> None:
    await store.append_rows("s", 0, [Row("m", "{}"), Row("m", "{}"), Row("n", "{}")])
    writes = [
        RowWrite("t", 0, [Row("m", "{}")]),
        RowWrite("u", 5, [Row("m", "{}"), Row("k", "{}")]),
    ]
    await store.commit(writes, Record(kind="k", id="r"), expected_version=0)
    assert await store.locate_message("m") == [("s", 0), ("s", 1), ("t", 0), ("u", 5)]
    assert await store.locate_message("n") == [("s", 2)]
    assert await store.locate_message("k") == [("u", 6)]
    assert await admin.hget("{" + store.prefix + "}:messages", "m") == "s/0 s/1 t/0 u/5"


async def test_retagging_a_record_moves_it_between_tag_indexes(store: RedisStore) -> None:
    first = await store.put_record(Record(kind="k", id="r", tags=("old",)), expected_version=0)
    await store.put_record(Record(kind="k", id="r", tags=("new",)), expected_version=first.version)
    assert await store.list_records(tags=["old"]) == []
    assert [r.id for r in await store.list_records(tags=["new"])] == ["r"]


async def test_prefixes_that_extend_each_other_never_share_keys(admin: redis.Redis) -> None:
    base = f"test-{uuid.uuid4().hex}"
    outer, inner = (
        RedisStore(REDIS_URL, prefix=base),
        RedisStore(REDIS_URL, prefix=base + ":record"),
    )
    try:
        async with outer, inner:
            # without the braces both would be the key `<base>:record:record:k/r`
            await inner.put_record(Record(kind="k", id="r"), expected_version=0)
            await outer.put_record(Record(kind="record:k", id="r"), expected_version=0)
            assert [(r.kind, r.id) for r in await inner.list_records()] == [("k", "r")]
            assert [(r.kind, r.id) for r in await outer.list_records()] == [("record:k", "r")]
    finally:
        await _drop(admin, outer)
        await _drop(admin, inner)


@pytest.mark.parametrize("bad", ["", "a b", "{x}", "a/b", "x" * 129])
def test_bad_prefix_is_rejected(bad: str) -> None:
    with pytest.raises(InvalidIdError, match="prefix"):
        RedisStore(REDIS_URL, prefix=bad)


async def test_foreign_data_under_a_key_is_reported_as_corruption(
    store: RedisStore, admin: redis.Redis
) -> None:
    base = "{" + store.prefix + "}:"
    await admin.set(base + "segment:s1", "not a hash")
    with pytest.raises(StoreCorruptedError, match="segment:s1"):
        await store.read_rows("s1", 0, 1)
    await admin.hset(base + "record:k/r", mapping={"version": "1", "doc": "{not json"})
    with pytest.raises(StoreCorruptedError, match="record:k/r"):
        await store.get_record("k", "r")


# -- cut connections --------------------------------------------------------------------


class ReplyDroppingProxy:
    """A loopback TCP proxy to Redis that can drop replies, holding a command in flight.

    Once a request containing `marker` passes, replies are dropped: the server has
    run the command, its client waits for an answer. The test then cuts the proxy's
    upstream connection with CLIENT KILL, as a network failure or an operator would.

    It can also answer EVALSHA itself with NOSCRIPT (`forget_scripts`), as a server whose
    script cache was flushed would, without flushing the shared server's cache (another
    test's store would load its script again meanwhile).
    """

    def __init__(self, group: TaskGroup, target: tuple[str, int]) -> None:
        self._group = group
        self._target = target
        self.marker: bytes | None = None
        self.dropped = anyio.Event()
        self.upstream_address = ""
        self.port = 0
        self.requests = bytearray()  # every byte sent to the server
        self.forget_scripts = 0  # EVALSHA calls still to answer with NOSCRIPT here

    async def start(self) -> None:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        self.port = listener.extra(SocketAttribute.local_port)

        async def run() -> None:
            async with listener:
                await listener.serve(self._serve)

        self._group.start_soon(run)

    async def _serve(self, client: SocketStream) -> None:
        upstream = await anyio.connect_tcp(*self._target)
        async with client, upstream, anyio.create_task_group() as group:
            group.start_soon(self._requests, client, upstream)
            await self._replies(upstream, client)
            group.cancel_scope.cancel()

    async def _requests(self, client: SocketStream, upstream: SocketStream) -> None:
        async for chunk in client:
            self.requests += chunk
            if self.forget_scripts and b"EVALSHA" in chunk.upper():
                self.forget_scripts -= 1  # the client waits for this answer alone
                await client.send(b"-NOSCRIPT No matching script. Please use EVAL.\r\n")
                continue
            if self.marker is not None and self.marker in chunk and not self.upstream_address:
                address = upstream.extra(SocketAttribute.local_address)
                assert isinstance(address, tuple)
                self.upstream_address = f"{address[0]}:{address[1]}"
            await upstream.send(chunk)

    async def _replies(self, upstream: SocketStream, client: SocketStream) -> None:
        async for chunk in upstream:  # ends when the server closes the connection
            if self.upstream_address:
                self.dropped.set()  # lost on the way back: the command did run
                continue
            await client.send(chunk)

    def release(self) -> None:
        self.marker, self.upstream_address = None, ""


async def test_a_commit_is_one_script_called_by_its_digest_loaded_again_if_flushed(
    store: RedisStore, admin: redis.Redis
) -> None:
    parsed = urlparse(REDIS_URL)
    record = Record(kind="thread", id="t1", owner="o", tags=("a",))
    async with anyio.create_task_group() as group:
        proxy = ReplyDroppingProxy(group, (parsed.hostname or "127.0.0.1", parsed.port or 6379))
        await proxy.start()
        async with RedisStore(_url_through(proxy.port), prefix=store.prefix) as watched:
            first = await watched.commit(
                [RowWrite("s1", 0, [Row("m1", "{}")]), RowWrite("log", 0, [Row("c1", "{}")])],
                record,
                expected_version=0,
            )
            proxy.requests.clear()
            await watched.commit(
                [RowWrite("s1", 1, [Row("m2", "{}")])], record, expected_version=first.version
            )
            sent = bytes(proxy.requests).upper()
            assert (sent.count(b"EVALSHA"), sent.count(b"SCRIPT"), sent.count(b"HSET")) == (1, 0, 0)
            proxy.forget_scripts = 1  # a restarted server, say: the script is loaded again
            proxy.requests.clear()
            await watched.commit(
                [RowWrite("s1", 2, [Row("m1", "{}")])], record, expected_version=first.version + 1
            )
            sent = bytes(proxy.requests).upper()
            assert (sent.count(b"EVALSHA"), sent.count(b"SCRIPT")) == (2, 1)  # NOSCRIPT, load
        group.cancel_scope.cancel()
    assert await store.locate_message("m1") == [("s1", 0), ("s1", 2)]
    assert await store.read_rows("log", 0, 1) == ["{}"]
    version = await admin.hget("{" + store.prefix + "}:record:thread/t1", "version")
    assert version == str(first.version + 2)
    assert await admin.smembers("{" + store.prefix + "}:tag:a") == {"thread/t1"}


def _url_through(port: int) -> str:
    parsed = urlparse(REDIS_URL)
    userinfo = parsed.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@127.0.0.1:{port}" if userinfo else f"127.0.0.1:{port}"
    return parsed._replace(netloc=netloc).geturl()


async def test_connection_cut_mid_append_fails_clearly_then_recovers(
    store: RedisStore, admin: redis.Redis
) -> None:
    """The append is one script (its rows and the record): it ran, its reply was lost."""
    parsed = urlparse(REDIS_URL)
    async with anyio.create_task_group() as group:
        proxy = ReplyDroppingProxy(group, (parsed.hostname or "127.0.0.1", parsed.port or 6379))
        await proxy.start()
        async with RedisStore(_url_through(proxy.port), prefix=store.prefix) as cut_store:
            thread = await ChatMessageThread.create(cut_store)
            await thread.on_new_messages([Message.user("a"), Message.user("b")])
            failures: list[BaseException] = []

            async def append() -> None:
                try:
                    await thread.on_new_messages([Message.user("in flight")])
                except StoreUnavailableError as exc:
                    failures.append(exc)

            proxy.marker = b"}:record:thread/"  # the commit writing rows and record
            async with anyio.create_task_group() as writers:
                writers.start_soon(append)
                with anyio.fail_after(10):
                    await proxy.dropped.wait()
                assert await admin.client_kill_filter(_type=None, addr=proxy.upstream_address) == 1
            proxy.release()

            assert len(failures) == 1
            assert isinstance(failures[0].__cause__, RedisConnectionError)
            assert "connection" in str(failures[0]).lower()
            expected = ["a", "b", "in flight"]  # all of it, never torn
            reloaded = await ChatMessageThread.load(thread.id, store=store)
            assert texts(reloaded.messages) == expected
            await thread.on_new_messages([Message.user("after")])  # the same handle recovers
            reloaded = await ChatMessageThread.load(thread.id, store=cut_store)
            assert texts(reloaded.messages) == [*expected, "after"]
        group.cancel_scope.cancel()


def named_url(name: str) -> str:
    """REDIS_URL, its connections named `name` (as CLIENT LIST shows them)."""
    return REDIS_URL + ("&" if "?" in REDIS_URL else "?") + f"client_name={name}"


@asynccontextmanager
async def named(store: RedisStore) -> AsyncIterator[tuple[RedisStore, str]]:
    """A second store on `store`'s keys whose connections carry a name of their own."""
    name = f"cut-{uuid.uuid4().hex}"
    async with RedisStore(named_url(name), prefix=store.prefix) as opened:
        yield opened, name


async def kill_connections(admin: redis.Redis, name: str) -> None:
    clients = [c for c in await admin.client_list() if c["name"] == name]
    assert clients
    for client in clients:
        await admin.client_kill_filter(_id=client["id"])


async def test_connection_killed_between_calls_is_replaced(
    store: RedisStore, admin: redis.Redis
) -> None:
    async with named(store) as (cut, name):
        await cut.put_record(Record(kind="k", id="r"), expected_version=0)
        await kill_connections(admin, name)
        assert (await cut.get_record("k", "r")) is not None


async def test_a_write_after_its_connection_was_killed_is_sent_on_a_new_one(
    store: RedisStore, admin: redis.Redis
) -> None:
    async with named(store) as (cut, name):
        first = await cut.put_record(Record(kind="k", id="r"), expected_version=0)
        await kill_connections(admin, name)
        stored = await cut.put_record(
            Record(kind="k", id="r", tags=("b",)), expected_version=first.version
        )
        assert stored.version == first.version + 1
        assert await store.get_record("k", "r") == stored


async def test_writes_at_the_same_time_all_land(store: RedisStore) -> None:
    async def write(i: int) -> None:
        rows = [RowWrite(f"s{i}", 0, [Row(f"m{i}", "{}")])]
        await store.commit(rows, Record(kind="k", id=f"r{i}"), expected_version=0)

    async with anyio.create_task_group() as group:
        for i in range(20):
            group.start_soon(write, i)
    assert [r.id for r in await store.list_records("k")] == sorted(f"r{i}" for i in range(20))
    assert await store.locate_messages([f"m{i}" for i in range(20)]) == {
        f"m{i}": [(f"s{i}", 0)] for i in range(20)
    }


async def test_a_connection_cut_during_a_read_raises_store_unavailable_then_recovers(
    store: RedisStore, admin: redis.Redis
) -> None:
    parsed = urlparse(REDIS_URL)
    async with anyio.create_task_group() as group:
        proxy = ReplyDroppingProxy(group, (parsed.hostname or "127.0.0.1", parsed.port or 6379))
        await proxy.start()
        async with RedisStore(_url_through(proxy.port), prefix=store.prefix) as cut_store:
            stored = await cut_store.put_record(Record(kind="k", id="r"), expected_version=0)
            failures: list[StoreUnavailableError] = []

            async def read() -> None:
                try:
                    await cut_store.get_record("k", "r")
                except StoreUnavailableError as exc:
                    failures.append(exc)

            proxy.marker = b"}:record:k/r"
            async with anyio.create_task_group() as readers:
                readers.start_soon(read)
                with anyio.fail_after(10):
                    await proxy.dropped.wait()
                assert await admin.client_kill_filter(_type=None, addr=proxy.upstream_address) == 1
            proxy.release()

            [failure] = failures
            assert isinstance(failure.__cause__, RedisConnectionError)
            assert (failure.store, failure.operation) == (repr(cut_store), "get_record")
            assert await cut_store.get_record("k", "r") == stored  # the same store recovers
        group.cancel_scope.cancel()


async def test_an_unreachable_server_raises_store_unavailable_naming_no_password() -> None:
    url = f"redis://:hunter2@127.0.0.1:{closed_port()}/0"
    with pytest.raises(StoreUnavailableError) as caught:
        async with RedisStore(url):
            pass
    assert isinstance(caught.value.__cause__, RedisConnectionError)
    assert caught.value.operation == "open"
    assert "127.0.0.1" in str(caught.value) and "hunter2" not in str(caught.value)


# -- timeouts: a server that stops answering never hangs a call ------------------------------


def _quick_store(port: int, prefix: str) -> RedisStore:
    """A store with short timeouts, reaching the server through loopback `port`."""
    return RedisStore(
        _url_through(port), prefix=prefix, connect_timeout=TIMEOUT, command_timeout=TIMEOUT
    )


async def test_a_server_that_never_answers_fails_the_open_after_the_command_timeout() -> None:
    async with silent_server() as port:
        store = _quick_store(port, "silent")
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            async with store:  # connected at once; its PING is never answered
                pass
    assert (caught.value.store, caught.value.operation) == (repr(store), "open")
    assert isinstance(caught.value.__cause__, RedisTimeoutError)


async def test_a_server_that_accepts_no_connection_fails_after_the_connect_timeout() -> None:
    with unaccepting_server() as port:
        store = _quick_store(port, "unaccepted")
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            async with store:
                pass
    assert (caught.value.store, caught.value.operation) == (repr(store), "open")


@asynccontextmanager
async def gone_silent(store: RedisStore) -> AsyncIterator[tuple[RedisStore, StallingProxy, Record]]:
    """A store with short timeouts on `store`'s keys, through a proxy: one record stored,
    then the proxy stalls (the server seems to hang) until `resume()`."""
    parsed = urlparse(REDIS_URL)
    proxy = StallingProxy((parsed.hostname or "127.0.0.1", parsed.port or 6379))
    async with proxy.running():
        slow = _quick_store(proxy.port, store.prefix)
        with anyio.fail_after(4 * BOUND):
            async with slow:
                stored = await slow.put_record(Record(kind="k", id="r"), expected_version=0)
                proxy.stall()
                yield slow, proxy, stored


async def test_a_server_gone_silent_fails_a_command_after_the_command_timeout(
    store: RedisStore,
) -> None:
    async with gone_silent(store) as (slow, proxy, stored):
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            await slow.get_record("k", "r")
        assert (caught.value.store, caught.value.operation) == (repr(slow), "get_record")
        assert isinstance(caught.value.__cause__, RedisTimeoutError)
        proxy.resume()
        assert await slow.get_record("k", "r") == stored  # the same store recovers


async def test_a_write_to_a_server_gone_silent_times_out_or_is_cancelled_then_recovers(
    store: RedisStore,
) -> None:
    async with gone_silent(store) as (slow, proxy, first):
        with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
            await slow.put_record(Record(kind="k", id="r"), expected_version=first.version)
        assert (caught.value.store, caught.value.operation) == (repr(slow), "put_record")
        assert isinstance(caught.value.__cause__, RedisTimeoutError)
        with anyio.move_on_after(TIMEOUT / 5) as scope:
            await slow.put_record(Record(kind="k", id="r"), expected_version=first.version)
        assert scope.cancelled_caught
        proxy.resume()
        stored = await slow.put_record(Record(kind="k", id="r"), expected_version=first.version)
        assert stored.version == first.version + 1


async def test_a_write_that_must_reconnect_to_a_server_gone_silent_times_out_too(
    store: RedisStore,
) -> None:
    async with gone_silent(store) as (slow, proxy, first):
        for _ in range(2):  # the first one's timeout drops the connection: the second connects
            with anyio.fail_after(BOUND), pytest.raises(StoreUnavailableError) as caught:
                await slow.put_record(Record(kind="k", id="r"), expected_version=first.version)
            assert isinstance(caught.value.__cause__, RedisTimeoutError)
        proxy.resume()
        stored = await slow.put_record(Record(kind="k", id="r"), expected_version=first.version)
        assert stored.version == first.version + 1


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "5"])
def test_bad_timeouts_are_refused_by_name(bad: Any) -> None:
    with pytest.raises(ValueError, match="connect_timeout"):
        RedisStore(REDIS_URL, connect_timeout=bad)
    with pytest.raises(ValueError, match="command_timeout"):
        RedisStore(REDIS_URL, command_timeout=bad)


@pytest.mark.parametrize("steps", range(4, 14))
async def test_a_write_in_flight_as_the_store_closes_ends_cleanly_and_leaves_no_connection(
    store: RedisStore, admin: redis.Redis, steps: int
) -> None:
    name = f"closing-{uuid.uuid4().hex}"
    closing = RedisStore(named_url(name), prefix=store.prefix)
    await closing.__aenter__()
    outcome: list[object] = []

    async def write() -> None:
        try:
            outcome.append(await closing.put_record(Record(kind="k", id="r"), expected_version=0))
        except StoreUnavailableError as exc:  # told as the store's error, never a driver's
            outcome.append(exc)

    async with anyio.create_task_group() as group:
        group.start_soon(write)
        for _ in range(steps):  # the write is somewhere between connecting and its reply
            await anyio.lowlevel.checkpoint()
        await closing.aclose()
    assert len(outcome) == 1
    await anyio.sleep(0.05)  # the server sees a closed connection go
    assert not [c for c in await admin.client_list() if c["name"] == name]
