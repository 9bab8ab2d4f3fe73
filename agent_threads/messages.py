"""Messages: the frozen, JSON-round-tripping unit every thread is made of."""

from __future__ import annotations

import base64
import binascii
import gc
import weakref
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, NoReturn, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    JsonValue,
    TypeAdapter,
    field_validator,
    model_validator,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from agent_threads.core.ids import new_id

FROZEN = ConfigDict(frozen=True, extra="forbid")

Role = Literal["system", "user", "assistant", "tool"]


class _SharedEmptyDict(dict[str, JsonValue]):
    """The one empty dict that every message without metadata (or call without arguments) holds.

    An empty dict each would cost 64 bytes a message (a ninth of a typical message's JSON).
    Sharing a mutable one would be unsafe: a change made through one message would show
    in every message. This one is read-only instead: its mutating methods raise
    `TypeError`. It is still a `dict` (for `isinstance`), equals `{}` and serializes as
    `{}`; a copy of it (`.copy()`, `dict(...)`, `copy.copy`, `copy.deepcopy`, `|`) is a
    new plain dict, free to change, and unpickling gives the shared one back.
    """

    __slots__ = ()

    def __init__(self) -> None:  # no argument: nothing can fill it, even `__init__` again
        super().__init__()

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError(
            "a message's empty metadata or arguments dict is shared and read-only;"
            " to change it, validate a new message (see `Message`)"
        )

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> dict[str, JsonValue]:
        return {}

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, JsonValue]:
        return {}

    def __reduce__(self) -> str:
        return "_EMPTY"


_EMPTY = _SharedEmptyDict()


def _empty() -> dict[str, JsonValue]:
    return _EMPTY


