"""`core.copies.replaced`: the copy `model_copy(update=...)` makes, for every kind of model."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, PrivateAttr

from agent_threads import Record
from agent_threads.core.copies import replaced
from agent_threads.core.records import ThreadStats


class _WithPrivate(BaseModel):
    x: int = 0
    _note: str = PrivateAttr(default="unset")


class _WithExtra(BaseModel):
    model_config = ConfigDict(extra="allow")
    x: int = 0


def _same_copy(a: BaseModel, b: BaseModel) -> None:
    assert type(a) is type(b)
    assert a.__dict__ == b.__dict__
    assert a.model_fields_set == b.model_fields_set
    assert a.__pydantic_extra__ == b.__pydantic_extra__
    assert a.__pydantic_private__ == b.__pydantic_private__


@given(
    version=st.integers(min_value=1, max_value=2**52),
    data=st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    owner=st.none() | st.just("o1"),
)
def test_a_record_copy_equals_model_copy(
    version: int, data: dict[str, Any], owner: str | None
) -> None:
    record = Record(kind="thread", id="t1", version=3, data={"a": 1}, tags=("x",))
    changes = {"version": version, "data": data, "owner": owner}
    copy = replaced(record, changes)
    _same_copy(copy, record.model_copy(update=changes))
    assert record.version == 3 and record.data == {"a": 1}  # the original is untouched


def test_the_fields_set_grows_by_the_keys_changed_and_is_not_shared() -> None:
    stats = ThreadStats()
    copy = replaced(stats, {"message_count": 2})
    assert copy.model_fields_set == {"message_count"}
    assert stats.model_fields_set == set()


def test_private_attributes_are_copied_not_shared() -> None:
    model = _WithPrivate()
    model._note = "kept"
    copy = replaced(model, {"x": 1})
    _same_copy(copy, model.model_copy(update={"x": 1}))
    assert copy._note == "kept"
    copy._note = "changed"
    assert model._note == "kept"


@pytest.mark.parametrize("changes", [{"x": 2}, {"y": 3}])
def test_a_model_with_extra_fields_gets_model_copy(changes: dict[str, Any]) -> None:
    model = _WithExtra(x=1, z=0)
    _same_copy(replaced(model, changes), model.model_copy(update=changes))


class _Plain(BaseModel):
    x: int = 0
    y: int = 0


def test_a_copy_of_a_model_that_is_not_frozen_has_a_fields_set_of_its_own() -> None:
    """Setting a field adds to the model's fields set in place: it must not reach the other."""
    model = _Plain(x=1)
    copy = replaced(model, {"x": 2})
    copy.y = 3
    assert copy.model_fields_set == {"x", "y"}
    assert model.model_fields_set == {"x"}


def test_a_frozen_copy_that_adds_no_field_has_the_same_fields_set() -> None:
    record = Record(kind="thread", id="t1", version=3, data={"a": 1})
    copy = replaced(record, {"version": 4})
    _same_copy(copy, record.model_copy(update={"version": 4}))
    assert copy.model_fields_set == {"kind", "id", "version", "data"}
