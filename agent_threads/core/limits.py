"""Limits on what is stored, checked before anything is written, so it can be read back.

A store holds JSON. A value nested deeper than `MAX_DEPTH` levels (the JSON readers of
the drivers and of pydantic refuse deep nesting), a float that JSON cannot spell (NaN,
Infinity), a NUL character (PostgreSQL cannot store one) or a message whose JSON is
longer than `MAX_MESSAGE_BYTES` would be written but could not be loaded again (or not
in every store), so they are refused at write time with an `InvalidValueError` that
names the thread and the field.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from agent_threads.errors import InvalidValueError

MAX_DEPTH = 64
"""How deeply lists and objects may nest inside one stored value."""

NUL_REASON = "holds a NUL character (U+0000), which PostgreSQL's JSON cannot store"
"""Refused in every store, so a thread can move between stores."""

SURROGATE_REASON = "holds a lone surrogate (U+D800..U+DFFF), which UTF-8 cannot encode"
"""Refused too: no store can write such text (a JSON or SQL driver fails on it)."""


def _text_problem(text: str) -> str | None:
    """Why no store could keep `text` as it is (None: any store can)."""
    if "\x00" in text:
        return NUL_REASON
    if not text.isascii():
        try:
            text.encode()
        except UnicodeEncodeError:
            return SURROGATE_REASON
    return None


MAX_MESSAGE_BYTES = 16 * 2**20
"""The longest a message's JSON may be; set this module attribute to change it."""


def check_json(value: object, where: str) -> None:
    """Raise `InvalidValueError` unless `value` is JSON that reads back as it is.

    Objects need string keys; numbers must be finite; nesting stops at `MAX_DEPTH`.
    Walks the value without recursion, so no input can overflow the stack.
    """
    stack: list[tuple[object, int, str, object]] = [(value, 0, where, None)]
    while stack:
        item, depth, parent, key = stack.pop()
        if isinstance(item, str):
            problem = _text_problem(item)
            if problem is not None:
                raise InvalidValueError(_path(parent, key), reason=problem)
            continue
        if isinstance(item, bool | int | None):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidValueError(_path(parent, key), reason=f"{item} is not a JSON number")
            continue
        if isinstance(item, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise InvalidValueError(
                    _path(parent, key), reason=f"nested deeper than {MAX_DEPTH} levels"
                )
            path = _path(parent, key)
            stack.extend(_children(item, depth + 1, path))
            continue
        raise InvalidValueError(
            _path(parent, key), reason=f"{type(item).__name__} is not a JSON value"
        )


def _children(
    item: Mapping[object, object] | list[object] | tuple[object, ...], depth: int, path: str
) -> list[tuple[object, int, str, object]]:
    if not isinstance(item, Mapping):
        return [(child, depth, path, index) for index, child in enumerate(item)]
    for key in item:
        if not isinstance(key, str):
            raise InvalidValueError(f"{path}", reason=f"key {key!r} is not a string")
        problem = _text_problem(key)
        if problem is not None:
            raise InvalidValueError(f"{path}", reason=f"key {key!r}: {problem}")
    return [(child, depth, path, key) for key, child in item.items()]


def _path(parent: str, key: object) -> str:
    if key is None:
        return parent
    return f"{parent}[{key}]" if isinstance(key, int) else f"{parent}.{key}"


def check_text(text: str, where: str) -> None:
    """Raise `InvalidValueError` if `text` holds a NUL character or a lone surrogate."""
    problem = _text_problem(text)
    if problem is not None:
        raise InvalidValueError(where, reason=problem)


def check_message_size(size: int, where: str) -> None:
    """Raise `InvalidValueError` if a message's JSON of `size` bytes is over the limit."""
    if size > MAX_MESSAGE_BYTES:
        raise InvalidValueError(
            where, reason=f"its JSON is {size:,} bytes, over the {MAX_MESSAGE_BYTES:,} limit"
        )
