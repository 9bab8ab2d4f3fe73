"""ThreadHistoryProvider: a real Agent Framework agent keeping its sessions in threads."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_framework import (
    Agent,
    AgentSession,
    BaseChatClient,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    ContextProvider,
    FunctionInvocationLayer,
    ResponseStream,
    SessionContext,
    tool,
)
from agent_framework import Message as FrameworkMessage
from hypothesis import given
from hypothesis import strategies as st

from agent_threads import (
    ChatMessageThread,
    CheckpointNotFoundError,
    InvalidIdError,
    InvalidValueError,
    Message,
    MessageNotFoundError,
    SQLiteStore,
    TextPart,
    ThreadStore,
    ToolCallPart,
    ToolResultPart,
    tool_call,
)
from agent_threads.integrations.agent_framework import (
    FRAMEWORK_KEY,
    ThreadHistoryProvider,
    from_framework,
    to_framework,
)
from tests.stores.conftest import STORES, ReopenStore, another_client

__all__ = ["another_client"]  # the fixture, used by name

Dumped = list[dict[str, Any]]


class ScriptedChatClient(  # type: ignore[misc]  # the layers' overloads differ, as in the package
    ChatMiddlewareLayer[Any], FunctionInvocationLayer[Any], BaseChatClient[Any]
):
    """A chat client answering with scripted messages; it records what each call was sent.

    Layered as Agent Framework's own clients are (chat middleware, then function calls).
    """

    def __init__(self, *replies: FrameworkMessage) -> None:
        super().__init__()
        self.replies = list(replies)
        self.calls: list[Dumped] = []

    def enqueue(self, *replies: FrameworkMessage) -> None:
        self.replies.extend(replies)

    def _inner_get_response(
        self,
        *,
        messages: Sequence[FrameworkMessage],
        stream: bool,
        options: Mapping[str, Any],
        **kw: Any,
    ) -> Awaitable[ChatResponse] | ResponseStream[ChatResponseUpdate, ChatResponse]:
        self.calls.append([m.to_dict() for m in messages])
        reply = self.replies.pop(0)
        if not stream:
            return self._respond(reply)

        async def updates() -> AsyncIterator[ChatResponseUpdate]:
            yield ChatResponseUpdate(role="assistant", contents=list(reply.contents))

        return ResponseStream(updates(), finalizer=ChatResponse.from_updates)

    async def _respond(self, reply: FrameworkMessage) -> ChatResponse:
        return ChatResponse(messages=[reply])

    def texts(self, call: int = -1) -> list[str]:
        """The texts of the messages a call was sent (a function call or result: its type)."""
        return [_text(m) for m in self.calls[call]]


def _text(dumped: dict[str, Any]) -> str:
    parts = []
    for content in dumped["contents"]:
        parts.append(content["text"] if content["type"] == "text" else content["type"])
    return " ".join(parts)


def said(text: str) -> FrameworkMessage:
    return FrameworkMessage("assistant", [text])


def calls(name: str, call_id: str, **arguments: Any) -> FrameworkMessage:
    return FrameworkMessage(
        "assistant", [Content.from_function_call(call_id, name, arguments=arguments)]
    )


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def make_agent(
    provider: ThreadHistoryProvider, client: ScriptedChatClient, **kw: Any
) -> Agent[Any]:
    return Agent(
        client, "Be brief.", name="guide", tools=[get_weather], context_providers=[provider], **kw
    )


@pytest.fixture(params=STORES)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore]:
    async with request.param(tmp_path) as opened:
        yield opened


async def two_turns(agent: Agent[Any], client: ScriptedChatClient, session: AgentSession) -> None:
    """A turn with a tool call (call, result, answer), then a plain turn."""
    client.enqueue(calls("get_weather", "call-1", city="Lisbon"), said("Sunny in Lisbon."))
    await agent.run("Weather in Lisbon?", session=session)
    client.enqueue(said("You asked about Lisbon."))
    await agent.run("What did I ask?", session=session)


TURNS = [
    "Weather in Lisbon?",
    "function_call",
    "function_result",
    "Sunny in Lisbon.",
    "What did I ask?",
    "You asked about Lisbon.",
]


# -- a real agent across turns --------------------------------------------------------------


async def test_an_agents_turns_are_stored_in_the_sessions_thread(store: ThreadStore) -> None:
    client = ScriptedChatClient()
    agent = make_agent(ThreadHistoryProvider(store), client)
    session = agent.create_session()
    await two_turns(agent, client, session)

    thread = await ChatMessageThread.load(session.session_id, store=store)
    messages = list(thread.messages)
    assert [m.role for m in messages] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert [m.text for m in messages][::3] == ["Weather in Lisbon?", "Sunny in Lisbon."]
    assert messages[1].contents == (tool_call("get_weather", {"city": "Lisbon"}, call_id="call-1"),)
    assert messages[2].contents == (ToolResultPart(call_id="call-1", result="sunny in Lisbon"),)
    assert [m.author for m in messages] == [None, "guide", "guide", "guide", None, "guide"]
    assert thread.stats.message_count == 6


async def test_the_agent_sees_its_earlier_turns_on_the_next_run(store: ThreadStore) -> None:
    client = ScriptedChatClient()
    agent = make_agent(ThreadHistoryProvider(store), client)
    session = agent.create_session()
    await two_turns(agent, client, session)
    # the tool turn's second model call saw the call and its result; the next run all of it
    assert client.texts(1) == TURNS[:3]
    assert client.texts(2) == TURNS[:5]
    assert client.calls[2][1]["contents"][0]["arguments"] == {"city": "Lisbon"}


async def test_a_streamed_run_is_stored_too(store: ThreadStore) -> None:
    client = ScriptedChatClient(said("Streamed."))
    provider = ThreadHistoryProvider(store)
    agent = make_agent(provider, client)
    session = agent.create_session()
    async for _ in agent.run("Stream it.", session=session, stream=True):
        pass
    found = await provider.get_messages(session.session_id)
    assert [m.text for m in found] == ["Stream it.", "Streamed."]


async def test_the_history_is_read_again_from_a_reopened_sqlite_file(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    client = ScriptedChatClient()
    async with SQLiteStore(path) as store:
        provider = ThreadHistoryProvider(store)
        agent = make_agent(provider, client)
        session = agent.create_session()
        await two_turns(agent, client, session)
        before = [m.to_dict() for m in await provider.get_messages(session.session_id)]

    async with SQLiteStore(path) as reopened:  # a later process: a new store, agent, session
        provider = ThreadHistoryProvider(reopened)
        later = ScriptedChatClient(said("Still Lisbon."))
        agent = make_agent(provider, later)
        restored = AgentSession(session_id=session.session_id)
        assert [m.to_dict() for m in await provider.get_messages(restored.session_id)] == before
        await agent.run("And tomorrow?", session=restored)
        assert later.texts() == [*TURNS, "And tomorrow?"]
        thread = await ChatMessageThread.load(session.session_id, store=reopened)
        assert [m.text for m in thread.messages][-2:] == ["And tomorrow?", "Still Lisbon."]


async def test_sessions_in_two_clients_of_one_store_see_each_other(
    store: ThreadStore, another_client: ReopenStore
) -> None:
    client = ScriptedChatClient(said("One."), said("Two."))
    agent = make_agent(ThreadHistoryProvider(store), client)
    await agent.run("First?", session=AgentSession(session_id="shared"))
    async with another_client(store) as other_store:
        other = make_agent(ThreadHistoryProvider(other_store), client)
        await other.run("Second?", session=AgentSession(session_id="shared"))
    assert client.texts() == ["First?", "One.", "Second?"]


async def test_per_service_call_persistence_stores_each_message_once(store: ThreadStore) -> None:
    client = ScriptedChatClient()
    provider = ThreadHistoryProvider(store)
    agent = make_agent(provider, client, require_per_service_call_history_persistence=True)
    session = agent.create_session()
    await two_turns(agent, client, session)
    thread = await provider.get_thread(session)
    assert [_text(to_framework(m).to_dict()) for m in await thread.get_messages()] == TURNS
    assert client.texts() == TURNS[:5]


class Notes(ContextProvider):
    """A context provider adding a note before each run (as retrieval would)."""

    async def before_run(
        self, *, agent: Any, session: AgentSession, context: SessionContext, state: dict[str, Any]
    ) -> None:
        context.extend_messages(self, [FrameworkMessage("user", [f"Note from {self.source_id}."])])


async def test_an_audit_log_stores_the_context_of_chosen_providers(store: ThreadStore) -> None:
    client = ScriptedChatClient(said("Noted."))
    audit = ThreadHistoryProvider(
        store, "audit", load_messages=False, store_context_messages=True, store_context_from={"rag"}
    )
    agent = Agent(client, name="guide", context_providers=[Notes("rag"), Notes("other"), audit])
    session = agent.create_session()
    await agent.run("Hi.", session=session)
    assert client.texts() == ["Note from rag.", "Note from other.", "Hi."]
    logged = await audit.get_messages(session.session_id)
    assert [m.text for m in logged] == ["Note from rag.", "Hi.", "Noted."]
    assert logged[0].additional_properties["_attribution"]["source_id"] == "rag"


async def test_outputs_only_when_inputs_are_not_stored(store: ThreadStore) -> None:
    client = ScriptedChatClient(said("One."), said("Two."))
    provider = ThreadHistoryProvider(store, store_inputs=False)
    agent = make_agent(provider, client)
    session = agent.create_session()
    await agent.run("First?", session=session)
    await agent.run("Second?", session=session)
    assert client.texts() == ["One.", "Second?"]
    assert [m.text for m in await provider.get_messages(session.session_id)] == ["One.", "Two."]


# -- fork, checkpoints, rollback ------------------------------------------------------------


async def test_a_fork_at_a_message_continues_on_its_own(store: ThreadStore) -> None:
    client = ScriptedChatClient()
    provider = ThreadHistoryProvider(store)
    agent = make_agent(provider, client)
    session = agent.create_session()
    await two_turns(agent, client, session)
    history = await provider.get_messages(session.session_id)
    answer = history[3]  # "Sunny in Lisbon."
    assert answer.message_id is not None

    branch = await provider.fork(session, message_id=answer.message_id, session_id="branch")
    client.enqueue(said("Porto is cloudy."))
    await agent.run("And Porto?", session=branch)

    assert client.texts() == [*TURNS[:4], "And Porto?"]  # the fork's history: up to the answer
    branch_history = await provider.get_messages("branch")
    assert [_text(m.to_dict()) for m in branch_history] == [
        *TURNS[:4],
        "And Porto?",
        "Porto is cloudy.",
    ]
    assert [_text(m.to_dict()) for m in await provider.get_messages(session.session_id)] == TURNS
    forked = await ChatMessageThread.load("branch", store=store)
    assert forked.parent_id == session.session_id
    assert forked.fork_point == answer.message_id


async def test_a_fork_at_a_checkpoint_and_a_fork_of_now(store: ThreadStore) -> None:
    client = ScriptedChatClient(said("One."))
    provider = ThreadHistoryProvider(store)
    agent = make_agent(provider, client)
    session = agent.create_session()
    await agent.run("First?", session=session)
    await provider.checkpoint(session, "after-first")
    client.enqueue(said("Two."))
    await agent.run("Second?", session=session)

    at_first = await provider.fork(session, checkpoint="after-first")
    now = await provider.fork(session.session_id)
    assert [m.text for m in await provider.get_messages(at_first.session_id)] == ["First?", "One."]
    assert len(await provider.get_messages(now.session_id)) == 4
    client.enqueue(said("Other."))
    await agent.run("Other?", session=at_first)
    assert client.texts() == ["First?", "One.", "Other?"]
    assert len(await provider.get_messages(session.session_id)) == 4


async def test_a_fork_copies_the_session_state_but_not_its_service_conversation() -> None:
    provider = ThreadHistoryProvider()
    session = AgentSession(session_id="s", service_session_id="conv_1")
    session.state["other"] = {"notes": ["keep"]}
    await provider.save_messages("s", [FrameworkMessage("user", ["Hi"])])
    fork = await provider.fork(session)
    assert fork.session_id != "s"
    assert fork.state == {"other": {"notes": ["keep"]}}
    assert fork.state["other"] is not session.state["other"]
    assert fork.service_session_id is None


async def test_rollback_hides_later_turns_from_the_agent_and_can_be_undone(
    store: ThreadStore,
) -> None:
    client = ScriptedChatClient(said("One."))
    provider = ThreadHistoryProvider(store)
    agent = make_agent(provider, client)
    session = agent.create_session()
    await agent.run("First?", session=session)
    await provider.checkpoint(session, "after-first")
    client.enqueue(said("Two."))
    await agent.run("Second?", session=session)

    await provider.rollback(session, "after-first")
    client.enqueue(said("Again."))
    await agent.run("Retry?", session=session)
    assert client.texts() == ["First?", "One.", "Retry?"]

    labels = [c.label for c in await provider.checkpoints(session)]
    assert labels == ["after-first", "before-rollback"]
    await provider.rollback(session, "before-rollback")
    assert [m.text for m in await provider.get_messages(session.session_id)] == [
        "First?",
        "One.",
        "Second?",
        "Two.",
    ]


async def test_rollback_to_a_message_keeps_it_and_drops_what_follows(store: ThreadStore) -> None:
    provider = ThreadHistoryProvider(store)
    given = FrameworkMessage("user", ["Hi"], message_id="given-1")
    await provider.save_messages("s", [given, said("Hello."), FrameworkMessage("user", ["Bye"])])
    await provider.rollback("s", message_id="given-1")  # the id Agent Framework gave it
    assert [m.text for m in await provider.get_messages("s")] == ["Hi"]
    history = await provider.rollback("s", "before-rollback")
    assert history.label == "before-rollback"
    minted = (await provider.get_messages("s"))[1].message_id
    assert minted is not None
    await provider.rollback("s", message_id=minted)  # an id the thread minted
    assert [m.text for m in await provider.get_messages("s")] == ["Hi", "Hello."]


async def test_unknown_points_and_ambiguous_arguments_are_refused() -> None:
    provider = ThreadHistoryProvider()
    await provider.save_messages("s", [FrameworkMessage("user", ["Hi"])])
    with pytest.raises(MessageNotFoundError):
        await provider.fork("s", message_id="nope")
    with pytest.raises(CheckpointNotFoundError):
        await provider.rollback("s", "nope")
    with pytest.raises(InvalidValueError):
        await provider.fork("s", checkpoint="x", message_id="y")
    with pytest.raises(InvalidValueError):
        await provider.rollback("s")


async def test_auto_checkpoint_makes_every_run_a_point_to_return_to() -> None:
    client = ScriptedChatClient(said("One."), said("Two."))
    provider = ThreadHistoryProvider(auto_checkpoint=True, title="support", tags={"team": "a"})
    agent = make_agent(provider, client)
    session = agent.create_session()
    await agent.run("First?", session=session)
    await agent.run("Second?", session=session)
    points = await provider.checkpoints(session)
    assert [p.reason for p in points] == ["auto", "auto"]
    first = await provider.fork(session, checkpoint=points[0].id)
    assert [m.text for m in await provider.get_messages(first.session_id)] == ["First?", "One."]
    thread = await provider.get_thread(session)
    assert (thread.title, dict(thread.tags)) == ("support", {"team": "a"})


# -- messages both ways ---------------------------------------------------------------------


def varied_messages() -> list[FrameworkMessage]:
    """One message per kind of content and field, as Agent Framework makes them."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(16))
    annotated = Content.from_text(
        "See [1].", annotations=[{"type": "citation", "title": "Doc", "url": "https://x.test"}]
    )
    return [
        FrameworkMessage("system", ["Be brief."]),
        FrameworkMessage("user", ["Hi", Content.from_data(png, "image/png")], author_name="ana"),
        FrameworkMessage(
            "user", [Content.from_uri("https://x.test/a.pdf", media_type="application/pdf")]
        ),
        FrameworkMessage(
            "assistant",
            [
                Content.from_text_reasoning(text="Think.", protected_data="sig=="),
                Content.from_function_call("c1", "lookup", arguments='{"q": "x"}', id="af-1"),
                Content.from_usage({"input_token_count": 12, "output_token_count": 3}),
            ],
            message_id="chatcmpl-1",
            additional_properties={"trace": {"step": 1}},
        ),
        FrameworkMessage(
            "tool", [Content.from_function_result("c1", result={"rows": [1, 2]}, exception="boom")]
        ),
        FrameworkMessage(
            "assistant", [annotated, Content.from_error(message="late", error_code="E1")]
        ),
        FrameworkMessage("critic", ["A custom role."]),
        FrameworkMessage("assistant", [Content.from_hosted_file("file-1")], author_name="guide"),
        FrameworkMessage("user", ["plain"], message_id="m-given"),
    ]


