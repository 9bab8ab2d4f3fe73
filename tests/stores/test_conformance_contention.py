"""Many writers on one thread, with default settings: every write lands, in each writer's order."""

from __future__ import annotations

from contextlib import AsyncExitStack

import anyio
import pytest

from agent_threads import ChatMessageThread, ConflictError, Message, ThreadStore
from agent_threads.core.retry import RetryPolicy

from .conftest import ReopenStore

WRITERS = 16
EACH = 10


async def handles(
    store: ThreadStore, another_client: ReopenStore, thread_id: str, stack: AsyncExitStack
) -> list[ChatMessageThread]:
    """One handle per writer, half of them on clients of their own (other connections)."""
    found = []
    for n in range(WRITERS):
        client = store if n % 2 else await stack.enter_async_context(another_client(store))
        found.append(await ChatMessageThread.load(thread_id, store=client))
    return found


async def test_sixteen_writers_on_one_thread_all_land_in_their_own_order(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store)
    async with AsyncExitStack() as stack:
        writers = await handles(store, another_client, thread.id, stack)

        async def write(n: int, handle: ChatMessageThread) -> None:
            for i in range(EACH):
                await handle.on_new_messages([Message.user(f"{n}:{i}")])

        async with anyio.create_task_group() as group:
            for n, handle in enumerate(writers):
                group.start_soon(write, n, handle)
    found = [m.text for m in (await ChatMessageThread.load(thread.id, store=store)).messages]
    assert len(found) == WRITERS * EACH
    for n in range(WRITERS):
        assert [t for t in found if t.startswith(f"{n}:")] == [f"{n}:{i}" for i in range(EACH)]


async def test_sixteen_writers_updating_state_and_checkpointing_lose_no_update(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store)
    async with AsyncExitStack() as stack:
        writers = await handles(store, another_client, thread.id, stack)

        async def write(n: int, handle: ChatMessageThread) -> None:
            for i in range(3):
                await handle.update_state({f"w{n}": i})
                await handle.checkpoint(f"w{n}-{i}")

        async with anyio.create_task_group() as group:
            for n, handle in enumerate(writers):
                group.start_soon(write, n, handle)
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert reloaded.state.to_dict() == {f"w{n}": 2 for n in range(WRITERS)}
    labels = [c.label or "" for c in await reloaded.checkpoints()]
    assert sorted(labels) == sorted(f"w{n}-{i}" for n in range(WRITERS) for i in range(3))


async def test_a_write_past_its_deadline_names_the_thread_attempts_and_time(
    store: ThreadStore,
) -> None:
    first = await ChatMessageThread.create(store)
    second = await ChatMessageThread.load(first.id, store=store)
    await first.on_new_messages([Message.user("first")])
    with pytest.raises(ConflictError, match=rf"{first.id}.*1 attempts in [0-9.]+ s"):
        await second.on_new_messages([Message.user("late")], deadline=0)
    await second.on_new_messages([Message.user("then")])  # the default policy waits it out
    assert [m.text for m in second.messages] == ["first", "then"]


def test_a_retry_policy_refuses_a_negative_deadline() -> None:
    with pytest.raises(ValueError, match="deadline"):
        RetryPolicy(deadline=-1)


async def test_a_stores_retry_policy_applies_to_its_threads_and_a_call_overrides_it(
    store: ThreadStore,
) -> None:
    first = await ChatMessageThread.create(store)
    second = await ChatMessageThread.load(first.id, store=store)
    store.retry = RetryPolicy(deadline=0)
    try:
        await first.on_new_messages([Message.user("first")])
        with pytest.raises(ConflictError, match="deadline 0 s"):
            await second.on_new_messages([Message.user("late")])
        await second.on_new_messages([Message.user("then")], deadline=5)
    finally:
        store.retry = RetryPolicy()
    assert [m.text for m in second.messages] == ["first", "then"]
