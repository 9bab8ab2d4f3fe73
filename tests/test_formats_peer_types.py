"""`formats.anthropic` and `formats.openai` checked against the provider packages' own types.

Requests are validated by the SDKs' request types (`anthropic.types.MessageParam`, the
`system` parameter's type, `openai.types.chat.ChatCompletionMessageParam`) so strictly that
a key they do not know, a missing one or a wrong value fails (the negative tests prove it).
Replies are the SDKs' own reply objects (`anthropic.types.Message`,
`openai.types.chat.ChatCompletion`), read with `from_response` / `from_completion` and sent
back with `to_messages`.
"""

from __future__ import annotations

import base64
import json
import typing
from typing import Any

import anthropic as anthropic_sdk
import pytest
from anthropic.types import MessageParam
from anthropic.types import message_create_params as anthropic_create
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam
from pydantic import BaseModel, ConfigDict, JsonValue, TypeAdapter

from agent_threads import (
    ChatMessageThread,
    DataPart,
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
    tool_call,
)
from agent_threads.formats import anthropic as anthropic_format
from agent_threads.formats import openai as chat_format
from agent_threads.views.answers import INTERRUPTED

try:  # both SDKs speak httpx2 from their current majors on
    import httpx2 as http
except ImportError:  # pragma: no cover
    import httpx as http  # type: ignore[no-redef]

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()
PDF = base64.b64encode(b"%PDF-1.4 fake").decode()

# extra="forbid" and strict reach every TypedDict without a config of its own; those with one
# (the base64 sources) drop an unknown key instead, which the equality in `checked` catches
STRICT = ConfigDict(extra="forbid", strict=True)
ANTHROPIC_MESSAGES: TypeAdapter[Any] = TypeAdapter(list[MessageParam], config=STRICT)
ANTHROPIC_SYSTEM: TypeAdapter[Any] = TypeAdapter(
    typing.get_type_hints(anthropic_create.MessageCreateParamsNonStreaming)["system"],
    config=STRICT,
)
CHAT_MESSAGES: TypeAdapter[Any] = TypeAdapter(list[ChatCompletionMessageParam], config=STRICT)


def _consume(value: Any) -> Any:
    """A validated value as plain data: lazy Iterable fields run, reply objects refused."""
    if isinstance(value, BaseModel):
        # the request unions also take the SDK's reply models (lenient, extra keys allowed):
        # a dict that only fits one of those is not a request block
        raise ValueError(f"matched only the reply model {type(value).__name__}: {value!r}")
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return [_consume(v) for v in value]


def checked(adapter: TypeAdapter[Any], request: Any) -> Any:
    """`request` as the SDK's type reads it; ValueError unless every key and value is its own."""
    seen = _consume(adapter.validate_python(request))
    if seen != request:  # a key was dropped or a value coerced on the way
        raise ValueError(f"the SDK type reads {request!r} as {seen!r}")
    return seen


def check_anthropic(request: anthropic_format.AnthropicMessages) -> None:
    checked(ANTHROPIC_MESSAGES, request.messages)
    if request.system is not None:
        checked(ANTHROPIC_SYSTEM, request.system)


# -- Anthropic: requests ---------------------------------------------------------------------


def every_kind() -> list[Message]:
    """A conversation holding every part the Anthropic format sends."""
    weather = tool_call("get_weather", {"city": "Lisbon", "days": [1, 2], "units": {"t": "C"}})
    failing = tool_call("book", {"nights": 3, "late": None, "vip": True})
    lost = tool_call("cancel", {})
    return [
        Message.system("You are a travel agent."),
        Message.user("Weather in Lisbon?", author="ana"),
        Message(
            role="user",
            contents=(
                TextPart(text="And these?"),
                DataPart(media_type="image/png", data=PNG),
                DataPart(media_type="image/jpeg", uri="https://example.com/a.jpg"),
                DataPart(media_type="application/pdf", data=PDF),
                DataPart(media_type="application/pdf", uri="https://example.com/plan.pdf"),
            ),
        ),
        Message.assistant(
            "Checking.",
            thinking=ThinkingPart(text="Two tools.", signature="EqQBCkYIBxgCKkD"),
            tool_calls=[weather, failing],
        ),
        Message.tool_result(weather.call_id, {"temp": 24, "sky": "sunny"}),
        Message.tool_result(failing.call_id, "no rooms", is_error=True),
        Message.system("Answer in one line."),
        Message.summary("They chose Lisbon.", start_id="m1", end_id="m9", role="user"),
        Message.assistant("Private.", thinking=ThinkingPart(text="unsigned")),
        Message.assistant(tool_calls=[lost]),  # its result was never written
        Message.user("Still there?"),
    ]


