"""The OpenAI Responses item format, both ways, checked against the `openai` package's types."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.conversations import ConversationItem
from openai.types.responses import Response, ResponseInputItemParam
from pydantic import ConfigDict, TypeAdapter

from agent_threads import (
    ChatMessageThread,
    DataPart,
    InvalidIdError,
    InvalidValueError,
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    tool_call,
)
from agent_threads.formats import anthropic, openai_responses
from agent_threads.formats.openai_responses import (
    METADATA_KEY,
    from_items,
    from_response,
    split_item_id,
    to_items,
)

CONVERSATION_ITEM: TypeAdapter[Any] = TypeAdapter(ConversationItem)
INPUT_ITEMS = TypeAdapter(
    list[ResponseInputItemParam], config=ConfigDict(extra="forbid", strict=True)
)
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\nfake").decode()


def as_the_client_reads(item: dict[str, Any]) -> dict[str, Any]:
    """The item as the `openai` client parses it and the Agents SDK dumps it again."""
    parsed = CONVERSATION_ITEM.validate_python(item)
    dumped: dict[str, Any] = parsed.model_dump(exclude_unset=True, by_alias=True)
    return dumped


# -- strategies: items in the form the Conversations API returns them ----------------------

ids = st.from_regex(r"[a-z]{2,4}_[A-Za-z0-9]{1,24}", fullmatch=True)
texts = st.text(max_size=30)
statuses = st.sampled_from(["completed", "in_progress", "incomplete"])


def _with(optional: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Any subset of `optional`'s fields, each drawn from its strategy."""
    return st.fixed_dictionaries({}, optional=optional)


input_parts = st.one_of(
    st.builds(lambda t: {"type": "input_text", "text": t}, texts),
    st.builds(
        lambda url, detail: {"type": "input_image", "image_url": url, "detail": detail},
        st.sampled_from(["https://example.com/a.png", f"data:image/png;base64,{PNG}"]),
        st.sampled_from(["auto", "low", "high"]),
    ),
    st.builds(
        lambda name: {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PNG}",
            "filename": name,
        },
        st.sampled_from(["a.pdf", "b.pdf"]),
    ),
    st.builds(lambda f: {"type": "input_image", "file_id": f, "detail": "auto"}, ids),
)
output_parts = st.one_of(
    st.builds(
        lambda t, extra: {"type": "output_text", "text": t, "annotations": [], **extra},
        texts,
        _with({"logprobs": st.just([])}),
    ),
    st.builds(lambda t: {"type": "refusal", "refusal": t}, texts),
)


@st.composite
def message_items(draw: st.DrawFn) -> dict[str, Any]:
    role = draw(st.sampled_from(["user", "system", "developer", "assistant"]))
    parts = output_parts if role == "assistant" else input_parts
    item = {
        "id": draw(ids),
        "type": "message",
        "role": role,
        "content": draw(st.lists(parts, max_size=3)),
        "status": draw(statuses),
    }
    if role == "assistant":
        item.update(draw(_with({"phase": st.sampled_from(["commentary", "final_answer"])})))
    return item


arguments = st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3)
call_items = st.builds(
    lambda i, c, n, args, sep, s: {
        "id": i,
        "type": "function_call",
        "call_id": c,
        "name": n,
        "arguments": json.dumps(args, separators=sep),
        "status": s,
    },
    ids,
    ids,
    st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
    arguments,
    st.sampled_from([(",", ":"), (", ", ": ")]),
    statuses,
)
output_items = st.builds(
    lambda i, c, o, s: {
        "id": i,
        "type": "function_call_output",
        "call_id": c,
        "output": o,
        "status": s,
    },
    ids,
    ids,
    texts | st.lists(st.builds(lambda t: {"type": "input_text", "text": t}, texts), max_size=2),
    statuses,
)
reasoning_items = st.builds(
    lambda i, summary, extra: {"id": i, "type": "reasoning", "summary": summary, **extra},
    ids,
    st.lists(st.builds(lambda t: {"type": "summary_text", "text": t}, texts), max_size=3),
    _with(
        {
            "encrypted_content": st.text(alphabet="abcXYZ012+/=", min_size=1, max_size=20),
            "status": statuses,
        }
    ),
)
search_items = st.builds(
    lambda i, q: {
        "id": i,
        "type": "web_search_call",
        "status": "completed",
        "action": {"type": "search", "query": q},
    },
    ids,
    texts,
)
items = st.one_of(message_items(), call_items, output_items, reasoning_items, search_items)


