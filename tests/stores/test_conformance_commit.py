"""Conformance: `commit`, the one write of a thread's turn (rows of segments and a record).

Every store in STORES passes these; see test_conformance.py for the fixtures.
"""

from __future__ import annotations

import json

import anyio
import pytest

from agent_threads import ConflictError, Record, Row, RowWrite, StoreCorruptedError, ThreadStore
from agent_threads.stores.base import FIRST_VERSION_LIMIT

from .conftest import ReopenStore


def rows(*ids: str) -> list[Row]:
    return [Row(i, json.dumps({"id": i})) for i in ids]


def record(version_note: str = "", **data: str) -> Record:
    return Record(kind="thing", id="r1", data={"note": version_note, **data})


async def test_commit_writes_every_segment_and_the_record(store: ThreadStore) -> None:
    stored = await store.commit(
        [RowWrite("s1", 0, rows("a", "b")), RowWrite("log", 0, rows("c"))],
        record("first"),
        expected_version=0,
    )
    assert 1 <= stored.version <= FIRST_VERSION_LIMIT
    assert await store.read_rows("s1", 0, 2) == [r.data for r in rows("a", "b")]
    assert await store.read_rows("log", 0, 1) == [r.data for r in rows("c")]
    assert await store.locate_message("b") == [("s1", 1)]
    again = await store.commit(
        [RowWrite("s1", 2, rows("d"))], record("next"), expected_version=stored.version
    )
    assert again.version == stored.version + 1
    assert await store.get_record("thing", "r1") == again
    assert await store.read_rows("s1", 0, 3) == [r.data for r in rows("a", "b", "d")]


async def test_commit_keeps_the_owner_given_and_the_one_taken_away(store: ThreadStore) -> None:
    owned = Record(kind="thing", id="r1", owner="o1", tags=("x",), data={"note": "owned"})
    stored = await store.commit([RowWrite("s1", 0, rows("a"))], owned, expected_version=0)
    assert await store.get_record("thing", "r1") == stored
    assert stored.owner == "o1"
    assert [r.id for r in await store.list_records(owner="o1")] == ["r1"]
    unowned = owned.model_copy(update={"owner": None})
    again = await store.commit(
        [RowWrite("s1", 1, rows("b"))], unowned, expected_version=stored.version
    )
    assert (await store.get_record("thing", "r1")) == again
    assert again.owner is None
    assert await store.list_records(owner="o1") == []


async def test_commit_of_no_rows_is_a_put_record(store: ThreadStore) -> None:
    stored = await store.commit([], record("alone"), expected_version=0)
    assert await store.get_record("thing", "r1") == stored


async def test_commit_with_a_stale_version_keeps_nothing(store: ThreadStore) -> None:
    kept = await store.put_record(record("kept"), expected_version=0)
    with pytest.raises(ConflictError, match="r1"):
        await store.commit(
            [RowWrite("s1", 0, rows("a")), RowWrite("log", 0, rows("c"))],
            record("lost"),
            expected_version=kept.version + 1,
        )
    with pytest.raises(ConflictError, match="r1"):  # a new record where one exists
        await store.commit([RowWrite("s1", 0, rows("a"))], record("lost"), expected_version=0)
    assert await store.get_record("thing", "r1") == kept
    assert await store.locate_message("a") == [] and await store.locate_message("c") == []
    with pytest.raises(StoreCorruptedError):
        await store.read_rows("s1", 0, 1)


async def test_commit_at_a_written_position_keeps_nothing(store: ThreadStore) -> None:
    kept = await store.put_record(record("kept"), expected_version=0)
    await store.append_rows("s1", 1, rows("taken"))
    with pytest.raises(ConflictError, match="s1"):
        await store.commit(
            [RowWrite("s1", 0, rows("a", "b"))], record("lost"), expected_version=kept.version
        )
    assert await store.get_record("thing", "r1") == kept
    assert await store.locate_message("a") == []
    # the record is written even when a later segment conflicts; what came before it may
    # stay behind unreferenced in a store without transactions (see `commit`), never the record
    with pytest.raises(ConflictError, match="s1"):
        await store.commit(
            [RowWrite("other", 0, rows("x")), RowWrite("s1", 1, rows("y"))],
            record("lost"),
            expected_version=kept.version,
        )
    assert await store.get_record("thing", "r1") == kept
    assert await store.read_rows("s1", 1, 2) == [r.data for r in rows("taken")]


async def test_of_racing_clients_committing_one_version_exactly_one_wins(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    start = await store.put_record(record("start"), expected_version=0)
    won: list[int] = []

    async def commit(n: int) -> None:
        async with another_client(store) as client:
            try:
                # each at its own positions: only the record decides
                await client.commit(
                    [RowWrite("s1", 10 * n, rows(f"m{n}"))],
                    record(f"{n}"),
                    expected_version=start.version,
                )
                won.append(n)
            except ConflictError:
                pass

    async with anyio.create_task_group() as group:
        for n in range(6):
            group.start_soon(commit, n)
    stored = await store.get_record("thing", "r1")
    assert len(won) == 1 and stored is not None
    assert (stored.version, stored.data["note"]) == (start.version + 1, f"{won[0]}")
    for n in range(6):
        assert (await store.locate_message(f"m{n}") != []) == (n in won)