def expected(message: FrameworkMessage, stored: Message) -> dict[str, Any]:
    """What a message reads back as: itself, with the thread's id when it had none."""
    dumped = message.to_dict()
    return dumped if "message_id" in dumped else {**dumped, "message_id": stored.id}


def test_every_kind_of_message_round_trips_exactly() -> None:
    for message in varied_messages():
        stored = from_framework(message)
        assert to_framework(stored).to_dict() == expected(message, stored)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)


@given(
    role=st.sampled_from(["system", "user", "assistant", "tool", "critic"]),
    texts=st.lists(st.text(max_size=20), max_size=3),
    author=st.none() | st.text(min_size=1, max_size=8),
    message_id=st.none() | st.text(min_size=1, max_size=12),
    properties=st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)
def test_any_text_message_round_trips_exactly(
    role: str,
    texts: list[str],
    author: str | None,
    message_id: str | None,
    properties: dict[str, Any],
) -> None:
    message = FrameworkMessage(
        role,
        [Content.from_text(t) for t in texts],
        author_name=author,
        message_id=message_id,
        additional_properties=properties,
    )
    stored = from_framework(message)
    assert to_framework(stored).to_dict() == expected(message, stored)
    again = Message.model_validate_json(stored.model_dump_json())  # as a store reads it back
    assert to_framework(again).to_dict() == expected(message, stored)


