"""The store fixtures: every store in STORES runs the whole conformance suite.

A new store joins by adding one `open_<kind>` factory and one `pytest.param` below.
Each factory returns a fresh, empty store as an async context manager and imports its
driver inside, so collection works without the extras installed.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from urllib.parse import urlparse

import anyio
import pytest

from agent_threads import MemoryStore, ThreadStore

StoreFactory = Callable[[Path], AbstractAsyncContextManager[ThreadStore]]

REDIS_URL = os.environ.get("AGENT_THREADS_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "AGENT_THREADS_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)
REQUIRE_SERVICES = os.environ.get("AGENT_THREADS_REQUIRE_SERVICES") == "1"


def _reachable(url: str, default_port: int) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection(
            (parsed.hostname or "127.0.0.1", parsed.port or default_port), 1.0
        ):
            return True
    except OSError:
        return False


def needs_server(kind: str) -> pytest.MarkDecorator:
    """Skip (or, with AGENT_THREADS_REQUIRE_SERVICES=1, fail) when the server is down."""
    url, port = {"redis": (REDIS_URL, 6379), "postgres": (POSTGRES_DSN, 5432)}[kind]
    up = _reachable(url, port)
    if not up and REQUIRE_SERVICES:
        raise RuntimeError(
            f"{kind} server at {url} is not reachable and AGENT_THREADS_REQUIRE_SERVICES=1"
        )
    return pytest.mark.skipif(not up, reason=f"{kind} server at {url} is not reachable")


def open_memory(tmp_path: Path) -> AbstractAsyncContextManager[ThreadStore]:
    return MemoryStore()


def open_jsonfile(tmp_path: Path) -> AbstractAsyncContextManager[ThreadStore]:
    from agent_threads.stores.jsonfile import JsonFileStore

    return JsonFileStore(tmp_path / "jsonfile-store")


def open_sqlite(tmp_path: Path) -> AbstractAsyncContextManager[ThreadStore]:
    from agent_threads.stores.sqlite import SQLiteStore

    tmp_path.mkdir(parents=True, exist_ok=True)
    return SQLiteStore(tmp_path / "threads.db")


@asynccontextmanager
async def open_redis(tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """A RedisStore under a unique key prefix, whose keys are deleted afterwards."""
    import redis.asyncio as redis

    from agent_threads.stores.redis import RedisStore

    store = RedisStore(REDIS_URL, prefix=f"test-{uuid.uuid4().hex}")
    try:
        async with store:
            yield store
    finally:
        async with redis.Redis.from_url(REDIS_URL) as client:
            keys = [key async for key in client.scan_iter(match=store.key_pattern, count=1000)]
            if keys:
                await client.delete(*keys)


class _Neighbour:
    """Another tenant's thread in a tenant store's storage, checked intact at the end."""

    def __init__(self, inner: ThreadStore) -> None:
        from agent_threads.stores.tenant import TenantStore

        self.store = TenantStore(inner, "neighbour")
        self.thread_id = ""

    async def fill(self) -> None:
        from agent_threads import ChatMessageThread, Message

        thread = await ChatMessageThread.create(self.store, id="shared-id", tags={"env": "x"})
        await thread.checkpoint("empty")
        await thread.on_new_messages([Message.user(t) for t in ("a", "b", "c")])
        await thread.checkpoint("full")
        await thread.rollback("empty")  # a, b, c: referenced by the log only
        await thread.on_new_messages([Message.user("a"), Message.user("d")])
        await thread.update_state({"n": 1})
        self.thread_id = thread.id

    async def check(self, inner: ThreadStore) -> None:
        from agent_threads import AgentThreadsError, ChatMessageThread

        with contextlib.suppress(AgentThreadsError):  # a test may leave corrupt data behind
            await inner.vacuum(grace=0)
        thread = await ChatMessageThread.load(self.thread_id, store=self.store)
        assert [m.text for m in thread.messages] == ["a", "d"]
        assert thread.state.to_dict() == {"n": 1}
        full = await thread.at("full")
        assert [m.text for m in full.messages] == ["a", "b", "c"]


@asynccontextmanager
async def open_tenant(tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """A TenantStore over a MemoryStore holding another tenant's thread, left intact."""
    from agent_threads.stores.tenant import TenantStore

    async with MemoryStore() as inner:
        neighbour = _Neighbour(inner)
        await neighbour.fill()
        yield TenantStore(inner, "acme")
        await neighbour.check(inner)


