"""OpenAI Chat Completions messages: `to_messages` for a request, `from_messages` to read one.

Mapping (what is lost is said here once):

- `system` -> `{"role": "system", "content": text}`; `user` -> text, or content parts when
  it holds data: images as `image_url` (a URI, or a `data:` URL for base64 data), wav/mp3
  audio as `input_audio`, other base64 data as `file`.
- `assistant` -> `content` (its text, or None beside tool calls) and `tool_calls`
  (`{"id", "type": "function", "function": {"name", "arguments": JSON text}}`).
  Thinking parts are left out: Chat Completions takes no reasoning input.
- Each tool result (in any message) -> `{"role": "tool", "tool_call_id", "content"}`;
  string results are sent as they are, other JSON encoded. `is_error` has no field here.
- Tool results go right after the message holding their call, as the API requires, and a
  call with no result in the list gets what `unanswered_tool_calls` says (by default a
  synthetic "interrupted" result; see `agent_threads.views.answers`). A result whose call
  is not in the list is sent where it stands.
- A summary part becomes text headed "Summary of earlier messages:".
- `author` -> `name` when it fits OpenAI's name pattern. Ids, times, usage and metadata have
  no place in a request and are not sent.

`from_messages` reads such a list back (also `developer` messages, as system, and a reply's
`refusal` as its text, so a refused turn is not read as an empty one). Tool
contents stay text: `from_messages(to_messages(x))` gives back `x` when its tool results are
strings and follow their calls, and `to_messages` of that is always the same request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel

from agent_threads.errors import InvalidValueError
from agent_threads.formats._parts import (
    as_mapping,
    data_url,
    field,
    guess_image_type,
    parse_data_url,
    result_text,
    summary_text,
    with_usage,
)
from agent_threads.messages import (
    DataPart,
    Message,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)
from agent_threads.views.answers import arrange, check_mode

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_AUDIO_FORMATS = {"audio/wav": "wav", "audio/x-wav": "wav", "audio/mpeg": "mp3", "audio/mp3": "mp3"}
_AUDIO_TYPES = {"wav": "audio/wav", "mp3": "audio/mpeg"}


def to_messages(
    messages: Iterable[Message],
    *,
    unanswered_tool_calls: Literal["interrupt", "drop", "error", "keep"] = "interrupt",
) -> list[dict[str, Any]]:
    """The Chat Completions `messages` for a `ContextView` or any messages, in order.

    Each call's results come right after its message. A tool call with no result among
    `messages` (a process stopped before it was recorded) gets, by `unanswered_tool_calls`:
    "interrupt" a tool message saying it was interrupted, "drop" nothing (the call is left
    out, and its message when nothing else remains), "error" `UnansweredToolCallError`,
    "keep" the call as written (to convert part of a conversation, not a whole request).
    A view is already in this shape and is sent as it is.

    Raises:
        UnansweredToolCallError: "error", and a call has no result.
        ValueError: a message holds something Chat Completions cannot take (names it), or
            the policy is unknown.
    """
    out: list[dict[str, Any]] = []
    arranged = arrange(list(messages), check_mode(unanswered_tool_calls))
    for message in arranged:
        out.extend(_results(message))
        rest = [p for p in message.contents if not isinstance(p, ToolResultPart)]
        if rest or not message.tool_results:
            out.append(_message(message, rest))
    return out


def _results(message: Message) -> list[dict[str, Any]]:
    return [
        {"role": "tool", "tool_call_id": part.call_id, "content": result_text(part.result)}
        for part in message.tool_results
    ]


def _message(message: Message, parts: Sequence[Part]) -> dict[str, Any]:
    if message.role == "tool":
        raise ValueError(
            f"message {message.id!r}: an OpenAI tool message holds tool results only,"
            f" not {', '.join(p.type for p in parts)}"
        )
    if message.role == "assistant":
        out = _assistant(message, parts)
    elif message.role == "user":
        out = {"role": "user", "content": _user_content(message, parts)}
    else:
        out = {"role": "system", "content": _plain_text(message, parts)}
    if message.author is not None and _NAME.match(message.author):
        out["name"] = message.author
    return out


def _text(part: Part) -> str | None:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, SummaryPart):
        return summary_text(part)
    return None


def _plain_text(message: Message, parts: Sequence[Part]) -> str:
    texts = []
    for part in parts:
        text = _text(part)
        if text is None and not isinstance(part, ThinkingPart):
            raise ValueError(
                f"message {message.id!r}: a {message.role} message for OpenAI holds text only,"
                f" not a {part.type} part"
            )
        if text is not None:
            texts.append(text)
    return "".join(texts)


def _user_content(message: Message, parts: Sequence[Part]) -> str | list[dict[str, Any]]:
    if not any(isinstance(p, DataPart) for p in parts):
        return _plain_text(message, parts)
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, DataPart):
            content.append(_data(message, part))
        elif (text := _text(part)) is not None:
            content.append({"type": "text", "text": text})
        else:
            raise InvalidValueError(
                f"message {message.id!r}", reason=f"a user message cannot hold {part.type}"
            )
    return content


def _data(message: Message, part: DataPart) -> dict[str, Any]:
    if part.media_type.startswith("image/"):
        url = part.uri if part.uri is not None else data_url(part.media_type, str(part.data))
        return {"type": "image_url", "image_url": {"url": url}}
    if part.data is None:
        raise ValueError(
            f"message {message.id!r}: OpenAI takes {part.media_type} by data, not by URI"
        )
    audio = _AUDIO_FORMATS.get(part.media_type)
    if audio is not None:
        return {"type": "input_audio", "input_audio": {"data": part.data, "format": audio}}
    return {"type": "file", "file": {"file_data": data_url(part.media_type, part.data)}}


def _assistant(message: Message, parts: Sequence[Part]) -> dict[str, Any]:
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    text = _plain_text(message, [p for p in parts if not isinstance(p, ToolCallPart)])
    out: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if calls:
        out["tool_calls"] = [
            {
                "id": call.call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.arguments)},
            }
            for call in calls
        ]
    return out


# -- reading ------------------------------------------------------------------------------


def from_messages(
    messages: Iterable[Mapping[str, Any] | BaseModel],
    *,
    usage: Mapping[str, Any] | BaseModel | None = None,
) -> list[Message]:
    """`Message`s from Chat Completions messages: dicts as sent, or the client's reply objects.

    `usage` (a completion's `{prompt_tokens, completion_tokens}`) goes to the last
    assistant message, so the thread's stats count it (`from_completion` reads a whole
    completion, usage included).

    Raises:
        ValueError: an entry is not a message this format knows (names its index).
    """
    out: list[Message] = []
    for i, raw in enumerate(messages):
        where = f"message {i}"
        item = as_mapping(raw, where)
        role = item.get("role")
        author = item.get("name") if isinstance(item.get("name"), str) else None
        if role in ("system", "developer"):
            out.append(Message(role="system", author=author, contents=_text_parts(item, where)))
        elif role == "user":
            out.append(Message(role="user", author=author, contents=_user_parts(item, where)))
        elif role == "assistant":
            out.append(Message(role="assistant", author=author, contents=_reply(item, where)))
        elif role == "tool":
            call_id = field(item, "tool_call_id", str, where)
            text = "".join(p.text for p in _text_parts(item, where))
            out.append(Message.tool_result(call_id, text))
        else:
            raise InvalidValueError(where, reason=f"unknown or unsupported role {role!r}")
    return with_usage(out, usage)


def from_completion(completion: Mapping[str, Any] | BaseModel) -> list[Message]:
    """The reply of a completion (`client.chat.completions.create(...)`), with its usage.

    The first choice's message; its usage on it.

    Raises:
        ValueError: the completion has no choice, or its message is not one this format knows.
    """
    body = as_mapping(completion, "completion")
    choices = field(body, "choices", list, "completion")
    if not choices:
        raise InvalidValueError("completion", reason="it has no choices")
    message = field(as_mapping(choices[0], "completion choice 0"), "message", Mapping, "choice 0")
    usage = body.get("usage")
    return from_messages([message], usage=usage if isinstance(usage, Mapping) else None)


def _content_blocks(item: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    content = item.get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    if not isinstance(content, list):
        raise InvalidValueError(
            where, reason=f"content must be text or a list of parts, got {content!r}"
        )
    return [as_mapping(block, f"{where} part {k}") for k, block in enumerate(content)]


def _text_parts(item: Mapping[str, Any], where: str) -> tuple[TextPart, ...]:
    parts: list[TextPart] = []
    for block in _content_blocks(item, where):
        kind = block.get("type")
        if kind not in ("text", "refusal"):
            raise InvalidValueError(where, reason=f"expected text parts, got a {kind!r} part")
        parts.append(TextPart(text=field(block, str(kind), str, where)))
    return tuple(parts)


def _user_parts(item: Mapping[str, Any], where: str) -> tuple[Part, ...]:
    parts: list[Part] = []
    for block in _content_blocks(item, where):
        kind = block.get("type")
        if kind == "text":
            parts.append(TextPart(text=field(block, "text", str, where)))
        elif kind == "image_url":
            url = field(field(block, "image_url", Mapping, where), "url", str, where)
            parts.append(_data_part(url, where))
        elif kind == "input_audio":
            audio = field(block, "input_audio", Mapping, where)
            audio_format = field(audio, "format", str, where)
            media_type = _AUDIO_TYPES.get(audio_format, f"audio/{audio_format}")
            parts.append(DataPart(media_type=media_type, data=field(audio, "data", str, where)))
        elif kind == "file":
            file = field(block, "file", Mapping, where)
            parts.append(_data_part(field(file, "file_data", str, where), where))
        else:
            raise InvalidValueError(where, reason=f"unsupported content part type {kind!r}")
    return tuple(parts)


def _data_part(url: str, where: str) -> DataPart:
    parsed = parse_data_url(url)
    if parsed is not None:
        return DataPart(media_type=parsed[0], data=parsed[1])
    if url.startswith("data:"):
        raise InvalidValueError(where, reason=f"a data URL must be base64: {url[:40]!r}...")
    return DataPart(media_type=guess_image_type(url), uri=url)


def _reply(item: Mapping[str, Any], where: str) -> tuple[Part, ...]:
    parts: list[Part] = list(_text_parts(item, where))
    refusal = item.get("refusal")
    if isinstance(refusal, str) and refusal:  # a reply's refusal: its only text
        parts.append(TextPart(text=refusal))
    for call in item.get("tool_calls") or []:
        call = as_mapping(call, where)
        function = field(call, "function", Mapping, f"{where} tool call")
        arguments = function.get("arguments") or "{}"
        try:
            decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
        except json.JSONDecodeError as exc:
            raise InvalidValueError(
                where, reason=f"tool call arguments are not JSON: {exc}"
            ) from exc
        if not isinstance(decoded, dict):
            raise InvalidValueError(where, reason="tool call arguments must be a JSON object")
        parts.append(
            ToolCallPart(
                call_id=field(call, "id", str, where),
                name=field(function, "name", str, where),
                arguments=decoded,
            )
        )
    return tuple(parts)


__all__ = ["from_completion", "from_messages", "to_messages"]
