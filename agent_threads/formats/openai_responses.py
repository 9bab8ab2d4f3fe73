"""OpenAI Responses API items: `from_items` reads input or output items, `to_items` writes them.

The Responses API (and the Conversations API, and the Agents SDK) speak in *items*:
`message`, `function_call`, `function_call_output`, `reasoning`, and a score of tool
calls. Reading, each item becomes one `Message` whose id is the item's id (a new
`msg_...`, `fc_...`, `fco_...` or `rs_...` id when the item has none):

- `message` (and the input-only form without `type`, whose `content` may be a string)
  -> its role (`developer` reads as `system`, other roles as the nearest one) with a
  `TextPart` per `input_text`/`output_text`/`refusal` part and a `DataPart` per image
  or file given by URL or data.
- `function_call` -> an assistant message with one `ToolCallPart` (arguments decoded).
- `function_call_output` -> a tool message with one `ToolResultPart` (`output` as given:
  text, or a list of content parts).
- `reasoning` -> an assistant message with one `ThinkingPart` per summary part.
  `encrypted_content` is OpenAI's and stays opaque in the message metadata, never a
  `ThinkingPart.signature` (that field is sent to Anthropic).
- Any other item (web search, computer, MCP calls, ...) -> a message with no contents,
  the item kept whole.

Nothing is lost: whatever of an item the message's fields do not hold (a status, a
phase, annotations, a `developer` role, arguments' exact spelling, a content part the
library has no type for) is kept under `metadata["openai_item"]`, and `to_items` gives
back the item. Items come back in the form the Conversations API returns them: with
`type`, `id` and, where the form requires them, `status` ("completed") and
`annotations` ([]) filled in, so a string `content` reads back as one text part.

Writing a message that did not come from an item (native messages mix parts), its
parts go out in order as items: thinking as one `reasoning` item, text and data as one
`message` item, each tool call as a `function_call`, each tool result as a
`function_call_output` (non-text results JSON-encoded; `is_error`, `author`, times and
`usage` have no field). The first item has the message's id, the next ones
`"{id}:1"`, `"{id}:2"`, ... (`split_item_id` reads them).

`usage` (a response's `{input_tokens, output_tokens}`) given to `from_items` or read
by `from_response` goes to the last assistant message with contents (the reply), so
thread stats count it once.
"""

from __future__ import annotations

import json
import mimetypes
import secrets
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar, cast

from pydantic import BaseModel, JsonValue, ValidationError

from agent_threads.core.ids import new_id, validate_id
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
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
)

METADATA_KEY = "openai_item"
"""The message metadata key holding what of its item the message's fields do not."""

_ROLES: dict[str, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "tool": "tool",
    "developer": "system",
    "critic": "assistant",
    "discriminator": "assistant",
    "unknown": "user",
}
_ID_PREFIXES = {
    "message": "msg",
    "function_call": "fc",
    "function_call_output": "fco",
    "reasoning": "rs",
}
_TEXT_TYPES = ("input_text", "output_text", "text", "summary_text", "reasoning_text", "refusal")
_MISSING = object()

Item = dict[str, Any]


def new_item_id(kind: str = "message") -> str:
    """A new item id shaped like OpenAI's: a type prefix, `_`, then 48 hex digits.

    The first 32 digits are a UUIDv7 (ids made later sort later), the rest random.
    """
    prefix = _ID_PREFIXES.get(kind, "item")
    return f"{prefix}_{uuid.UUID(new_id()).hex}{secrets.token_hex(8)}"


def split_item_id(item_id: str) -> tuple[str, int]:
    """`(message id, position)` of an item id `to_items` wrote: `"m:2"` -> `("m", 2)`.

    An id without a `:<number>` suffix is the first (or only) item of its message.
    """
    base, colon, number = item_id.rpartition(":")
    if colon and base and number.isdigit() and number == str(int(number)) and int(number) > 0:
        return base, int(number)
    return item_id, 0


# -- writing ------------------------------------------------------------------------------


def to_items(messages: Iterable[Message]) -> list[Item]:
    """The Responses/Conversations items of these messages, in order, each with its id."""
    return [item for message in messages for item in message_items(message)]