def _shared_if_empty(value: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return value or _EMPTY


_JsonObject = Annotated[dict[str, JsonValue], AfterValidator(_shared_if_empty)]
"""A dict of JSON values, validated; an empty one is `_EMPTY`, shared and read-only."""


class TextPart(BaseModel):
    """Plain text."""

    model_config = FROZEN
    type: Literal["text"] = "text"
    text: str


class ToolCallPart(BaseModel):
    """A request by the model to call a tool; a `ToolResultPart` with its call_id answers it."""

    model_config = FROZEN
    type: Literal["tool_call"] = "tool_call"
    call_id: str = Field(min_length=1)
    name: str = Field(min_length=1)
    arguments: _JsonObject = Field(default_factory=_empty)


class ToolResultPart(BaseModel):
    """The outcome of a tool call, matched to its call by `call_id`."""

    model_config = FROZEN
    type: Literal["tool_result"] = "tool_result"
    call_id: str = Field(min_length=1)
    result: JsonValue = None
    is_error: bool = False


class ThinkingPart(BaseModel):
    """Model reasoning; `signature` is the provider's opaque proof, kept verbatim."""

    model_config = FROZEN
    type: Literal["thinking"] = "thinking"
    text: str
    signature: str | None = None


class DataPart(BaseModel):
    """Binary content (an image, a file) given by URI or as base64 data, with its media type."""

    model_config = FROZEN
    type: Literal["data"] = "data"
    media_type: str = Field(min_length=1)
    uri: str | None = None
    data: str | None = None

    @field_validator("data")
    @classmethod
    def _data_is_base64(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                base64.b64decode(value, validate=True)
            except binascii.Error as exc:
                raise ValueError(f"data is not valid base64: {exc}") from exc
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Self:
        if (self.uri is None) == (self.data is None):
            raise ValueError("a data part needs exactly one of uri or data")
        return self


class SummaryPart(BaseModel):
    """Condensation: stands for the messages from `start_id` to `end_id` (inclusive)."""

    model_config = FROZEN
    type: Literal["summary"] = "summary"
    text: str
    start_id: str = Field(min_length=1)
    end_id: str = Field(min_length=1)


Part = Annotated[
    TextPart | ToolCallPart | ToolResultPart | ThinkingPart | DataPart | SummaryPart,
    Field(discriminator="type"),
]


class Usage(BaseModel):
    """What producing a message cost: tokens in and out, and money if known."""

    model_config = FROZEN
    input_tokens: int = Field(default=0, ge=0)
    output_tokens: int = Field(default=0, ge=0)
    cost: float = Field(default=0.0, ge=0)


def _now() -> datetime:
    return datetime.now(UTC)


def _to_utc(value: datetime) -> datetime:
    return value.astimezone(UTC)


class _UtcTime:
    """The type of `Message.created_at`: a time with a time zone, turned into UTC.

    Parsed by pydantic-core alone from JSON that is UTC already (offset 0, as every
    stored row is written), so loading a thread runs no Python for its times; any other
    offset, and every Python value, goes through `_to_utc`. Naive times are refused.
    """

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        aware = core_schema.no_info_after_validator_function(
            _to_utc, core_schema.datetime_schema(tz_constraint="aware")
        )
        utc = core_schema.datetime_schema(tz_constraint=0)
        from_json = core_schema.union_schema(
            [(utc, "UTC"), (aware, "other offset")], mode="left_to_right"
        )
        return core_schema.json_or_python_schema(json_schema=from_json, python_schema=aware)

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return handler(core_schema.datetime_schema())


class Message(BaseModel):
    """One message of a thread. Frozen: nothing reachable from a thread changes in place.

    `metadata` and tool-call `arguments` are dicts and read-only by convention; to derive
    a changed message, validate again: `Message.model_validate({**m.model_dump(), ...})`.
    An empty one is enforced read-only: all messages share one empty dict (memory), whose
    mutating methods raise `TypeError`, so no change can leak into every message.
    """

    model_config = FROZEN
    id: str = Field(default_factory=new_id, min_length=1, max_length=128)
    role: Role
    author: str | None = None
    contents: tuple[Part, ...] = ()
    created_at: Annotated[datetime, _UtcTime] = Field(default_factory=_now)
    usage: Usage | None = None
    metadata: _JsonObject = Field(default_factory=_empty)

    @classmethod
    def user(cls, text: str, *, author: str | None = None, **fields: Any) -> Message:
        """A user message holding `text`."""
        return cls(role="user", author=author, contents=(TextPart(text=text),), **fields)

    @classmethod
    def system(cls, text: str, **fields: Any) -> Message:
        """A system message (instructions) holding `text`."""
        return cls(role="system", contents=(TextPart(text=text),), **fields)

    @classmethod
    def assistant(
        cls,
        text: str | None = None,
        *,
        tool_calls: Sequence[ToolCallPart] = (),
        thinking: ThinkingPart | None = None,
        author: str | None = None,
        usage: Usage | None = None,
        **fields: Any,
    ) -> Message:
        """An assistant message: optional thinking, then text, then tool calls."""
        parts: list[Part] = []
        if thinking is not None:
            parts.append(thinking)
        if text is not None:
            parts.append(TextPart(text=text))
        parts.extend(tool_calls)
        return cls(role="assistant", author=author, contents=tuple(parts), usage=usage, **fields)

    @classmethod
    def tool_result(
        cls,
        call_id: str,
        result: JsonValue,
        *,
        is_error: bool = False,
        author: str | None = None,
        **fields: Any,
    ) -> Message:
        """A tool message answering the tool call `call_id`."""
        part = ToolResultPart(call_id=call_id, result=result, is_error=is_error)
        return cls(role="tool", author=author, contents=(part,), **fields)

    @classmethod
    def summary(cls, text: str, *, start_id: str, end_id: str, **fields: Any) -> Message:
        """A summary message standing for the messages `start_id` .. `end_id`."""
        part = SummaryPart(text=text, start_id=start_id, end_id=end_id)
        return cls(role=fields.pop("role", "assistant"), contents=(part,), **fields)

    @property
    def text(self) -> str:
        """The concatenated text parts (empty when there are none)."""
        return "".join(p.text for p in self.contents if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        """The tool calls this message makes."""
        return tuple(p for p in self.contents if isinstance(p, ToolCallPart))

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        """The tool results this message carries."""
        return tuple(p for p in self.contents if isinstance(p, ToolResultPart))


def tool_call(
    name: str, arguments: dict[str, JsonValue] | None = None, *, call_id: str | None = None
) -> ToolCallPart:
    """Build a tool call part with a fresh call id unless one is given."""
    return ToolCallPart(call_id=call_id or f"call_{new_id()}", name=name, arguments=arguments or {})


MESSAGES_ADAPTER: TypeAdapter[tuple[Message, ...]] = TypeAdapter(tuple[Message, ...])


# -- ids minted for input ---------------------------------------------------------------

_MINTED: weakref.WeakValueDictionary[int, Message] = weakref.WeakValueDictionary()
"""The messages `note_minted` noted and no append claimed yet, by identity (a message is
not hashable); each leaves when claimed, or when nothing else holds it."""


def note_minted(messages: Iterable[Message]) -> None:
    """Note the messages made just now from input that came without an id.

    Each such message holds an id `new_id` minted for it as it was made, so no thread
    can hold that id yet: the first append offered the message may skip looking its id
    up (`claim_minted`). For a service's request bodies, right after validating them,
    before anything else can see the messages. Not for a message that may be a copy of
    an older one (`model_copy` keeps the id and the fields given): only the object given
    is noted, and only if it is a plain `Message` whose fields given leave out `id` (a
    message built with an id, as a format's reader builds them, is not).
    """
    for message in messages:
        if type(message) is Message and "id" not in message.model_fields_set:
            _MINTED[id(message)] = message


def claim_minted(message: Message) -> bool:
    """Whether `message` is one `note_minted` noted, unclaimed; it is claimed now.

    True at most once per message, so a message offered to two appends (or to one,
    twice) has its id looked up by all but the first.
    """
    return bool(_MINTED) and _MINTED.pop(id(message), None) is message  # none noted: no pop


def unclaimed(messages: list[Message]) -> list[Message]:
    """The messages of a batch that `claim_minted` does not claim (it claims the others).

    With no message noted (every append outside a service), the batch as it is, with no
    look at each message.
    """
    if not _MINTED:
        return messages
    return [m for m in messages if not claim_minted(m)]


# -- stored rows ------------------------------------------------------------------------

_ROWS_ADAPTER: TypeAdapter[list[Message]] = TypeAdapter(
    list[Message], config=ConfigDict(cache_strings="keys")
)
"""Validates a JSON array of rows; caching only keys, as ids and texts do not repeat."""

_ALL_FIELDS: dict[type[BaseModel], set[str]] = {
    model: set(model.model_fields)
    for model in (
        Message,
        Usage,
        TextPart,
        ToolCallPart,
        ToolResultPart,
        ThinkingPart,
        DataPart,
        SummaryPart,
    )
}
"""Each model's field names: the `model_fields_set` its decoded instances share."""

_FIELDS_SET = BaseModel.__dict__["__pydantic_fields_set__"]
"""The slot holding each model instance's fields set (its `__get__` / `__set__` are the
fastest way to it: no attribute lookup through the class each time)."""


def _share_fields_sets(messages: list[Message]) -> None:
    """Give every message, part and usage that was given all its fields one shared set.

    pydantic gives each instance a set of the fields it was given. Rows hold them all,
    and a set each costs more memory than most of a message's own fields (and the
    garbage collector's time). pydantic only reads it, and copies it before changing a
    copy's (`model_copy(update=...)`), so the shared set never changes.
    """
    get, put = _FIELDS_SET.__get__, _FIELDS_SET.__set__
    all_fields = _ALL_FIELDS
    message_fields, usage_fields = all_fields[Message], all_fields[Usage]
    message_count, usage_count = len(message_fields), len(usage_fields)
    text_fields = all_fields[TextPart]  # the usual part, told apart without a lookup
    for message in messages:
        if len(get(message)) == message_count:
            put(message, message_fields)
        for part in message.contents:
            if type(part) is TextPart:  # always given both: its tag and its required text
                put(part, text_fields)
                continue
            fields = all_fields[type(part)]
            if len(get(part)) == len(fields):
                put(part, fields)
        usage = message.usage
        if usage is not None and len(get(usage)) == usage_count:
            put(usage, usage_fields)


def decode_arrays(arrays: Iterable[tuple[int, str]]) -> list[Message]:
    """The messages of stored rows given as JSON arrays: `(length, "[row,row,...]")`.

    Each row is a `Message.model_dump_json()`. One pydantic-core call per array (the
    times, UTC, run no Python; see `_UtcTime`); the messages equal what
    `Message.model_validate_json` gives row by row.

    Raises:
        ValueError: some row is not one valid message (which one is for the caller to
            find, row by row); a `pydantic.ValidationError` when it does not validate.
    """
    messages: list[Message] = []
    with _collector_paused():
        for length, array in arrays:
            decoded = _ROWS_ADAPTER.validate_json(array)
            if len(decoded) != length:  # a row holding two messages, or half of one
                raise ValueError(f"{length} rows hold {len(decoded)} messages")
            _share_fields_sets(decoded)
            messages += decoded
    return messages


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection inside (if it was enabled): for a decode, which never awaits.

    A decode allocates several tracked objects per message and keeps them all, so the
    collections their allocation triggers traverse the same new messages again and
    again (and, where few objects are long-lived, whole collections run): about half
    the time of decoding thousands of messages. Validation makes no reference cycles,
    so nothing waits for the collector meanwhile; it runs as usual afterwards.
    """
    if not gc.isenabled():  # the caller's choice: leave it
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
