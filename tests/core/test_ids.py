"""`core.ids.validate_id`: which ids reach a path or a key, asked once or many times."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_threads import InvalidIdError
from agent_threads.core.ids import new_id, validate_id

_RULE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,127}")
_ID_CHARS = st.sampled_from("aZ09._:@+=-/ \n\x00é")


@given(st.text(_ID_CHARS, max_size=130) | st.just("x" * 128) | st.just("x" * 129))
def test_an_id_is_accepted_exactly_when_the_rule_says_every_time_it_is_asked(value: str) -> None:
    """The second ask finds the answer cached: it must be the same, and an error again."""
    for _ in range(2):
        if _RULE.fullmatch(value):
            assert validate_id(value) == value
        else:
            with pytest.raises(InvalidIdError):
                validate_id(value, what="segment id")


def test_a_string_subclass_or_another_type_is_checked_as_before() -> None:
    class Named(str):
        pass

    assert validate_id(Named("abc")) == "abc"
    with pytest.raises(InvalidIdError, match="must be a string"):
        validate_id(12, what="thread id")
    value = new_id()
    assert validate_id(value) is value


def test_an_id_over_the_limit_is_refused_without_being_kept() -> None:
    """The cache keeps what it is asked: a long string must never reach it."""
    from agent_threads.core.ids import _valid_id

    before = _valid_id.cache_info().currsize
    for i in range(3):
        with pytest.raises(InvalidIdError, match="longer than 128"):
            validate_id("x" * 100_000 + str(i))
    assert _valid_id.cache_info().currsize == before
