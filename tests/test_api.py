"""The public API is explicit: sorted, complete, nothing private."""

from __future__ import annotations

import inspect
from types import ModuleType

import agent_threads


def test_root_exports_are_sorted_and_complete() -> None:
    public = {
        n
        for n, v in vars(agent_threads).items()
        if not n.startswith("_") and not isinstance(v, ModuleType)
    }
    assert agent_threads.__all__ == sorted(agent_threads.__all__)
    assert set(agent_threads.__all__) == public


def test_every_export_has_a_docstring_or_is_a_type_alias() -> None:
    for name in agent_threads.__all__:
        value = getattr(agent_threads, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, name
