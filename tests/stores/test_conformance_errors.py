"""Conformance: what a store raises is a library error, and bad arguments never reach it.

Every store goes through `StoreBase`, which checks each operation's arguments before the
store's primitive (`_do_<operation>`) runs and maps the store's driver errors (its
`driver_errors` table) to library errors. These tests hold every store in STORES to that.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import NoReturn

import pytest

from agent_threads import (
    InvalidIdError,
    Record,
    Row,
    StoreCorruptedError,
    StoreUnavailableError,
    ThreadStore,
)
from agent_threads.stores.base import StoreBase

Call = Callable[[ThreadStore], Awaitable[object]]

PRIMITIVES = sorted(name for name in vars(StoreBase) if name.startswith("_do_"))


def row(message_id: str) -> Row:
    return Row(message_id, json.dumps({"id": message_id}))


BAD_CALLS: list[tuple[str, Call, type[Exception]]] = [
    ("get_record kind", lambda s: s.get_record("../k", "r"), InvalidIdError),
    ("get_record id", lambda s: s.get_record("k", "a/b"), InvalidIdError),
    (
        "put_record kind",
        lambda s: s.put_record(Record(kind="", id="r"), expected_version=0),
        InvalidIdError,
    ),
    (
        "put_record id",
        lambda s: s.put_record(Record(kind="k", id=".."), expected_version=0),
        InvalidIdError,
    ),
    (
        "put_record owner",
        lambda s: s.put_record(Record(kind="k", id="r", owner="a\nb"), expected_version=0),
        InvalidIdError,
    ),
    (
        "put_record tag",
        lambda s: s.put_record(Record(kind="k", id="r", tags=("x\x00",)), expected_version=0),
        InvalidIdError,
    ),
    ("delete_record id", lambda s: s.delete_record("k", "x" * 129), InvalidIdError),
    ("list_records kind", lambda s: s.list_records("a b"), InvalidIdError),
    ("list_records tag", lambda s: s.list_records(tags=[""]), InvalidIdError),
    ("list_records owner", lambda s: s.list_records(owner="../o"), InvalidIdError),
    ("append_rows segment", lambda s: s.append_rows("../s", 0, [row("m")]), InvalidIdError),
    (
        "append_rows message id",
        lambda s: s.append_rows("s", 0, [row("m"), row("m n")]),
        InvalidIdError,
    ),
    ("append_rows start", lambda s: s.append_rows("s", -1, [row("m")]), ValueError),
    ("read_rows segment", lambda s: s.read_rows("s/..", 0, 1), InvalidIdError),
    ("read_rows span", lambda s: s.read_rows("s", -5, 1), StoreCorruptedError),
    ("locate_message", lambda s: s.locate_message("é"), InvalidIdError),
    ("delete_segments", lambda s: s.delete_segments(["s", "../s"]), InvalidIdError),
    ("get_blob", lambda s: s.get_blob("A" * 64), InvalidIdError),
    ("delete_blobs", lambda s: s.delete_blobs(["0" * 64, "0" * 63]), InvalidIdError),
]


def _untouchable(store: ThreadStore, monkeypatch: pytest.MonkeyPatch) -> StoreBase:
    """Make every primitive of `store` fail the test if it is called."""
    assert isinstance(store, StoreBase), f"{store!r} does not go through StoreBase's checks"
    for name in PRIMITIVES:

        async def touched(*args: object, _name: str = name, **kwargs: object) -> NoReturn:
            raise AssertionError(f"{_name} ran with a bad argument")

        monkeypatch.setattr(store, name, touched)
    return store


@pytest.mark.parametrize(
    ("call", "error"), [(c, e) for _, c, e in BAD_CALLS], ids=[name for name, _, _ in BAD_CALLS]
)
async def test_bad_arguments_are_refused_before_the_store_is_touched(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch, call: Call, error: type[Exception]
) -> None:
    _untouchable(store, monkeypatch)
    with pytest.raises(error):
        await call(store)


def _failing(exc: Exception) -> Callable[..., Awaitable[NoReturn]]:
    async def fail(*args: object, **kwargs: object) -> NoReturn:
        raise exc

    return fail


async def test_driver_errors_become_library_errors_naming_store_and_operation(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _untouchable(store, monkeypatch)
    for rule in base.driver_errors:
        drivers = rule.drivers if isinstance(rule.drivers, tuple) else (rule.drivers,)
        for driver in drivers:
            exc = driver(rule.when or "the connection went away")
            monkeypatch.setattr(base, "_do_get_record", _failing(exc))
            with pytest.raises(Exception) as caught:
                await base.get_record("k", "r")
            if rule.error is None:  # a setting to fix, not the store's fault: as it is
                assert caught.value is exc
                continue
            assert isinstance(caught.value, rule.error), (driver, rule)  # no row shadows it
            assert caught.value.__cause__ is exc
            assert repr(base) in str(caught.value) and "get_record" in str(caught.value)
            if isinstance(caught.value, StoreUnavailableError):
                assert (caught.value.store, caught.value.operation) == (repr(base), "get_record")


async def test_errors_no_table_lists_pass_through_unchanged(
    store: ThreadStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = _untouchable(store, monkeypatch)
    for exc in (RuntimeError("a bug"), KeyError("k"), InvalidIdError("x", what="id", reason="r")):
        monkeypatch.setattr(base, "_do_list_segments", _failing(exc))
        with pytest.raises(type(exc)) as caught:
            await base.list_segments()
        assert caught.value is exc and caught.value.__cause__ is None
