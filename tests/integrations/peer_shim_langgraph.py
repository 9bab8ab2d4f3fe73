"""Pytest fixtures giving LangGraph's own tests a `ThreadSaver` as their checkpointer.

Imported by the conftest `test_langgraph_peer.py` writes for a pytest process running
LangGraph's `tests/test_time_travel*.py`, extracted from its source distribution. Those
tests take the `sync_checkpointer` / `async_checkpointer` fixtures of LangGraph's own
conftest (not extracted); these are the same fixtures on a `ThreadSaver`, on the store
named by `AGENT_THREADS_PEER_STORE` ("memory" or "sqlite"; the sync fixture always uses a
memory store: its saver runs in an event loop of its own, where a store is opened lazily).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agent_threads import MemoryStore, SQLiteStore, ThreadStore
from agent_threads.integrations.langgraph import ThreadSaver


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # LangGraph's async tests run on asyncio only


@pytest.fixture
def sync_checkpointer() -> Iterator[ThreadSaver]:
    saver = ThreadSaver(MemoryStore())
    try:
        yield saver
    finally:
        saver.close()


@pytest.fixture
async def async_checkpointer(tmp_path: Path) -> AsyncIterator[ThreadSaver]:
    kind = os.environ.get("AGENT_THREADS_PEER_STORE", "memory")
    store: ThreadStore = SQLiteStore(tmp_path / "peer.db") if kind == "sqlite" else MemoryStore()
    async with store:
        yield ThreadSaver(store)
