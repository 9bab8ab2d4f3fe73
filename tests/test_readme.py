"""Every python block of README.md runs, so the documentation cannot go stale."""

from __future__ import annotations

import ast
import os
import re
import types
from pathlib import Path

import pytest

from tests.stores.conftest import needs_server

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"^```python\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 3


def _servers_needed(source: str) -> list[pytest.MarkDecorator]:
    """Skip marks (fail marks in CI) for the servers a block's stores talk to."""
    needed = {"redis": "RedisStore(", "postgres": "PostgresStore("}
    return [needs_server(kind) for kind, call in needed.items() if call in source]


@pytest.mark.parametrize(
    "source",
    [pytest.param(b, marks=_servers_needed(b), id=f"block{i}") for i, b in enumerate(BLOCKS)],
)
async def test_readme_block_runs(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = compile(source, str(README), "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    namespace: dict[str, object] = {"__name__": "__readme__"}
    result = types.FunctionType(code, namespace)()
    if result is not None:  # a block with top-level await compiles to a coroutine
        await result
    assert os.getcwd() == str(tmp_path)