def test_contents_with_a_native_counterpart_become_native_parts() -> None:
    stored = [from_framework(m) for m in varied_messages()]
    assert stored[1].contents[0] == TextPart(text="Hi")
    assert stored[1].contents[1].type == "data" and stored[1].author == "ana"
    assert [p.type for p in stored[3].contents] == ["thinking", "tool_call"]
    assert stored[3].contents[1] == ToolCallPart(call_id="c1", name="lookup", arguments={"q": "x"})
    assert stored[3].usage is not None and stored[3].usage.input_tokens == 12
    assert stored[4].tool_results[0].is_error
    assert stored[6].role == "user" and stored[6].text == "A custom role."


def test_a_plain_message_holds_no_copy_of_itself() -> None:
    plain = from_framework(FrameworkMessage("user", ["Just text."]))
    assert FRAMEWORK_KEY not in plain.metadata
    given_id = from_framework(FrameworkMessage("user", ["Just text."], message_id="m1"))
    assert given_id.metadata[FRAMEWORK_KEY] == {
        "type": "message",
        "role": "user",
        "contents": [{"type": "text", "text": "Just text.", "additional_properties": {}}],
        "message_id": "m1",
        "additional_properties": {},
    }


async def test_saved_messages_read_back_exactly_from_the_store(store: ThreadStore) -> None:
    provider = ThreadHistoryProvider(store)
    messages = varied_messages()
    await provider.save_messages("varied", messages)
    thread = await ChatMessageThread.load("varied", store=store)
    found = await provider.get_messages("varied")
    assert [m.to_dict() for m in found] == [
        expected(m, s) for m, s in zip(messages, thread.messages, strict=True)
    ]


