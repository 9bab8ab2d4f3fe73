"""workflows/_models.py: scripted and OpenAI-compatible models behind one interface."""

from __future__ import annotations

from types import ModuleType

import anyio
import pytest
from pydantic import JsonValue

from agent_threads import ChatMessageThread, Message, tool_call
from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import load_program


@pytest.fixture(scope="module")
def models() -> ModuleType:
    return load_program("_models")


async def echo(arguments: dict[str, JsonValue]) -> JsonValue:
    return {"echo": arguments["text"]}


def echo_tool(models: ModuleType) -> object:
    return models.Tool("echo", "Echo text.", models.schema({"text": {"type": "string"}}), echo)


async def test_a_scripted_reply_carries_counted_usage(models: ModuleType) -> None:
    model = models.ScriptedModel(lambda request: Message.assistant("pong"))
    reply = await model.reply([Message.user("ping")])
    assert reply.text == "pong"
    assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0


async def test_ask_answers_every_tool_call_in_the_same_write(models: ModuleType) -> None:
    calls = [
        tool_call("echo", {"text": "hi"}),
        tool_call("echo", {}),  # bad arguments: an error result, not a crash
        tool_call("missing", {}),
    ]
    model = models.ScriptedModel(lambda request: Message.assistant(tool_calls=calls))
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("go")])
    await models.ask(thread, model, author="agent", tools=[echo_tool(models)])
    roles = [m.role for m in thread.messages]
    assert roles == ["user", "assistant", "tool", "tool", "tool"]
    results = [m.tool_results[0] for m in thread.messages[2:]]
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.is_error for r in results] == [False, True, True]
    assert {m.author for m in thread.messages[1:]} == {"agent"}


async def test_work_ends_with_a_text_answer(models: ModuleType) -> None:
    def script(request: object) -> Message:
        if getattr(request, "tools", ()):
            return Message.assistant(tool_calls=[tool_call("echo", {"text": "again"})])
        return Message.assistant("done")

    model = models.ScriptedModel(script)
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("go")])
    answer = await models.work(thread, model, author="a", tools=[echo_tool(models)], max_rounds=3)
    assert answer.text == "done"
    assert [m.role for m in thread.messages].count("tool") == 2


async def test_the_openai_model_sends_the_view_and_keeps_the_usage(
    models: ModuleType, fake_model: FakeChatServer
) -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.system("Be brief."), Message.user("Echo hi.")])
    with anyio.fail_after(30):
        async with models.Models("fake-model") as chosen:
            model = chosen.get(lambda request: Message.assistant("unused"))
            answer = await models.work(thread, model, author="a", tools=[echo_tool(models)])
    assert [m.role for m in thread.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert answer.text.startswith("Fake answer")
    # from_messages reads no usage (it is on the response): OpenAIModel sets it
    assert [m.usage.input_tokens for m in thread.messages if m.usage] == [101, 102]
    first, second = fake_model.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert first["tools"][0]["function"]["name"] == "echo"
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "tool"]
    assert second["messages"][3]["tool_call_id"] == second["messages"][2]["tool_calls"][0]["id"]
    assert fake_model.invalid == []
