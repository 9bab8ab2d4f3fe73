"""Identifiers: time-ordered UUIDv7 strings and validation of ids that reach paths or keys."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

from agent_threads.errors import InvalidIdError

MAX_ID_LENGTH = 128
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
_DIGEST_PATTERN = re.compile(r"[0-9a-f]{64}")

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 string; ids made in one process sort in creation order.

    48 bits of Unix milliseconds, then a 12-bit counter that orders ids made within
    the same millisecond, then 62 random bits.
    """
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms, _counter = now_ms, int.from_bytes(os.urandom(1), "big")
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter overflow: borrow the next millisecond
                _last_ms, _counter = _last_ms + 1, 0
        ms, counter = _last_ms, _counter
    rand = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    return str(uuid.UUID(int=value))


def validate_id(value: object, *, what: str = "id") -> str:
    """Return `value` if it is safe as a file name and a store key, else raise.

    Accepted: 1 to 128 characters, starting with a letter or digit, then letters,
    digits and `. _ : @ + = -`. That excludes path separators, `..` at the start,
    whitespace, NUL and other control characters.

    Raises:
        InvalidIdError: naming `what` and the reason.
    """
    if not isinstance(value, str):
        raise InvalidIdError(value, what=what, reason="must be a string")
    if not value:
        raise InvalidIdError(value, what=what, reason="must not be empty")
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(value, what=what, reason=f"longer than {MAX_ID_LENGTH} characters")
    if not _ID_PATTERN.fullmatch(value):
        raise InvalidIdError(
            value,
            what=what,
            reason="only letters, digits and . _ : @ + = - are allowed, starting with a letter"
            " or digit (no path separators, whitespace or control characters)",
        )
    return value


def validate_digest(value: object) -> str:
    """Return `value` if it is a lowercase hex SHA-256 digest (a blob key), else raise."""
    if not isinstance(value, str) or not _DIGEST_PATTERN.fullmatch(value):
        raise InvalidIdError(value, what="blob digest", reason="must be 64 lowercase hex digits")
    return value
