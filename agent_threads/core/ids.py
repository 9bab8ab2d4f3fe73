"""Identifiers: time-ordered UUIDv7 strings and validation of ids that reach paths or keys."""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from agent_threads.errors import InvalidIdError

MAX_ID_LENGTH = 128
_ID = f"[A-Za-z0-9][A-Za-z0-9._:@+=-]{{0,{MAX_ID_LENGTH - 1}}}"
_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]*")
_JOINED_IDS = re.compile(f"{_ID}(?:\n{_ID})*")
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
    random = int.from_bytes(os.urandom(9), "big")  # one system call: 8 bytes, then 1
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms, _counter = now_ms, random & 0xFF
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter overflow: borrow the next millisecond
                _last_ms, _counter = _last_ms + 1, 0
        ms, counter = _last_ms, _counter
    rand = (random >> 8) & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | rand
    digits = f"{value:032x}"  # str(uuid.UUID(int=value)), without building the UUID
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def validate_id(value: object, *, what: str = "id") -> str:
    """Return `value` if it is safe as a file name and a store key, else raise.

    Accepted: 1 to 128 characters, starting with a letter or digit, then letters,
    digits and `. _ : @ + = -`. That excludes path separators, `..` at the start,
    whitespace, NUL and other control characters.

    Raises:
        InvalidIdError: naming `what` and the reason.
    """
    # the usual id, seen before: a lookup (of a short string only: the cache keeps what
    # it is asked, and an id over the limit is refused below at once)
    if type(value) is str and len(value) <= MAX_ID_LENGTH and _valid_id(value):
        return value
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


@functools.lru_cache(maxsize=1024)
def _valid_id(value: str) -> bool:
    """Whether `validate_id` accepts `value`, of at most `MAX_ID_LENGTH` characters.

    Cached: a store sees the same segment, record and thread ids on every write, and a
    regex match of a UUID costs ~3,000 instructions, a hit here ~1,000 (callgrind).
    """
    return _ID_PATTERN.fullmatch(value) is not None  # (an empty one does not match)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
"""What `str(uuid.UUID(value))` gives back unchanged: 36 lowercase hex digits and dashes."""
_UUIDV7 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")
"""A canonical UUID of version 7 and the RFC 4122 variant (what `new_id` makes)."""
_RAW_MARK = "~"
"""Starts a packed id that is not a canonical UUID (`~` never starts a valid id)."""


@functools.lru_cache(maxsize=256)
def id_time(value: str) -> datetime | None:
    """When a UUIDv7 id was made (to the millisecond, UTC); None for any other id.

    Cached: a new checkpoint's time is its id's, asked for again when its row is written.
    """
    if not _UUIDV7.fullmatch(value):
        return None
    return _EPOCH + timedelta(milliseconds=int(value[:8] + value[9:13], 16))


@functools.lru_cache(maxsize=1024)
def pack_id(value: str) -> str:
    """A short form of an id for compact rows: 22 characters for a canonical UUID.

    Other ids are kept whole behind a `~`. `unpack_id` reverses it exactly. Cached: a
    checkpoint log's rows name the same few segments again and again.
    """
    if not _CANONICAL_UUID.fullmatch(value):
        return _RAW_MARK + value
    raw = bytes.fromhex(value.replace("-", ""))  # uuid.UUID(value).bytes
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def unpack_id(packed: str) -> str:
    """The id `pack_id` packed (ValueError if `packed` is not one of its results)."""
    if packed.startswith(_RAW_MARK):
        return validate_id(packed[1:])
    return str(uuid.UUID(bytes=_unbase64(packed, 16)))


def pack_digest(digest: str) -> str:
    """A blob digest in 43 characters instead of 64 (base64url of its 32 bytes)."""
    return base64.urlsafe_b64encode(bytes.fromhex(validate_digest(digest))).decode().rstrip("=")


def unpack_digest(packed: str) -> str:
    """The digest `pack_digest` packed (ValueError if `packed` is not one of its results)."""
    return _unbase64(packed, 32).hex()


def _unbase64(packed: str, size: int) -> bytes:
    try:
        raw = base64.urlsafe_b64decode(packed + "=" * (-len(packed) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{packed!r} is not a packed identifier") from exc
    if len(raw) != size or base64.urlsafe_b64encode(raw).decode().rstrip("=") != packed:
        raise ValueError(f"{packed!r} is not a packed identifier of {size} bytes")
    return raw


def all_valid_ids(values: Sequence[str]) -> bool:
    """Whether `validate_id` accepts every one of `values` (non-empty), in one regex pass.

    A fast path for batches: on False, validate them one by one to name the bad one.
    """
    if not values:
        return False
    joined = "\n".join(values)
    return _JOINED_IDS.fullmatch(joined) is not None and joined.count("\n") == len(values) - 1


def validate_digest(value: object) -> str:
    """Return `value` if it is a lowercase hex SHA-256 digest (a blob key), else raise."""
    if not isinstance(value, str) or not _DIGEST_PATTERN.fullmatch(value):
        raise InvalidIdError(value, what="blob digest", reason="must be 64 lowercase hex digits")
    return value
