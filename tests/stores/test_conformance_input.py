"""Whatever a thread accepts reads back equal, in every store; what it refuses changes nothing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    ImmutableState,
    InvalidValueError,
    Message,
    ThreadStore,
    Usage,
    tool_call,
)
from agent_threads.core import limits

from .conftest import StoreFactory

SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)  # NUL too
JSON = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


def storable(value: object) -> bool:
    try:
        limits.check_json(value, "value")
    except InvalidValueError:
        return False
    return True


async def reload(thread: ChatMessageThread) -> ChatMessageThread:
    return await ChatMessageThread.load(thread.id, store=thread.store)


def _last_metadata(thread: ChatMessageThread) -> object:
    return thread.messages[-1].metadata["v"]


def _last_result(thread: ChatMessageThread) -> object:
    return thread.messages[-1].tool_results[0].result


def _state_value(thread: ChatMessageThread) -> object:
    return thread.state.to_dict().get("v")


def _thread_metadata(thread: ChatMessageThread) -> object:
    return thread.metadata["v"]


def _patched(value: object) -> object:
    """What the state holds under "v" after the merge patch {"v": value} (None: removed)."""
    return ImmutableState().apply({"v": value}).to_dict().get("v")


class Writes:
    """Each kind of write a user makes with free-form JSON, done on one thread."""

    def __init__(self, portal: BlockingPortal, store: ThreadStore) -> None:
        self.portal = portal
        self.thread = portal.call(lambda: ChatMessageThread.create(store))

    def check(self, value: Any) -> None:
        """Every write either reads back equal or is refused with nothing changed."""
        ok = storable(value)
        for write, read in [
            (self.metadata_message, _last_metadata),
            (self.tool_result, _last_result),
            (self.state, _state_value),
            (self.thread_metadata, _thread_metadata),
        ]:
            self.portal.call(self.thread.update_state, {"v": None})  # a merge patch: start over
            version = self.portal.call(reload, self.thread).version
            try:
                self.portal.call(write, value)
            except InvalidValueError:
                assert not ok, value
                assert self.portal.call(reload, self.thread).version == version
                continue
            assert ok, value
            expected = value if write != self.state else _patched(value)
            assert read(self.portal.call(reload, self.thread)) == expected

    async def metadata_message(self, value: Any) -> None:
        await self.thread.on_new_messages([Message.user("m", metadata={"v": value})])

    async def tool_result(self, value: Any) -> None:
        call = tool_call("lookup", {"q": "x"})
        await self.thread.on_new_messages(
            [Message.assistant(tool_calls=[call]), Message.tool_result(call.call_id, value)]
        )

    async def state(self, value: Any) -> None:
        await self.thread.update_state({"v": value})

    async def thread_metadata(self, value: Any) -> None:
        await self.thread.update(metadata={"v": value})


def test_any_json_a_thread_accepts_reads_back_equal(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    with (
        start_blocking_portal(backend="asyncio") as portal,
        portal.wrap_async_context_manager(store_factory(tmp_path)) as store,
    ):
        writes = Writes(portal, store)

        @given(JSON)
        @settings(
            max_examples=25,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture],
        )
        def check(value: Any) -> None:
            writes.check(value)

        run: Callable[[], None] = check
        run()
        writes.check(nested(limits.MAX_DEPTH - 2))  # deep but allowed: reads back
        writes.check(nested(limits.MAX_DEPTH + 5))  # too deep: refused by name


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
async def test_nan_and_infinity_are_refused_naming_the_thread_and_field(
    store: ThreadStore, bad: float
) -> None:
    thread = await ChatMessageThread.create(store)
    with pytest.raises(InvalidValueError, match=rf"{thread.id}.*metadata\.scores\[1\]"):
        await thread.on_new_messages([Message.user("x", metadata={"scores": [1.0, bad]})])
    with pytest.raises(InvalidValueError, match="arguments"):
        await thread.on_new_messages([Message.assistant(tool_calls=[tool_call("f", {"x": bad})])])
    with pytest.raises(InvalidValueError, match="'x'"):
        await thread.update_state({"x": bad})
    with pytest.raises(InvalidValueError, match=rf"thread '{thread.id}' metadata"):
        await thread.update(metadata={"x": bad})
    with pytest.raises(InvalidValueError, match="checkpoint metadata"):
        await thread.checkpoint("c", metadata={"x": bad})
    reloaded = await reload(thread)
    assert (reloaded.head, reloaded.state.to_dict(), dict(reloaded.metadata)) == (0, {}, {})
    assert await reloaded.checkpoints() == []


async def test_text_utf8_cannot_encode_is_refused_naming_where_and_nothing_is_written(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store)
    with pytest.raises(InvalidValueError, match=r"checkpoint metadata\.k: holds a lone surr"):
        await thread.on_new_messages(
            [Message.user("x")], checkpoint="c", checkpoint_metadata={"k": "\ud800"}
        )
    with pytest.raises(InvalidValueError, match=rf"thread '{thread.id}' title: holds a lone"):
        await thread.update(title="a\udc00")
    with pytest.raises(InvalidValueError, match=r"metadata: key '\\ud800'"):
        await thread.update(metadata={"\ud800": 1})
    with pytest.raises(InvalidValueError, match=r"tags.*holds a lone surrogate"):
        await thread.update(tags={"a": "b\ud800"})
    with pytest.raises(InvalidValueError, match="a tag key is"):
        await thread.update(tags={"\udbff": "b"})
    reloaded = await reload(thread)
    assert (reloaded.head, reloaded.title, dict(reloaded.metadata)) == (0, None, {})
    assert dict(reloaded.tags) == {}
    assert await reloaded.checkpoints() == []


class _FalsyUsage(Usage):
    """A usage that is falsy (a subclass may be): checked all the same."""

    def __len__(self) -> int:
        return 0


BAD_MESSAGES: dict[str, tuple[Callable[[], Message], str]] = {
    "nan in metadata": (lambda: Message.user("x", metadata={"s": [math.nan]}), r"metadata\.s\[0\]"),
    "nan in tool arguments": (
        lambda: Message.assistant(tool_calls=[tool_call("f", {"x": math.nan})]),
        "arguments",
    ),
    "nan in a tool result": (lambda: Message.tool_result("c1", {"x": math.nan}), "tool result"),
    "infinite cost": (
        lambda: Message.assistant("x", usage=Usage(cost=math.inf)),
        "usage.cost",
    ),
    "infinite cost in a falsy usage": (
        lambda: Message.assistant("x", usage=_FalsyUsage(cost=math.inf)),
        "usage.cost",
    ),
    "NUL in a text": (lambda: Message.user("a\x00b"), "NUL"),
    "NUL in metadata": (lambda: Message.user("x", metadata={"k": "\x00"}), "NUL"),
    "lone surrogate in a text": (lambda: Message.user("a\ud800"), "surrogates not allowed"),
    "lone surrogate in metadata": (
        lambda: Message.user("x", metadata={"k": "\udfff"}),
        r"metadata\.k: holds a lone surrogate",
    ),
    "too large": (lambda: Message.user("x" * 2_000), "over the 1,000 limit"),
}


@pytest.mark.parametrize("kind", BAD_MESSAGES)
@pytest.mark.parametrize("others", [0, 11], ids=["alone", "among 11"])
async def test_a_bad_message_is_named_alone_or_in_a_long_batch_and_nothing_is_written(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch, kind: str, others: int
) -> None:
    monkeypatch.setattr(limits, "MAX_MESSAGE_BYTES", 1_000)
    thread = await ChatMessageThread.create(store)
    make, reason = BAD_MESSAGES[kind]
    bad = make()
    good = [
        Message.assistant(f"ok {i}", usage=Usage(input_tokens=i, cost=0.5)) for i in range(others)
    ]
    batch = [*good[:7], bad, *good[7:]]
    with pytest.raises(InvalidValueError, match=rf"{thread.id}.*{bad.id}.*{reason}"):
        await thread.on_new_messages(batch)
    reloaded = await reload(thread)
    assert (reloaded.head, reloaded.stats.message_count) == (0, 0)
    await thread.on_new_messages(good)  # the same batch without it is fine
    reloaded = await reload(thread)
    assert reloaded.head == reloaded.stats.message_count == others
    assert reloaded.stats.input_tokens == sum(range(others))
    assert reloaded.stats.cost == 0.5 * others


async def test_a_message_over_the_size_limit_is_refused_and_nothing_is_written(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(limits, "MAX_MESSAGE_BYTES", 1_000)
    thread = await ChatMessageThread.create(store)
    small, big = Message.user("ok"), Message.user("x" * 2_000)
    with pytest.raises(InvalidValueError, match=rf"message '{big.id}'.*over the 1,000 limit"):
        await thread.on_new_messages([small, big])
    assert (await reload(thread)).head == 0


async def test_an_import_of_a_bad_document_writes_nothing_and_names_the_field(
    store: ThreadStore,
) -> None:
    source = await ChatMessageThread.create(store, title="t")
    await source.on_new_messages([Message.user("a"), Message.user("b")])
    good = json.loads(source.to_json())
    await source.delete()
    before = await store.list_records()
    for field, value in [
        ("state", [1, 2]),
        ("state", "text"),
        ("title", ["not", "text"]),
        ("stats", {"message_count": -1}),
        ("messages", [{"role": "wizard"}]),
        ("metadata", {"x": nested(limits.MAX_DEPTH + 1)}),
    ]:
        document = {**good, field: value}
        with pytest.raises(
            InvalidValueError, match=rf"{good['id']}.*{field}|{field}.*{good['id']}"
        ):
            await AgentThread.from_json(document, store=store)
        assert await store.list_records() == before
    await AgentThread.from_json(good, store=store)  # the document itself was fine
