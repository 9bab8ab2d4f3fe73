"""Views never send a tool call without its result: the unanswered_tool_calls policy."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    AgentThreadsError,
    ChatMessageThread,
    ContextOverflowError,
    ContextView,
    MemoryStore,
    Message,
    TextPart,
    ThinkingPart,
    ToolResultPart,
    UnansweredToolCallError,
    tool_call,
)
from agent_threads.views import condensed as condensed_module
from agent_threads.views.answers import INTERRUPTED, arrange
from agent_threads.views.context import build_view

from .test_views import (
    _LIMITS,
    TextCounter,
    UnitCounter,
    _apply,
    built_or_overflow,
    conversations,
    reference_view,
    turn,
    viewed_or_overflow,
)

POLICIES = ["interrupt", "drop", "error"]


def crashed_call(*names: str, text: str | None = None) -> Message:
    """An assistant message whose tool calls never got results (the process was killed)."""
    return Message.assistant(text, tool_calls=[tool_call(n) for n in names or ("search",)])


def assert_every_call_is_answered_at_once(messages: Sequence[Message]) -> None:
    """What providers require: the results of a message's calls right after it, and only there."""
    expected: list[str] = []  # the call ids still to be answered, in the current answers
    for message in messages:
        results = [p.call_id for p in message.tool_results]
        if expected:
            assert results, f"{message.id}: calls {expected} are not answered before it"
            assert len(results) == len(message.contents), f"{message.id} holds more than results"
            assert set(results) <= set(expected), f"{message.id} answers other calls"
            expected = [c for c in expected if c not in results]
            continue
        assert not results, f"{message.id}: results {results} follow no call"
        expected = [c.call_id for c in message.tool_calls]
    assert not expected, f"calls {expected} end the view unanswered"


def synthetic(message: Message) -> bool:
    return message.metadata.get("synthetic") == "interrupted"


async def thread_of(messages: Sequence[Message]) -> ChatMessageThread:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(messages)
    return thread


# -- the policies ----------------------------------------------------------------------------


async def test_a_call_without_result_gets_an_interrupted_result_by_default() -> None:
    question, crashed, again = Message.user("weather?"), crashed_call("weather"), Message.user("?")
    thread = await thread_of([question, crashed, again])
    view = await thread.view(counter=TextCounter())
    assert view.messages[:2] == (question, crashed) and view.messages[3] == again
    interrupted = view.messages[2]
    assert interrupted.role == "tool" and synthetic(interrupted)
    assert interrupted.contents == (
        ToolResultPart(call_id=crashed.tool_calls[0].call_id, result=INTERRUPTED, is_error=True),
    )
    assert INTERRUPTED == "interrupted: no result was recorded for this call"
    assert view.tokens == sum(TextCounter().count(m) for m in view)
    assert list(thread.messages) == [question, crashed, again]  # nothing is written


async def test_the_interrupted_result_follows_the_real_results_of_the_same_message() -> None:
    crashed = crashed_call("first", "second", text="two tools")
    first, second = crashed.tool_calls
    answer = Message.tool_result(first.call_id, "done")
    thread = await thread_of([Message.user("go"), crashed, answer, Message.user("next")])
    view = await thread.view()
    assert [m.role for m in view] == ["user", "assistant", "tool", "tool", "user"]
    assert view.messages[2] == answer
    assert view.messages[3].tool_results[0].call_id == second.call_id
    assert_every_call_is_answered_at_once(view.messages)


async def test_synthetic_results_are_counted_in_the_tokens_and_the_budgets() -> None:
    counter = TextCounter()
    thread = await thread_of([*turn("a" * 20), Message.user("b"), crashed_call()])
    view = await thread.view(counter=counter)
    assert view.tokens == sum(counter.count(m) for m in view)
    newest_group = sum(counter.count(m) for m in view.messages[-2:])
    assert (await thread.view(max_messages=2)).messages == view.messages[-2:]
    assert (await thread.view(max_tokens=newest_group, counter=counter)).tokens == newest_group
    with pytest.raises(ContextOverflowError) as caught:  # the call and its interrupted result
        await thread.view(max_messages=1)
    assert (caught.value.needed, caught.value.unit) == (2, "messages")


