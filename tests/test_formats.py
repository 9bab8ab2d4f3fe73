"""Provider formats: OpenAI Chat Completions and Anthropic Messages, both ways."""

from __future__ import annotations

import base64
import json
from typing import Any, cast

import openai as openai_sdk
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from pydantic import ConfigDict, JsonValue, TypeAdapter

from agent_threads import (
    ChatMessageThread,
    DataPart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnansweredToolCallError,
    tool_call,
)
from agent_threads.formats import anthropic, openai
from agent_threads.views.answers import INTERRUPTED

try:  # the openai SDK speaks httpx2 from version 3 on, httpx before
    import httpx2 as http
except ImportError:  # pragma: no cover
    import httpx as http  # type: ignore[no-redef]

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()

# extra="forbid": a key the SDK's request types do not know is an error, not ignored
OPENAI_REQUEST = TypeAdapter(
    list[ChatCompletionMessageParam], config=ConfigDict(extra="forbid", strict=True)
)


def validated(request: list[dict[str, Any]]) -> Any:
    """The request as the SDK's types read it (their Iterable fields validate when consumed)."""

    def consume(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: consume(v) for k, v in value.items()}
        if isinstance(value, str | int | float | bool) or value is None:
            return value
        return [consume(v) for v in value]

    return consume(OPENAI_REQUEST.validate_python(request))


def essence(messages: list[Message]) -> list[tuple[Any, ...]]:
    """What a provider format carries: role, author and contents (ids and times are new)."""
    return [(m.role, m.author, m.contents) for m in messages]


def conversation() -> list[Message]:
    call = tool_call("get_weather", {"city": "Lisbon", "days": 2})
    second = tool_call("get_time", {"tz": "Europe/Lisbon"})
    return [
        Message.system("You are a travel agent."),
        Message.user("Weather in Lisbon?", author="ana"),
        Message.assistant("Checking.", tool_calls=[call, second], author="planner"),
        Message.tool_result(call.call_id, "24 C, sunny"),
        Message.tool_result(second.call_id, "14:05"),
        Message.assistant("Warm and sunny; it is 14:05 there."),
    ]


# -- OpenAI --------------------------------------------------------------------------------


def test_openai_messages_have_the_chat_completions_shape() -> None:
    messages = conversation()
    call_id = messages[2].tool_calls[0].call_id
    out = openai.to_messages(messages)
    assert out[0] == {"role": "system", "content": "You are a travel agent."}
    assert out[1] == {"role": "user", "content": "Weather in Lisbon?", "name": "ana"}
    assert out[2]["role"] == "assistant" and out[2]["content"] == "Checking."
    assert out[2]["tool_calls"][0] == {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Lisbon", "days": 2}'},
    }
    assert out[3] == {"role": "tool", "tool_call_id": call_id, "content": "24 C, sunny"}
    assert out[5] == {"role": "assistant", "content": "Warm and sunny; it is 14:05 there."}


def test_openai_output_validates_against_the_sdk_request_types() -> None:
    messages = [
        *conversation(),
        Message(
            role="user",
            contents=(
                TextPart(text="What is in these?"),
                DataPart(media_type="image/png", data=PNG),
                DataPart(media_type="image/jpeg", uri="https://example.com/a.jpg"),
                DataPart(media_type="audio/wav", data=PNG),
                DataPart(media_type="application/pdf", data=PNG),
            ),
        ),
        Message.assistant(tool_calls=[tool_call("noop")]),
        Message.tool_result("call_x", {"ok": True, "items": [1, 2]}),
    ]
    out = openai.to_messages(messages, unanswered_tool_calls="keep")  # as written
    assert validated(out) == out
    assert out[6]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": f"data:image/png;base64,{PNG}"},
    }
    assert out[7]["content"] is None  # tool calls only
    assert json.loads(out[8]["content"]) == {"ok": True, "items": [1, 2]}


