"""`core.clock`: record times written as `datetime.isoformat` writes them, only faster."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from agent_threads.core.clock import iso_of_micros, now_iso

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MAX = int((datetime(9999, 12, 31, tzinfo=UTC) - _EPOCH).total_seconds()) * 10**6


def _expected(micros: int) -> str:
    return (_EPOCH + timedelta(microseconds=micros)).isoformat()


@given(st.integers(min_value=0, max_value=_MAX))
def test_a_time_reads_as_isoformat_writes_it(micros: int) -> None:
    assert iso_of_micros(micros) == _expected(micros)


@given(st.integers(min_value=0, max_value=_MAX // 10**6), st.lists(st.integers(0, 999_999)))
def test_times_within_one_second_and_the_next_keep_their_own_date(
    second: int, micros: list[int]
) -> None:
    for micro in [0, *micros, 999_999]:  # the cached second, then the next one
        for at in (second * 10**6 + micro, (second + 1) * 10**6 + micro):
            assert iso_of_micros(at) == _expected(at)


def test_now_is_the_time_in_utc() -> None:
    before = datetime.now(UTC)
    now = datetime.fromisoformat(now_iso())
    assert before <= now <= datetime.now(UTC)
    assert now.utcoffset() == timedelta(0)
