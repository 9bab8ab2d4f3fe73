"""The public API is explicit: sorted, complete, nothing private."""

from __future__ import annotations

import inspect
from types import ModuleType

import pytest

import agent_threads
import agent_threads.workflows

PACKAGES = [agent_threads, agent_threads.workflows]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_root_exports_are_sorted_and_complete(package: ModuleType) -> None:
    public = {
        n
        for n, v in vars(package).items()
        if not n.startswith("_") and not isinstance(v, ModuleType)
    }
    assert package.__all__ == sorted(package.__all__)
    assert set(package.__all__) == public


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_exported_class_and_function_is_documented(package: ModuleType) -> None:
    for name in package.__all__:
        value = getattr(package, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, name