async def test_drop_leaves_out_the_call_and_a_message_left_empty() -> None:
    bare, with_text = crashed_call(), crashed_call(text="let me look")
    thread = await thread_of([Message.user("q"), bare, with_text, Message.user("still there?")])
    view = await thread.view(unanswered_tool_calls="drop", counter=TextCounter())
    assert [m.text for m in view] == ["q", "let me look", "still there?"]
    assert view.messages[1].id == with_text.id and view.messages[1].tool_calls == ()
    assert view.tokens == sum(TextCounter().count(m) for m in view)


async def test_drop_keeps_the_answered_calls_of_a_message() -> None:
    crashed = crashed_call("answered", "lost")
    answer = Message.tool_result(crashed.tool_calls[0].call_id, "ok")
    thread = await thread_of([crashed, answer])
    view = await thread.view(unanswered_tool_calls="drop")
    assert view.messages[0].tool_calls == crashed.tool_calls[:1] and view.messages[1] == answer


async def test_drop_leaves_out_a_message_holding_nothing_but_thinking_beside_the_call() -> None:
    thinking = Message.assistant(thinking=ThinkingPart(text="hmm"), tool_calls=[tool_call("f")])
    thread = await thread_of([Message.user("q"), thinking])
    assert [m.text for m in await thread.view(unanswered_tool_calls="drop")] == ["q"]


async def test_error_names_the_thread_the_message_and_the_call() -> None:
    crashed = crashed_call()
    thread = await thread_of([Message.user("q"), crashed, Message.user("?")])
    with pytest.raises(UnansweredToolCallError) as caught:
        await thread.view(unanswered_tool_calls="error")
    error = caught.value
    assert (error.thread_id, error.message_id) == (thread.id, crashed.id)
    assert error.call_id == crashed.tool_calls[0].call_id
    assert isinstance(error, AgentThreadsError) and isinstance(error, ValueError)
    assert thread.id in str(error) and error.call_id in str(error)


async def test_error_spares_a_call_the_window_leaves_out() -> None:
    thread = await thread_of([crashed_call(), *turn("later")])
    view = await thread.view(max_messages=2, unanswered_tool_calls="error")
    assert view.messages == tuple(thread.messages[-2:])


async def test_an_unknown_policy_is_refused() -> None:
    thread = await thread_of(turn())
    with pytest.raises(ValueError, match="unanswered_tool_calls"):
        await thread.view(unanswered_tool_calls=cast(Any, "ignore"))
    with pytest.raises(ValueError, match="unanswered_tool_calls"):  # converters only
        build_view([], unanswered_tool_calls=cast(Any, "keep"))


# -- placing results ----------------------------------------------------------------------------


async def test_a_result_written_after_other_messages_moves_up_to_its_call() -> None:
    call = tool_call("slow")
    asked = Message.assistant(tool_calls=[call])
    meanwhile, result = Message.user("any news?"), Message.tool_result(call.call_id, "done")
    thread = await thread_of([asked, meanwhile, result])
    assert (await thread.view()).messages == (asked, result, meanwhile)


async def test_a_message_holding_results_and_text_is_split() -> None:
    call = tool_call("f")
    mixed = Message(
        role="user",
        contents=(ToolResultPart(call_id=call.call_id, result="42"), TextPart(text="and then?")),
    )
    thread = await thread_of([Message.assistant(tool_calls=[call]), mixed])
    view = await thread.view(counter=TextCounter())
    assert [m.role for m in view] == ["assistant", "tool", "user"]
    assert view.messages[1].contents == mixed.contents[:1]
    assert view.messages[1].metadata == {"split_from": mixed.id}
    assert view.messages[2].contents == mixed.contents[1:] and view.messages[2].id == mixed.id
    assert view.tokens == sum(TextCounter().count(m) for m in view)


# -- the newest call, the cache, the kept-first messages and lazy handles ---------------------