def test_every_kind_of_anthropic_block_validates_against_the_sdk_types() -> None:
    request = anthropic_format.to_messages(every_kind())
    check_anthropic(request)
    assert request.system == "You are a travel agent.\n\nAnswer in one line."
    kinds = [[b["type"] for b in m["content"]] for m in request.messages]
    assert kinds == [
        ["text", "text", "image", "image", "document", "document"],
        ["thinking", "text", "tool_use", "tool_use"],
        ["tool_result", "tool_result", "text"],
        ["text", "tool_use"],  # the unsigned thinking is left out
        ["tool_result", "text"],
    ]
    failed = request.messages[2]["content"][1]
    assert failed["is_error"] is True and failed["content"] == "no rooms"
    assert request.messages[4]["content"][0]["content"] == INTERRUPTED


async def test_an_anthropic_request_goes_through_the_client_unchanged() -> None:
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(every_kind())
    request = anthropic_format.to_messages(await thread.view(max_tokens=10_000, keep_first=1))
    check_anthropic(request)
    seen: dict[str, Any] = {}

    def reply(sent: http.Request) -> http.Response:
        seen.update(json.loads(sent.content))
        return http.Response(200, json=anthropic_reply())

    client = anthropic_sdk.AsyncAnthropic(
        api_key="test",
        base_url="http://model.invalid",
        http_client=http.AsyncClient(transport=http.MockTransport(reply)),
    )
    response = await client.messages.create(
        model="claude-test", max_tokens=1024, **request.as_kwargs()
    )
    assert seen["messages"] == request.messages and seen["system"] == request.system
    assert isinstance(response, anthropic_sdk.types.Message)
    await thread.on_new_messages(anthropic_format.from_response(response))
    assert thread.messages[-1].tool_calls[0].name == "get_time"
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (420, 96)


def _valid_messages() -> list[dict[str, Any]]:
    return anthropic_format.to_messages(every_kind()).messages


def _set(path: tuple[int | str, ...], value: Any) -> list[dict[str, Any]]:
    request = _valid_messages()
    target: Any = request
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return request


def _drop(path: tuple[int | str, ...]) -> list[dict[str, Any]]:
    request = _valid_messages()
    target: Any = request
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return request


@pytest.mark.parametrize(
    "request_",
    [
        pytest.param(_set((0, "content", 0, "colour"), "red"), id="unknown key in a text block"),
        pytest.param(_set((0, "content", 2, "source", "x"), 1), id="unknown key in a source"),
        pytest.param(_set((0, "content", 2, "source", "media_type"), "image/tiff"), id="tiff"),
        pytest.param(_set((1, "content", 0, "signature"), None), id="thinking without signature"),
        pytest.param(_drop((1, "content", 2, "input")), id="tool_use without input"),
        pytest.param(_set((1, "content", 2, "input"), "{}"), id="tool_use input as text"),
        pytest.param(_set((2, "content", 1, "is_error"), "yes"), id="is_error not a bool"),
        pytest.param(_drop((2, "content", 0, "tool_use_id")), id="tool_result without id"),
        pytest.param(_set((3, "role"), "tool"), id="role tool"),
        pytest.param(_set((0, "content", 0, "type"), "input_text"), id="openai part type"),
    ],
)
def test_the_anthropic_check_refuses_a_malformed_request(request_: list[dict[str, Any]]) -> None:
    with pytest.raises(ValueError):
        checked(ANTHROPIC_MESSAGES, request_)


