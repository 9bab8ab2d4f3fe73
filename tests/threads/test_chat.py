from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import anyio
import pytest
from pydantic import ValidationError

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    MemoryStore,
    Message,
    Record,
    Row,
    SchemaVersionError,
    StoreCorruptedError,
    TextPart,
    ThreadNotFoundError,
    ThreadStats,
    Usage,
)


def texts(messages: object) -> list[str]:
    return [m.text for m in messages]  # type: ignore[attr-defined]


async def thread_with(*words: str, store: MemoryStore | None = None) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store, title="t", metadata={"team": {"lead": "ana"}})
    await thread.on_new_messages([Message.user(w, usage=Usage(input_tokens=1)) for w in words])
    return thread


def test_constructor_points_at_create() -> None:
    with pytest.raises(TypeError, match=r"ChatMessageThread\.create"):
        ChatMessageThread()


async def test_create_rejects_taken_and_invalid_ids() -> None:
    store = MemoryStore()
    await ChatMessageThread.create(store, id="session-1")
    with pytest.raises(ConflictError, match=r"session-1.*already exists"):
        await ChatMessageThread.create(store, id="session-1")
    with pytest.raises(InvalidIdError, match="thread id"):
        await ChatMessageThread.create(store, id="../etc")


async def test_load_of_unknown_thread_names_it() -> None:
    with pytest.raises(ThreadNotFoundError, match="ghost"):
        await ChatMessageThread.load("ghost", store=MemoryStore())


async def test_fork_shares_ranges_instead_of_copying_messages() -> None:
    parent = await thread_with(*[str(i) for i in range(1000)])
    child = await parent.fork()
    assert child.ranges == parent.ranges and len(child.ranges) == 1
    assert child.messages[999] is parent.messages[999]


async def test_fork_stats_start_at_zero_unless_kept() -> None:
    parent = await thread_with("a", "b", "c")
    assert (await parent.fork()).stats == ThreadStats()
    kept = await parent.fork(message_id=parent.messages[1].id, reset_stats=False)
    assert (kept.stats.message_count, kept.stats.input_tokens) == (2, 2)
    assert (await parent.fork(reset_stats=False)).stats == parent.stats


async def test_fork_takes_new_identity_title_and_tags() -> None:
    parent = await thread_with("a")
    child = await parent.fork(id="child-1", title="branch", tags={"x": "1"})
    assert (child.id, child.title, child.tags) == ("child-1", "branch", {"x": "1"})
    assert (await parent.fork()).title == "t"


async def test_copy_is_independent_and_saved_on_first_write() -> None:
    original = await thread_with("a", "b")
    twin = original.copy(reset_stats=True)
    assert twin.id != original.id and twin.stats == ThreadStats()
    assert twin.messages[0] is original.messages[0]
    with pytest.raises(ThreadNotFoundError):
        await ChatMessageThread.load(twin.id, store=original.store)
    await twin.on_new_messages([Message.user("twin only")])
    await twin.update(metadata={"team": {"lead": "bo"}})
    assert texts(original.messages) == ["a", "b"]
    assert original.metadata == {"team": {"lead": "ana"}}
    stored = await ChatMessageThread.load(twin.id, store=original.store)
    assert texts(stored.messages) == ["a", "b", "twin only"]
    await original.on_new_messages([Message.user("original only")])
    assert texts(twin.messages) == ["a", "b", "twin only"]


async def test_messages_view_slices_and_compares_like_a_list() -> None:
    thread = await thread_with("a", "b", "c")
    assert thread.messages[-1].text == "c"
    assert texts(thread.messages[1:]) == ["b", "c"]
    as_list: Sequence[Message] = list(thread.messages)
    as_tuple: Sequence[Message] = tuple(thread.messages)
    assert thread.messages == as_list
    assert thread.messages == as_tuple
    with pytest.raises(IndexError):
        _ = thread.messages[3]


async def test_one_handle_serializes_concurrent_appends() -> None:
    thread = await thread_with()
    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(thread.on_new_messages, [Message.user(str(i))])
    assert sorted(texts(thread.messages), key=int) == [str(i) for i in range(20)]
    assert len(thread.ranges) == 1