async def test_a_view_between_a_call_and_its_result_shows_it_interrupted_until_it_arrives() -> None:
    thread = await thread_of([Message.system("s"), Message.user("q")])
    await thread.view()
    call = tool_call("search")
    await thread.on_new_messages([Message.assistant(tool_calls=[call])])  # tools now running
    during = await thread.view(keep_first=1)
    assert synthetic(during.messages[-1]) and during.messages[-2].tool_calls == (call,)
    result = Message.tool_result(call.call_id, "found it")
    await thread.on_new_messages([result])
    after = await thread.view(keep_first=1)
    assert after.messages[-1] == result and not any(synthetic(m) for m in after)
    assert after == build_view(thread.messages, keep_first=1)
    assert thread._view_cache().rebuilds == 1  # brought up to date, never rebuilt


async def test_a_live_agent_loop_viewing_between_calls_and_results_stays_incremental(
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
    thread = await thread_of([Message.system("s")])
    for i in range(300):
        call = tool_call("step", {"i": i})
        await thread.on_new_messages([Message.assistant(tool_calls=[call])])
        during = await thread.view(max_tokens=40, keep_first=1, counter=counter)
        assert synthetic(during.messages[-1])
        await thread.on_new_messages([Message.tool_result(call.call_id, "ok")])
        view = await thread.view(max_tokens=40, keep_first=1, counter=counter)
        assert len(view) == min(2 * i + 3, 39)  # the system prompt, then whole pairs
    assert linked == 601  # each message entered once
    assert counter.calls <= 601 + 300 + 1  # each message and each synthetic result counted once
    assert thread._view_cache().rebuilds == 1


async def test_an_unanswered_call_among_the_kept_first_does_not_keep_the_whole_thread() -> None:
    crashed = crashed_call()
    thread = await thread_of([Message.system("s"), crashed])
    for i in range(20):
        await thread.on_new_messages(turn(f"t{i}"))
    view = await thread.view(max_messages=5, keep_first=2)
    assert view.messages[:2] == (thread.messages[0], crashed) and synthetic(view.messages[2])
    assert view.messages[3:] == tuple(thread.messages[-2:])
    late = Message.tool_result(crashed.tool_calls[0].call_id, "late")  # kept-first grow to it
    await thread.on_new_messages([late])
    expected = built_or_overflow(thread.messages, max_messages=50, keep_first=2)
    assert await thread.view(max_messages=50, keep_first=2) == expected


@pytest.mark.parametrize("policy", POLICIES)
async def test_a_lazy_handle_views_unanswered_calls_like_a_loaded_one(policy: Any) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.system("s")])
    for i in range(40):
        await thread.on_new_messages([*turn(f"t{i}"), crashed_call(), Message.user("?")])
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    limits: dict[str, Any] = {"max_messages": 6, "keep_first": 1, "unanswered_tool_calls": policy}
    if policy == "error":
        with pytest.raises(UnansweredToolCallError):
            await lazy.view(**limits)
        return
    assert await lazy.view(**limits) == await thread.view(**limits)
    call = tool_call("now")
    await lazy.on_new_messages([Message.assistant(tool_calls=[call])])
    await thread.refresh()
    assert await lazy.view(**limits) == await thread.view(**limits)
    await lazy.on_new_messages([Message.tool_result(call.call_id, "ok")])
    await thread.refresh()
    assert await lazy.view(**limits) == await thread.view(**limits)
    assert lazy._view_cache().rebuilds == 0  # read from the end each time


# -- properties ----------------------------------------------------------------------------------

_POLICY = st.sampled_from(POLICIES)


def _view_or_outcome(messages: list[Message], **limits: Any) -> ContextView | str:
    try:
        return built_or_overflow(messages, **limits)
    except UnansweredToolCallError:
        return "unanswered"


@settings(max_examples=300, deadline=None)
@given(messages=conversations(), limits=_LIMITS, policy=_POLICY)
def test_a_view_in_every_policy_answers_every_call_at_once(
    messages: list[Message], limits: dict[str, Any], policy: str
) -> None:
    counter = TextCounter()
    view = _view_or_outcome(messages, counter=counter, unanswered_tool_calls=policy, **limits)
    if isinstance(view, str):
        assert view == "overflow" or policy == "error"
        return
    assert_every_call_is_answered_at_once(view.messages)
    assert view.tokens == sum(counter.count(m) for m in view)
    if limits["max_messages"] is not None:
        assert len(view) <= limits["max_messages"]
    ids = {m.id for m in messages}
    assert all(m.id in ids for m in view if not synthetic(m) and "split_from" not in m.metadata)
    if policy != "interrupt":
        assert not any(synthetic(m) for m in view)