async def test_messages_appended_by_other_means_reach_the_agent() -> None:
    provider = ThreadHistoryProvider()
    thread = await ChatMessageThread.create(provider.store, id="imported")
    call = tool_call("get_weather", {"city": "Faro"}, call_id="t1")
    await thread.on_new_messages(
        [
            Message.user("Weather in Faro?"),
            Message.assistant(tool_calls=[call]),
            Message.tool_result("t1", "windy"),
            Message.assistant("Windy in Faro."),
        ]
    )
    client = ScriptedChatClient(said("Yes, windy."))
    agent = make_agent(provider, client)
    await agent.run("Really?", session=AgentSession(session_id="imported"))
    sent = client.calls[-1]
    assert client.texts() == [
        "Weather in Faro?",
        "function_call",
        "function_result",
        "Windy in Faro.",
        "Really?",
    ]
    assert sent[1]["contents"][0]["arguments"] == {"city": "Faro"}
    assert sent[2]["contents"][0]["result"] == "windy"
    assert sent[0]["message_id"] == thread.messages[0].id


# -- what save_messages skips and refuses ---------------------------------------------------


async def test_messages_the_thread_already_ends_with_are_not_stored_again() -> None:
    provider = ThreadHistoryProvider()
    first = [FrameworkMessage("user", ["Hi"]), said("Hello.")]
    await provider.save_messages("s", first)
    await provider.save_messages("s", first)  # the same batch again
    replay = [*await provider.get_messages("s"), FrameworkMessage("user", ["More?"])]
    await provider.save_messages("s", replay)  # the whole transcript, read back, plus one
    with_ids = [FrameworkMessage("user", ["x"], message_id="i1")]
    await provider.save_messages("s", with_ids)
    await provider.save_messages("s", with_ids)
    assert [m.text for m in await provider.get_messages("s")] == ["Hi", "Hello.", "More?", "x"]


