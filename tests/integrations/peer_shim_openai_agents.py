"""A pytest plugin running the OpenAI Agents SDK's own session tests on `ThreadSession`.

Loaded with `-p peer_shim_openai_agents` by `test_openai_agents_peer.py` into a pytest
run over test files extracted from the SDK's source distribution. The SDK's tests build
`SQLiteSession(session_id, db_path, session_settings=...)` by the name their module
imported; an autouse fixture rebinds that name to `PeerSession`, a `ThreadSession` with
the same constructor: sessions given one `db_path` share one store (of the kind named by
`AGENT_THREADS_PEER_STORE`: memory, sqlite or jsonfile), `":memory:"` gets a fresh one.
"""

from __future__ import annotations

import os
import tempfile
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import pytest
from agents.memory import SessionSettings

from agent_threads import JsonFileStore, MemoryStore, SQLiteStore, ThreadStore
from agent_threads.integrations.openai_agents import ThreadSession

STORE_KIND = os.environ.get("AGENT_THREADS_PEER_STORE", "memory")

_stores: dict[str, ThreadStore] = {}
_guard = threading.Lock()


def _in_own_loop(work: Callable[[], Awaitable[object]]) -> None:
    """Run `work` in an event loop of its own, in a thread of its own.

    The SDK's tests build sessions inside running event loops (and several loops, for
    `run_sync`), where nothing can be awaited from a constructor; a store's connection
    outlives the loop that opened it.
    """
    runner = threading.Thread(target=anyio.run, args=(work,))
    runner.start()
    runner.join()


def _store_for(db_path: str | Path) -> ThreadStore:
    """The open store standing for the SDK's database file `db_path` (one per file)."""
    key = str(db_path)
    with _guard:
        if key == ":memory:" or key not in _stores:
            store = _new_store()
            _in_own_loop(store.__aenter__)
            if key == ":memory:":
                key = f":memory:{id(store)}"
            _stores[key] = store
        return _stores[key]


def _new_store() -> ThreadStore:
    if STORE_KIND == "memory":
        return MemoryStore()
    directory = tempfile.mkdtemp(prefix="agent-threads-peer-")
    if STORE_KIND == "sqlite":
        return SQLiteStore(Path(directory) / "threads.db")
    if STORE_KIND == "jsonfile":
        return JsonFileStore(directory)
    raise ValueError(f"AGENT_THREADS_PEER_STORE={STORE_KIND!r}: memory, sqlite or jsonfile")


class PeerSession(ThreadSession):
    """`ThreadSession` with `SQLiteSession`'s constructor and a `close()` that does nothing."""

    def __init__(
        self,
        session_id: str,
        db_path: str | Path = ":memory:",
        sessions_table: str = "agent_sessions",
        messages_table: str = "agent_messages",
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__(session_id, store=_store_for(db_path), session_settings=session_settings)

    def close(self) -> None:
        """Nothing: the stores are closed after each test."""


@pytest.fixture(autouse=True)
def thread_session_for_sqlite_session(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    """Rebind the test module's `SQLiteSession` to `PeerSession`; close its stores after."""
    module = request.module
    if hasattr(module, "SQLiteSession"):
        monkeypatch.setattr(module, "SQLiteSession", PeerSession)
    yield
    with _guard:
        opened = list(_stores.values())
        _stores.clear()

    async def close_all() -> None:
        for store in opened:
            await store.aclose()

    _in_own_loop(close_all)
