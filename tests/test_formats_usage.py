"""`usage` reaches thread stats through every provider format's `from_*` function."""

from __future__ import annotations

from typing import Any

import pytest
from openai.types.chat import ChatCompletion

from agent_threads import ChatMessageThread, InvalidValueError, Message, Usage
from agent_threads.formats import anthropic, openai, openai_responses


def completion(**usage: Any) -> ChatCompletion:
    """A Chat Completions reply as the `openai` client returns it."""
    return ChatCompletion.model_validate(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-test",
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": "Hello!"},
                }
            ],
            "usage": usage,
        }
    )


async def test_a_chat_completions_usage_reaches_the_thread_stats() -> None:
    reply = openai.from_completion(
        completion(prompt_tokens=11, completion_tokens=3, total_tokens=14)
    )
    assert [m.text for m in reply] == ["Hello!"]
    thread = await ChatMessageThread.create()
    await thread.on_new_messages([Message.user("Hi"), *reply])
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (11, 3)


def test_from_messages_puts_usage_on_the_last_reply() -> None:
    read = openai.from_messages(
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello"},
            {"role": "tool", "tool_call_id": "c", "content": "x"},
        ],
        usage={"prompt_tokens": 5, "completion_tokens": 2},
    )
    assert [m.usage for m in read] == [None, Usage(input_tokens=5, output_tokens=2), None]
    assert openai.from_messages([{"role": "user", "content": "Hi"}])[0].usage is None


async def test_an_anthropic_replys_usage_reaches_the_thread_stats() -> None:
    reply = anthropic.from_response(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": [{"type": "text", "text": "Hello!"}],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 9, "output_tokens": 4, "cache_read_input_tokens": 100},
        }
    )
    assert [(m.role, m.text) for m in reply] == [("assistant", "Hello!")]
    thread = await ChatMessageThread.create()
    await thread.on_new_messages(reply)
    assert (thread.stats.input_tokens, thread.stats.output_tokens) == (9, 4)


def test_anthropic_from_messages_takes_usage() -> None:
    read = anthropic.from_messages(
        [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}],
        usage={"input_tokens": 1, "output_tokens": 2},
    )
    assert read[1].usage == Usage(input_tokens=1, output_tokens=2)


def test_responses_usage_takes_the_same_path() -> None:
    read = openai_responses.from_items(
        [{"role": "assistant", "content": "Hi"}], usage={"input_tokens": 3, "output_tokens": 1}
    )
    assert read[0].usage == Usage(input_tokens=3, output_tokens=1)


@pytest.mark.parametrize("usage", [{"prompt_tokens": -1}, {"output_tokens": "many"}])
def test_a_malformed_usage_is_refused(usage: dict[str, Any]) -> None:
    with pytest.raises(InvalidValueError, match="usage"):
        openai.from_messages([{"role": "assistant", "content": "x"}], usage=usage)


def test_a_completion_without_choices_is_refused() -> None:
    with pytest.raises(InvalidValueError, match="no choices"):
        openai.from_completion({"choices": []})
