"""Thread tags: short keys mapped to string values, the rules they follow, their store labels.

A thread's tags are a `dict[str, str]`, kept in its record data (`ThreadData.tags`).
Stores list records by labels (`Record.tags`, strings of 1-128 characters), so each
pair is stored as two labels as well (`tag_labels`): the key, so listing by key works,
and `key=value`. A key holds no `=`, so the first `=` of a label splits it. A pair
whose `key=value` would be longer than a label may be is labelled `#` and the SHA-256
hex digest of `key=value` instead (65 characters); no key following the rules
starts with `#`.

Rules for tags given to `create`, `fork` and `update` (`clean_tags`):

- a key is 1-64 ASCII letters, digits, `_`, `-`, `.`, `:` or `/`;
- a value is a string of at most 256 characters without control characters
  (the empty string included: a tag used as a plain label).

Threads stored by versions before tags were a dict (record schema 1 and 2, export
schema 1) had labels: a label `x` reads as the tag `{"x": ""}`. Such a key may break
the key rules (a space, say, or up to 128 characters); it is kept as it is, and tags
read from a thread (`thread.tags`, a `Tags`) are taken back as they are by `fork`,
`update` and imports, so every thread stays forkable and exportable. A new key must
follow the rules. Tags read back sorted by key, on every store (PostgresStore's schema 1
held record data as jsonb, which keeps no key order).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping

from agent_threads.core.limits import check_text
from agent_threads.errors import InvalidValueError

MAX_KEY_LENGTH = 64
"""The longest a tag key may be."""

MAX_VALUE_LENGTH = 256
"""The longest a tag value may be."""

MAX_LABEL_LENGTH = 128
"""The longest a store label may be (`stores.base.validate_tag`, a layer above this one)."""

KEY_RULE = "1-64 characters, each an ASCII letter, a digit or one of _ - . : /"

_KEY = re.compile(rf"[A-Za-z0-9_.:/-]{{1,{MAX_KEY_LENGTH}}}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HINT_LABELS = 3
"""How many of the labels of an old-style tags list the error's hint spells out."""


