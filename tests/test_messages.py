from __future__ import annotations

import base64
import gc
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import JsonValue, ValidationError

from agent_threads import (
    DataPart,
    Message,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    Usage,
    tool_call,
)
from agent_threads.messages import decode_arrays

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3)
    ),
    max_leaves=8,
)


def test_constructors_set_role_and_parts() -> None:
    call = tool_call("search", {"q": "x"})
    message = Message.assistant(
        "ok", tool_calls=[call], thinking=ThinkingPart(text="hmm", signature="sig")
    )
    assert message.role == "assistant"
    assert [p.type for p in message.contents] == ["thinking", "text", "tool_call"]
    assert Message.user("hi").text == "hi"
    assert Message.system("rules").role == "system"
    result = Message.tool_result(call.call_id, {"hits": 3}, is_error=False)
    assert result.role == "tool" and result.tool_results[0].call_id == call.call_id


def test_ids_are_unique_and_time_ordered() -> None:
    ids = [Message.user("x").id for _ in range(2000)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)


def test_every_part_round_trips_through_json() -> None:
    message = Message(
        role="assistant",
        author="researcher",
        contents=(
            TextPart(text="t ✓"),
            ToolCallPart(call_id="c1", name="f", arguments={"a": [1, 2.5, None]}),
            ThinkingPart(text="th", signature="s"),
            DataPart(media_type="image/png", data=base64.b64encode(b"\x89PNG").decode()),
            DataPart(media_type="image/png", uri="https://example.org/x.png"),
            SummaryPart(text="sum", start_id="a", end_id="b"),
        ),
        usage=Usage(input_tokens=1, output_tokens=2, cost=0.25),
        metadata={"k": {"nested": True}},
    )
    assert Message.model_validate_json(message.model_dump_json()) == message


@given(result=json_values, text=st.text(), is_error=st.booleans())
def test_tool_results_round_trip_any_json(result: JsonValue, text: str, is_error: bool) -> None:
    message = Message.tool_result("call-1", result, is_error=is_error, metadata={"note": text})
    assert Message.model_validate_json(message.model_dump_json()) == message


def test_messages_are_frozen() -> None:
    message = Message.user("x")
    with pytest.raises(ValidationError):
        message.role = "assistant"
    with pytest.raises(AttributeError):
        message.contents.append(TextPart(text="y"))  # type: ignore[attr-defined]


def test_timestamps_are_utc_and_naive_ones_rejected() -> None:
    local = datetime(2026, 1, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert Message.user("x", created_at=local).created_at == local
    assert Message.user("x", created_at=local).created_at.tzinfo == UTC
    with pytest.raises(ValidationError, match="timezone"):
        Message.user("x", created_at=datetime(2026, 1, 1))


def test_bad_parts_are_rejected_with_the_reason() -> None:
    with pytest.raises(ValidationError, match="exactly one of uri or data"):
        DataPart(media_type="image/png")
    with pytest.raises(ValidationError, match="base64"):
        DataPart(media_type="image/png", data="not base64!")
    with pytest.raises(ValidationError, match="role"):
        Message.model_validate({"role": "robot"})
    with pytest.raises(ValidationError, match="type"):
        Message.model_validate({"role": "user", "contents": [{"type": "video"}]})


@pytest.mark.parametrize("enabled", [True, False])
def test_decoding_rows_leaves_the_garbage_collector_as_it_was(enabled: bool) -> None:
    messages = [Message.user(f"question {i}") for i in range(3)]
    array = "[" + ",".join(m.model_dump_json() for m in messages) + "]"
    was = gc.isenabled()
    try:
        if not enabled:
            gc.disable()
        assert decode_arrays([(3, array)]) == messages
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError, match="2 rows hold 3 messages"):
            decode_arrays([(2, array)])
        assert gc.isenabled() is enabled
        with pytest.raises(ValueError):
            decode_arrays([(1, "[{]")])
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