def message_items(message: Message) -> list[Item]:
    """The items of one message: one if it came from an item, else one per part group."""
    kept = message.metadata.get(METADATA_KEY)
    if isinstance(kept, dict) and isinstance(kept.get("type"), str):
        return [_kept_item(message, kept)]
    items = [_render(kind, message, parts) for kind, parts in _groups(message.contents)]
    if not items:
        items = [_render("message", message, [])]
    return [
        {"id": message.id if position == 0 else f"{message.id}:{position}", **item}
        for position, item in enumerate(items)
    ]


def _groups(contents: Sequence[Part]) -> list[tuple[str, list[Part]]]:
    """The parts as items: reasoning first, then message content, then calls and results."""
    thinking = [p for p in contents if isinstance(p, ThinkingPart)]
    content: list[Part] = [p for p in contents if isinstance(p, TextPart | DataPart | SummaryPart)]
    groups: list[tuple[str, list[Part]]] = []
    if thinking:
        groups.append(("reasoning", list(thinking)))
    if content:
        groups.append(("message", content))
    for part in contents:
        if isinstance(part, ToolCallPart):
            groups.append(("function_call", [part]))
        elif isinstance(part, ToolResultPart):
            groups.append(("function_call_output", [part]))
    return groups


def _kept_item(message: Message, kept: Mapping[str, Any]) -> Item:
    kind = str(kept["type"])
    raw = kept.get("raw")
    if isinstance(raw, dict):  # an item the library has no parts for, kept whole
        return raw if kind == "item_reference" else {**raw, "id": message.id}
    entries = kept.get("content")
    item = {
        "id": message.id,
        **_render(
            kind, message, list(message.contents), entries if isinstance(entries, list) else None
        ),
    }
    fields = kept.get("fields")
    if isinstance(fields, dict):
        item.update(fields)
    return item


def _render(
    kind: str, message: Message, parts: Sequence[Part], entries: list[Any] | None = None
) -> Item:
    if kind == "function_call":
        call = _one(parts, ToolCallPart)
        arguments = json.dumps(call.arguments, separators=(",", ":"), ensure_ascii=False)
        return {
            "type": "function_call",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": arguments,
            "status": "completed",
        }
    if kind == "function_call_output":
        result = _one(parts, ToolResultPart)
        output = result.result if isinstance(result.result, list) else result_text(result.result)
        return {
            "type": "function_call_output",
            "call_id": result.call_id,
            "output": output,
            "status": "completed",
        }
    if kind == "reasoning":
        summary = [
            {"type": "summary_text", "text": p.text} for p in parts if isinstance(p, ThinkingPart)
        ]
        return {"type": "reasoning", "summary": summary}
    return {
        "type": "message",
        "role": message.role,
        "content": _render_content(message.role, parts, entries),
        "status": "completed",
    }


_P = TypeVar("_P", ToolCallPart, ToolResultPart)


def _one(parts: Sequence[Part], kind: type[_P]) -> _P:
    found = [p for p in parts if isinstance(p, kind)]
    if len(found) != 1:
        raise InvalidValueError(
            "message", reason=f"expected one {kind.__name__} for this item, got {len(found)}"
        )
    return found[0]


def _render_content(role: str, parts: Sequence[Part], entries: list[Any] | None) -> list[Item]:
    """The content parts; `entries` (kept from the item) restore parts as they were."""
    if entries is None or sum(1 for e in entries if not _is_raw(e)) != len(parts):
        entries = [None] * len(parts)
    out: list[Item] = []
    remaining = iter(parts)
    for entry in entries:
        if _is_raw(entry):
            out.append(dict(entry["raw"]))
            continue
        overrides = entry.get("part", {}) if isinstance(entry, dict) else {}
        out.append({**_render_part(next(remaining), role, overrides.get("type")), **overrides})
    return out


def _is_raw(entry: object) -> bool:
    return isinstance(entry, dict) and isinstance(entry.get("raw"), dict)


def _render_part(part: Part, role: str, kind: object = None) -> Item:
    if isinstance(part, DataPart):
        return _render_data(part, kind)
    text = summary_text(part) if isinstance(part, SummaryPart) else getattr(part, "text", "")
    if kind not in _TEXT_TYPES:
        kind = "output_text" if role == "assistant" else "input_text"
    if kind == "refusal":
        return {"type": "refusal", "refusal": text}
    if kind == "output_text":
        return {"type": "output_text", "text": text, "annotations": []}
    return {"type": kind, "text": text}


