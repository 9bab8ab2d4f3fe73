"""ImmutableState: a copy-on-write JSON-like mapping with merge patches and merge policies.

Nested objects come back as read-only mappings and lists as tuples, so nothing
reachable from a state can be changed in place; every change returns a new state that
shares each untouched subtree (the very same objects) with the old one.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, Literal, cast, get_args

from agent_threads.core.limits import MAX_DEPTH, NUL_REASON
from agent_threads.errors import InvalidValueError, StateConflictError

MergePolicy = Literal["last_write_wins", "combine_lists", "raise"]
MERGE_POLICIES: tuple[str, ...] = get_args(MergePolicy)

FrozenMap = MappingProxyType[str, Any]
_SCALARS = (str, int, float, bool, type(None))
_MISSING: Any = object()


def freeze(value: object, *, path: str = "", depth: int = 0) -> Any:
    """Deep-freeze JSON-like data: dicts become read-only mappings, lists tuples.

    Raises:
        InvalidValueError: naming the path of a value that is not JSON-like, a number
            JSON cannot spell (NaN, Infinity), or nesting deeper than `MAX_DEPTH`.
    """
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidValueError(f"state value at {_where(path)!r}", reason=f"{value} is not JSON")
    if isinstance(value, str) and "\x00" in value:
        raise InvalidValueError(f"state value at {_where(path)!r}", reason=NUL_REASON)
    if isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping | list | tuple) and depth >= MAX_DEPTH:
        raise InvalidValueError(
            f"state value at {_where(path)!r}", reason=f"nested deeper than {MAX_DEPTH} levels"
        )
    if isinstance(value, Mapping):
        items: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise InvalidValueError(f"state key {path}{key!r}", reason="not a string")
            if "\x00" in key:
                raise InvalidValueError(f"state key {path}{key!r}", reason=NUL_REASON)
            items[key] = freeze(item, path=f"{path}{key}.", depth=depth + 1)
        return MappingProxyType(items)
    if isinstance(value, list | tuple):
        return tuple(
            freeze(item, path=f"{path}[{i}].", depth=depth + 1) for i, item in enumerate(value)
        )
    raise InvalidValueError(
        f"state value at {_where(path)!r}", reason=f"{type(value).__name__} is not JSON-like"
    )


def _where(path: str) -> str:
    return path.rstrip(".") or "<root>"


def thaw(value: Any) -> Any:
    """Turn frozen data back into plain, mutable dicts and lists."""
    if isinstance(value, Mapping):
        return {key: thaw(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [thaw(item) for item in value]
    return value


def _split(path: str | Sequence[str]) -> tuple[str, ...]:
    keys = tuple(path.split(".")) if isinstance(path, str) else tuple(path)
    if not keys or any(not isinstance(k, str) or not k for k in keys):
        raise InvalidValueError(f"state path {path!r}", reason="keys must be non-empty strings")
    return keys


def _apply_patch(target: Any, patch: Mapping[str, Any]) -> FrozenMap:
    """RFC 7386 merge patch of frozen `patch` onto `target`, sharing untouched subtrees."""
    base: Mapping[str, Any] = target if isinstance(target, Mapping) else {}
    result = dict(base)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping):
            result[key] = _apply_patch(base.get(key), value)
        else:
            result[key] = value
    return MappingProxyType(result)


class ImmutableState(Mapping[str, Any]):
    """A copy-on-write mapping of JSON-like agent or workflow state.

    `set` and `apply` return a new state; the old one is unchanged and the two share
    every subtree the change did not touch.
    """

    __slots__ = ("_data", "_digest")

    def __init__(self, data: Mapping[str, Any] | None = None) -> None:
        frozen = freeze(data or {})
        self._data: FrozenMap = frozen
        self._digest: str | None = None

    @classmethod
    def _wrap(cls, data: FrozenMap) -> ImmutableState:
        state = cls.__new__(cls)
        state._data = data
        state._digest = None
        return state

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ImmutableState):
            return bool(self._data == other._data)
        if isinstance(other, Mapping):
            return bool(self.to_dict() == thaw(other))
        return NotImplemented

    # No __hash__: a class that defines __eq__ alone gets `__hash__ = None`, so a state,
    # like the dict it stands in for, is unhashable.

    def __repr__(self) -> str:
        return f"ImmutableState({self.to_dict()!r})"

    def get_path(self, path: str | Sequence[str], default: Any = None) -> Any:
        """The value at a dotted path (`"a.b"`) or key sequence, or `default`."""
        node: Any = self._data
        for key in _split(path):
            if not isinstance(node, Mapping) or key not in node:
                return default
            node = node[key]
        return node

    def to_dict(self) -> dict[str, Any]:
        """A plain, deep, mutable copy."""
        return cast(dict[str, Any], thaw(self._data))

    def set(self, path: str | Sequence[str], value: Any) -> ImmutableState:
        """A new state with `value` at `path` (dotted string or key sequence).

        Intermediate objects are created as needed; a non-object in the way is replaced.
        """
        return self._set_frozen(_split(path), freeze(value))

    def _set_frozen(self, keys: tuple[str, ...], value: Any) -> ImmutableState:
        def rebuild(node: Any, depth: int) -> FrozenMap:
            current = dict(node) if isinstance(node, Mapping) else {}
            key = keys[depth]
            if depth == len(keys) - 1:
                current[key] = value
            else:
                current[key] = rebuild(current.get(key), depth + 1)
            return MappingProxyType(current)

        return ImmutableState._wrap(rebuild(self._data, 0))

    def apply(self, patch: Mapping[str, Any]) -> ImmutableState:
        """A new state with a JSON merge patch (RFC 7386) applied: `None` deletes a key."""
        if not patch:
            return self
        return ImmutableState._wrap(_apply_patch(self._data, freeze(patch)))

    def merge(
        self,
        other: Mapping[str, Any],
        *,
        policy: MergePolicy = "last_write_wins",
        base: Mapping[str, Any] | None = None,
    ) -> ImmutableState:
        """Reconcile this state with `other`, another branch of the same history.

        Objects merge key by key. Where both sides hold different values for a key:
        `last_write_wins` takes `other`'s; `combine_lists` concatenates two lists (other
        types fall back to last-write-wins); `raise` raises `StateConflictError`.
        With `base` (the state both branches started from), keys only one side changed
        take that side's value, and `combine_lists` appends only what each side added.

        Raises:
            StateConflictError: with policy `raise`, naming the dotted key.
            ValueError: an unknown policy.
        """
        if policy not in MERGE_POLICIES:
            raise InvalidValueError(
                f"merge policy {policy!r}", reason=f"use one of {MERGE_POLICIES}"
            )
        theirs = other._data if isinstance(other, ImmutableState) else freeze(other)
        frozen_base = None if base is None else freeze(dict(base))
        merged = _merge_maps(self._data, theirs, frozen_base, policy, "")
        return ImmutableState._wrap(merged)

    def to_json_bytes(self) -> bytes:
        """Canonical JSON (sorted keys, no spaces): equal states give equal bytes."""
        return canonical_json(self._data)

    @classmethod
    def from_json_bytes(cls, data: bytes | str) -> ImmutableState:
        """Read a state written by `to_json_bytes`."""
        loaded = json.loads(data)
        if not isinstance(loaded, dict):
            raise ValueError("a state must be a JSON object")
        return cls(loaded)

    @property
    def digest(self) -> str:
        """SHA-256 of the canonical JSON: the state's content address."""
        if self._digest is None:
            self._digest = hashlib.sha256(self.to_json_bytes()).hexdigest()
        return self._digest


