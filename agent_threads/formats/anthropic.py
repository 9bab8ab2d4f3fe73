"""Anthropic Messages API messages: `to_messages` for a request, `from_messages` to read one.

The Messages API takes the system prompt apart from the messages, so `to_messages` returns
an `AnthropicMessages(system, messages)` pair (a NamedTuple: `system, messages =
to_messages(view)`), and `from_messages(messages, system=...)` takes it back.

Mapping (what is lost is said here once):

- Every `system` message's text joins `system` (blank-line separated), wherever it stood.
- `user` -> text blocks, `image` blocks (base64 JPEG, PNG, GIF or WebP, or a URL source)
  and PDF `document` blocks.
- `assistant` -> `thinking` blocks with their signature (unsigned thinking is left out: the
  API rejects it), text blocks, and `tool_use` blocks (`id`, `name`, `input`).
- Empty text is left out (the API rejects an empty text block), and so is a message left
  with nothing to send.
- Each tool result -> a `tool_result` block (`tool_use_id`, text `content`, `is_error`) in a
  user message; string results are sent as they are, other JSON encoded.
- Consecutive messages of the same API role are merged into one message (the results of
  parallel tool calls go back together, as the API asks); `from_messages` splits every
  tool result into a tool message of its own again.
- Tool results go right after the message holding their call, as the API requires, and a
  call with no result in the list gets what `unanswered_tool_calls` says (by default a
  synthetic `is_error` result saying it was interrupted; see `agent_threads.views.answers`).
  A result whose call is not in the list is sent where it stands.
- A summary part becomes text headed "Summary of earlier messages:". Authors, ids, times,
  usage and metadata have no place in a request and are not sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel

from agent_threads.errors import InvalidValueError
from agent_threads.formats._parts import (
    as_mapping,
    field,
    guess_image_type,
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

_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp")
"""The media types a base64 image source may name (a URL source names none)."""


class AnthropicMessages(NamedTuple):
    """A request's `system` prompt (None when there is none) and its `messages`."""

    system: str | None
    messages: list[dict[str, Any]]

    def as_kwargs(self) -> dict[str, Any]:
        """`messages=` and, when there is one, `system=`, for `client.messages.create(**...)`."""
        kwargs: dict[str, Any] = {"messages": self.messages}
        if self.system is not None:
            kwargs["system"] = self.system
        return kwargs


def to_messages(
    messages: Iterable[Message],
    *,
    unanswered_tool_calls: Literal["interrupt", "drop", "error", "keep"] = "interrupt",
) -> AnthropicMessages:
    """The system prompt and Messages API `messages` for a `ContextView` or any messages.

    Each call's results come right after its message. A tool call with no result among
    `messages` (a process stopped before it was recorded) gets, by `unanswered_tool_calls`:
    "interrupt" an `is_error` result saying it was interrupted, "drop" nothing (the call is
    left out, and its message when nothing else remains), "error" `UnansweredToolCallError`,
    "keep" the call as written (to convert part of a conversation, not a whole request).
    A view is already in this shape and is sent as it is.

    Raises:
        UnansweredToolCallError: "error", and a call has no result.
        ValueError: a message holds something the Messages API cannot take (names it), or
            the policy is unknown.
    """
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in arrange(list(messages), check_mode(unanswered_tool_calls)):
        if message.role == "system":
            system.append("".join(_text(message, p) for p in message.contents))
            continue
        for part in message.contents:
            block = _block(message, part)
            if block is not None:
                tool_result = isinstance(part, ToolResultPart)
                _add(
                    out,
                    "assistant" if message.role == "assistant" and not tool_result else "user",
                    block,
                )
    return AnthropicMessages("\n\n".join(system) if system else None, out)


def _add(out: list[dict[str, Any]], role: str, block: dict[str, Any]) -> None:
    """Append `block` to the last message if it has `role`, else start a message."""
    if out and out[-1]["role"] == role:
        out[-1]["content"].append(block)
    else:
        out.append({"role": role, "content": [block]})


def _text(message: Message, part: Part) -> str:
    if isinstance(part, TextPart):
        return part.text
    if isinstance(part, SummaryPart):
        return summary_text(part)
    raise InvalidValueError(
        f"message {message.id!r}", reason=f"a system prompt holds text only, not {part.type}"
    )


def _block(message: Message, part: Part) -> dict[str, Any] | None:
    if isinstance(part, TextPart | SummaryPart):
        text = _text(message, part)
        return {"type": "text", "text": text} if text else None  # the API refuses "" text
    if isinstance(part, ThinkingPart):
        if part.signature is None:
            return None
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolCallPart):
        return {"type": "tool_use", "id": part.call_id, "name": part.name, "input": part.arguments}
    if isinstance(part, ToolResultPart):
        block = {"type": "tool_result", "tool_use_id": part.call_id}
        return {**block, "content": result_text(part.result), "is_error": part.is_error}
    return _data(message, part)