async def test_non_messages_are_rejected_before_anything_is_stored() -> None:
    thread = await thread_with("a")
    with pytest.raises(TypeError, match="expected Message"):
        await thread.on_new_messages([Message.user("b"), {"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="wrap one in a list"):
        await thread.on_new_messages(Message.user("c"))  # type: ignore[arg-type]
    assert texts(thread.messages) == ["a"]


class _Note(Message):
    """A message subclass: a batch may hold one, alone or among plain messages."""


@pytest.mark.parametrize(
    ("argument", "problem"),
    [
        ([{"role": "user"}], "expected Message, got dict"),
        ("hello", "takes a list of messages, not 'hello'"),
        ({"role": "user"}, "takes a list of messages, not {"),
        (Message.user("c"), "wrap one in a list"),
        (42, "wrap one in a list"),
    ],
)
async def test_an_argument_that_is_not_a_list_of_messages_is_named_with_the_thread(
    argument: Any, problem: str
) -> None:
    thread = await thread_with("a")
    with pytest.raises(TypeError, match=problem) as raised:
        await thread.on_new_messages(argument)
    assert f"thread {thread.id!r} on_new_messages" in str(raised.value)
    assert texts(thread.messages) == ["a"]


@pytest.mark.parametrize(
    ("batch", "expected"),
    [
        (lambda: (Message.user("b"),), ["b"]),
        (lambda: (m for m in [Message.user("b"), Message.user("c")]), ["b", "c"]),
        (lambda: [_Note(role="user", contents=[TextPart(text="b")])], ["b"]),
        (
            lambda: [Message.user("b"), _Note(role="user", contents=[TextPart(text="c")])],
            ["b", "c"],
        ),
    ],
)
async def test_any_iterable_of_messages_and_subclasses_is_appended(
    batch: Any, expected: list[str]
) -> None:
    thread = await thread_with("a")
    await thread.on_new_messages(batch())
    assert texts(thread.messages) == ["a", *expected]


async def test_from_json_rejects_newer_versions_and_unknown_kinds() -> None:
    document = json.loads((await thread_with("a")).to_json())
    with pytest.raises(SchemaVersionError, match="99"):
        await AgentThread.from_json({**document, "schema_version": 99})
    with pytest.raises(SchemaVersionError, match="spreadsheet"):
        await AgentThread.from_json({**document, "kind": "spreadsheet"})
    with pytest.raises(ValueError, match="format"):
        await AgentThread.from_json({"messages": []})
    restored = await AgentThread.from_json(json.dumps(document))
    assert isinstance(restored.store, MemoryStore)


async def test_record_from_a_newer_version_is_refused() -> None:
    store = MemoryStore()
    thread = await thread_with("a", store=store)
    record = await store.get_record("thread", thread.id)
    assert record is not None
    newer = Record(kind="thread", id=thread.id, data={**record.data, "schema_version": 7})
    await store.put_record(newer, expected_version=record.version)
    with pytest.raises(SchemaVersionError, match="7"):
        await ChatMessageThread.load(thread.id, store=store)


async def test_undecodable_row_is_reported_with_its_place() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await store.append_rows("bad-seg", 0, [Row("m1", '{"role": "robot"}')])
    record = await store.get_record("thread", thread.id)
    assert record is not None
    data: dict[str, Any] = {**record.data, "ranges": [["bad-seg", 0, 1]], "head": 1}
    await store.put_record(
        record.model_copy(update={"data": data}), expected_version=record.version
    )
    with pytest.raises(StoreCorruptedError, match=r"bad-seg.*position 0"):
        await ChatMessageThread.load(thread.id, store=store)


def test_threads_run_on_trio() -> None:
    async def main() -> list[str]:
        thread = await thread_with("a", "b")
        fork = await thread.fork(message_id=thread.messages[0].id)
        await fork.on_new_messages([Message.user("trio")])
        return texts(fork.messages)

    assert anyio.run(main, backend="trio") == ["a", "trio"]


async def test_a_subclass_imports_only_its_own_kind() -> None:
    document = (await thread_with("a")).to_json()
    assert isinstance(await ChatMessageThread.from_json(document), ChatMessageThread)
    other_kind = json.dumps({**json.loads(document), "kind": "workflow"})
    with pytest.raises(ValueError, match="'workflow' thread, not a 'chat' one"):
        await ChatMessageThread.from_json(other_kind)


async def test_a_usage_made_without_validation_is_refused_and_the_thread_still_loads() -> None:
    thread = await thread_with("a")
    bad = Usage.model_construct(input_tokens=-5, output_tokens=0, cost=0.0)
    with pytest.raises(ValidationError):
        await thread.on_new_messages([Message.assistant("b", usage=bad)])
    loaded = await ChatMessageThread.load(thread.id, store=thread.store)
    assert texts(loaded.messages) == ["a"] and loaded.stats == thread.stats
