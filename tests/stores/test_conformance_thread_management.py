"""Thread management on every store: get_or_create, pop, clear, import under a new id."""

from __future__ import annotations

from collections.abc import Iterable

import anyio
import pytest

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    InvalidValueError,
    Message,
    ThreadNotFoundError,
    ThreadStore,
    Usage,
    WorkflowThread,
)
from tests.stores.conftest import ReopenStore


def texts(messages: Iterable[Message]) -> list[str]:
    return [m.text for m in messages]


async def test_get_or_create_creates_a_missing_thread_with_its_fields(store: ThreadStore) -> None:
    thread = await ChatMessageThread.get_or_create(
        "support-42", store=store, title="Support", tags={"team": "care"}, metadata={"n": 1}
    )
    assert (thread.id, thread.title, dict(thread.tags), dict(thread.metadata)) == (
        "support-42",
        "Support",
        {"team": "care"},
        {"n": 1},
    )
    assert (await ChatMessageThread.load("support-42", store=store)).title == "Support"


async def test_get_or_create_opens_an_existing_thread_as_it_is(store: ThreadStore) -> None:
    first = await ChatMessageThread.create(store, id="t-1", title="Kept")
    await first.on_new_messages([Message.user("hello")])
    again = await ChatMessageThread.get_or_create("t-1", store=store, title="Ignored")
    assert again.title == "Kept"
    assert texts(again.messages) == ["hello"]


async def test_get_or_create_lazy_reads_messages_on_demand(store: ThreadStore) -> None:
    created = await ChatMessageThread.get_or_create("lazy-1", store=store, lazy=True)
    assert created.is_lazy
    await created.on_new_messages([Message.user("a"), Message.user("b")])
    opened = await ChatMessageThread.get_or_create("lazy-1", store=store, lazy=True)
    assert opened.is_lazy
    assert texts(await opened.get_messages(-1)) == ["b"]


