"""`ThreadStats.add`: what a batch of messages adds to a thread's stats."""

from __future__ import annotations

import math
from functools import reduce
from operator import add

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from agent_threads import Message, Usage
from agent_threads.core.records import ThreadStats


class _FalsyUsage(Usage):
    """A usage that is falsy (a subclass may be): still a usage, never skipped."""

    def __len__(self) -> int:
        return 0


def _messages(usages: list[tuple[int, float] | None]) -> list[Message]:
    """A user message for each None, else an assistant one with (input_tokens, cost)."""
    return [
        Message.user("x")
        if u is None
        else Message.assistant("y", usage=Usage(input_tokens=u[0], output_tokens=1, cost=u[1]))
        for u in usages
    ]


COSTS = st.floats(min_value=0, max_value=1e17, allow_nan=False, allow_infinity=False)


@given(st.lists(st.none() | st.tuples(st.integers(0, 10**9), COSTS), max_size=40))
def test_usages_are_summed_in_order_and_messages_counted(
    usages: list[tuple[int, float] | None],
) -> None:
    messages = _messages(usages)
    given_usages = [u for u in usages if u is not None]
    stats = ThreadStats(message_count=2, cost=0.5).add(iter(messages))
    assert stats.message_count == 2 + len(messages)
    assert stats.input_tokens == sum(u[0] for u in given_usages)
    assert stats.output_tokens == len(given_usages)
    # as `cost += ...` adds, in order (`sum` of floats compensates since Python 3.12)
    assert stats.cost == 0.5 + reduce(add, (u[1] for u in given_usages), 0.0)


def test_a_tenth_ten_times_costs_what_adding_it_ten_times_does() -> None:
    messages = [Message.assistant("y", usage=Usage(cost=0.1)) for _ in range(10)]
    assert ThreadStats().add(messages).cost == 0.9999999999999999  # not 1.0: no compensation


def test_a_falsy_usage_still_counts() -> None:
    message = Message.assistant("y", usage=_FalsyUsage(input_tokens=5, cost=math.inf))
    assert not message.usage
    stats = ThreadStats().add([message] * 9)
    assert (stats.input_tokens, stats.cost) == (45, math.inf)


@given(st.lists(st.none() | st.tuples(st.integers(0, 10**9), COSTS), max_size=12))
def test_added_stats_equal_validated_stats_with_every_field_given(
    usages: list[tuple[int, float] | None],
) -> None:
    messages = _messages(usages)
    stats = ThreadStats(message_count=1, output_tokens=4).add(messages)
    assert stats == ThreadStats.model_validate(stats.model_dump())
    assert stats.model_fields_set == set(ThreadStats.model_fields)
    assert stats.as_data() == stats.model_dump()


class _WideUsage(Usage):
    """A usage subclass that widens a count to floats (validated as itself, not as Usage)."""

    input_tokens: float = 0  # type: ignore[assignment]


@pytest.mark.parametrize(
    "usage",
    [
        Usage.model_construct(input_tokens=-5, output_tokens=0, cost=0.0),
        Usage.model_construct(input_tokens=0, output_tokens=0, cost=-1.0),
        _WideUsage(input_tokens=2.5),
    ],
)
def test_sums_a_usage_made_without_validation_leads_to_are_validated(usage: Usage) -> None:
    """Such a usage is refused, as the stats of the record holding the sums would be."""
    with pytest.raises(ValidationError):
        ThreadStats().add([Message.assistant("y", usage=usage)])


def test_an_integral_cost_is_held_as_a_float_as_validation_makes_it() -> None:
    class IntCost(Usage):
        cost: int = 0

    stats = ThreadStats().add([Message.assistant("y", usage=IntCost(cost=2))])
    assert stats.cost == 2.0 and type(stats.cost) is float