def test_the_anthropic_system_check_refuses_what_the_sdk_does_not_take() -> None:
    checked(ANTHROPIC_SYSTEM, "rules")
    for system in ([{"type": "text", "text": "rules", "extra": 1}], 3):
        with pytest.raises(ValueError):
            checked(ANTHROPIC_SYSTEM, system)


def test_a_base64_image_the_messages_api_cannot_take_is_refused() -> None:
    tiff = Message(role="user", contents=(DataPart(media_type="image/tiff", data=PNG),))
    with pytest.raises(ValueError, match="image/tiff"):
        anthropic_format.to_messages([tiff])
    by_url = Message(role="user", contents=(DataPart(media_type="image/tiff", uri="https://x/a"),))
    check_anthropic(anthropic_format.to_messages([by_url]))  # a URL source names no type


def test_empty_text_is_not_sent_to_the_messages_api() -> None:
    # the API answers 400 "text content blocks must be non-empty"; the SDK types allow one
    messages = [
        Message.user("Hi"),
        Message.assistant(""),
        Message.user(""),
        Message.assistant("", tool_calls=[tool_call("f", call_id="toolu_1")]),
        Message.tool_result("toolu_1", ""),
    ]
    request = anthropic_format.to_messages(messages)
    check_anthropic(request)
    texts = [b["text"] for m in request.messages for b in m["content"] if b["type"] == "text"]
    assert texts == ["Hi"]
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]


# -- Anthropic: replies ---------------------------------------------------------------------


def anthropic_reply(**usage: Any) -> dict[str, Any]:
    """A Messages API reply as the API sends it: thinking, text, a tool call, cache usage."""
    return {
        "id": "msg_01XFDUDYJgAACzvnptvVoYEL",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [
            {"type": "thinking", "thinking": "The user asks the time.", "signature": "EqQBCkYI"},
            {"type": "text", "text": "Let me check.", "citations": None},
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": "get_time",
                "input": {"tz": "Europe/Lisbon", "format": {"24h": True}},
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 420,
            "output_tokens": 96,
            "cache_creation_input_tokens": 1500,
            "cache_read_input_tokens": 3000,
            "cache_creation": {"ephemeral_5m_input_tokens": 1500, "ephemeral_1h_input_tokens": 0},
            "server_tool_use": None,
            "service_tier": "standard",
            **usage,
        },
    }


def test_an_anthropic_reply_object_becomes_one_assistant_message_with_its_usage() -> None:
    response = anthropic_sdk.types.Message.model_validate(anthropic_reply())
    (message,) = anthropic_format.from_response(response)
    assert message.role == "assistant"
    assert message.contents == (
        ThinkingPart(text="The user asks the time.", signature="EqQBCkYI"),
        TextPart(text="Let me check."),
        ToolCallPart(
            call_id="toolu_01A09q90qw90lq917835lq9",
            name="get_time",
            arguments={"tz": "Europe/Lisbon", "format": {"24h": True}},
        ),
    )
    # input tokens as reported: the cache's reads and writes are not added (formats/_parts.py)
    assert message.usage == Usage(input_tokens=420, output_tokens=96)


def test_an_anthropic_reply_goes_back_as_the_api_returned_it() -> None:
    response = anthropic_sdk.types.Message.model_validate(anthropic_reply())
    reply = anthropic_format.from_response(response)
    result = Message.tool_result("toolu_01A09q90qw90lq917835lq9", "14:05")
    request = anthropic_format.to_messages([Message.user("Time?"), *reply, result])
    check_anthropic(request)
    # the blocks the SDK's own `to_param()` would send back, less its null fields
    assert request.messages[1] == {
        "role": "assistant",
        "content": [block.model_dump(exclude_none=True) for block in response.content],
    }
    assert [m["role"] for m in request.messages] == ["user", "assistant", "user"]


def test_an_anthropic_reply_object_built_without_validation_reads_the_same() -> None:
    validated = anthropic_sdk.types.Message.model_validate(anthropic_reply())
    constructed = anthropic_sdk.types.Message.model_construct(
        **{**anthropic_reply(), "content": validated.content, "usage": validated.usage}
    )
    assert _essence(anthropic_format.from_response(constructed)) == _essence(
        anthropic_format.from_response(validated)
    )