async def test_a_view_goes_through_the_real_openai_client_and_its_reply_comes_back() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(conversation())
    view = await thread.view(max_tokens=4000, keep_first=1)
    seen: dict[str, Any] = {}

    def reply(request: http.Request) -> http.Response:
        seen.update(json.loads(request.content))
        completion = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 0,
            "model": "test-model",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "tool_calls",
                    "message": {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {
                                "id": "call_9",
                                "type": "function",
                                "function": {"name": "book", "arguments": '{"nights": 3}'},
                            }
                        ],
                    },
                }
            ],
        }
        return http.Response(200, json=completion)

    client = openai_sdk.AsyncOpenAI(
        api_key="test",
        base_url="http://model.invalid/v1",
        http_client=http.AsyncClient(transport=http.MockTransport(reply)),
    )
    response = await client.chat.completions.create(
        model="test-model",
        messages=cast("list[ChatCompletionMessageParam]", openai.to_messages(view)),
    )
    assert seen["messages"] == openai.to_messages(view)
    (answer,) = openai.from_messages([response.choices[0].message])  # the SDK's own object
    assert answer.tool_calls == (
        ToolCallPart(call_id="call_9", name="book", arguments={"nights": 3}),
    )
    await thread.on_new_messages([answer])
    assert thread.messages[-1].tool_calls[0].name == "book"


def test_openai_round_trip_gives_back_the_messages() -> None:
    messages = conversation()
    assert essence(openai.from_messages(openai.to_messages(messages))) == essence(messages)


def test_openai_round_trip_keeps_images() -> None:
    message = Message(
        role="user",
        contents=(
            TextPart(text="look"),
            DataPart(media_type="image/png", data=PNG),
            DataPart(media_type="image/png", uri="https://example.com/cat.png"),
            DataPart(media_type="audio/mpeg", data=PNG),
        ),
    )
    assert essence(openai.from_messages(openai.to_messages([message]))) == essence([message])


def test_openai_request_is_a_fixed_point_of_the_round_trip() -> None:
    messages = [*conversation(), Message.tool_result("call_1", {"rows": [1, 2]})]
    once = openai.to_messages(messages)
    assert openai.to_messages(openai.from_messages(once)) == once


def test_openai_leaves_out_thinking_and_writes_summaries_as_text() -> None:
    thinking = ThinkingPart(text="hmm", signature="sig")
    out = openai.to_messages(
        [
            Message.assistant("answer", thinking=thinking),
            Message.summary("they agreed", start_id="a", end_id="b"),
        ]
    )
    assert out[0] == {"role": "assistant", "content": "answer"}
    assert out[1]["content"] == "Summary of earlier messages:\nthey agreed"


def test_openai_reads_developer_messages_as_system() -> None:
    (message,) = openai.from_messages([{"role": "developer", "content": "be brief"}])
    assert (message.role, message.text) == ("system", "be brief")


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"role": "function", "content": "x", "name": "f"}, "unsupported role 'function'"),
        ("not a dict", "expected an object"),
        ({"role": "tool", "content": "x"}, "'tool_call_id' must be a str"),
        (
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "[1]"}}],
            },
            "must be a JSON object",
        ),
        ({"role": "user", "content": [{"type": "video"}]}, "unsupported content part"),
    ],
)
def test_openai_bad_input_names_the_message(entry: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error) as caught:
        openai.from_messages([{"role": "user", "content": "fine"}, entry])
    assert "message 1" in str(caught.value)


def test_openai_refuses_what_chat_completions_cannot_take() -> None:
    pdf_by_uri = Message(
        role="user", contents=(DataPart(media_type="application/pdf", uri="https://x/y.pdf"),)
    )
    with pytest.raises(ValueError, match="by data, not by URI"):
        openai.to_messages([pdf_by_uri])
    with pytest.raises(ValueError, match="holds text only"):
        openai.to_messages([Message(role="system", contents=(pdf_by_uri.contents[0],))])


# -- Anthropic ---------------------------------------------------------------------------------


def test_anthropic_separates_the_system_prompt_and_merges_parallel_results() -> None:
    messages = conversation()
    first, second = messages[2].tool_calls
    system, out = anthropic.to_messages(messages)
    assert system == "You are a travel agent."
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert out[1]["content"] == [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": first.call_id, "name": "get_weather", "input": first.arguments},
        {"type": "tool_use", "id": second.call_id, "name": "get_time", "input": second.arguments},
    ]
    assert out[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": first.call_id,
            "content": "24 C, sunny",
            "is_error": False,
        },
        {
            "type": "tool_result",
            "tool_use_id": second.call_id,
            "content": "14:05",
            "is_error": False,
        },
    ]