def canonical_json(value: Any) -> bytes:
    """Serialize JSON-like (frozen or plain) data canonically (never NaN or Infinity)."""
    return json.dumps(
        value,
        default=_plain,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
    ).encode()


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON-like: {type(value).__name__}")


def _merge_maps(
    ours: Mapping[str, Any],
    theirs: Mapping[str, Any],
    base: Mapping[str, Any] | None,
    policy: MergePolicy,
    prefix: str,
) -> FrozenMap:
    result = dict(ours)
    for key, their_value in theirs.items():
        our_value = ours.get(key, _MISSING)
        base_value = _MISSING if base is None else base.get(key, _MISSING)
        if our_value is _MISSING and base_value is not _MISSING and their_value == base_value:
            continue  # we deleted it and they left it alone: it stays deleted
        result[key] = _merge_values(
            our_value, their_value, base_value, policy, f"{prefix}{key}", has_base=base is not None
        )
    if base is not None:  # a key the other side deleted and we left alone stays deleted
        for key in base:
            if key not in theirs and key in ours and ours[key] == base[key]:
                del result[key]
    return MappingProxyType(result)


def _merge_values(
    ours: Any, theirs: Any, base: Any, policy: MergePolicy, key: str, *, has_base: bool
) -> Any:
    if ours is _MISSING or ours == theirs:
        return theirs
    if has_base:
        if theirs == base:
            return ours
        if ours == base:
            return theirs
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        sub_base = base if isinstance(base, Mapping) else ({} if has_base else None)
        return _merge_maps(ours, theirs, sub_base, policy, f"{key}.")
    if policy == "combine_lists" and isinstance(ours, tuple) and isinstance(theirs, tuple):
        if has_base and isinstance(base, tuple) and theirs[: len(base)] == base:
            return ours + theirs[len(base) :]
        return ours + theirs
    if policy == "raise":
        raise StateConflictError(key, thaw(ours), thaw(theirs))
    return theirs
