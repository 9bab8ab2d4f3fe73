"""ThreadSession on every store: the Session protocol, exact items, fork and checkpoints."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

import anyio
import pytest
from agents import (
    Agent,
    RunConfig,
    Runner,
    Session,
    SessionSettings,
    TResponseInputItem,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import ScriptedModel
from hypothesis import given
from hypothesis import strategies as st
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from agent_threads import (
    ChatMessageThread,
    CheckpointNotFoundError,
    InvalidValueError,
    Message,
    ThreadStore,
    tool_call,
)
from agent_threads.integrations.openai_agents import (
    ITEM_KEY,
    ThreadSession,
    item_message,
    message_items,
)
from tests.stores.conftest import STORES, ReopenStore, another_client

__all__ = ["another_client"]  # the fixture, used by name

set_tracing_disabled(True)  # the scripted runs have nothing to export


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    async with request.param(tmp_path) as opened:
        yield opened


def items(*entries: dict[str, Any]) -> list[TResponseInputItem]:
    return [cast(TResponseInputItem, e) for e in entries]


def said(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="1",
        type="message",
        role="assistant",
        content=[ResponseOutputText(text=text, type="output_text", annotations=[], logprobs=[])],
        status="completed",
    )


def get_function_tool_call(name: str, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        id="1", call_id="2", type="function_call", name=name, arguments=arguments
    )


def contents(found: list[TResponseInputItem]) -> list[Any]:
    return [cast(dict[str, Any], i).get("content") for i in found]


VARIED = items(
    {"role": "user", "content": "Hello"},
    {"role": "developer", "content": "Be brief."},
    {
        "id": "1",
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Hi", "annotations": [], "logprobs": []}],
        "status": "completed",
    },
    {
        "type": "function_call",
        "call_id": "c1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    },
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "think"}],
        "encrypted_content": "opaque==",
    },
    {"type": "web_search_call", "id": "ws 1", "status": "completed", "action": {"q": "x"}},
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://x/a.png", "detail": "low"},
        ],
    },
    {"weird": True, "role": "nobody"},
    {"type": "message", "role": "user", "content": "typed but string"},
)


def test_a_thread_session_is_an_sdk_session() -> None:
    session = ThreadSession("s", store=cast(ThreadStore, None))
    assert isinstance(session, Session)
    typed: Session = session
    assert typed.session_id == "s"
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None


def test_session_settings_are_taken_as_the_sdk_takes_them() -> None:
    session = ThreadSession("s", store=cast(ThreadStore, None), session_settings={"limit": 3})
    assert session.session_settings == SessionSettings(limit=3)
    with pytest.raises(TypeError, match="limitt"):
        ThreadSession("s", store=cast(ThreadStore, None), session_settings={"limitt": 3})


async def test_items_come_back_exactly_and_the_thread_reads_them_as_messages(
    store: ThreadStore,
) -> None:
    session = ThreadSession("varied", store=store)
    await session.add_items(VARIED)
    assert await session.get_items() == VARIED
    again = ThreadSession("varied", store=store)  # a new session object: from the store
    assert await again.get_items() == VARIED
    thread = await ChatMessageThread.load("varied", store=store)
    assert [m.role for m in thread.messages][:5] == [
        "user",
        "system",
        "assistant",
        "assistant",
        "tool",
    ]
    assert thread.messages[0].text == "Hello"
    assert thread.messages[3].tool_calls[0].arguments == {"city": "Oslo"}
    assert thread.stats.message_count == len(VARIED)


@given(
    text=st.text(max_size=20),
    extra=st.dictionaries(
        st.sampled_from(["id", "status", "phase", "name", "x"]),
        st.one_of(st.text(max_size=8), st.integers(), st.none()),
        max_size=3,
    ),
    typed=st.booleans(),
    role=st.sampled_from(["user", "assistant", "system", "developer"]),
    as_parts=st.booleans(),
)
def test_any_message_item_round_trips_exactly(
    text: str, extra: dict[str, Any], typed: bool, role: str, as_parts: bool
) -> None:
    part_type = "output_text" if role == "assistant" else "input_text"
    content: Any = [{"type": part_type, "text": text}] if as_parts else text
    item = {**extra, "role": role, "content": content, **({"type": "message"} if typed else {})}
    assert message_items(item_message(item)) == [item]


def test_an_item_that_is_not_json_is_refused_naming_it() -> None:
    with pytest.raises(InvalidValueError, match="session item"):
        item_message({"role": "user", "content": object()})
    with pytest.raises(InvalidValueError, match="session item"):
        item_message(cast(Any, ["not", "a", "dict"]))


def test_a_string_content_is_stored_once() -> None:
    message = item_message({"role": "user", "content": "x" * 1000})
    assert message.text == "x" * 1000
    assert "x" * 1000 not in str(message.metadata[ITEM_KEY])


async def test_get_items_limit_follows_sqlite_session(store: ThreadStore) -> None:
    session = ThreadSession("limits", store=store)
    added = items(*({"role": "user", "content": f"m{i}"} for i in range(6)))
    await session.add_items(added)
    assert await session.get_items(limit=2) == added[-2:]
    assert await session.get_items(limit=10) == added
    assert await session.get_items(limit=0) == []
    assert await session.get_items(limit=-1) == added  # SQLite's LIMIT -1: all
    limited = ThreadSession("limits", store=store, session_settings=SessionSettings(limit=3))
    assert await limited.get_items() == added[-3:]
    assert await limited.get_items(limit=1) == added[-1:]


async def test_a_missing_session_is_empty_and_not_created_by_reads(store: ThreadStore) -> None:
    session = ThreadSession("nobody", store=store)
    assert await session.get_items() == []
    assert await session.pop_item() is None
    await session.clear_session()
    await session.add_items([])
    assert await session.checkpoints() == []
    assert await store.get_record("thread", "nobody") is None


async def test_pop_item_returns_the_newest_and_keeps_it_as_a_checkpoint(
    store: ThreadStore,
) -> None:
    session = ThreadSession("pops", store=store)
    await session.add_items(VARIED[:3])
    assert await session.pop_item() == VARIED[2]
    assert await session.get_items() == VARIED[:2]
    saved = await session.checkpoints()
    assert [(c.label, c.message_count) for c in saved] == [("before-pop", 3)]
    await session.rollback(saved[0])
    assert await session.get_items() == VARIED[:3]


async def test_clear_session_empties_it_and_rollback_restores_it(store: ThreadStore) -> None:
    session = ThreadSession("clears", store=store, title="Support")
    await session.add_items(VARIED[:4])
    await session.clear_session()
    assert await session.get_items() == []
    await session.rollback("before-clear")
    assert await session.get_items() == VARIED[:4]
    assert (await session.get_thread()).title == "Support"


async def test_a_fork_holds_the_items_and_then_goes_its_own_way(store: ThreadStore) -> None:
    session = ThreadSession("trunk", store=store, session_settings={"limit": 50})
    await session.add_items(VARIED[:2])
    fork = await session.fork(session_id="branch")
    assert (fork.session_id, fork.session_settings) == ("branch", SessionSettings(limit=50))
    await fork.add_items(items({"role": "user", "content": "only on the branch"}))
    await session.add_items(items({"role": "user", "content": "only on the trunk"}))
    assert contents(await fork.get_items())[-1] == "only on the branch"
    assert contents(await session.get_items())[-1] == "only on the trunk"
    assert (await fork.get_thread()).parent_id == "trunk"


async def test_a_fork_at_a_checkpoint_holds_the_items_then(store: ThreadStore) -> None:
    session = ThreadSession("cp", store=store)
    await session.add_items(VARIED[:2])
    mark = await session.checkpoint("two items")
    await session.add_items(VARIED[2:5])
    fork = await session.fork("two items")
    assert await fork.get_items() == VARIED[:2]
    assert (await session.fork(mark)).session_id != fork.session_id
    with pytest.raises(CheckpointNotFoundError):
        await session.fork("no such label")


async def test_rollback_to_a_checkpoint_then_continue(store: ThreadStore) -> None:
    session = ThreadSession("rb", store=store)
    await session.add_items(VARIED[:1])
    await session.checkpoint("start")
    await session.add_items(VARIED[1:4])
    before = await session.rollback("start")
    assert before.message_count == 4
    await session.add_items(VARIED[4:5])
    assert await session.get_items() == [VARIED[0], VARIED[4]]


async def test_sessions_of_one_id_on_two_clients_see_each_others_items(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    here = ThreadSession("shared", store=store)
    await here.add_items(VARIED[:1])
    async with another_client(store) as other_store:
        there = ThreadSession("shared", store=other_store)
        assert await there.get_items() == VARIED[:1]
        await there.add_items(VARIED[1:2])
        assert await here.get_items() == VARIED[:2]
        assert await here.pop_item() == VARIED[1]
        assert await there.get_items() == VARIED[:1]


async def test_concurrent_pops_from_two_clients_never_return_one_item_twice(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    added = items(*({"role": "user", "content": f"m{i}"} for i in range(6)))
    await ThreadSession("race", store=store).add_items(added)
    popped: list[TResponseInputItem] = []
    async with another_client(store) as other_store:
        sessions = [ThreadSession("race", store=s) for s in (store, other_store) * 2]

        async def pop(session: ThreadSession) -> None:
            item = await session.pop_item()
            assert item is not None
            popped.append(item)

        async with anyio.create_task_group() as group:
            for session in sessions:
                group.start_soon(pop, session)
    assert sorted(contents(popped)) == ["m2", "m3", "m4", "m5"]
    assert await ThreadSession("race", store=store).get_items() == added[:2]


async def test_a_session_over_a_native_thread_gives_its_messages_as_items(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store, id="native")
    call = tool_call("lookup", {"q": "x"})
    await thread.on_new_messages(
        [Message.user("hi"), Message.assistant("checking", tool_calls=[call])]
    )
    session = ThreadSession.of(thread)
    found = [cast(dict[str, Any], i) for i in await session.get_items()]
    assert [i["type"] for i in found] == ["message", "message", "function_call"]
    assert found[2]["name"] == "lookup"
    assert [cast(dict[str, Any], i)["type"] for i in await session.get_items(limit=1)] == [
        "function_call"
    ]


async def test_the_runner_keeps_a_conversation_and_a_fork_answers_differently(
    store: ThreadStore,
) -> None:
    model = ScriptedModel()
    agent = Agent(name="guide", model=model)
    session = ThreadSession("trip", store=store)
    model.enqueue([said("Lisbon is lovely.")])
    await Runner.run(agent, "Where should I go?", session=session)
    branch = await session.fork(session_id="trip-b")
    model.enqueue([said("Porto, then.")])
    await Runner.run(agent, "Somewhere else?", session=branch)
    assert contents(model.calls[-1].input)[:1] == ["Where should I go?"]
    model.enqueue([said("Three days.")])
    await Runner.run(
        agent,
        "How long?",
        session=session,
        run_config=RunConfig(session_settings=SessionSettings(limit=1)),
    )
    assert len(model.calls[-1].input) == 2  # the newest stored item and the new input
    trunk = await session.get_items()
    assert contents(trunk)[::2] == ["Where should I go?", "How long?"]
    assert len(await branch.get_items()) == 4
    assert (await session.get_thread()).stats.message_count == 4


def test_importing_without_the_sdk_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n"
        "    import agent_threads.integrations.openai_agents\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'agent-threads-framework[openai-agents]'" in done.stdout


async def test_the_runs_token_usage_reaches_the_thread_stats(store: ThreadStore) -> None:
    model = ScriptedModel(default_usage=Usage(requests=1, input_tokens=30, output_tokens=7))
    agent = Agent(name="guide", model=model)
    session = ThreadSession("usage", store=store)
    model.enqueue([said("One.")])
    await Runner.run(agent, "First?", session=session)
    model.enqueue([said("Two.")])
    await Runner.run(agent, "Second?", session=session)
    thread = await session.get_thread()
    stats = thread.stats
    assert (stats.message_count, stats.input_tokens, stats.output_tokens) == (4, 60, 14)
    messages = await thread.get_messages()
    assert [m.usage.output_tokens if m.usage else None for m in messages] == [None, 7, None, 7]
    assert contents(await session.get_items())[::2] == ["First?", "Second?"]  # items unchanged


async def test_a_turn_with_a_tool_call_charges_each_model_call_once(store: ThreadStore) -> None:
    @function_tool
    def lookup(city: str) -> str:
        return f"{city}: sunny"

    model = ScriptedModel(default_usage=Usage(requests=1, input_tokens=10, output_tokens=2))
    agent = Agent(name="guide", model=model, tools=[lookup])
    session = ThreadSession("tools", store=store)
    model.enqueue([get_function_tool_call("lookup", '{"city": "Oslo"}')])
    model.enqueue([said("Sunny in Oslo.")])
    await Runner.run(agent, "Weather in Oslo?", session=session)
    thread = await session.get_thread()
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (20, 4)
    assert [cast(dict[str, Any], i).get("type") for i in await session.get_items()] == [
        None,
        "function_call",
        "function_call_output",
        "message",
    ]
