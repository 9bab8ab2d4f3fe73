"""SequenceView: a read-only sequence that compares equal to any sequence of the same items."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")


class SequenceView(Sequence[T]):
    """Base of the O(1) views over shared storage (messages, step records).

    Equal to a list or tuple holding the same items in the same order; unhashable,
    like the lists it stands in for.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))

    # No __hash__: defining __eq__ alone sets `__hash__ = None` (unhashable, like a list).