def _data(message: Message, part: DataPart) -> dict[str, Any]:
    if part.media_type.startswith("image/"):
        kind = "image"
    elif part.media_type == "application/pdf":
        kind = "document"
    else:
        raise ValueError(
            f"message {message.id!r}: the Messages API takes images and PDFs, not {part.media_type}"
        )
    if part.uri is not None:
        return {"type": kind, "source": {"type": "url", "url": part.uri}}
    if kind == "image" and part.media_type not in _IMAGE_TYPES:
        raise ValueError(
            f"message {message.id!r}: the Messages API takes base64 images as"
            f" {', '.join(_IMAGE_TYPES)}, not {part.media_type}"
        )
    source = {"type": "base64", "media_type": part.media_type, "data": part.data}
    return {"type": kind, "source": source}


# -- reading ------------------------------------------------------------------------------


def from_messages(
    messages: Iterable[Mapping[str, Any] | BaseModel],
    *,
    system: str | Iterable[Any] | None = None,
    usage: Mapping[str, Any] | BaseModel | None = None,
) -> list[Message]:
    """`Message`s from a Messages API `system` and `messages` (dicts, or SDK reply objects).

    Each tool result becomes a tool message of its own, in place. `usage` (a reply's
    `{input_tokens, output_tokens}`) goes to the last assistant message, so the thread's
    stats count it (`from_response` reads a whole reply, usage included).

    Raises:
        ValueError: an entry is not a message this format knows (names its index).
    """
    out: list[Message] = []
    if system is not None:
        out.append(Message.system(_system_text(system)))
    for i, raw in enumerate(messages):
        where = f"message {i}"
        item = as_mapping(raw, where)
        role = item.get("role")
        if role not in ("user", "assistant"):
            raise InvalidValueError(
                where, reason=f"role must be 'user' or 'assistant', got {role!r}"
            )
        out.extend(_read(role, _blocks(item, where), where))
    return with_usage(out, usage)


def from_response(response: Mapping[str, Any] | BaseModel) -> list[Message]:
    """The messages of a Messages API reply (`client.messages.create(...)`), with its usage.

    A reply with no content (the API may end a turn so) is an assistant message with no
    contents, which carries the usage and which `to_messages` does not send.

    Raises:
        ValueError: the reply is not an assistant message this format knows.
    """
    reply = as_mapping(response, "response")
    usage = reply.get("usage")
    usage = usage if isinstance(usage, Mapping) else None
    message = {"role": reply.get("role"), "content": reply.get("content")}
    return from_messages([message], usage=usage) or with_usage([Message(role="assistant")], usage)


def _system_text(system: str | Iterable[Any]) -> str:
    if isinstance(system, str):
        return system
    return "".join(field(as_mapping(b, "system"), "text", str, "system") for b in system)


def _blocks(item: Mapping[str, Any], where: str) -> list[Mapping[str, Any]]:
    content = item.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if not isinstance(content, list):
        raise InvalidValueError(
            where, reason=f"content must be text or a list of blocks, got {content!r}"
        )
    return [as_mapping(block, f"{where} block {k}") for k, block in enumerate(content)]


def _read(role: str, blocks: list[Mapping[str, Any]], where: str) -> list[Message]:
    out: list[Message] = []
    parts: list[Part] = []
    for block in blocks:
        if block.get("type") == "tool_result":
            if parts:
                out.append(Message(role="user", contents=tuple(parts)))
                parts = []
            out.append(_tool_result(block, where))
        else:
            parts.append(_part(block, where))
    if parts:
        out.append(
            Message(role="assistant" if role == "assistant" else "user", contents=tuple(parts))
        )
    return out


def _tool_result(block: Mapping[str, Any], where: str) -> Message:
    content = block.get("content", "")
    if isinstance(content, list):
        texts = [field(as_mapping(b, where), "text", str, where) for b in content]
        content = "".join(texts)
    if not isinstance(content, str):
        raise InvalidValueError(where, reason=f"tool_result content must be text, got {content!r}")
    call_id = field(block, "tool_use_id", str, where)
    return Message.tool_result(call_id, content, is_error=bool(block.get("is_error", False)))


def _part(block: Mapping[str, Any], where: str) -> Part:
    kind = block.get("type")
    if kind == "text":
        return TextPart(text=field(block, "text", str, where))
    if kind == "thinking":
        signature = block.get("signature")
        return ThinkingPart(
            text=field(block, "thinking", str, where),
            signature=signature if isinstance(signature, str) else None,
        )
    if kind == "tool_use":
        return ToolCallPart(
            call_id=field(block, "id", str, where),
            name=field(block, "name", str, where),
            arguments=dict(field(block, "input", Mapping, where)),
        )
    if kind in ("image", "document"):
        source = field(block, "source", Mapping, where)
        if source.get("type") == "url":
            url = field(source, "url", str, where)
            media_type = "application/pdf" if kind == "document" else guess_image_type(url)
            return DataPart(media_type=media_type, uri=url)
        return DataPart(
            media_type=field(source, "media_type", str, where),
            data=field(source, "data", str, where),
        )
    raise InvalidValueError(where, reason=f"unsupported content block type {kind!r}")


__all__ = ["AnthropicMessages", "from_messages", "from_response", "to_messages"]
