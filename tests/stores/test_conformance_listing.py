"""Thread listing on every store: filters, order by update time, cursor pages, sub-threads."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from agent_threads import (
    ChatMessageThread,
    InvalidValueError,
    Message,
    Record,
    ThreadStore,
    WorkflowThread,
    count_threads,
    list_threads,
)
from agent_threads.core.records import THREAD_KIND


async def all_pages(store: ThreadStore, *, after: str | None = None, **options: Any) -> list[str]:
    ids: list[str] = []
    cursor = after
    while True:
        page = await list_threads(store, after=cursor, **options)
        ids += [t.id for t in page.threads]
        cursor = page.next_cursor
        if cursor is None:
            return ids


async def test_threads_are_listed_newest_update_first_with_their_summary(
    store: ThreadStore,
) -> None:
    first = await ChatMessageThread.create(store, title="First", tags={"env": "prod"})
    second = await ChatMessageThread.create(store, title="Second", metadata={"n": 2})
    await first.on_new_messages([Message.user("a"), Message.user("b")])
    page = await list_threads(store)
    assert [t.id for t in page.threads] == [first.id, second.id]
    assert page.next_cursor is None
    top = page.threads[0]
    assert (top.kind, top.title, top.tags, top.message_count) == (
        "chat",
        "First",
        {"env": "prod"},
        2,
    )
    assert top.updated_at > top.created_at
    assert page.threads[1].metadata == {"n": 2}
    oldest = await list_threads(store, order="asc")
    assert [t.id for t in oldest.threads] == [second.id, first.id]


async def test_pages_follow_the_cursor_to_the_end_without_repeats(store: ThreadStore) -> None:
    made = [await ChatMessageThread.create(store, title=f"t{i}") for i in range(7)]
    newest_first = [t.id for t in reversed(made)]
    assert await all_pages(store, limit=3) == newest_first
    assert await all_pages(store, limit=3, order="asc") == newest_first[::-1]
    assert await all_pages(store, limit=7) == newest_first
    assert await count_threads(store) == 7


async def test_a_thread_updated_between_pages_is_not_listed_twice_nor_others_skipped(
    store: ThreadStore,
) -> None:
    made = [await ChatMessageThread.create(store, title=f"t{i}") for i in range(6)]
    page = await list_threads(store, limit=2)
    seen = [t.id for t in page.threads]
    await made[0].update(title="moved to the front")  # not yet listed: now newest
    await made[5].update(title="listed already")
    assert page.next_cursor is not None
    rest = await all_pages(store, limit=2, after=page.next_cursor)
    assert len(seen + rest) == len(set(seen + rest))
    assert set(seen + rest) >= {t.id for t in made[1:5]}


async def test_threads_updated_at_the_same_time_are_ordered_by_id(store: ThreadStore) -> None:
    made = [await ChatMessageThread.create(store) for _ in range(4)]
    moment = datetime(2030, 1, 1, tzinfo=UTC).isoformat()
    for thread in made:
        record = await store.get_record(THREAD_KIND, thread.id)
        assert record is not None
        data = {**record.data, "updated_at": moment}
        await store.put_record(
            Record(kind=THREAD_KIND, id=record.id, tags=record.tags, data=data),
            expected_version=record.version,
        )
    ids = sorted(t.id for t in made)
    assert await all_pages(store, limit=3, order="asc") == ids
    assert await all_pages(store, limit=1) == ids[::-1]


async def test_filters_by_kind_tags_title_and_update_time(store: ThreadStore) -> None:
    prod = await ChatMessageThread.create(store, title="Billing bug", tags={"env": "prod"})
    dev = await ChatMessageThread.create(store, title="billing idea", tags={"env": "dev"})
    flag = await ChatMessageThread.create(store, title="Other", tags={"env": "", "x": "1"})
    run = await WorkflowThread.create(store, title="a run", tags={"env": "prod"})
    assert await all_pages(store, kind="workflow") == [run.id]
    assert await all_pages(store, kind="chat") == [flag.id, dev.id, prod.id]
    assert await all_pages(store, tags={"env": "prod"}) == [run.id, prod.id]
    assert await all_pages(store, tags={"env": ""}) == [flag.id]
    assert await all_pages(store, tags={"env": "prod"}, kind="chat") == [prod.id]
    assert await all_pages(store, title_contains="BILLING") == [dev.id, prod.id]
    assert await count_threads(store, title_contains="billing", tags={"env": "dev"}) == 1
    later = (await list_threads(store, limit=1, kind="chat")).threads[0].updated_at
    assert await all_pages(store, updated_after=later - timedelta(microseconds=1)) == [
        run.id,
        flag.id,
    ]
    assert await all_pages(store, kind="nothing-of-this-kind") == []


async def test_workflow_sub_threads_are_listed_only_when_asked(store: ThreadStore) -> None:
    run = await WorkflowThread.create(store, title="run", tags={"team": "a"})
    helper = await run.create_sub_thread("helper")
    main = await run.get_sub_thread()
    alone = await ChatMessageThread.create(store, tags={"team": "a"})
    assert set(await all_pages(store)) == {run.id, alone.id}
    assert set(await all_pages(store, include_sub_threads=True)) == {
        run.id,
        alone.id,
        helper.id,
        main.id,
    }
    await helper.update(tags={"team": "a"})
    assert set(await all_pages(store, tags={"team": "a"})) == {run.id, alone.id}
    assert await count_threads(store, tags={"team": "a"}, include_sub_threads=True) == 3
    assert await count_threads(store) == 2


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
        ({"order": "sideways"}, "order"),
        ({"after": "not-a-cursor"}, "after"),
        ({"tags": {"bad key": "x"}}, "tags"),
        ({"updated_after": datetime(2030, 1, 1)}, "updated_after"),
        ({"kind": ""}, "kind"),
    ],
)
async def test_malformed_arguments_are_refused_naming_them(
    store: ThreadStore, options: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidValueError, match=field):
        await list_threads(store, **options)


async def test_a_cursor_of_the_other_order_is_refused(store: ThreadStore) -> None:
    for _ in range(3):
        await ChatMessageThread.create(store)
    cursor = (await list_threads(store, limit=1)).next_cursor
    assert cursor is not None
    with pytest.raises(InvalidValueError, match="order"):
        await list_threads(store, order="asc", after=cursor)
