"""Context views: the rules, condensation, the incremental cache, and token counters."""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    ApproximateTokenCounter,
    ChatMessageThread,
    ContextOverflowError,
    ContextView,
    DroppedRange,
    MemoryStore,
    Message,
    MessageNotFoundError,
    SummaryPart,
    TextPart,
    TiktokenCounter,
    TokenCounter,
    ToolCallPart,
    ToolResultPart,
    Usage,
    tool_call,
)
from agent_threads.views import condensed as condensed_module
from agent_threads.views.answers import arrange
from agent_threads.views.context import ViewCache, build_view
from tests.counting_store import CountingStore


class UnitCounter:
    """Every message is one token; counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, message: Message) -> int:
        self.calls += 1
        return 1


class TextCounter:
    """Tokens = characters of text parts + 1 (predictable sizes for the tests)."""

    def count(self, message: Message) -> int:
        return 1 + sum(len(p.text) for p in message.contents if hasattr(p, "text"))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TextCounter)

    def __hash__(self) -> int:
        return 1


def turn(text: str = "hello") -> list[Message]:
    return [Message.user(text), Message.assistant(text)]


def tool_turn(n_calls: int = 1, text: str = "x") -> list[Message]:
    calls = [tool_call("f", {"i": i}) for i in range(n_calls)]
    return [
        Message.assistant(text, tool_calls=calls),
        *(Message.tool_result(c.call_id, text) for c in calls),
    ]


def roles(view: ContextView) -> list[str]:
    return [m.role for m in view.messages]


# -- a naive reading of the rules, to check the real thing against -------------------------


@dataclass
class _Entry:
    pos: int
    raw: int
    last: int


def _ref_visible(messages: Sequence[Message]) -> list[_Entry]:
    """Later summaries win: walk back, hiding the ranges of the visible summaries."""
    index = {m.id: i for i, m in enumerate(messages)}

    def span(i: int) -> tuple[int, int] | None:
        for part in messages[i].contents:
            if isinstance(part, SummaryPart):
                a, b = index.get(part.start_id), index.get(part.end_id)
                return (a, b) if a is not None and b is not None and a <= b < i else None
        return None

    hidden: set[int] = set()
    visible: list[_Entry] = []
    for i in reversed(range(len(messages))):
        s = None if i in hidden else span(i)
        if i in hidden or (s is not None and s[0] in hidden):
            continue
        if s is None:
            visible.append(_Entry(i, i, i))
        else:
            hidden.update(range(s[0], s[1] + 1))
            visible.append(_Entry(s[0], i, s[1]))
    return sorted(visible, key=lambda e: (e.pos, e.raw))


def _results(m: Message) -> list[str]:
    return [p.call_id for p in m.contents if isinstance(p, ToolResultPart)]


def _calls(m: Message) -> list[str]:
    return [p.call_id for p in m.contents if isinstance(p, ToolCallPart)]


def _ref_groups(
    messages: Sequence[Message], visible: list[_Entry]
) -> tuple[list[_Entry], list[_Entry], list[list[int]]]:
    """Entries, orphans, and tool groups (lists of entry indexes) by union-find."""
    entries: list[_Entry] = []
    orphans: list[_Entry] = []
    parent: list[int] = []
    latest_call: dict[str, int] = {}

    def find(k: int) -> int:
        while parent[k] != k:
            k = parent[k]
        return k

    for e in visible:
        m = messages[e.raw]
        if any(c not in latest_call for c in _results(m)):
            orphans.append(e)
            continue
        k = len(entries)
        entries.append(e)
        parent.append(k)
        for c in _results(m):
            parent[find(k)] = find(latest_call[c])
        latest_call.update(dict.fromkeys(_calls(m), k))
    groups: dict[int, list[int]] = {}
    for k in range(len(entries)):
        groups.setdefault(find(k), []).append(k)
    return entries, orphans, list(groups.values())


def _ref_prefix(
    messages: Sequence[Message], keep_first: int
) -> tuple[int, list[Message], list[int]]:
    end, pending, calls = 0, set[str](), set[str]()
    kept: list[Message] = []
    orphans: list[int] = []

    def answered_later(call_id: str) -> bool:  # the thread holds a result for it from `end` on
        return any(call_id in _results(m) for m in messages[end:])

    while end < len(messages) and (end < keep_first or any(map(answered_later, pending))):
        m = messages[end]
        if all(c in calls for c in _results(m)):
            kept.append(m)
            pending = (pending - set(_results(m))) | set(_calls(m))
            calls |= set(_calls(m))
        else:
            orphans.append(end)
        end += 1
    return end, kept, orphans


def reference_view(
    messages: Sequence[Message],
    *,
    max_tokens: int | None = None,
    max_messages: int | None = None,
    keep_first: int = 0,
    counter: TokenCounter,
    unanswered_tool_calls: str = "interrupt",
) -> ContextView | str:
    """The view by the words of the rules, in O(n^3); "overflow" when it cannot fit.

    The budgets hold what the view shows: its messages arranged for a provider (answers
    right after their calls, and what the policy puts for a call without result).
    """
    entries, orphans, groups = _ref_groups(messages, _ref_visible(messages))
    end, kept, kept_orphans = _ref_prefix(messages, keep_first)
    tail = [k for k, e in enumerate(entries) if e.last >= end]
    size = len(tail)
    mode: Any = "keep" if unanswered_tool_calls == "error" else unanswered_tool_calls

    def chosen(j: int) -> list[Message]:
        return [*kept, *(messages[entries[k].raw] for k in tail[j:])]

    def tokens(j: int) -> int:
        return sum(counter.count(m) for m in arrange(chosen(j), mode))

    def allowed(j: int) -> bool:
        cut_ok = j in (0, size) or not any(min(g) < tail[j] <= max(g) for g in groups)
        fits = (max_tokens is None or tokens(j) <= max_tokens) and (
            max_messages is None or len(arrange(chosen(j), mode)) <= max_messages
        )
        return cut_ok and fits

    start = next((j for j in range(size + 1) if allowed(j)), None)
    if start is None or (start == size and size > 0):
        return "overflow"
    shown = arrange(chosen(start), cast(Any, unanswered_tool_calls))
    dropped = [(i, i) for i in kept_orphans]
    gap_end = entries[tail[start - 1]].last if start > 0 else -1
    if start > 0:
        dropped.append((end, gap_end))
    dropped += [(max(o.pos, end), o.last) for o in orphans if o.last >= end and o.pos > gap_end]
    ids = [m.id for m in messages]
    return ContextView(
        messages=tuple(shown),
        tokens=tokens(start),
        dropped=tuple(DroppedRange(a, b, ids[a], ids[b]) for a, b in sorted(dropped)),
    )


def built_or_overflow(messages: Sequence[Message], **limits: Any) -> ContextView | str:
    try:
        return build_view(messages, **limits)
    except ContextOverflowError:
        return "overflow"


async def viewed_or_overflow(thread: ChatMessageThread, **limits: Any) -> ContextView | str:
    try:
        return await thread.view(**limits)
    except ContextOverflowError:
        return "overflow"


# -- the rules -------------------------------------------------------------------------------


async def test_view_keeps_the_newest_messages_that_fit() -> None:
    thread = await ChatMessageThread.create()
    messages = [Message.user(f"m{i}") for i in range(10)]
    await thread.on_new_messages(messages)
    view = await thread.view(max_tokens=3, counter=UnitCounter())
    assert view.messages == tuple(messages[-3:])
    assert view.tokens == 3
    assert view.dropped == (DroppedRange(0, 6, messages[0].id, messages[6].id),)


async def test_view_without_limits_holds_every_message() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(turn() + tool_turn() + turn())
    view = await thread.view()
    assert list(view) == list(thread.messages) and view.dropped == ()
    assert view.tokens == sum(ApproximateTokenCounter().count(m) for m in thread.messages)


async def test_view_of_an_empty_thread_is_empty() -> None:
    thread = await ChatMessageThread.create()
    assert await thread.view(max_tokens=0) == ContextView(messages=(), tokens=0)


async def test_keep_first_messages_are_always_kept() -> None:
    thread = await ChatMessageThread.create()
    system, task = Message.system("be brief"), Message.user("the task")
    later = [Message.user(f"m{i}") for i in range(8)]
    await thread.on_new_messages([system, task, *later])
    view = await thread.view(max_messages=4, keep_first=2)
    assert view.messages == (system, task, *later[-2:])
    assert view.dropped == (DroppedRange(2, 7, later[0].id, later[5].id),)


async def test_keep_first_extends_to_the_results_of_its_tool_calls() -> None:
    thread = await ChatMessageThread.create()
    call = tool_call("lookup")
    first = [Message.user("q"), Message.assistant(tool_calls=[call])]
    result = Message.tool_result(call.call_id, "42")
    await thread.on_new_messages([*first, result, *turn(), *turn()])
    view = await thread.view(max_messages=4, keep_first=2)
    assert view.messages[:3] == (*first, result)
    assert len(view) == 4


async def test_tool_call_and_results_are_dropped_together() -> None:
    thread = await ChatMessageThread.create()
    pair = tool_turn(n_calls=2)  # one call message, two results
    last = Message.user("next")
    await thread.on_new_messages([*turn(), *pair, last])
    view = await thread.view(max_messages=3)  # the 3 newest would cut the call off its results
    assert view.messages == (last,)
    assert (await thread.view(max_messages=4)).messages == (*pair, last)


async def test_view_never_begins_with_a_tool_result() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([*turn(), *tool_turn(n_calls=3)])
    with pytest.raises(ContextOverflowError):  # rather than start with results
        await thread.view(max_messages=3)
    assert roles(await thread.view(max_messages=4)) == ["assistant", "tool", "tool", "tool"]
    assert roles(await thread.view(max_messages=5))[:2] == ["assistant", "assistant"]


async def test_orphan_tool_result_is_left_out_and_reported() -> None:
    thread = await ChatMessageThread.create()
    orphan = Message.tool_result("call_unknown", "stray")
    await thread.on_new_messages([Message.user("a"), orphan, Message.user("b")])
    view = await thread.view()
    assert orphan not in view.messages and len(view) == 2
    assert view.dropped == (DroppedRange(1, 1, orphan.id, orphan.id),)


async def test_overflow_says_by_how_much() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.system("s" * 9), Message.user("u" * 29)])
    with pytest.raises(ContextOverflowError) as caught:
        await thread.view(max_tokens=35, keep_first=1, counter=TextCounter())
    error = caught.value
    assert (error.needed, error.limit, error.over, error.unit) == (40, 35, 5, "tokens")
    assert error.thread_id == thread.id
    assert "5 tokens over" in str(error) and thread.id in str(error)


async def test_overflow_counts_the_whole_newest_tool_group() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(tool_turn(n_calls=3))
    with pytest.raises(ContextOverflowError) as caught:
        await thread.view(max_messages=2)
    assert (caught.value.needed, caught.value.over, caught.value.unit) == (4, 2, "messages")


async def test_kept_first_messages_alone_can_overflow() -> None:
    messages = [Message.user("a" * 50), Message.user("b")]
    with pytest.raises(ContextOverflowError, match="over"):
        build_view(messages, max_tokens=10, keep_first=1, counter=TextCounter())


@pytest.mark.parametrize(
    ("limits", "error"),
    [
        ({"max_tokens": -1}, ValueError),
        ({"max_messages": -2}, ValueError),
        ({"keep_first": -1}, ValueError),
        ({"max_tokens": 1.5}, TypeError),
        ({"counter": object()}, TypeError),
    ],
)
async def test_bad_limits_are_rejected(limits: dict[str, Any], error: type[Exception]) -> None:
    thread = await ChatMessageThread.create()
    with pytest.raises(error):
        await thread.view(**limits)


async def test_a_counter_returning_a_non_count_is_rejected() -> None:
    class Bad:
        def count(self, message: Message) -> int:
            return -1

    with pytest.raises(TypeError, match="non-negative int"):
        build_view([Message.user("x")], counter=Bad())


# -- condensation ----------------------------------------------------------------------------


async def test_summary_stands_for_its_range_at_the_range_position() -> None:
    thread = await ChatMessageThread.create()
    system = Message.system("s")
    middle = turn("old") + tool_turn() + turn("older")
    newest = turn("new")
    await thread.on_new_messages([system, *middle, *newest])
    summary = await thread.condense(middle[0].id, middle[-1].id, "they talked")
    assert summary.contents == (
        SummaryPart(text="they talked", start_id=middle[0].id, end_id=middle[-1].id),
    )
    view = await thread.view()
    assert view.messages == (system, summary, *newest)
    assert list(thread.messages) == [system, *middle, *newest, summary]  # nothing deleted


async def test_condensing_the_dropped_range_puts_its_summary_after_the_kept_first() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.system("s")])
    for i in range(20):
        await thread.on_new_messages(turn(f"turn {i}"))
    before = await thread.view(max_messages=6, keep_first=1)
    (gap,) = before.dropped
    summary = await thread.condense(gap.start_id, gap.end_id, "turns 0-17")
    after = await thread.view(max_messages=7, keep_first=1)
    assert after.messages == (thread.messages[0], summary, *before.messages[1:])
    assert after.dropped == ()


async def test_condensing_a_summary_again_folds_it_in() -> None:
    thread = await ChatMessageThread.create()
    for i in range(6):
        await thread.on_new_messages(turn(f"t{i}"))
    messages = list(thread.messages)
    first = await thread.condense(messages[0].id, messages[3].id, "first")
    second = await thread.condense(first.id, messages[7].id, "second")  # a summary id snaps out
    assert second.contents[0] == SummaryPart(
        text="second", start_id=messages[0].id, end_id=messages[7].id
    )
    view = await thread.view()
    assert view.messages == (second, *messages[8:])


async def test_condense_refuses_to_cut_a_tool_call_from_its_result() -> None:
    thread = await ChatMessageThread.create()
    pair = tool_turn()
    await thread.on_new_messages([*turn(), *pair, *turn()])
    with pytest.raises(ValueError, match="separate tool call"):
        await thread.condense(thread.messages[0].id, pair[0].id, "cut")
    with pytest.raises(ValueError, match="separate tool call"):
        await thread.condense(pair[1].id, thread.messages[-1].id, "cut")
    assert thread.head == 6


async def test_condense_refuses_to_overlap_part_of_a_summary() -> None:
    thread = await ChatMessageThread.create()
    for i in range(4):
        await thread.on_new_messages(turn(f"t{i}"))
    messages = list(thread.messages)
    summary = await thread.condense(messages[2].id, messages[5].id, "middle")
    await thread.on_new_messages(turn("after"))
    # holds the summary message (index 8) but not the messages it stands for (2..5)
    with pytest.raises(ValueError, match="part of summary"):
        await thread.condense(messages[6].id, thread.messages[9].id, "overlap")
    # an end inside the summary's range snaps out to the whole summary: accepted
    wider = await thread.condense(messages[0].id, messages[3].id, "wider")
    assert wider.contents[0].end_id == messages[5].id  # type: ignore[union-attr]
    assert summary in thread.messages


async def test_condense_names_an_unknown_message() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(turn())
    with pytest.raises(MessageNotFoundError):
        await thread.condense("nope", thread.messages[0].id, "x")
    with pytest.raises(ValueError, match="start comes after the end"):
        await thread.condense(thread.messages[1].id, thread.messages[0].id, "x")


async def test_a_summary_with_unknown_ids_is_an_ordinary_message() -> None:
    stray = Message.summary("?", start_id="a", end_id="b")
    messages = [Message.user("x"), stray]
    assert build_view(messages).messages == tuple(messages)


# -- the cache ---------------------------------------------------------------------------------


async def test_thousand_appends_with_a_view_each_evaluate_each_message_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    linked = 0
    original = condensed_module.Condensed._link

    def counting_link(self: condensed_module.Condensed, entry: condensed_module.Entry) -> None:
        nonlocal linked
        linked += 1
        original(self, entry)

    monkeypatch.setattr(condensed_module.Condensed, "_link", counting_link)
    counter = UnitCounter()
    thread = await ChatMessageThread.create()
    for i in range(1000):
        message = Message.system("s") if i == 0 else Message.user(f"m{i}")
        await thread.on_new_messages([message])
        view = await thread.view(max_tokens=50, keep_first=1, counter=counter)
        assert len(view) == min(i + 1, 50)
    assert counter.calls <= 1001  # each message counted once (the kept one twice)
    assert linked == 1000  # and entered once
    assert thread._view_cache().rebuilds == 1


async def test_cached_view_after_condense_refolds_only_from_the_range() -> None:
    counter = UnitCounter()
    thread = await ChatMessageThread.create()
    for i in range(100):
        await thread.on_new_messages(turn(f"t{i}"))
        await thread.view(max_tokens=20, counter=counter)
    gap = (await thread.view(max_tokens=20, counter=counter)).dropped[0]
    await thread.condense(gap.start_id, gap.end_id, "the first 180")
    view = await thread.view(max_tokens=21, counter=counter)
    assert view.messages[0].contents[0].type == "summary"
    assert counter.calls == 201  # the summary is the only new count
    assert thread._view_cache().rebuilds == 1


async def test_rollback_fork_load_and_invalidate_rebuild_the_view() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    for i in range(5):
        await thread.on_new_messages(turn(f"t{i}"))
    await thread.view()
    cache = thread._view_cache()
    assert cache.rebuilds == 1
    await thread.on_new_messages(turn("more"))
    await thread.view()
    assert cache.rebuilds == 1  # an append extends the ranges: incremental

    await thread.rollback(message_id=thread.messages[3].id)
    view = await thread.view()
    assert cache.rebuilds == 2 and view.messages == tuple(thread.messages[:4])
    await thread.on_new_messages(turn("after rollback"))
    assert (await thread.view()).messages == tuple(thread.messages)
    assert cache.rebuilds == 2

    thread.invalidate_view()
    await thread.view()
    assert cache.rebuilds == 3

    fork = await thread.fork(message_id=thread.messages[1].id)
    assert (await fork.view()).messages == tuple(fork.messages)
    assert fork._view_cache() is not cache

    loaded = await ChatMessageThread.load(thread.id, store=store)
    assert (await loaded.view()) == (await thread.view())


async def test_view_picks_up_another_handles_appends_incrementally() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages(turn())
    other = await ChatMessageThread.load(thread.id, store=store)
    await other.view()
    await thread.on_new_messages(turn("from the first handle"))
    await other.refresh()
    assert (await other.view()).messages == tuple(thread.messages)
    assert other._view_cache().rebuilds == 1


async def test_lazy_handle_views_without_loading_its_messages() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.system("s")])
    for i in range(30):
        await thread.on_new_messages(turn(f"t{i}") + tool_turn())
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    limits: dict[str, Any] = {"max_tokens": 200, "keep_first": 1}
    assert await lazy.view(**limits) == await thread.view(**limits)
    await lazy.on_new_messages(turn("new"))
    await thread.refresh()
    assert await lazy.view(**limits) == await thread.view(**limits)
    assert lazy.is_lazy and lazy._view_cache().rebuilds == 0  # read from the end each time


async def test_lazy_handle_view_reads_only_the_tail_and_the_kept_first() -> None:
    store = CountingStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.system("rules"), Message.user("task")])
    for start in range(0, 3000, 300):
        batch: list[Message] = []
        for i in range(start, start + 300, 3):
            batch += turn(f"turn {i}") + tool_turn()
        await thread.on_new_messages(batch)
    gap = (await thread.view(max_messages=40, keep_first=2)).dropped[0]
    await thread.condense(gap.start_id, gap.end_id, "all of the middle")
    for i in range(30):
        await thread.on_new_messages(turn(f"after {i}"))
    limits: dict[str, Any] = {"max_tokens": 1000, "keep_first": 2, "counter": TextCounter()}
    expected = await thread.view(**limits)

    store.rows_read = 0
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    view = await lazy.view(**limits)
    assert view == expected and view.messages[2].contents[0].type == "summary"
    assert thread.head > 3000 and store.rows_read < 300  # the condensed middle is never read


async def test_lazy_handle_view_that_overflows_reads_the_thread_to_say_by_how_much() -> None:
    store = CountingStore()
    thread = await ChatMessageThread.create(store)
    for i in range(50):
        await thread.on_new_messages(turn(f"t{i}"))
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    assert await lazy.view() == await thread.view()
    with pytest.raises(ContextOverflowError) as caught:
        await lazy.view(max_tokens=3, counter=TextCounter())
    assert caught.value.over == 1 + len("t49") - 3


async def test_views_with_different_limits_share_one_cache() -> None:
    thread = await ChatMessageThread.create()
    for i in range(10):
        await thread.on_new_messages(turn(f"t{i}"))
    small = await thread.view(max_messages=2)
    large = await thread.view(max_messages=8, keep_first=1)
    assert small.messages == tuple(thread.messages[-2:])
    assert large.messages == (thread.messages[0], *thread.messages[-7:])
    assert thread._view_cache().rebuilds == 1


async def test_copy_gets_its_own_view_cache() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(turn())
    await thread.view()
    twin = thread.copy()
    await twin.on_new_messages(turn("only in the copy"))
    assert len(await twin.view()) == 4 and len(await thread.view()) == 2


# -- properties ------------------------------------------------------------------------------

_TEXT = st.text(alphabet="abc ", max_size=12)


@st.composite
def conversations(draw: st.DrawFn, *, hand_made_summaries: bool = True) -> list[Message]:
    """Random threads: turns, tool exchanges (some interleaved), stray results, summaries."""
    messages: list[Message] = []
    pending: list[str] = []
    for _ in range(draw(st.integers(0, 30))):
        kind = draw(st.sampled_from(["user", "assistant", "call", "result", "summary", "stray"]))
        if kind == "call":
            calls = [tool_call("f") for _ in range(draw(st.integers(1, 3)))]
            messages.append(Message.assistant(draw(_TEXT), tool_calls=calls))
            pending += [c.call_id for c in calls]
        elif kind == "result" and pending:
            call_id = pending.pop(draw(st.integers(0, len(pending) - 1)))
            messages.append(Message.tool_result(call_id, draw(_TEXT)))
        elif kind == "stray" and hand_made_summaries:
            messages.append(Message.tool_result("call_stray_" + str(len(messages)), "?"))
        elif kind == "summary" and hand_made_summaries and messages:
            a = draw(st.integers(0, len(messages) - 1))
            b = draw(st.integers(0, len(messages) - 1))
            ids = [m.id for m in messages]
            messages.append(Message.summary(draw(_TEXT), start_id=ids[a], end_id=ids[b]))
        else:
            role = "user" if kind == "user" else "assistant"
            messages.append(Message(role=role, contents=(TextPart(text=draw(_TEXT)),)))
    return messages


_LIMITS = st.fixed_dictionaries(
    {
        "max_tokens": st.none() | st.integers(0, 60),
        "max_messages": st.none() | st.integers(0, 12),
        "keep_first": st.integers(0, 4),
    }
)


@settings(max_examples=300, deadline=None)
@given(messages=conversations(), limits=_LIMITS)
def test_built_view_follows_the_rules_as_written(
    messages: list[Message], limits: dict[str, Any]
) -> None:
    counter = TextCounter()
    expected = reference_view(messages, counter=counter, **limits)
    assert built_or_overflow(messages, counter=counter, **limits) == expected


@settings(max_examples=200, deadline=None)
@given(messages=conversations(hand_made_summaries=False), limits=_LIMITS)
def test_a_view_never_separates_a_tool_call_from_its_result(
    messages: list[Message], limits: dict[str, Any]
) -> None:
    view = built_or_overflow(messages, counter=TextCounter(), **limits)
    if isinstance(view, str):
        return
    shown = list(view.messages)
    for i, message in enumerate(shown):
        for result in message.tool_results:  # every result follows its call in the view
            assert any(result.call_id in {c.call_id for c in m.tool_calls} for m in shown[:i])
        for call in message.tool_calls:  # every call keeps every result the thread has
            answers = [m for m in messages if call.call_id in {r.call_id for r in m.tool_results}]
            assert all(a in shown[i + 1 :] for a in answers)


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(1, 3)),
        st.tuples(st.just("tools"), st.integers(1, 3)),
        st.tuples(st.just("condense"), st.integers(0, 99), st.integers(0, 99)),
        st.tuples(st.just("summary"), st.integers(0, 99), st.integers(0, 99)),
        st.tuples(st.just("rollback"), st.integers(0, 99)),
        st.tuples(st.just("undo"), st.just(0)),
        st.tuples(st.just("fork"), st.integers(0, 99)),
        st.tuples(st.just("invalidate"), st.just(0)),
    ),
    max_size=25,
)


async def _condense_or_summarize(
    thread: ChatMessageThread, name: str, start_id: str, end_id: str
) -> None:
    if name == "summary":  # appended by hand: no checks, any range
        await thread.on_new_messages([Message.summary("hand", start_id=start_id, end_id=end_id)])
        return
    with contextlib.suppress(ValueError):  # condense refuses unsound ranges
        await thread.condense(start_id, end_id, "condensed")


async def _apply(thread: ChatMessageThread, op: tuple[Any, ...]) -> ChatMessageThread:
    name, *args = op
    messages = list(thread.messages)
    picks = [messages[a % len(messages)].id for a in args] if messages else []
    if name == "turn":
        await thread.on_new_messages(turn("t" * args[0]))
    elif name == "tools":
        await thread.on_new_messages(tool_turn(n_calls=args[0]))
    elif name in ("condense", "summary") and picks:
        await _condense_or_summarize(thread, name, picks[0], picks[1])
    elif name == "rollback" and picks:
        await thread.rollback(message_id=picks[0])
    elif name == "undo":
        with contextlib.suppress(LookupError):
            await thread.rollback("before-rollback")
    elif name == "fork":
        return await thread.fork(message_id=picks[0] if picks else None)
    elif name == "invalidate":
        thread.invalidate_view()
    return thread


@settings(max_examples=150, deadline=None)
@given(messages=conversations(), limits=_LIMITS)
async def test_lazy_view_read_from_the_end_equals_the_cached_view(
    messages: list[Message], limits: dict[str, Any]
) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages(messages)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    counter = TextCounter()
    expected = await viewed_or_overflow(thread, counter=counter, **limits)
    assert await viewed_or_overflow(lazy, counter=counter, **limits) == expected


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=_OPS, limits=_LIMITS)
async def test_cached_view_always_equals_a_view_built_from_scratch(
    ops: list[tuple[Any, ...]], limits: dict[str, Any]
) -> None:
    counter = TextCounter()
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.system("rules")])
    for op in ops:
        thread = await _apply(thread, op)
        messages = list(thread.messages)
        cached = await viewed_or_overflow(thread, counter=counter, **limits)
        assert cached == built_or_overflow(messages, counter=counter, **limits)
        assert cached == reference_view(messages, counter=counter, **limits)


# -- token counters ------------------------------------------------------------------------------


def test_approximate_counter_grows_with_text_and_data() -> None:
    counter = ApproximateTokenCounter()
    short, long = Message.user("hi"), Message.user("hello world " * 40)
    assert 4 < counter.count(short) < counter.count(long)
    assert counter.count(long) == 4 + (4 + 480) // 4  # overhead + (role + text bytes) / 4
    call = Message.assistant(tool_calls=[tool_call("search", {"q": "lisbon weather"})])
    assert counter.count(call) > counter.count(Message.assistant())
    assert isinstance(counter, TokenCounter) and counter == ApproximateTokenCounter()


def test_usage_figures_are_not_token_counts() -> None:
    plain = Message.assistant("same text")
    costly = Message.assistant("same text", usage=Usage(input_tokens=9000, output_tokens=900))
    assert ApproximateTokenCounter().count(plain) == ApproximateTokenCounter().count(costly)


def _byte_level_encoding() -> Any:
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([i]): i for i in range(256)}
    ranks[b"he"] = 256
    ranks[b"ll"] = 257
    return tiktoken.Encoding(
        name="test-bytes", pat_str=r"\S+|\s+", mergeable_ranks=ranks, special_tokens={}
    )


def test_tiktoken_counter_counts_with_a_real_tiktoken_encoding() -> None:
    # a tiny byte-level BPE built here: tiktoken itself runs it, nothing is downloaded
    counter = TiktokenCounter(_byte_level_encoding(), per_message=3)
    message = Message.user("hello")  # role "user" = 4 bytes; "hello" = he + ll + o
    assert counter.count(message) == 3 + 4 + 3
    assert counter == TiktokenCounter(_byte_level_encoding(), per_message=3)
    view = build_view([Message.user("hello")] * 1, counter=counter)
    assert view.tokens == 10


def _cached_named_encoding(name: str) -> bool:
    url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
    cache = os.environ.get("TIKTOKEN_CACHE_DIR") or os.environ.get("DATA_GYM_CACHE_DIR")
    folder = Path(cache) if cache else Path(tempfile.gettempdir()) / "data-gym-cache"
    return (folder / hashlib.sha1(url.encode()).hexdigest()).exists()


@pytest.mark.skipif(
    not _cached_named_encoding("o200k_base"),
    reason="o200k_base is not in tiktoken's local cache and this machine cannot download it",
)
def test_tiktoken_counter_with_a_named_encoding() -> None:
    counter = TiktokenCounter("o200k_base")
    assert counter.count(Message.user("hello world")) == 3 + 1 + 2


async def test_view_cache_is_usable_directly() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(turn())
    cache = ViewCache()
    assert (await cache.view(thread)).messages == tuple(thread.messages)


def test_views_and_condense_run_on_trio() -> None:
    async def main() -> tuple[int, str]:
        thread = await ChatMessageThread.create()
        for i in range(10):
            await thread.on_new_messages(turn(f"t{i}"))
        gap = (await thread.view(max_messages=4)).dropped[0]
        await thread.condense(gap.start_id, gap.end_id, "early turns")
        view = await thread.view(max_messages=5)
        return len(view), view.messages[0].contents[0].type

    assert anyio.run(main, backend="trio") == (5, "summary")