async def test_concurrent_get_or_create_from_two_clients_ends_with_one_thread(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    handles: list[ChatMessageThread] = []
    async with another_client(store) as other:

        async def open_on(client: ThreadStore) -> None:
            handles.append(await ChatMessageThread.get_or_create("shared", store=client))

        async with anyio.create_task_group() as group:
            for client in (store, other, store, other):
                group.start_soon(open_on, client)
        assert len(handles) == 4
        assert {h.id for h in handles} == {"shared"}
        for i, handle in enumerate(handles):
            await handle.on_new_messages([Message.user(f"from {i}")])
        final = await ChatMessageThread.load("shared", store=store)
        assert sorted(texts(final.messages)) == [f"from {i}" for i in range(4)]


async def test_a_stale_handle_never_overwrites_a_thread_deleted_and_created_again(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    stale = await ChatMessageThread.create(store, id="user-42", title="old")
    await stale.on_new_messages([Message.user("old")])
    async with another_client(store) as other:
        await (await ChatMessageThread.load("user-42", store=other)).delete()
        again = await ChatMessageThread.create(other, id="user-42", title="new")
        await again.on_new_messages([Message.user("new")])  # as many writes as the stale one saw
        await stale.on_new_messages([Message.user("late")])  # loses, reads the new thread
        final = await ChatMessageThread.load("user-42", store=other)
    assert (final.title, texts(final.messages)) == ("new", ["new", "late"])


async def test_get_or_create_refuses_an_id_held_by_a_workflow(store: ThreadStore) -> None:
    workflow = await WorkflowThread.create(store)
    with pytest.raises(ThreadNotFoundError, match="workflow"):
        await ChatMessageThread.get_or_create(workflow.id, store=store)


async def test_get_or_create_checks_the_id(store: ThreadStore) -> None:
    with pytest.raises(InvalidIdError):
        await ChatMessageThread.get_or_create("", store=store)


async def test_pop_removes_and_returns_the_last_message(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    a, b = Message.user("a"), Message.assistant("b", usage=Usage(input_tokens=5, output_tokens=7))
    await thread.on_new_messages([a, b])
    popped = await thread.pop()
    assert popped == b
    assert texts(thread.messages) == ["a"]
    assert (thread.stats.message_count, thread.stats.output_tokens) == (1, 0)
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert texts(reloaded.messages) == ["a"]
    assert reloaded.stats == thread.stats


async def test_pop_on_an_empty_thread_returns_none_and_saves_nothing(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    assert await thread.pop() is None
    assert await thread.checkpoints() == []


async def test_pop_keeps_the_old_head_as_a_checkpoint_to_roll_back_to(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    await thread.pop()
    await thread.pop()
    assert texts(thread.messages) == []
    saved = await thread.checkpoints()
    assert [(c.label, c.reason, c.message_count) for c in saved] == [
        ("before-pop", "rollback", 2),
        ("before-pop", "rollback", 1),
    ]
    await thread.rollback(saved[0])
    assert texts(thread.messages) == ["a", "b"]
    assert thread.stats.message_count == 2


async def test_append_after_pop_never_overwrites_the_popped_message(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    await thread.pop()
    await thread.on_new_messages([Message.user("c")])
    assert texts(thread.messages) == ["a", "c"]
    before = (await thread.checkpoints())[0]
    snapshot = await thread.at(before)
    assert texts(snapshot.messages) == ["a", "b"]


async def test_pop_keeps_the_state(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await thread.update_state({"step": 3})
    await thread.pop()
    assert thread.state.to_dict() == {"step": 3}


async def test_pop_by_a_stale_handle_removes_the_last_message_as_stored(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    async with another_client(store) as other:
        stale = await ChatMessageThread.load(thread.id, store=other)
        await thread.on_new_messages([Message.user("b")])
        popped = await stale.pop()
        assert popped is not None and popped.text == "b"
        assert texts(stale.messages) == ["a"]
    await thread.refresh()
    assert texts(thread.messages) == ["a"]


async def test_concurrent_pops_remove_distinct_messages(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user(str(i)) for i in range(6)])
    popped: list[str] = []
    async with another_client(store) as other:
        handles = [await ChatMessageThread.load(thread.id, store=c) for c in (store, other) * 2]

        async def pop_with(handle: ChatMessageThread) -> None:
            message = await handle.pop()
            assert message is not None
            popped.append(message.text)

        async with anyio.create_task_group() as group:
            for handle in handles:
                group.start_soon(pop_with, handle)
    assert sorted(popped) == ["2", "3", "4", "5"]
    await thread.refresh()
    assert texts(thread.messages) == ["0", "1"]


async def test_pop_on_a_lazy_handle(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    popped = await lazy.pop()
    assert popped is not None and popped.text == "b"
    assert lazy.head == 1


async def test_clear_empties_the_thread_and_keeps_a_checkpoint(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store, title="Kept", tags={"k": "v"})
    usage = Usage(input_tokens=3, output_tokens=4, cost=0.5)
    await thread.on_new_messages([Message.user("a"), Message.assistant("b", usage=usage)])
    await thread.update_state({"x": 1})
    saved = await thread.clear()
    assert saved is not None and saved.label == "before-clear"
    assert saved.message_count == 2
    assert thread.head == 0
    assert thread.stats.message_count == 0 and thread.stats.cost == 0
    assert (thread.title, dict(thread.tags), thread.state.to_dict()) == (
        "Kept",
        {"k": "v"},
        {"x": 1},
    )
    reloaded = await ChatMessageThread.load(thread.id, store=store)
    assert reloaded.head == 0
    await reloaded.rollback(saved)
    assert texts(reloaded.messages) == ["a", "b"]
    assert reloaded.stats.cost == 0.5


async def test_clear_on_an_empty_thread_returns_none(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    assert await thread.clear() is None
    assert await thread.checkpoints() == []


async def test_export_and_history_see_pops_and_clears(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a"), Message.user("b")])
    await thread.pop()
    imported = await ChatMessageThread.from_json(thread.to_json(), store, id="copy-of-popped")
    assert isinstance(imported, ChatMessageThread)
    assert texts(imported.messages) == ["a"]
    await imported.rollback("before-pop")
    assert texts(imported.messages) == ["a", "b"]


async def test_import_under_a_new_id_copies_the_thread_beside_the_original(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store, title="Original")
    await thread.on_new_messages([Message.user("a")])
    checkpoint = await thread.checkpoint("one")
    await thread.on_new_messages([Message.user("b")])
    copy = await AgentThread.from_json(await thread.export(), store, id="the-copy")
    assert isinstance(copy, ChatMessageThread)
    assert (copy.id, copy.title) == ("the-copy", "Original")
    assert texts(copy.messages) == ["a", "b"]
    assert [c.id for c in await copy.checkpoints()] == [checkpoint.id]
    await copy.rollback("one")
    assert texts(copy.messages) == ["a"]
    await copy.on_new_messages([Message.user("c")])
    original = await ChatMessageThread.load(thread.id, store=store)
    assert texts(original.messages) == ["a", "b"]
    assert [c.thread_id for c in await original.checkpoints()] == [thread.id]


async def test_import_under_a_taken_or_invalid_id_is_refused(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store, id="taken")
    document = thread.to_json()
    with pytest.raises(InvalidIdError):
        await ChatMessageThread.from_json(document, store, id="bad id\n")
    other = await ChatMessageThread.create(store, id="other")
    with pytest.raises(ConflictError, match="other"):
        await ChatMessageThread.from_json(document, store, id=other.id)


async def test_a_workflow_is_imported_under_its_own_id_only(store: ThreadStore) -> None:
    workflow = await WorkflowThread.create(store)
    with pytest.raises(InvalidValueError, match="own id"):
        await AgentThread.from_json(workflow.to_json(), store, id="renamed")
