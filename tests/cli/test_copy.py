"""copy: a store holding forks, checkpoints and a workflow run, into JSON files and PostgreSQL.

Afterwards everything is equal: every record (threads, workflow checkpoints) and every
thread's export (its messages, state and checkpoints), also after a vacuum of the target,
which proves the copy holds every row and blob its records reference.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    Message,
    ThreadStore,
    open_store,
)
from agent_threads.threads.transfer import plan_copy
from tests.cli.conftest import Sample, as_json, fails, ok, run
from tests.stores.conftest import POSTGRES_DSN, needs_server


async def _contents(store: ThreadStore) -> dict[str, Any]:
    """Every record, and every thread's export, of a store."""
    records = {
        f"{r.kind}/{r.id}": (
            r.owner,
            sorted(r.tags),
            json.loads(json.dumps(r.data, sort_keys=True)),
        )
        for r in await store.list_records()
    }
    exports = {}
    for r in await store.list_records("thread"):
        exports[r.id] = json.loads(await (await AgentThread.load(r.id, store=store)).export())
    return {"records": records, "exports": exports}


def contents(url: str, *, vacuum: bool = False) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with open_store(url) as store:
            if vacuum:
                await store.vacuum(grace=0)
            return await _contents(store)

    return anyio.run(main)


def segments(url: str) -> set[str]:
    async def main() -> set[str]:
        async with open_store(url) as store:
            return set(await store.list_segments())

    return anyio.run(main)


def check_equal_copy(source: str, target: str) -> dict[str, Any]:
    report: dict[str, Any] = as_json("copy", "--from", source, "--to", target)
    assert report["ok"] and report["conflicts"] == []
    checked = {c["thread_id"]: c for c in report["threads"]}
    assert len(checked) == 8  # 5 threads and the run's 3 sub-threads
    assert checked["support"]["messages"] == [5, 5] and checked["retry"]["checkpoints"] == [2, 2]
    assert all(c["problem"] is None for c in checked.values())
    before = contents(source, vacuum=True)
    assert contents(target) == before
    assert contents(target, vacuum=True) == before  # nothing referenced is missing
    assert segments(target) == segments(source)  # shared segments stay shared, none added
    return report


def test_copy_into_a_json_file_store_is_equal_and_verified(sample: Sample, tmp_path: Path) -> None:
    target = f"file://{tmp_path}/copy"
    report = check_equal_copy(sample.url, target)
    assert report["rows_copied"] > 0 and report["rows_skipped"] == 0
    text = ok("copy", "--from", sample.url, "--to", target)
    assert "verified 8 of 8 threads" in " ".join(text.split())


def test_copying_again_skips_everything(sample: Sample, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path}/copy.db"
    first = as_json("copy", "--from", sample.url, "--to", target)
    again = as_json("copy", "--from", sample.url, "--to", target)
    assert (again["records_copied"], again["rows_copied"], again["blobs_copied"]) == (0, 0, 0)
    assert again["records_skipped"] == first["records_copied"]
    assert again["rows_skipped"] == first["rows_copied"] and again["ok"]


def test_a_copy_of_some_threads_brings_their_ancestors_and_is_completed_later(
    sample: Sample, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path}/copy.db"
    some = as_json("copy", "--from", sample.url, "--to", target, "--thread", "retry-2")
    assert {c["thread_id"] for c in some["threads"]} == {"retry-2", "retry", "support"}
    assert {t["id"] for t in as_json("ls", "--store", target)["threads"]} == {
        "retry-2",
        "retry",
        "support",
    }
    run_only = as_json("copy", "--from", sample.url, "--to", target, "--thread", "run-1")
    assert len(run_only["threads"]) == 4  # the run and its sub-threads
    rest = check_equal_copy(sample.url, target)
    assert rest["records_skipped"] > 0


def test_an_interrupted_copy_resumes(sample: Sample, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path}/copy.db"

    class Stop(Exception):
        pass

    def stop_after_rows(unit: str, count: int) -> None:
        if unit == "rows":
            raise Stop

    async def interrupted() -> None:
        async with open_store(sample.url) as source, open_store(target) as into:
            plan = await plan_copy(source)
            with pytest.raises(Stop):
                await plan.run(source, into, progress=stop_after_rows)
            assert await into.list_records() == []  # rows first, records last

    anyio.run(interrupted)
    report = check_equal_copy(sample.url, target)
    assert report["rows_skipped"] > 0 and report["blobs_skipped"] == 1


def _append(url: str, thread_id: str, text: str) -> None:
    async def main() -> None:
        async with open_store(url) as store:
            thread = await ChatMessageThread.load(thread_id, store=store)
            await thread.on_new_messages([Message.user(text)])

    anyio.run(main)


def test_a_thread_changed_since_is_a_conflict_unless_replaced(
    sample: Sample, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path}/copy.db"
    ok("copy", "--from", sample.url, "--to", target)
    _append(sample.url, "support", "one more")  # extends the segment the target holds
    result = run("copy", "--from", sample.url, "--to", target, "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["conflicts"] == ["thread 'support'"] and not report["ok"]
    (bad,) = [c for c in report["threads"] if c["problem"]]
    assert (bad["thread_id"], bad["messages"]) == ("support", [6, 5])
    assert report["rows_copied"] == 1  # the new row, beside the ones already there
    assert "not equal" in result.stderr
    replaced = as_json("copy", "--from", sample.url, "--to", target, "--replace")
    assert replaced["ok"] and replaced["records_copied"] == 1
    assert contents(target) == contents(sample.url)


def test_a_thread_missing_from_the_source_is_named(sample: Sample, tmp_path: Path) -> None:
    target = f"sqlite:///{tmp_path}/copy.db"
    line = fails("copy", "--from", sample.url, "--to", target, "--thread", "nobody", code=3)
    assert "'nobody'" in line


@pytest.fixture
def postgres_url() -> Iterator[str]:
    schema = f"cli_{uuid.uuid4().hex}"
    yield f"{POSTGRES_DSN}?schema={schema}"

    async def drop() -> None:
        import asyncpg

        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await connection.close()

    anyio.run(drop)


@needs_server("postgres")
def test_copy_from_sqlite_into_postgresql_is_equal_and_verified(
    sample: Sample, postgres_url: str
) -> None:
    check_equal_copy(sample.url, postgres_url)
    shown = as_json("show", "support", "--store", postgres_url)
    assert [m["id"] for m in shown["messages"]] == sample.messages
    assert as_json("runs", "run-1", "--store", postgres_url)["status"] == "paused"
    again = as_json("copy", "--from", sample.url, "--to", postgres_url)
    assert again["ok"] and again["rows_copied"] == 0
