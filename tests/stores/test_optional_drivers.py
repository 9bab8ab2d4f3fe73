"""Optional stores: a missing driver names its extra, and the root package loads none."""

from __future__ import annotations

import importlib
import re
import sys
import tomllib
from pathlib import Path
from typing import NamedTuple

import anyio
import pytest


class Driver(NamedTuple):
    store_module: str
    driver_module: str  # what the store imports
    top_level: str  # what importing it puts in sys.modules
    extra: str


PROJECT = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
DISTRIBUTION = PROJECT["name"]
"""What `pip install` knows the project as (the import package is `agent_threads`)."""

DRIVERS = [
    pytest.param(
        Driver("agent_threads.stores.redis", "redis.asyncio", "redis", "redis"), id="redis"
    ),
    pytest.param(
        Driver("agent_threads.stores.postgres", "asyncpg", "asyncpg", "postgres"), id="postgres"
    ),
    pytest.param(Driver("agent_threads.stores.http", "httpx", "httpx", "http"), id="http"),
]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_missing_driver_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, driver: Driver
) -> None:
    importlib.import_module(driver.store_module)  # loaded, so it can be removed and re-imported
    monkeypatch.setitem(sys.modules, driver.driver_module, None)  # as if not installed
    monkeypatch.delitem(sys.modules, driver.store_module)
    with pytest.raises(
        ImportError, match=re.escape(f"pip install '{DISTRIBUTION}[{driver.extra}]'")
    ):
        importlib.import_module(driver.store_module)


def test_the_extras_named_are_the_ones_the_project_declares() -> None:
    for param in DRIVERS:
        (driver,) = param.values
        assert isinstance(driver, Driver) and driver.extra in PROJECT["optional-dependencies"]


@pytest.mark.parametrize("driver", DRIVERS)
async def test_the_root_package_does_not_load_the_driver(driver: Driver) -> None:
    code = f"import sys, agent_threads; print({driver.top_level!r} in sys.modules)"
    result = await anyio.run_process([sys.executable, "-c", code])
    assert result.stdout.strip() == b"False"