def test_anthropic_keeps_thinking_with_its_signature() -> None:
    thinking = ThinkingPart(text="The user wants weather.", signature="EqQBCkYIBx...")
    message = Message.assistant("Checking.", thinking=thinking, tool_calls=[tool_call("w")])
    _, out = anthropic.to_messages([message], unanswered_tool_calls="keep")  # one message
    assert out[0]["content"][0] == {
        "type": "thinking",
        "thinking": "The user wants weather.",
        "signature": "EqQBCkYIBx...",
    }
    (back,) = anthropic.from_messages(out)
    assert back.contents == message.contents


def test_anthropic_leaves_out_unsigned_thinking() -> None:
    message = Message.assistant("ok", thinking=ThinkingPart(text="private"))
    assert anthropic.to_messages([message]).messages[0]["content"] == [
        {"type": "text", "text": "ok"}
    ]


def test_anthropic_round_trip_gives_back_the_messages() -> None:
    messages = [
        m.model_copy(update={"author": None}) for m in conversation()
    ]  # authors have no place in the Messages API
    messages.append(Message.tool_result("call_e", "failed", is_error=True))
    messages.append(
        Message(
            role="user",
            contents=(
                TextPart(text="and this?"),
                DataPart(media_type="image/png", data=PNG),
                DataPart(media_type="image/jpeg", uri="https://example.com/a.jpg"),
                DataPart(media_type="application/pdf", data=PNG),
            ),
        )
    )
    system, out = anthropic.to_messages(messages)
    back = anthropic.from_messages(out, system=system)
    assert essence(back) == essence(messages)


def test_anthropic_as_kwargs_omits_a_missing_system() -> None:
    request = anthropic.to_messages([Message.user("hi")])
    assert request.as_kwargs() == {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    }
    with_system = anthropic.to_messages([Message.system("s"), Message.user("hi")])
    assert with_system.as_kwargs()["system"] == "s"


def test_anthropic_reads_string_content_and_system_blocks() -> None:
    back = anthropic.from_messages(
        [{"role": "user", "content": "hello"}], system=[{"type": "text", "text": "rules"}]
    )
    assert [(m.role, m.text) for m in back] == [("system", "rules"), ("user", "hello")]


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"role": "system", "content": "x"}, "role must be 'user' or 'assistant'"),
        ({"role": "user", "content": 3}, "content must be text or a list"),
        ({"role": "user", "content": [{"type": "video"}]}, "unsupported content block"),
        ({"role": "assistant", "content": [{"type": "tool_use", "id": "c"}]}, "'name' must"),
    ],
)
def test_anthropic_bad_input_names_the_message(entry: Any, error: str) -> None:
    with pytest.raises(ValueError, match=error) as caught:
        anthropic.from_messages([{"role": "user", "content": "fine"}, entry])
    assert "message 1" in str(caught.value)


def test_anthropic_refuses_other_data() -> None:
    audio = Message(role="user", contents=(DataPart(media_type="audio/wav", data=PNG),))
    with pytest.raises(ValueError, match="images and PDFs"):
        anthropic.to_messages([audio])


# -- round trips, for any conversation ------------------------------------------------------

_TEXT = st.text(max_size=20)
_ARGS: st.SearchStrategy[dict[str, JsonValue]] = st.dictionaries(
    st.text(min_size=1, max_size=5), st.none() | st.integers() | st.text(max_size=5), max_size=3
)


@st.composite
def messages(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["user", "assistant", "tools"]))
        if kind == "user":
            out.append(Message.user(draw(st.text(min_size=1, max_size=20))))
        elif kind == "assistant":
            out.append(Message.assistant(draw(st.text(min_size=1, max_size=20))))
        else:
            calls = [
                tool_call(draw(st.sampled_from(["a", "b_c"])), draw(_ARGS))
                for _ in range(draw(st.integers(1, 3)))
            ]
            text = draw(st.none() | st.text(min_size=1, max_size=10))
            out.append(Message.assistant(text, tool_calls=calls))
            out.extend(Message.tool_result(c.call_id, draw(_TEXT)) for c in calls)
    return out


def _parts(message_list: list[Message]) -> list[tuple[str, tuple[Part, ...]]]:
    return [(m.role, m.contents) for m in message_list]


@settings(max_examples=100, deadline=None)
@given(conversation_=messages())
def test_any_conversation_round_trips_through_openai(conversation_: list[Message]) -> None:
    out = openai.to_messages(conversation_)
    assert validated(out) == out
    assert _parts(openai.from_messages(out)) == _parts(conversation_)