def _render_data(part: DataPart, kind: object) -> Item:
    location = part.uri if part.uri is not None else data_url(part.media_type, str(part.data))
    if kind != "input_file" and part.media_type.startswith("image/"):
        return {"type": "input_image", "image_url": location, "detail": "auto"}
    if part.uri is not None:
        return {"type": "input_file", "file_url": location}
    return {"type": "input_file", "file_data": location}


# -- reading ------------------------------------------------------------------------------


def from_items(
    items: Iterable[Mapping[str, Any] | BaseModel],
    *,
    usage: Mapping[str, Any] | BaseModel | None = None,
) -> list[Message]:
    """One `Message` per Responses item: dicts as sent, or the `openai` client's objects.

    `usage` (a response's usage, `{input_tokens, output_tokens, ...}`) goes to the last
    assistant message, or the last message when none is an assistant's.

    Raises:
        InvalidValueError: an item is malformed (names its index and the field).
        InvalidIdError: an item's id is not a valid id (names its index).
    """
    messages = [
        _read_item(as_mapping(raw, f"item {i}"), f"item {i}") for i, raw in enumerate(items)
    ]
    return with_usage(messages, usage)


def from_response(response: Mapping[str, Any] | BaseModel) -> list[Message]:
    """The messages of a Responses API response's `output`, its `usage` on the last reply."""
    body = as_mapping(response, "response")
    output = field(body, "output", list, "response")
    usage = body.get("usage")
    return from_items(output, usage=usage if isinstance(usage, Mapping) else None)


def _read_item(raw: Mapping[str, Any], where: str) -> Message:
    kind = raw.get("type", "message")
    if not isinstance(kind, str):
        raise InvalidValueError(where, reason=f"'type' must be a string, got {kind!r}")
    message_id = _item_id(raw, kind, where)
    if kind == "message":
        return _read_message(raw, message_id, where)
    reader = _READERS.get(kind)
    if reader is None:
        role: Role = "tool" if kind.endswith("_output") else "assistant"
        if kind == "item_reference":
            role = "user"
        kept = {k: v for k, v in raw.items() if k != "id" or kind == "item_reference"}
        return Message(
            id=message_id, role=role, metadata={METADATA_KEY: {"type": kind, "raw": kept}}
        )
    role, parts = reader(raw, where)
    return _finish(kind, message_id, role, parts, raw, None)


def _item_id(raw: Mapping[str, Any], kind: str, where: str) -> str:
    given = raw.get("id")
    if given is None or kind == "item_reference":  # a reference's id is the one it names
        return new_item_id(kind)
    return validate_id(given, what=f"{where} id")


def _finish(
    kind: str,
    message_id: str,
    role: Role,
    parts: Sequence[Part],
    raw: Mapping[str, Any],
    entries: list[Any] | None,
) -> Message:
    """The message, keeping what of `raw` its rendering would not give back."""
    bare = Message(id=message_id, role=role, contents=tuple(parts))
    rendered = _render(kind, bare, parts, entries)
    fields = {
        k: v
        for k, v in raw.items()
        if k not in ("id", "type", "content") and rendered.get(k, _MISSING) != v
    }
    kept: dict[str, Any] = {}
    if fields:
        kept["fields"] = fields
    if entries is not None and any(e is not None for e in entries):
        kept["content"] = entries
    if kept or not parts or [k for k, _ in _groups(parts)] != [kind]:
        kept = {"type": kind, **kept}
        return Message(
            id=message_id, role=role, contents=tuple(parts), metadata={METADATA_KEY: kept}
        )
    return bare


def _read_message(raw: Mapping[str, Any], message_id: str, where: str) -> Message:
    role_name = raw.get("role")
    role = _ROLES.get(role_name) if isinstance(role_name, str) else None
    if role is None:
        raise InvalidValueError(where, reason=f"unknown or missing role {role_name!r}")
    content = raw.get("content")
    if isinstance(content, str):
        content = [
            {"type": "input_text" if role != "assistant" else "output_text", "text": content}
        ]
    elif not isinstance(content, list):
        raise InvalidValueError(where, reason="'content' must be text or a list of parts")
    parts, entries = _read_content(content, role, where)
    return _finish("message", message_id, role, parts, raw, entries)


