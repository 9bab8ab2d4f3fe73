"""The append path of ChatMessageThread: what its fast paths must keep identical."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from agent_threads import (
    ChatMessageThread,
    DuplicateMessageError,
    InvalidValueError,
    MemoryStore,
    Message,
    SQLiteStore,
    ThreadNotFoundError,
    Usage,
    tool_call,
)
from tests.timetravel.legacy_threads import make_legacy


class TaggedMessage(Message):
    """A subclass, as a user might make: accepted like a Message."""

    tag: str = "t"


def conversation(count: int) -> list[Message]:
    return [
        Message.assistant(f"answer {i}", usage=Usage(output_tokens=i), metadata={"n": i})
        if i % 2
        else Message.user(f"question {i}\nwith a second line")
        for i in range(count)
    ]


async def test_stored_rows_are_each_messages_own_json() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    batch = conversation(5)
    await thread.on_new_messages(batch)
    segment_id, start, end = thread.ranges[0].to_json()
    stored = await store.read_rows(segment_id, start, end)
    assert stored == [m.model_dump_json() for m in batch]
    assert [json.loads(row)["id"] for row in stored] == [m.id for m in batch]


async def test_the_first_repeated_id_in_a_batch_is_named() -> None:
    thread = await ChatMessageThread.create()
    a, b = conversation(2)
    with pytest.raises(DuplicateMessageError, match=b.id):
        await thread.on_new_messages([a, b, b, a])
    assert thread.head == 0


async def test_an_id_already_in_the_thread_is_refused_and_nothing_stored() -> None:
    thread = await ChatMessageThread.create()
    first = conversation(3)
    await thread.on_new_messages(first)
    with pytest.raises(DuplicateMessageError, match=first[1].id):
        await thread.on_new_messages([Message.user("new"), first[1]])
    assert thread.messages == first


async def test_a_message_of_a_sibling_fork_may_join_this_thread() -> None:
    parent = await ChatMessageThread.create()
    await parent.on_new_messages(conversation(2))
    fork = await parent.fork()
    extra = Message.user("only in the parent so far")
    await parent.on_new_messages([extra])
    await fork.on_new_messages([extra])  # the shared cache holds it, this thread does not
    assert fork.messages[-1] == extra
    assert fork.head == parent.head == 3


async def test_subclasses_of_message_are_appended_like_messages() -> None:
    thread = await ChatMessageThread.create()
    tagged = TaggedMessage(role="user", contents=())
    await thread.on_new_messages([tagged, Message.user("plain")])
    with pytest.raises(DuplicateMessageError):
        await thread.on_new_messages([tagged])
    assert thread.head == 2
    segment_id, start, end = thread.ranges[0].to_json()
    stored = await thread.store.read_rows(segment_id, start, end)
    assert stored[0] == tagged.model_dump_json()  # its own fields too, as ever


async def test_a_stale_handle_appends_after_another_handles_state_update() -> None:
    store = MemoryStore()
    first = await ChatMessageThread.create(store)
    second = await ChatMessageThread.load(first.id, store=store)
    await first.update_state({"step": 1})
    await second.on_new_messages([Message.user("x"), Message.user("y")])
    reloaded = await ChatMessageThread.load(first.id, store=store, lazy=True)
    assert [m.text for m in await reloaded.get_messages()] == ["x", "y"]
    assert reloaded.state.to_dict() == {"step": 1}


async def test_what_json_cannot_hold_is_refused_naming_the_message_and_field() -> None:
    thread = await ChatMessageThread.create()
    costly = Message.assistant("a", usage=Usage(cost=math.inf))
    with pytest.raises(InvalidValueError, match=rf"message '{costly.id}' usage\.cost"):
        await thread.on_new_messages([Message.user("fine"), costly])
    answer = Message.tool_result("call-1", {"x": [math.nan]})
    with pytest.raises(InvalidValueError, match=rf"message '{answer.id}' tool result 'call-1'"):
        await thread.on_new_messages([answer])
    call = Message.assistant(tool_calls=[tool_call("f", {"x": math.inf}, call_id="call-2")])
    with pytest.raises(InvalidValueError, match=rf"message '{call.id}' tool call 'call-2' arg"):
        await thread.on_new_messages([call])
    assert thread.head == 0


async def test_a_stale_handle_never_overwrites_a_thread_created_again_with_its_id(
    tmp_path: Path,
) -> None:
    async with SQLiteStore(tmp_path / "t.db") as here, SQLiteStore(tmp_path / "t.db") as there:
        stale = await ChatMessageThread.create(here, id="user-42", title="old")
        await (await ChatMessageThread.load("user-42", store=there)).delete()
        await ChatMessageThread.create(there, id="user-42", title="new")  # at a version of its own
        await stale.on_new_messages([Message.user("late")])
        again = await ChatMessageThread.load("user-42", store=there)
        assert again.title == "new"  # the new thread's own data stays


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_a_stale_handle_resends_a_message_a_rollback_elsewhere_took_out(
    lazy: bool,
) -> None:
    store = MemoryStore()
    first = await ChatMessageThread.create(store)
    kept, removed = Message.user("kept"), Message.user("removed")
    await first.on_new_messages([kept, removed])
    stale = await ChatMessageThread.load(first.id, store=store, lazy=lazy)
    await first.rollback(message_id=kept.id)
    await stale.on_new_messages([removed])  # its stale head still holds it: not a duplicate
    again = await ChatMessageThread.load(stale.id, store=store)
    assert [m.text for m in await again.get_messages()] == ["kept", "removed"]


async def test_a_stale_lazy_handle_resends_a_message_popped_elsewhere() -> None:
    store = MemoryStore()
    first = await ChatMessageThread.create(store)
    last = Message.user("b")
    await first.on_new_messages([Message.user("a"), last])
    stale = await ChatMessageThread.load(first.id, store=store, lazy=True)
    assert await first.pop() == last
    await stale.on_new_messages([last])
    assert [m.text for m in await first.get_messages()] == ["a"]
    await first.refresh()
    assert [m.text for m in await first.get_messages()] == ["a", "b"]


async def test_a_message_still_in_the_thread_is_refused_after_a_stale_handle_reads_again() -> None:
    store = MemoryStore()
    stale = await ChatMessageThread.create(store)
    message = Message.user("once")
    await stale.on_new_messages([message])
    other = await ChatMessageThread.load(stale.id, store=store)
    await other.on_new_messages([Message.user("later")])
    with pytest.raises(DuplicateMessageError, match=message.id):
        await stale.on_new_messages([message])
    await other.refresh()
    assert [m.text for m in await other.get_messages()] == ["once", "later"]


async def test_a_stale_handle_resending_to_a_deleted_thread_finds_it_gone() -> None:
    store = MemoryStore()
    stale = await ChatMessageThread.create(store)
    message = Message.user("once")
    await stale.on_new_messages([message])
    await (await ChatMessageThread.load(stale.id, store=store)).delete()
    with pytest.raises(ThreadNotFoundError, match=stale.id):
        await stale.on_new_messages([message])


@pytest.mark.parametrize("now", [True, False], ids=["auto-now", "auto-before"])
async def test_a_stale_handle_checkpoints_as_the_thread_made_again_asks(now: bool) -> None:
    store = MemoryStore()
    stale = await ChatMessageThread.create(store, id="again", auto_checkpoint=not now)
    await (await ChatMessageThread.load("again", store=store)).delete()
    await ChatMessageThread.create(store, id="again", auto_checkpoint=now)
    await stale.on_new_messages([Message.user("late")])
    again = await ChatMessageThread.load("again", store=store)
    assert [c.reason for c in await again.checkpoints()] == (["auto"] if now else [])
    assert [m.text for m in await again.get_messages()] == ["late"]


@pytest.mark.parametrize("lazy", [False, True], ids=["eager", "lazy"])
async def test_a_stale_handle_resending_to_a_thread_made_again_checkpoints_as_it_asks(
    lazy: bool,
) -> None:
    store = MemoryStore()
    first = await ChatMessageThread.create(store, id="again")
    message = Message.user("m")
    await first.on_new_messages([message])
    stale = await ChatMessageThread.load("again", store=store, lazy=lazy)
    await first.delete()
    await ChatMessageThread.create(store, id="again", auto_checkpoint=True)
    await stale.on_new_messages([message])  # in its stale head: found gone after a re-read
    again = await ChatMessageThread.load("again", store=store)
    assert [m.text for m in await again.get_messages()] == ["m"]
    assert [c.reason for c in await again.checkpoints()] == ["auto"]


async def test_a_stale_handle_of_an_old_thread_checkpoints_as_the_thread_made_again_asks() -> None:
    store = MemoryStore()
    old = await ChatMessageThread.create(store, id="again", auto_checkpoint=True)
    await old.on_new_messages([Message.user("a")])
    await make_legacy(store, old, [])  # as version 0.1 stored it: no checkpoint log
    stale = await ChatMessageThread.load("again", store=store)
    await old.delete()
    await ChatMessageThread.create(store, id="again")  # without auto_checkpoint
    assert await stale.on_new_messages([Message.user("late")]) is None
    again = await ChatMessageThread.load("again", store=store)
    assert [m.text for m in await again.get_messages()] == ["late"]
    assert await again.checkpoints() == []