def test_an_anthropic_reply_of_text_only_with_no_cache_fields_reads() -> None:
    body = {**anthropic_reply(), "content": [{"type": "text", "text": "Hi!"}]}
    body["usage"] = {"input_tokens": 5, "output_tokens": 2}
    (message,) = anthropic_format.from_response(anthropic_sdk.types.Message.model_validate(body))
    assert message.contents == (TextPart(text="Hi!"),)
    assert message.usage == Usage(input_tokens=5, output_tokens=2)


async def test_an_empty_anthropic_reply_still_counts_its_usage() -> None:
    # the API can answer end_turn with no content (e.g. right after tool results)
    body = {**anthropic_reply(), "content": [], "stop_reason": "end_turn"}
    reply = anthropic_format.from_response(anthropic_sdk.types.Message.model_validate(body))
    assert _essence(reply) == [("assistant", (), Usage(input_tokens=420, output_tokens=96))]
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("Go."), *reply])
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (420, 96)
    request = anthropic_format.to_messages([*thread.messages, Message.user("Go on.")])
    check_anthropic(request)  # the empty turn is not sent
    assert request.messages == [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Go."}, {"type": "text", "text": "Go on."}],
        }
    ]


@pytest.mark.xfail(
    reason="formats.anthropic has no part for redacted_thinking (Message has no opaque"
    " thinking part), so a reply holding one is refused instead of kept to send back",
    raises=ValueError,
    strict=True,
)
def test_an_anthropic_reply_with_redacted_thinking_can_be_sent_back() -> None:
    body = anthropic_reply()
    body["content"] = [{"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}]
    body["content"] += anthropic_reply()["content"][1:]
    response = anthropic_sdk.types.Message.model_validate(body)
    reply = anthropic_format.from_response(response)
    request = anthropic_format.to_messages([Message.user("Time?"), *reply])
    assert request.messages[1]["content"][0] == body["content"][0]


# -- Anthropic: round trips over generated conversations ----------------------------------------

_WORDS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=12)
_JSON: st.SearchStrategy[JsonValue] = st.recursive(
    st.none() | st.booleans() | st.integers() | _WORDS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_WORDS, inner, max_size=3),
    max_leaves=6,
)
_ARGUMENTS = st.dictionaries(_WORDS, _JSON, max_size=3)
_IMAGES = st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"])
_URLS = st.sampled_from(
    [
        ("image/png", "https://example.com/cat.png"),
        ("image/jpeg", "https://example.com/a.jpg?size=2"),
        ("image/gif", "https://example.com/x.gif"),
    ]
)
_DATA = st.one_of(
    st.builds(lambda t: DataPart(media_type=t, data=PNG), _IMAGES),
    st.builds(lambda tu: DataPart(media_type=tu[0], uri=tu[1]), _URLS),
    st.just(DataPart(media_type="application/pdf", data=PDF)),
    st.just(DataPart(media_type="application/pdf", uri="https://example.com/doc.pdf")),
)
_USER_PARTS = st.lists(st.builds(TextPart, text=_WORDS) | _DATA, min_size=1, max_size=4)


@st.composite
def _assistant_turn(draw: st.DrawFn) -> list[Message]:
    """An assistant message (maybe signed thinking, text, calls) and the results of its calls."""
    thinking = draw(st.none() | st.builds(ThinkingPart, text=_WORDS, signature=_WORDS))
    calls = [
        tool_call(draw(st.sampled_from(["search", "get_time"])), draw(_ARGUMENTS))
        for _ in range(draw(st.integers(0, 3)))
    ]
    text = draw(st.none() | _WORDS) if calls else draw(_WORDS)
    turn = [Message.assistant(text, tool_calls=calls, thinking=thinking)]
    for call in calls:
        result, is_error = draw(_WORDS), draw(st.booleans())
        turn.append(Message.tool_result(call.call_id, result, is_error=is_error))
    return turn


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    out = [Message.system(t) for t in draw(st.lists(_WORDS, max_size=2))]
    for _ in range(draw(st.integers(1, 6))):
        if draw(st.booleans()):
            out.append(Message(role="user", contents=tuple(draw(_USER_PARTS))))
        else:
            out.extend(draw(_assistant_turn()))
    return out