def _read_content(content: list[Any], role: str, where: str) -> tuple[list[Part], list[Any]]:
    parts: list[Part] = []
    entries: list[Any] = []
    for k, block in enumerate(content):
        raw = dict(as_mapping(block, f"{where} part {k}"))
        part = _part_of(raw)
        if part is None:
            entries.append({"raw": raw})
            continue
        rendered = _render_part(part, role, raw.get("type"))
        overrides = {n: v for n, v in raw.items() if rendered.get(n, _MISSING) != v}
        default_type = _render_part(part, role)["type"]
        if rendered["type"] != default_type:
            overrides["type"] = rendered["type"]
        parts.append(part)
        entries.append({"part": overrides} if overrides else None)
    return parts, entries


def _part_of(block: Mapping[str, Any]) -> Part | None:
    """The library part of a content part, or None to keep it as it is."""
    kind = block.get("type")
    text_field = "refusal" if kind == "refusal" else "text"
    if kind in _TEXT_TYPES and isinstance(block.get(text_field), str):
        return TextPart(text=block[text_field])
    try:
        if kind == "input_image" and isinstance(block.get("image_url"), str):
            return _data_part(block["image_url"], None)
        if kind == "input_file" and isinstance(block.get("file_data"), str):
            return _data_part(block["file_data"], None)
        if kind == "input_file" and isinstance(block.get("file_url"), str):
            filename = block.get("filename")
            hint = filename if isinstance(filename, str) else block["file_url"]
            return _data_part(block["file_url"], _file_type(hint))
    except ValidationError:  # not base64 after all: kept as it is
        return None
    return None


def _data_part(url: str, media_type: str | None) -> DataPart | None:
    parsed = parse_data_url(url)
    if parsed is not None:
        return DataPart(media_type=parsed[0], data=parsed[1])
    if url.startswith("data:"):
        return None
    return DataPart(media_type=media_type or guess_image_type(url), uri=url)


def _file_type(name: str) -> str:
    return mimetypes.guess_type(name.split("?", 1)[0])[0] or "application/octet-stream"


def _read_call(raw: Mapping[str, Any], where: str) -> tuple[Role, list[Part]]:
    arguments = raw.get("arguments", "")
    if not isinstance(arguments, str):
        raise InvalidValueError(where, reason="'arguments' must be a JSON string")
    try:
        decoded = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        decoded = None
    part = ToolCallPart(
        call_id=_nonempty(raw, "call_id", where),
        name=_nonempty(raw, "name", where),
        arguments=decoded if isinstance(decoded, dict) else {},
    )
    return "assistant", [part]


def _read_output(raw: Mapping[str, Any], where: str) -> tuple[Role, list[Part]]:
    output = raw.get("output")
    if not isinstance(output, str | list):
        raise InvalidValueError(where, reason="'output' must be text or a list of parts")
    part = ToolResultPart(call_id=_nonempty(raw, "call_id", where), result=cast(JsonValue, output))
    return "tool", [part]


def _read_reasoning(raw: Mapping[str, Any], where: str) -> tuple[Role, list[Part]]:
    summary = raw.get("summary", [])
    if not isinstance(summary, list):
        raise InvalidValueError(where, reason="'summary' must be a list")
    parts: list[Part] = []
    for k, entry in enumerate(summary):
        block = as_mapping(entry, f"{where} summary {k}")
        parts.append(ThinkingPart(text=field(block, "text", str, f"{where} summary {k}")))
    return "assistant", parts


def _nonempty(raw: Mapping[str, Any], name: str, where: str) -> str:
    value = field(raw, name, str, where)
    if not value:
        raise InvalidValueError(where, reason=f"{name!r} must not be empty")
    return cast(str, value)


_READERS = {
    "function_call": _read_call,
    "function_call_output": _read_output,
    "reasoning": _read_reasoning,
}

__all__ = [
    "METADATA_KEY",
    "from_items",
    "from_response",
    "message_items",
    "new_item_id",
    "split_item_id",
    "to_items",
]