async def test_a_user_repeating_the_same_words_is_stored_twice() -> None:
    provider = ThreadHistoryProvider()
    await provider.save_messages("s", [FrameworkMessage("user", ["Again?"])])
    await provider.save_messages("s", [FrameworkMessage("user", ["Again?"])])
    assert [m.text for m in await provider.get_messages("s")] == ["Again?", "Again?"]


async def test_a_replay_with_a_prefix_stores_only_what_follows_the_thread() -> None:
    provider = ThreadHistoryProvider()
    await provider.save_messages("s", [FrameworkMessage("user", ["Hi"]), said("Hello.")])
    prefix = FrameworkMessage("system", ["Instructions."])
    incoming = [prefix, FrameworkMessage("user", ["Hi"]), said("Hello."), said("More.")]
    await provider.save_messages("s", incoming)
    assert [m.text for m in await provider.get_messages("s")] == ["Hi", "Hello.", "More."]


@pytest.mark.parametrize("session_id", [None, "", "../escape", "a/b", "x" * 129])
async def test_a_session_id_that_is_no_thread_id_is_refused(session_id: str | None) -> None:
    provider = ThreadHistoryProvider()
    with pytest.raises(InvalidIdError):
        await provider.save_messages(session_id, [FrameworkMessage("user", ["Hi"])])
    with pytest.raises(InvalidIdError):
        await provider.get_messages(session_id)
    assert await provider.store.list_records("thread") == []


async def test_a_message_that_is_not_json_is_refused_and_nothing_is_written() -> None:
    provider = ThreadHistoryProvider()
    bad = FrameworkMessage("user", ["NaN"], additional_properties={"score": float("nan")})
    with pytest.raises(InvalidValueError):
        await provider.save_messages("s", [FrameworkMessage("user", ["Hi"]), bad])
    assert await provider.get_messages("s") == []


async def test_a_session_never_saved_has_no_history_and_no_thread() -> None:
    provider = ThreadHistoryProvider()
    assert await provider.get_messages("never") == []
    assert await provider.checkpoints("never") == []
    assert await provider.store.list_records("thread") == []


def test_importing_without_agent_framework_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['agent_framework'] = None\n"
        "try:\n"
        "    import agent_threads.integrations.agent_framework\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert "pip install 'agent-threads-framework[agent-framework]'" in done.stdout


def test_the_stored_copy_is_plain_json() -> None:
    stored = from_framework(varied_messages()[3])
    assert json.loads(json.dumps(stored.metadata[FRAMEWORK_KEY]))["message_id"] == "chatcmpl-1"