def _sent_parts(messages: list[Message]) -> list[Part]:
    """The parts a request carries, in order: all but the system prompt's."""
    return [p for m in messages if m.role != "system" for p in m.contents]


def _essence(messages: list[Message]) -> list[tuple[Any, ...]]:
    return [(m.role, m.contents, m.usage) for m in messages]


@settings(max_examples=150)
@given(conversation=conversations())
def test_any_conversation_is_a_valid_anthropic_request_that_reads_back(
    conversation: list[Message],
) -> None:
    request = anthropic_format.to_messages(conversation)
    check_anthropic(request)
    back = anthropic_format.from_messages(request.messages, system=request.system)
    system = [m.text for m in conversation if m.role == "system"]
    assert [m.text for m in back if m.role == "system"] == (["\n\n".join(system)] if system else [])
    assert _sent_parts(back) == _sent_parts(conversation)
    assert anthropic_format.to_messages(back) == request  # a fixed point


@settings(max_examples=50)
@given(turn=_assistant_turn(), usage=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
def test_any_anthropic_reply_reads_into_the_same_parts_and_usage(
    turn: list[Message], usage: tuple[int, int]
) -> None:
    """Generated reply → the SDK's `Message` → `from_response` → the parts it was made of."""
    assistant = turn[0]
    blocks = anthropic_format.to_messages([assistant], unanswered_tool_calls="keep").messages
    body = {
        **anthropic_reply(input_tokens=usage[0], output_tokens=usage[1]),
        "content": blocks[0]["content"],
    }
    response = anthropic_sdk.types.Message.model_validate(body)
    (message,) = anthropic_format.from_response(response)
    assert message.contents == assistant.contents
    assert message.usage == Usage(input_tokens=usage[0], output_tokens=usage[1])


# -- Chat Completions -------------------------------------------------------------------------


def completion(message: dict[str, Any], **usage: Any) -> ChatCompletion:
    """A Chat Completions reply object, as the `openai` client returns it."""
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
            "object": "chat.completion",
            "created": 1741569952,
            "model": "gpt-test",
            "system_fingerprint": "fp_44709d6fcb",
            "service_tier": "default",
            "choices": [
                {"index": 0, "finish_reason": "stop", "logprobs": None, "message": message},
            ],
            "usage": {
                "prompt_tokens": 1117,
                "completion_tokens": 46,
                "total_tokens": 1163,
                "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
                "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
                **usage,
            },
        }
    )


TOOL_REPLY = {
    "role": "assistant",
    "content": None,
    "refusal": None,
    "annotations": [],
    "tool_calls": [
        {
            "id": "call_12345xyz",
            "type": "function",
            "function": {"name": "get_weather", "arguments": '{"location": "Paris, France"}'},
        },
        {
            "id": "call_67890abc",
            "type": "function",
            "function": {"name": "get_time", "arguments": '{"tz": "Europe/Paris", "n": [1, 2]}'},
        },
    ],
}


def check_chat(request: list[dict[str, Any]]) -> None:
    checked(CHAT_MESSAGES, request)


def test_a_chat_completion_object_becomes_one_assistant_message_with_its_usage() -> None:
    (message,) = chat_format.from_completion(completion(TOOL_REPLY))
    assert message.role == "assistant"
    assert message.contents == (
        ToolCallPart(
            call_id="call_12345xyz", name="get_weather", arguments={"location": "Paris, France"}
        ),
        ToolCallPart(
            call_id="call_67890abc", name="get_time", arguments={"tz": "Europe/Paris", "n": [1, 2]}
        ),
    )
    assert message.usage == Usage(input_tokens=1117, output_tokens=46)


