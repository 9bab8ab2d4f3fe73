"""The time as thread records hold it: ISO 8601 text in UTC, to the microsecond."""

from __future__ import annotations

import time
from datetime import UTC, datetime

_last_second: tuple[int, str] = (-1, "")
"""The last whole second formatted, and its text up to the seconds (one tuple: a thread
that reads it while another replaces it sees one pair or the other, never half)."""


def now_iso() -> str:
    """`datetime.now(UTC).isoformat()`, formatting the date and time once a second.

    An append stamps its record with it; `isoformat` costs a fifth of the record's own
    serialization, and all but the microseconds repeat within a second.
    """
    return iso_of_micros(time.time_ns() // 1000)


def iso_of_micros(micros: int) -> str:
    """The time `micros` microseconds after the Unix epoch as `datetime.isoformat` writes it.

    Without a fraction when the microseconds are zero, as `isoformat` leaves it out.
    """
    global _last_second
    second, micro = divmod(micros, 1_000_000)
    cached, text = _last_second
    if cached != second:
        text = datetime.fromtimestamp(second, UTC).isoformat()[:-6]  # less "+00:00"
        _last_second = (second, text)
    return f"{text}.{micro:06d}+00:00" if micro else f"{text}+00:00"
