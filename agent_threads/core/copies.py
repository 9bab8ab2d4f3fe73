"""Copies of pydantic models with some fields replaced: `model_copy(update=...)`, made lean."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__


def replaced(model: M, changes: Mapping[str, Any]) -> M:
    """`model.model_copy(update=changes)`: a shallow copy with `changes` in place.

    The same copy (the values shared, not validated; the fields set grown by the keys
    changed), without `model_copy`'s generic steps: about half its time for a thread
    record (1.7 against 3.1 us). For the copies an append makes of its record and typed data. A
    model that keeps extra fields gets `model_copy` itself (its changes may be extras).
    """
    if model.model_config.get("extra") == "allow":
        return model.model_copy(update=changes)
    cls = type(model)
    copy = cls.__new__(cls)
    _set(copy, "__dict__", {**model.__dict__, **changes})
    _set(copy, "__pydantic_extra__", None)
    _set(copy, "__pydantic_fields_set__", model.__pydantic_fields_set__ | changes.keys())
    private = model.__pydantic_private__
    if private is not None:
        private = {k: v for k, v in private.items() if v is not PydanticUndefined}
    _set(copy, "__pydantic_private__", private)
    return copy