# -- round trips ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(st.lists(items, max_size=6, unique_by=lambda i: i["id"]))
def test_items_in_the_conversation_form_come_back_exactly(drawn: list[dict[str, Any]]) -> None:
    for item in drawn:  # the strategy draws what the openai client itself accepts
        assert as_the_client_reads(item) == item
    messages = from_items(drawn)
    assert [m.id for m in messages] == [i["id"] for i in drawn]
    assert to_items(messages) == drawn


@settings(max_examples=100, deadline=None)
@given(st.lists(items, max_size=6, unique_by=lambda i: i["id"]))
def test_messages_read_from_items_survive_json(drawn: list[dict[str, Any]]) -> None:
    stored = [Message.model_validate_json(m.model_dump_json()) for m in from_items(drawn)]
    assert to_items(stored) == drawn


def test_input_forms_read_as_the_conversation_form() -> None:
    given_items: list[Any] = [
        {"role": "user", "content": "Weather in Lisbon?"},
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "x"}]},
        {"role": "assistant", "content": "Checking."},
        {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    ]
    INPUT_ITEMS.validate_python(given_items)
    out = to_items(from_items(given_items))
    assert [as_the_client_reads(item) for item in out] == out
    assert [i["id"].split("_")[0] for i in out] == ["msg", "msg", "msg", "fc", "fco"]
    assert all(len(i["id"].split("_")[1]) == 48 for i in out)
    assert out[0]["content"] == [{"type": "input_text", "text": "Weather in Lisbon?"}]
    assert out[1]["role"] == "developer"
    assert out[2]["content"] == [{"type": "output_text", "text": "Checking.", "annotations": []}]
    assert out[3]["status"] == out[4]["status"] == "completed"
    assert to_items(from_items(out)) == out


def test_item_kinds_become_the_library_parts() -> None:
    read = from_items(
        [
            {"role": "developer", "content": "Be brief."},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a": 1}'},
            {"type": "function_call_output", "call_id": "c1", "output": "done"},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "t"}]},
        ]
    )
    assert read[0].role == "system" and read[0].contents == (TextPart(text="Be brief."),)
    assert read[1].contents == (ToolCallPart(call_id="c1", name="f", arguments={"a": 1}),)
    assert read[2].role == "tool"
    assert read[2].contents == (ToolResultPart(call_id="c1", result="done"),)
    assert read[3].id == "rs_1" and read[3].contents == (ThinkingPart(text="t"),)


def test_encrypted_reasoning_stays_opaque_and_never_reaches_anthropic() -> None:
    item = {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "plan"}],
        "encrypted_content": "gAAAA-opaque",
    }
    (message,) = from_items([item])
    assert message.contents == (ThinkingPart(text="plan", signature=None),)
    assert message.metadata[METADATA_KEY] == {
        "type": "reasoning",
        "fields": {"encrypted_content": "gAAAA-opaque"},
    }
    assert to_items([message]) == [item]
    _, sent = anthropic.to_messages([Message.user("hi"), message])
    assert "gAAAA-opaque" not in json.dumps(sent)


def test_unknown_item_types_are_kept_whole() -> None:
    item = {"id": "ci_1", "type": "code_interpreter_call", "code": "1+1", "status": "completed"}
    reference = {"type": "item_reference", "id": "msg_1"}
    kept, ref = from_items([item, reference])
    assert kept.id == "ci_1" and kept.contents == ()
    assert ref.id != "msg_1"  # a reference's id names another item, not itself
    assert to_items([kept, ref]) == [item, reference]


def test_data_parts_are_images_and_files() -> None:
    (message,) = from_items(
        [
            {
                "role": "user",
                "content": [
                    {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}"},
                    {"type": "input_file", "file_url": "https://example.com/r.pdf"},
                ],
            }
        ]
    )
    assert message.contents == (
        DataPart(media_type="image/png", data=PNG),
        DataPart(media_type="application/pdf", uri="https://example.com/r.pdf"),
    )