class Tags(Mapping[str, str]):
    """A thread's tags, read-only: what `thread.tags` returns.

    Equal to any mapping with the same pairs (`thread.tags == {"env": "prod"}`);
    `dict(thread.tags)` gives a copy to change. Passed back as tags (`fork(tags=...)`,
    `update(tags=...)`), it is taken as it is: its keys may be labels that agent-threads
    0.3 stored (see the module docstring).
    """

    __slots__ = ("_pairs",)

    _pairs: dict[str, str]

    def __init__(self, pairs: Mapping[str, str] | None = None) -> None:
        """Tags holding `pairs`, checked as stored tags are (`stored_tags`)."""
        self._pairs = stored_tags(pairs, where="tags")

    @classmethod
    def of(cls, pairs: dict[str, str]) -> Tags:
        """Tags over `pairs`, which were checked already (a thread record's); not copied."""
        tags = object.__new__(cls)
        tags._pairs = pairs
        return tags

    def __getitem__(self, key: str) -> str:
        return self._pairs[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return f"Tags({self._pairs!r})"


def clean_tags(value: object, *, where: str) -> dict[str, str]:
    """`value` as new tags: a copy of a dict of keys and values that follow the rules.

    None is no tags. A `Tags` (a thread's) is taken as it is. `where` names the thread
    (e.g. "thread 'abc' tags").

    Raises:
        InvalidValueError: `value` is not a mapping (a list of labels, the form of
            agent-threads 0.3, gets a hint), or a key or value breaks the rules, naming it.
    """
    if value is None:
        return {}
    if isinstance(value, Tags):
        return dict(value)
    pairs = _as_mapping(value, where)
    for key, item in pairs.items():
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise InvalidValueError(f"{where}[{key!r}]", reason=f"a tag key is {KEY_RULE}")
        _check_value(item, f"{where}[{key!r}]")
    return {str(k): str(v) for k, v in pairs.items()}


def stored_tags(value: object, *, where: str) -> dict[str, str]:
    """`value` as tags a thread may hold: those `clean_tags` accepts and older labels.

    A key is any label of 1-128 characters without control characters (what
    agent-threads 0.3 accepted as a tag, see `labels_to_tags`); values follow the rules.
    For tags read from a record or an export, which are taken back as they are.

    Raises:
        InvalidValueError: a key or value is not acceptable even so, naming it.
    """
    if value is None:
        return {}
    if isinstance(value, Tags):
        return dict(value)
    pairs = _as_mapping(value, where)
    for key, item in pairs.items():
        _check_label(key, f"{where}[{key!r}]")
        _check_value(item, f"{where}[{key!r}]")
    return {str(k): str(v) for k, v in pairs.items()}


def labels_to_tags(labels: Iterable[object], *, where: str) -> dict[str, str]:
    """The tags of a thread stored with labels (record schema 1-2, export schema 1).

    Each label `x` becomes the tag `{"x": ""}`.

    Raises:
        InvalidValueError: a label is not a string of 1-128 characters without control
            characters (no version stored one), naming it.
    """
    tags: dict[str, str] = {}
    for label in labels:
        _check_label(label, f"{where} label {label!r}")
        tags[str(label)] = ""
    return tags


def tag_labels(tags: Mapping[str, str]) -> tuple[str, ...]:
    """The store labels of tags: per pair, the key and `key=value` (see the module docstring).

    Give them to `store.list_records("thread", tags=...)` to list the records of the
    threads holding every pair. A record written before schema version 3 holds only
    the key labels until its next write; `AgentThread.find` lists those too.

    Raises:
        InvalidValueError: the tags break the rules (as in `create`).
    """
    return labels_of(clean_tags(tags, where="tags"))


def labels_of(tags: Mapping[str, str]) -> tuple[str, ...]:
    """`tag_labels` of tags checked already (a thread's), without checking them again."""
    labels = [*tags, *(pair_label(key, value) for key, value in tags.items())]
    return tuple(dict.fromkeys(labels))  # an old key holding "=" may equal another's pair


def pair_label(key: str, value: str) -> str:
    """The label of one pair: `key=value`, or `#` and its SHA-256 if that is too long."""
    pair = f"{key}={value}"
    if len(pair) <= MAX_LABEL_LENGTH:
        return pair
    return "#" + hashlib.sha256(pair.encode()).hexdigest()


def _as_mapping(value: object, where: str) -> Mapping[object, object]:
    if isinstance(value, Mapping):
        return value
    reason = f"tags are a dict of str keys to str values, not {type(value).__name__}"
    if isinstance(value, str | bytes):
        reason += ": a single label is the dict {label: ''}"
    elif isinstance(value, Iterable):
        reason += f": a list of labels is the old form; pass {_hint(value)} instead"
    raise InvalidValueError(where, reason=reason)


def _hint(labels: Iterable[object]) -> str:
    """A dict the old labels would be, e.g. `{'x': '', 'y': ''}` (the first few)."""
    shown: list[str] = []
    for label in labels:
        if len(shown) == _HINT_LABELS:
            return "{" + ", ".join([*shown, "..."]) + "}"
        shown.append(f"{label!r}: ''")
    return "{" + ", ".join(shown) + "}" if shown else "{'x': ''} for a label 'x'"


def _check_value(value: object, where: str) -> None:
    if not isinstance(value, str):
        raise InvalidValueError(
            where, reason=f"a tag value is a string, not {type(value).__name__}"
        )
    if len(value) > MAX_VALUE_LENGTH or _CONTROL.search(value):
        raise InvalidValueError(
            where,
            reason=f"a tag value has at most {MAX_VALUE_LENGTH} characters, none of them"
            " a control character",
        )
    check_text(value, where)  # a lone surrogate


def _check_label(key: object, where: str) -> None:
    if not isinstance(key, str) or not key or len(key) > MAX_LABEL_LENGTH or _CONTROL.search(key):
        raise InvalidValueError(
            where, reason="a tag key is a string of 1-128 characters without control characters"
        )
    check_text(key, where)  # a lone surrogate


__all__ = [
    "KEY_RULE",
    "MAX_KEY_LENGTH",
    "MAX_LABEL_LENGTH",
    "MAX_VALUE_LENGTH",
    "Tags",
    "clean_tags",
    "labels_of",
    "labels_to_tags",
    "pair_label",
    "stored_tags",
    "tag_labels",
]