@settings(max_examples=300, deadline=None)
@given(messages=conversations(), limits=_LIMITS, policy=_POLICY)
def test_a_view_in_every_policy_follows_the_rules_as_written(
    messages: list[Message], limits: dict[str, Any], policy: str
) -> None:
    counter = TextCounter()
    try:
        expected: ContextView | str = reference_view(
            messages, counter=counter, unanswered_tool_calls=policy, **limits
        )
    except UnansweredToolCallError:
        expected = "unanswered"
    outcome = _view_or_outcome(messages, counter=counter, unanswered_tool_calls=policy, **limits)
    assert outcome == expected


@settings(max_examples=150, deadline=None)
@given(messages=conversations(), limits=_LIMITS, policy=_POLICY)
async def test_a_lazy_view_in_every_policy_equals_the_cached_view(
    messages: list[Message], limits: dict[str, Any], policy: str
) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages(messages)
    lazy = await ChatMessageThread.load(thread.id, store=store, lazy=True)
    options = {"counter": TextCounter(), "unanswered_tool_calls": policy, **limits}
    assert await _viewed(lazy, **options) == await _viewed(thread, **options)


async def _viewed(thread: ChatMessageThread, **limits: Any) -> ContextView | str:
    try:
        return await viewed_or_overflow(thread, **limits)
    except UnansweredToolCallError:
        return "unanswered"


_AGENT_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("turn"), st.integers(1, 3)),
        st.tuples(st.just("tools"), st.integers(1, 3)),
        st.tuples(st.just("condense"), st.integers(0, 99), st.integers(0, 99)),
        st.tuples(st.just("summary"), st.integers(0, 99), st.integers(0, 99)),
        st.tuples(st.just("rollback"), st.integers(0, 99)),
        st.tuples(st.just("fork"), st.integers(0, 99)),
        st.tuples(st.just("call"), st.integers(1, 3)),
        st.tuples(st.just("answer"), st.integers(0, 99)),
        st.tuples(st.just("say"), st.just(0)),
    ),
    max_size=30,
)


async def _apply_agent_op(thread: ChatMessageThread, op: tuple[Any, ...]) -> ChatMessageThread:
    """The ops of `_apply`, and calls left running, answered later, or talked over."""
    name, arg = op[0], op[-1]
    if name == "call":
        await thread.on_new_messages([crashed_call(*(["f"] * arg))])
    elif name == "answer":
        answered = {r.call_id for m in thread.messages for r in m.tool_results}
        waiting = [c for m in thread.messages for c in m.tool_calls if c.call_id not in answered]
        if waiting:
            call = waiting[arg % len(waiting)]
            await thread.on_new_messages([Message.tool_result(call.call_id, "late")])
    elif name == "say":
        await thread.on_new_messages([Message.user("meanwhile")])
    else:
        return await _apply(thread, op)
    return thread


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=_AGENT_OPS, limits=_LIMITS, policy=_POLICY)
async def test_a_cached_view_in_every_policy_equals_one_built_from_scratch(
    ops: list[tuple[Any, ...]], limits: dict[str, Any], policy: str
) -> None:
    options = {"counter": TextCounter(), "unanswered_tool_calls": policy, **limits}
    thread = await thread_of([Message.system("rules")])
    for op in ops:
        thread = await _apply_agent_op(thread, op)
        messages = list(thread.messages)
        cached = await _viewed(thread, **options)
        assert cached == _view_or_outcome(messages, **options)
        if not isinstance(cached, str):
            assert_every_call_is_answered_at_once(cached.messages)


@settings(max_examples=200, deadline=None)
@given(messages=conversations())
def test_arranging_twice_changes_nothing(messages: list[Message]) -> None:
    once = arrange(messages)
    assert arrange(once) == once
