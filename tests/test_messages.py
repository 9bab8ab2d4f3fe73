from __future__ import annotations

import base64
import copy
import gc
import pickle
from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

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


# -- the shared, read-only empty dict ---------------------------------------------------

texts = st.text(max_size=20)
parts = st.one_of(
    st.builds(TextPart, text=texts),
    st.builds(
        ToolCallPart,
        call_id=st.text(min_size=1, max_size=8),
        name=st.text(min_size=1, max_size=8),
        arguments=st.dictionaries(st.text(max_size=5), json_values, max_size=2),
    ),
    st.builds(ThinkingPart, text=texts, signature=st.none() | texts),
)
messages = st.builds(
    Message,
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    author=st.none() | texts,
    contents=st.lists(parts, max_size=3).map(tuple),
    usage=st.none() | st.builds(Usage, output_tokens=st.integers(0, 100)),
    metadata=st.dictionaries(st.text(max_size=5), json_values, max_size=2),
)


def empty_dicts(message: Message) -> list[dict[str, JsonValue]]:
    calls = [p.arguments for p in message.contents if isinstance(p, ToolCallPart)]
    return [d for d in [message.metadata, *calls] if not d]


@given(message=messages)
def test_a_message_with_shared_empty_dicts_round_trips_equal_to_a_fresh_one(
    message: Message,
) -> None:
    again = Message.model_validate_json(message.model_dump_json())
    rows = decode_arrays([(1, f"[{message.model_dump_json()}]")])
    plain = Message.model_validate(message.model_dump())
    for copy_ in (again, rows[0], plain):
        assert copy_ == message
        assert copy_.model_dump() == message.model_dump()
        assert copy_.model_dump_json() == message.model_dump_json()
        assert all(d is empty_dicts(message)[0] for d in empty_dicts(copy_))
    own = message.model_copy(update={"metadata": dict(message.metadata)})  # a plain dict
    assert own == message and own.model_dump_json() == message.model_dump_json()
    assert own.model_dump() == message.model_dump()
    dumped = message.model_dump()
    assert type(dumped["metadata"]) is dict
    dumped["metadata"]["mine"] = 1  # a dump is the caller's own: it changes no message
    assert "mine" not in again.metadata and "mine" not in Message.user("x").metadata


def test_messages_without_metadata_or_arguments_share_one_empty_dict() -> None:
    row = Message.system("c").model_dump_json()
    built = [
        Message.user("a"),
        Message.assistant("b", metadata={}),
        *decode_arrays([(1, f"[{row}]")]),
    ]
    calls = [tool_call("f"), ToolCallPart(call_id="c", name="f"), tool_call("f", {})]
    empties = [m.metadata for m in built] + [c.arguments for c in calls]
    assert all(e is empties[0] for e in empties)
    assert isinstance(empties[0], dict) and empties[0] == {} and not empties[0]
    assert Message.user("d", metadata={"k": 1}).metadata == {"k": 1}


MUTATIONS = {
    "setitem": lambda d: d.__setitem__("k", 1),
    "delitem": lambda d: d.__delitem__("k"),
    "update": lambda d: d.update(k=1),
    "setdefault": lambda d: d.setdefault("k", 1),
    "pop": lambda d: d.pop("k", None),
    "popitem": lambda d: d.popitem(),
    "clear": lambda d: d.clear(),
    "ior": lambda d: d.__ior__({"k": 1}),
    "init": lambda d: d.__init__({"k": 1}),
}


@pytest.mark.parametrize("mutate", MUTATIONS.values(), ids=MUTATIONS.keys())
def test_the_shared_empty_dict_refuses_every_change(mutate: Callable[[Any], object]) -> None:
    shared = Message.user("x").metadata
    with pytest.raises(TypeError):
        mutate(shared)
    assert shared == {} and Message.user("y").metadata == {}


def test_copies_of_the_shared_empty_dict_are_plain_dicts_free_to_change() -> None:
    shared = Message.user("x").metadata
    for made in (
        shared.copy(),
        dict(shared),
        copy.copy(shared),
        copy.deepcopy(shared),
        shared | {},
        {} | shared,
        Message.user("x").model_copy(deep=True).metadata,
    ):
        assert type(made) is dict and made is not shared
        made["k"] = 1
    assert shared == {}
    message = Message.user("x")
    unpickled = pickle.loads(pickle.dumps(message))
    assert unpickled == message and unpickled.metadata is shared