def test_a_chat_completion_goes_back_as_the_api_returned_it() -> None:
    response = completion(TOOL_REPLY)
    reply = chat_format.from_completion(response)
    results = [
        Message.tool_result("call_12345xyz", "18 C"),
        Message.tool_result("call_67890abc", "9:00"),
    ]
    request = chat_format.to_messages([Message.user("Paris?"), *reply, *results])
    check_chat(request)
    sent = response.choices[0].message.model_dump(include={"role", "content", "tool_calls"})
    assert request[1] == sent
    assert [m["role"] for m in request] == ["user", "assistant", "tool", "tool"]


def test_every_kind_of_chat_message_validates_against_the_sdk_types() -> None:
    kinds = every_kind()
    pdf_by_uri = DataPart(media_type="application/pdf", uri="https://example.com/plan.pdf")
    # Chat Completions takes a PDF by data only (formats.openai refuses one by URI)
    kinds[2] = Message(role="user", contents=tuple(p for p in kinds[2].contents if p != pdf_by_uri))
    messages = [
        *kinds,
        Message(role="user", contents=(DataPart(media_type="audio/wav", data=PNG),)),
        Message.user("hi", author="not a valid name"),  # left out: OpenAI's name pattern
    ]
    request = chat_format.to_messages(messages)
    check_chat(request)
    roles = [m["role"] for m in request]
    assert roles == [
        "system", "user", "user", "assistant", "tool", "tool", "system", "user",
        "assistant", "assistant", "tool", "user", "user", "user",
    ]  # fmt: skip
    assert request[7]["content"] == "Summary of earlier messages:\nThey chose Lisbon."
    assert request[10]["content"] == INTERRUPTED
    assert "name" not in request[-1]


def test_a_chat_refusal_is_kept_as_the_replys_text() -> None:
    refusal = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    (message,) = chat_format.from_completion(completion(refusal))
    assert message.contents == (TextPart(text="I can't help with that."),)
    request = chat_format.to_messages([Message.user("Do it."), message])
    check_chat(request)
    assert request[1] == {"role": "assistant", "content": "I can't help with that."}


def test_the_chat_check_refuses_a_malformed_request() -> None:
    good = chat_format.to_messages(
        [Message.user("hi"), *chat_format.from_completion(completion(TOOL_REPLY))],
        unanswered_tool_calls="keep",
    )
    check_chat(good)
    for path, value in [
        ((0, "colour"), "red"),
        ((1, "tool_calls", 0, "function", "arguments"), {"location": "Paris"}),
        ((1, "tool_calls", 0, "type"), "tool_use"),
        ((1, "role"), "model"),
    ]:
        bad = json.loads(json.dumps(good))
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(ValueError):
            check_chat(bad)


_REPLY_TEXT = st.none() | _WORDS


@st.composite
def chat_replies(draw: st.DrawFn) -> dict[str, Any]:
    calls = [
        {
            "id": f"call_{i}_{draw(st.from_regex(r'[A-Za-z0-9]{4,12}', fullmatch=True))}",
            "type": "function",
            "function": {
                "name": draw(st.sampled_from(["search", "get_time"])),
                "arguments": json.dumps(draw(_ARGUMENTS)),
            },
        }
        for i in range(draw(st.integers(0, 3)))
    ]
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": draw(_WORDS) if not calls else draw(_REPLY_TEXT),
    }
    if calls:
        reply["tool_calls"] = calls
    return reply


@settings(max_examples=100)
@given(reply=chat_replies(), usage=st.tuples(st.integers(0, 10**6), st.integers(0, 10**6)))
def test_any_chat_completion_reads_and_goes_back_unchanged(
    reply: dict[str, Any], usage: tuple[int, int]
) -> None:
    response = completion(reply, prompt_tokens=usage[0], completion_tokens=usage[1])
    read = chat_format.from_completion(response)
    assert read[0].usage == Usage(input_tokens=usage[0], output_tokens=usage[1])
    request = chat_format.to_messages(read, unanswered_tool_calls="keep")
    check_chat(request)
    sent = response.choices[0].message.model_dump(include={"role", "content", "tool_calls"})
    sent_calls = sent.pop("tool_calls") or []
    got_calls = request[0].pop("tool_calls", [])
    assert request[0] == sent
    assert [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in got_calls
    ] == [
        (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in sent_calls
    ]
