"""open_store: each URL form opens its store, and a bad URL is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_threads import (
    ChatMessageThread,
    InvalidValueError,
    JsonFileStore,
    MemoryStore,
    Message,
    SQLiteStore,
    ThreadStore,
    open_store,
)

from .conftest import POSTGRES_DSN, REDIS_URL, needs_server


async def round_trip(store: ThreadStore) -> None:
    async with store:
        thread = await ChatMessageThread.create(store)
        await thread.on_new_messages([Message.user("hello")])
        loaded = await ChatMessageThread.load(thread.id, store=store)
        assert [m.text for m in loaded.messages] == ["hello"]
        await loaded.delete()


async def test_memory_url() -> None:
    store = open_store("memory://")
    assert isinstance(store, MemoryStore)
    await round_trip(store)


async def test_sqlite_urls_take_relative_and_absolute_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    relative = open_store("sqlite:///sub.db")
    assert isinstance(relative, SQLiteStore) and relative.path == "sub.db"
    await round_trip(relative)
    assert (tmp_path / "sub.db").exists()
    absolute = open_store(f"sqlite:///{tmp_path}/abs.db")
    assert isinstance(absolute, SQLiteStore) and absolute.path == f"{tmp_path}/abs.db"
    await round_trip(absolute)


async def test_file_url_is_a_json_file_store(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/files")
    assert isinstance(store, JsonFileStore) and store.directory == tmp_path / "files"
    await round_trip(store)


@needs_server("redis")
async def test_redis_url_takes_a_prefix() -> None:
    store = open_store(f"{REDIS_URL}?prefix=test-urls")
    assert type(store).__name__ == "RedisStore"
    assert "test-urls" in repr(store) and "prefix=test-urls" not in repr(store).split(",")[0]
    await round_trip(store)
    async with store:
        await store.vacuum(grace=0)  # the thread was deleted: its rows go
        assert await store.list_segments() == {}


@needs_server("postgres")
async def test_postgres_urls_take_a_schema() -> None:
    import asyncpg

    for scheme in ("postgresql", "postgres"):
        dsn = POSTGRES_DSN.replace("postgresql", scheme, 1)
        store = open_store(f"{dsn}?schema=test_urls")
        assert type(store).__name__ == "PostgresStore"
        assert "schema='test_urls'" in repr(store)
        await round_trip(store)
    connection = await asyncpg.connect(POSTGRES_DSN)
    try:
        await connection.execute('DROP SCHEMA IF EXISTS "test_urls" CASCADE')
    finally:
        await connection.close()


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("mysql://user:secret@host/db", "unknown scheme 'mysql'"),
        ("threads.db", "unknown scheme ''"),
        ("sqlite://host/x.db", "sqlite:///relative"),
        ("sqlite://", "sqlite:///relative"),
        ("file://relative/dir", "file:///absolute"),
        ("memory://somewhere", "memory://"),
        ("sqlite:///x.db?mode=ro", "unknown query parameter 'mode'"),
        ("redis://host:port/0", "malformed port"),
        ("postgresql://[::1/db", "malformed"),
    ],
)
def test_a_bad_url_is_refused_naming_it_and_the_forms(url: str, says: str) -> None:
    with pytest.raises(InvalidValueError, match="store URL") as caught:
        open_store(url)
    assert says in str(caught.value)
    assert "secret" not in str(caught.value)


def test_an_unknown_scheme_lists_every_scheme() -> None:
    with pytest.raises(InvalidValueError) as caught:
        open_store("ftp://x")
    for scheme in ("memory", "sqlite", "file", "redis", "postgresql"):
        assert scheme in str(caught.value)