def test_arguments_that_are_not_a_json_object_are_kept_as_written() -> None:
    item = {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "c",
        "name": "f",
        "arguments": '{"partial": ',
        "status": "incomplete",
    }
    (message,) = from_items([item])
    assert message.tool_calls[0].arguments == {}
    assert to_items([message]) == [item]


# -- native messages -----------------------------------------------------------------------


def test_native_messages_are_items_in_order_with_derived_ids() -> None:
    call = tool_call("weather", {"city": "Lisbon"})
    reply = Message.assistant("Checking.", tool_calls=[call], thinking=ThinkingPart(text="hm"))
    answer = Message.tool_result(call.call_id, {"temp": 24})
    out = to_items([reply, answer])
    assert [i["type"] for i in out] == [
        "reasoning",
        "message",
        "function_call",
        "function_call_output",
    ]
    assert [i["id"] for i in out] == [reply.id, f"{reply.id}:1", f"{reply.id}:2", answer.id]
    assert [split_item_id(i["id"]) for i in out[:3]] == [
        (reply.id, 0),
        (reply.id, 1),
        (reply.id, 2),
    ]
    assert out[2]["arguments"] == '{"city":"Lisbon"}'
    assert out[3]["output"] == '{"temp": 24}'  # non-text results are JSON text
    for item in out:
        assert as_the_client_reads(item) == item


native_messages = st.one_of(
    st.builds(Message.user, texts),
    st.builds(Message.system, texts),
    st.builds(lambda t: Message.assistant(t), texts),
    st.builds(
        lambda name, args: Message.assistant(tool_calls=[tool_call(name, args)]),
        st.from_regex(r"[a-z]{1,8}", fullmatch=True),
        arguments,
    ),
    st.builds(lambda c, r: Message.tool_result(c, r), ids, texts),
    st.builds(
        lambda ts: Message.assistant(thinking=ThinkingPart(text=ts)),
        texts,
    ),
)


@settings(max_examples=100, deadline=None)
@given(st.lists(native_messages, max_size=6))
def test_native_messages_of_one_item_each_read_back_the_same(messages: list[Message]) -> None:
    out = to_items(messages)
    back = from_items(out)
    assert [(m.id, m.role, m.contents) for m in back] == [
        (m.id, m.role, m.contents) for m in messages
    ]
    assert [as_the_client_reads(item) for item in out] == out


# -- usage ---------------------------------------------------------------------------------


async def test_a_responses_usage_reaches_the_thread_stats() -> None:
    response = Response.model_validate(
        {
            "id": "resp_1",
            "object": "response",
            "created_at": 1,
            "model": "gpt-test",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {"id": "rs_1", "type": "reasoning", "summary": []},
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "status": "completed",
                    "content": [{"type": "output_text", "text": "Hi!", "annotations": []}],
                },
            ],
            "usage": {
                "input_tokens": 12,
                "output_tokens": 5,
                "total_tokens": 17,
                "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
                "output_tokens_details": {"reasoning_tokens": 2},
            },
        }
    )
    messages = from_response(response)
    assert messages[0].usage is None
    assert messages[1].usage is not None and messages[1].usage.output_tokens == 5
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("Hello"), *messages])
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (12, 5)


def test_usage_goes_to_the_last_reply() -> None:
    read = from_items(
        [{"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}],
        usage={"input_tokens": 1, "output_tokens": 2},
    )
    assert read[0].usage is not None and read[1].usage is None


# -- refusals ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("item", "named"),
    [
        ({"type": "message", "content": "no role"}, "role"),
        ({"role": "user", "content": 3}, "content"),
        ({"type": "function_call", "name": "f", "arguments": "{}"}, "call_id"),
        ({"type": "function_call_output", "call_id": "c"}, "output"),
        ({"role": "user", "content": "x", "id": "../etc"}, "id"),
        ({"type": "reasoning", "summary": "text"}, "summary"),
    ],
)
def test_malformed_items_are_refused_naming_the_field(item: dict[str, Any], named: str) -> None:
    with pytest.raises((InvalidValueError, InvalidIdError), match=named) as raised:
        from_items([{"role": "user", "content": "fine"}, item])
    assert "item 1" in str(raised.value)


def test_the_module_is_reachable_from_formats() -> None:
    assert openai_responses.to_items is to_items
