"""The Agents SDK's `OpenAIConversationsSession` over `/v1`, driving a `Runner` for several turns.

The model is the SDK's own scripted test double (`agents.testing.ScriptedModel`); the
session is the SDK's, unmodified, on the unmodified `openai` client pointed at the app.
So every history read and every save goes through the service's `/v1` routes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

import openai
import pytest
from agents import Agent, OpenAIConversationsSession, RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from fastapi import FastAPI

from agent_threads import ChatMessageThread, MemoryStore
from agent_threads.stores.tenant import TenantStore
from tests.server.conftest import KEYS
from tests.server.v1_helpers import openai_client

NO_TRACES = RunConfig(tracing_disabled=True)  # nothing leaves the machine


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"24 C and sunny in {city}"


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai_client(app, KEYS["acme"]) as opened:
        yield opened


def kinds_and_texts(items: Sequence[Any]) -> list[tuple[str, str]]:
    """Each item's type and its text, call or output, to compare histories briefly."""
    out = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            text = content if isinstance(content, str) else content[0]["text"]
            out.append((f"{item['role']}", text))
        elif kind == "function_call":
            out.append(("call", f"{item['name']}{item['arguments']}"))
        elif kind == "function_call_output":
            out.append(("output", str(item["output"])))
        else:
            out.append((kind, ""))
    return out


async def test_a_runner_keeps_every_turn_in_the_conversation(
    client: openai.AsyncOpenAI, store: MemoryStore
) -> None:
    model = ScriptedModel(
        [
            [assistant_message("Hello Ana.")],
            [function_call("weather", {"city": "Lisbon"}, call_id="call_1")],
            [assistant_message("It is 24 C and sunny in Lisbon.")],
            [assistant_message("You are Ana, asking about Lisbon.")],
        ]
    )
    agent = Agent(name="helper", instructions="Be brief.", model=model, tools=[weather])
    session = OpenAIConversationsSession(openai_client=client)

    first = await Runner.run(agent, "Hi, I am Ana.", session=session, run_config=NO_TRACES)
    assert first.final_output == "Hello Ana."
    second = await Runner.run(agent, "Weather in Lisbon?", session=session, run_config=NO_TRACES)
    assert second.final_output == "It is 24 C and sunny in Lisbon."
    third = await Runner.run(agent, "Who am I?", session=session, run_config=NO_TRACES)
    assert third.final_output == "You are Ana, asking about Lisbon."

    expected = [
        ("user", "Hi, I am Ana."),
        ("assistant", "Hello Ana."),
        ("user", "Weather in Lisbon?"),
        ("call", 'weather{"city":"Lisbon"}'),
        ("output", "24 C and sunny in Lisbon"),
        ("assistant", "It is 24 C and sunny in Lisbon."),
        ("user", "Who am I?"),
        ("assistant", "You are Ana, asking about Lisbon."),
    ]
    # the session reads its history back through /v1 ...
    assert kinds_and_texts(await session.get_items()) == expected
    # ... the model saw it on each turn (the third turn's input is the whole conversation) ...
    assert kinds_and_texts(model.calls[3].input) == expected[:-1]
    # ... and the conversation is a thread of the tenant, holding every turn's messages
    thread = await ChatMessageThread.load(session.session_id, store=TenantStore(store, "acme"))
    roles = [m.role for m in thread.messages]
    assert roles == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]
    assert thread.messages[3].tool_calls[0].arguments == {"city": "Lisbon"}
    model.assert_complete()


async def test_limited_history_pop_and_clear(client: openai.AsyncOpenAI) -> None:
    session = OpenAIConversationsSession(openai_client=client)
    turns = [{"role": "user", "content": f"turn {i}"} for i in range(25)]
    await session.add_items(turns[:20])  # type: ignore[arg-type]
    await session.add_items(turns[20:])  # type: ignore[arg-type]

    latest = await session.get_items(limit=3)  # newest first, no limit sent: default pages
    assert kinds_and_texts(latest) == [("user", f"turn {i}") for i in (22, 23, 24)]
    assert len(await session.get_items()) == 25  # asc, after=last_id until has_more is false

    popped = await session.pop_item()
    assert popped is not None and kinds_and_texts([dict(popped)]) == [("user", "turn 24")]
    assert kinds_and_texts(await session.get_items(limit=1)) == [("user", "turn 23")]

    conversation_id = session.session_id
    await session.clear_session()
    with pytest.raises(openai.NotFoundError):
        await client.conversations.retrieve(conversation_id)
    assert await session.get_items() == []  # a new conversation starts on next use
    assert session.session_id != conversation_id


async def test_items_come_back_as_the_session_saved_them(client: openai.AsyncOpenAI) -> None:
    session = OpenAIConversationsSession(openai_client=client)
    reasoning = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Check the tool first."}],
        "encrypted_content": "gAAAAB-opaque",
    }
    call = {
        "type": "function_call",
        "call_id": "call_9",
        "name": "weather",
        "arguments": json.dumps({"city": "Porto"}),
    }
    await session.add_items([reasoning, call])  # type: ignore[list-item]
    reasoning_back, call_back = await session.get_items()
    assert reasoning_back == reasoning  # encrypted content and id kept as they were
    assert {k: v for k, v in call_back.items() if k not in ("id", "status")} == call