@asynccontextmanager
async def open_http(tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """An HttpStore of a fresh MemoryStore the service serves (uvicorn on a loopback port)."""
    from agent_threads.stores.http import HttpStore

    from ._service import service

    url = service().mount(MemoryStore())
    try:
        async with HttpStore(url) as store:
            yield store
    finally:
        service().unmount(url)


_EMPTIED_SCHEMAS: list[str] = []
"""Schemas of closed test PostgresStores, emptied for the next one: creating a schema's
tables costs ~0.1 s, emptying them ~1 ms (hypothesis opens a store per example)."""


@asynccontextmanager
async def open_postgres(tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """A PostgresStore in a schema of its own, empty; emptied for reuse afterwards."""
    import asyncpg

    from agent_threads.stores.postgres import PostgresStore

    schema = _EMPTIED_SCHEMAS.pop() if _EMPTIED_SCHEMAS else f"test_{uuid.uuid4().hex}"
    try:
        async with PostgresStore(POSTGRES_DSN, schema=schema, max_size=4) as store:
            yield store
    finally:
        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await connection.execute(
                f'SET search_path TO "{schema}"; DELETE FROM segment_rows; DELETE FROM segments;'
                " DELETE FROM records; DELETE FROM blobs"
            )
            _EMPTIED_SCHEMAS.append(schema)
        except asyncpg.PostgresError:  # its tables were never made (the store failed to open)
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()


async def _drop_schemas(schemas: list[str]) -> None:
    import asyncpg

    connection = await asyncpg.connect(POSTGRES_DSN)
    try:
        for schema in schemas:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await connection.close()


def _drop_emptied() -> None:
    """Drop the reused test schemas (all of them: no test is using one any more)."""
    schemas = list(_EMPTIED_SCHEMAS)
    _EMPTIED_SCHEMAS.clear()
    if schemas:
        anyio.run(_drop_schemas, schemas)


# a module importing STORES from elsewhere (tests/threads) runs no test of this directory,
# so the session fixture below never starts for it: dropped on exit then
atexit.register(_drop_emptied)


@pytest.fixture(scope="session", autouse=True)
def _drop_emptied_schemas() -> Iterator[None]:
    """Drop the reused test schemas once every test is done."""
    yield
    _drop_emptied()


@asynccontextmanager
async def _same(store: ThreadStore) -> AsyncIterator[ThreadStore]:
    yield store  # a MemoryStore is its own only client; the test's fixture closes it


def _another_client(store: ThreadStore) -> AbstractAsyncContextManager[ThreadStore]:
    """A second, independent client of the storage behind `store` (same file, prefix, schema)."""
    from agent_threads import JsonFileStore
    from agent_threads.stores.sqlite import SQLiteStore

    if isinstance(store, MemoryStore):
        return _same(store)
    if type(store).__name__ == "TenantStore":
        return _another_tenant_client(store)
    if isinstance(store, JsonFileStore):
        return JsonFileStore(store.directory)
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path)
    if type(store).__name__ == "HttpStore":
        from agent_threads.stores.http import HttpStore

        assert isinstance(store, HttpStore)
        return HttpStore(store.url)  # its own connections to the same service
    if type(store).__name__ == "RedisStore":
        from agent_threads.stores.redis import RedisStore

        assert isinstance(store, RedisStore)
        return RedisStore(REDIS_URL, prefix=store.prefix)
    from agent_threads.stores.postgres import PostgresStore

    assert isinstance(store, PostgresStore), f"no second client known for {store!r}"
    return PostgresStore(POSTGRES_DSN, schema=store.schema, max_size=1)


@asynccontextmanager
async def _another_tenant_client(store: ThreadStore) -> AsyncIterator[ThreadStore]:
    from agent_threads.stores.tenant import TenantStore

    assert isinstance(store, TenantStore)
    async with _another_client(store.inner) as inner:
        yield TenantStore(inner, store.tenant)


ReopenStore = Callable[[ThreadStore], AbstractAsyncContextManager[ThreadStore]]


@pytest.fixture
def another_client() -> ReopenStore:
    """Opens another client of a store's storage, as a second process or machine would."""
    return _another_client


STORES = [
    pytest.param(open_memory, id="memory"),
    pytest.param(open_jsonfile, id="jsonfile"),
    pytest.param(open_sqlite, id="sqlite"),
    pytest.param(open_redis, id="redis", marks=needs_server("redis")),
    pytest.param(open_postgres, id="postgres", marks=needs_server("postgres")),
    pytest.param(open_tenant, id="tenant"),
    pytest.param(open_http, id="http"),
]


@pytest.fixture(params=STORES)
def store_factory(request: pytest.FixtureRequest) -> StoreFactory:
    """A factory of fresh stores of one kind (for tests that need several or their own loop)."""
    factory: StoreFactory = request.param
    return factory


@pytest.fixture
async def store(store_factory: StoreFactory, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    """A fresh, empty, open store of each kind in STORES."""
    async with store_factory(tmp_path) as opened:
        yield opened