@settings(max_examples=100, deadline=None)
@given(conversation_=messages())
def test_any_conversation_round_trips_through_anthropic(conversation_: list[Message]) -> None:
    system, out = anthropic.to_messages(conversation_)
    back = anthropic.from_messages(out, system=system)
    merged = _merge_same_role(conversation_)
    assert _parts(back) == _parts(merged)


def _merge_same_role(message_list: list[Message]) -> list[Message]:
    """What Anthropic's merging of consecutive same-role turns does to plain messages."""
    out: list[Message] = []
    for m in message_list:
        if (
            out
            and m.role == out[-1].role
            and m.role in ("user", "assistant")
            and not (out[-1].tool_results or m.tool_results)
        ):
            out[-1] = Message(role=m.role, contents=out[-1].contents + m.contents)
        else:
            out.append(m)
    return out


def test_the_sdk_type_check_rejects_a_malformed_request() -> None:
    good = openai.to_messages(conversation())
    bad_call = json.loads(json.dumps(good))
    del bad_call[2]["tool_calls"][0]["function"]["arguments"]
    for request in (
        [{"role": "tool", "content": "no call id"}],
        [{**good[1], "extra": 1}],
        bad_call,
    ):
        with pytest.raises(ValueError):
            validated(request)


# -- tool calls without results ---------------------------------------------------------------


def crashed(*, text: str | None = "Checking.") -> list[Message]:
    """A conversation whose process was killed between a tool call and its result."""
    return [
        Message.system("You are a travel agent."),
        Message.user("Weather in Porto?"),
        Message.assistant(text, tool_calls=[tool_call("get_weather", {"city": "Porto"})]),
        Message.user("Hello? Are you still there?"),
    ]


def assert_openai_answers_every_call(request: list[dict[str, Any]]) -> None:
    """Chat Completions' rule: tool_calls answered by tool messages right after, and only there."""
    waiting: set[str] = set()
    for message in request:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, f"{message} answers no call before it"
            waiting.remove(message["tool_call_id"])
            continue
        assert not waiting, f"calls {waiting} are not answered before {message}"
        waiting = {call["id"] for call in message.get("tool_calls", [])}
    assert not waiting, f"calls {waiting} end the request unanswered"


def assert_anthropic_answers_every_call(messages: list[dict[str, Any]]) -> None:
    """Messages API rules: roles alternate; tool_use answered first thing in the next message."""
    waiting: set[str] = set()
    for before, message in zip([None, *messages], messages, strict=False):
        assert before is None or before["role"] != message["role"]
        blocks = message["content"]
        results = [b["tool_use_id"] for b in blocks if b["type"] == "tool_result"]
        assert [b["type"] for b in blocks[: len(results)]] == ["tool_result"] * len(results)
        assert set(results) == waiting and len(results) == len(waiting)
        uses = [b["id"] for b in blocks if b["type"] == "tool_use"]
        waiting = set(uses) if message["role"] == "assistant" else set()
    assert not waiting, f"tool_use {waiting} ends the request unanswered"


def test_openai_sends_an_interrupted_result_for_a_call_without_one() -> None:
    messages = crashed()
    call_id = messages[2].tool_calls[0].call_id
    out = openai.to_messages(messages)
    assert out[3] == {"role": "tool", "tool_call_id": call_id, "content": INTERRUPTED}
    assert out[4] == {"role": "user", "content": "Hello? Are you still there?"}
    assert validated(out) == out
    assert_openai_answers_every_call(out)


def test_anthropic_sends_an_interrupted_error_result_for_a_call_without_one() -> None:
    messages = crashed()
    call_id = messages[2].tool_calls[0].call_id
    _, out = anthropic.to_messages(messages)
    assert out[2] == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": INTERRUPTED,
                "is_error": True,
            },
            {"type": "text", "text": "Hello? Are you still there?"},
        ],
    }
    assert_anthropic_answers_every_call(out)


def test_a_request_ending_with_a_call_gets_its_interrupted_result() -> None:
    messages = crashed()[:3]  # the newest message's tools never reported back
    request = openai.to_messages(messages)
    assert request[-1]["role"] == "tool" and request[-1]["content"] == INTERRUPTED
    assert_openai_answers_every_call(request)
    _, out = anthropic.to_messages(messages)
    assert out[-1]["content"][0]["is_error"] is True
    assert_anthropic_answers_every_call(out)


