"""`langgraph-checkpoint-conformance` (LangGraph's checkpointer suite) against ThreadSaver.

Every test of every capability must pass, on a memory store and on a SQLite file: the
base ones (put, put_writes, get_tuple, list, delete_thread: 58 tests) and the extended
ones (delete_for_runs, copy_thread, prune: 23 tests).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.conformance")

from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.initializer import RegisteredCheckpointer
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from agent_threads import MemoryStore, SQLiteStore, ThreadStore
from agent_threads.integrations.langgraph import ThreadSaver

pytestmark = pytest.mark.anyio

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}
EXTENDED = {"delete_for_runs", "copy_thread", "prune"}


def _registered(kind: str, tmp_path: Path) -> RegisteredCheckpointer:
    @checkpointer_test(name=f"ThreadSaver on {kind}")
    async def saver() -> AsyncIterator[ThreadSaver]:
        store: ThreadStore = MemoryStore() if kind == "memory" else SQLiteStore(tmp_path / "s.db")
        async with store:
            yield ThreadSaver(store)

    return saver


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_every_conformance_test_passes(kind: str, tmp_path: Path) -> None:
    report = await validate(_registered(kind, tmp_path), progress=ProgressCallbacks.quiet())
    report.print_report()
    for name in BASE | EXTENDED:
        result = report.results[name]
        assert result.detected, name
        assert result.failures == [], name
        assert (result.tests_failed, result.tests_skipped) == (0, 0), name
    assert sum(report.results[name].tests_passed for name in BASE) == 58
    assert sum(report.results[name].tests_passed for name in EXTENDED) == 23
    assert report.passed_all_base()
    assert report.passed_all()
