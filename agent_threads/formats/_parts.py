"""Pieces both provider formats share: result text, summary text, data URLs, input checks."""

from __future__ import annotations

import json
import mimetypes
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, JsonValue

from agent_threads.errors import InvalidValueError
from agent_threads.messages import Message, SummaryPart, Usage

SUMMARY_HEADING = "Summary of earlier messages:"
"""How a summary part reads to a model (providers have no summary type)."""

_DATA_URL = re.compile(r"^data:(?P<media_type>[\w.+-]+/[\w.+-]+);base64,(?P<data>.*)$", re.S)


def result_text(result: JsonValue) -> str:
    """A tool result as the text a provider takes: strings as they are, other JSON encoded."""
    if isinstance(result, str):
        return result
    return json.dumps(result, ensure_ascii=False)


def summary_text(part: SummaryPart) -> str:
    return f"{SUMMARY_HEADING}\n{part.text}"


def data_url(media_type: str, data: str) -> str:
    return f"data:{media_type};base64,{data}"


def parse_data_url(url: str) -> tuple[str, str] | None:
    """`(media_type, base64 data)` of a `data:` URL, or None if it is not one."""
    match = _DATA_URL.match(url)
    return None if match is None else (match["media_type"], match["data"])


def field(block: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    """`block[name]`, checked to be a `kind`; ValueError naming `where` otherwise."""
    value = block.get(name)
    if not isinstance(value, kind):
        raise InvalidValueError(where, reason=f"{name!r} must be a {kind.__name__}, got {value!r}")
    return value


def as_mapping(value: object, where: str) -> Mapping[str, Any]:
    """`value` as a mapping; an SDK's pydantic object (a client's reply) is dumped first."""
    if isinstance(value, BaseModel):  # e.g. openai's ChatCompletionMessage
        return value.model_dump(exclude_none=True)
    if not isinstance(value, Mapping):
        raise InvalidValueError(where, reason=f"expected an object (dict), got {value!r}")
    return value


def guess_image_type(url: str) -> str:
    """The image media type a URL's extension suggests, or "image/*" when it says nothing."""
    guessed = mimetypes.guess_type(url.split("?", 1)[0])[0]
    return guessed if guessed and guessed.startswith("image/") else "image/*"


_USAGE_NAMES = (("input_tokens", "prompt_tokens"), ("output_tokens", "completion_tokens"))
"""Each count's name in the Responses and Anthropic APIs, then in Chat Completions."""


def read_usage(usage: Mapping[str, Any] | BaseModel) -> Usage:
    """A `Usage` of a provider's usage (a dict, or the SDK's object).

    Counts are `input_tokens`/`output_tokens` (Responses API; Anthropic, whose input
    tokens are taken as reported: cache reads and writes are not added) or
    `prompt_tokens`/`completion_tokens` (Chat Completions).

    Raises:
        InvalidValueError: a count is not a non-negative integer.
    """
    body = as_mapping(usage, "usage")
    counts = []
    for names in _USAGE_NAMES:
        value = next((body[n] for n in names if body.get(n) is not None), 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise InvalidValueError("usage", reason=f"{names[0]!r} must be a count, got {value!r}")
        counts.append(value)
    return Usage(input_tokens=counts[0], output_tokens=counts[1])


def with_usage(
    messages: list[Message], usage: Mapping[str, Any] | BaseModel | None
) -> list[Message]:
    """`messages` with `usage` on the reply it was spent on, counted once in thread stats.

    The reply is the last assistant message holding contents (else the last assistant
    message, else the last one). None (or no messages) changes nothing.
    """
    if usage is None or not messages:
        return messages
    replies = [i for i, m in enumerate(messages) if m.role == "assistant"]
    with_contents = [i for i in replies if messages[i].contents]
    target = (with_contents or replies or [len(messages) - 1])[-1]
    carrier = messages[target]
    out = list(messages)
    out[target] = Message.model_validate({**carrier.model_dump(), "usage": read_usage(usage)})
    return out