def test_drop_sends_neither_the_call_nor_a_message_it_leaves_empty() -> None:
    request = openai.to_messages(crashed(), unanswered_tool_calls="drop")
    assert request[2] == {"role": "assistant", "content": "Checking."}
    assert [m["role"] for m in request] == ["system", "user", "assistant", "user"]
    bare = openai.to_messages(crashed(text=None), unanswered_tool_calls="drop")
    assert [m["role"] for m in bare] == ["system", "user", "user"]
    _, out = anthropic.to_messages(crashed(text=None), unanswered_tool_calls="drop")
    assert [m["role"] for m in out] == ["user"]  # the two user messages merge
    assert_anthropic_answers_every_call(out)


@pytest.mark.parametrize("convert", [openai.to_messages, anthropic.to_messages])
def test_error_names_the_message_and_the_call(convert: Any) -> None:
    messages = crashed()
    with pytest.raises(UnansweredToolCallError) as caught:
        convert(messages, unanswered_tool_calls="error")
    assert caught.value.message_id == messages[2].id
    assert caught.value.call_id == messages[2].tool_calls[0].call_id
    assert caught.value.thread_id is None


@pytest.mark.parametrize("convert", [openai.to_messages, anthropic.to_messages])
def test_an_unknown_policy_is_refused_by_the_converters(convert: Any) -> None:
    with pytest.raises(ValueError, match="unanswered_tool_calls"):
        convert([Message.user("hi")], unanswered_tool_calls="ignore")


def test_a_result_written_after_other_messages_is_sent_right_after_its_call() -> None:
    call = tool_call("slow")
    messages = [
        Message.user("go"),
        Message.assistant(tool_calls=[call]),
        Message.user("any news?"),
        Message.tool_result(call.call_id, "done"),
    ]
    request = openai.to_messages(messages)
    assert [m["role"] for m in request] == ["user", "assistant", "tool", "user"]
    assert_openai_answers_every_call(request)
    _, out = anthropic.to_messages(messages)
    assert_anthropic_answers_every_call(out)


async def test_a_view_of_a_crashed_thread_is_a_valid_request_in_both_formats() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([*crashed(), Message.assistant("Yes, sorry.")])
    for policy in ("interrupt", "drop"):
        view = await thread.view(keep_first=1, unanswered_tool_calls=policy)
        request = openai.to_messages(view, unanswered_tool_calls="error")  # nothing left to fix
        assert validated(request) == request
        assert_openai_answers_every_call(request)
        assert request == openai.to_messages(view.messages, unanswered_tool_calls="keep")
        assert_anthropic_answers_every_call(anthropic.to_messages(view).messages)


@st.composite
def interrupted_messages(draw: st.DrawFn) -> list[Message]:
    """Conversations where calls may never be answered, or be answered after other messages."""
    out: list[Message] = []
    waiting: list[str] = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["user", "assistant", "tools", "result"]))
        if kind == "result" and waiting:
            call_id = waiting.pop(draw(st.integers(0, len(waiting) - 1)))
            out.append(Message.tool_result(call_id, draw(_TEXT)))
        elif kind == "tools":
            calls = [tool_call("a", draw(_ARGS)) for _ in range(draw(st.integers(1, 3)))]
            out.append(Message.assistant(draw(st.none() | st.just("t")), tool_calls=calls))
            waiting += [c.call_id for c in calls]
        elif kind == "assistant":
            out.append(Message.assistant(draw(st.text(min_size=1, max_size=10))))
        else:
            out.append(Message.user(draw(st.text(min_size=1, max_size=10))))
    return out


@settings(max_examples=200, deadline=None)
@given(conversation_=interrupted_messages(), policy=st.sampled_from(["interrupt", "drop"]))
def test_any_conversation_with_lost_results_is_a_valid_request(
    conversation_: list[Message], policy: Any
) -> None:
    request = openai.to_messages(conversation_, unanswered_tool_calls=policy)
    assert validated(request) == request
    assert_openai_answers_every_call(request)
    _, out = anthropic.to_messages(conversation_, unanswered_tool_calls=policy)
    if out:
        assert_anthropic_answers_every_call(out)
