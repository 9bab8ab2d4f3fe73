"""Load the programs of the top-level `workflows/` folder, in this process or as scripts."""

from __future__ import annotations

import importlib.util
import itertools
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from tests.programs.fake_chat import FakeChatServer

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def load_program(name: str) -> ModuleType:
    """Import `workflows/<name>.py` as the module `name` (once per test session).

    Run as a script, a program finds `_models` next to it because Python puts the
    script's folder first on `sys.path`; here the folder is put there the same way.
    """
    if str(WORKFLOWS) not in sys.path:
        sys.path.insert(0, str(WORKFLOWS))
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, WORKFLOWS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def run_program(
    name: str,
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60.0,
) -> subprocess.CompletedProcess[str]:
    """Run `python workflows/<name>.py ARGS` to its end; fails the test on a non-zero exit.

    Proxy variables are dropped, so a request to the loopback fake server stays local.
    """
    child_env = {k: v for k, v in os.environ.items() if k.upper() not in PROXY_VARIABLES}
    child_env.update(env or {})
    command = [sys.executable, str(WORKFLOWS / f"{name}.py"), *args]
    done = subprocess.run(
        command, env=child_env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command} exited {done.returncode}:\n{done.stderr}"
    return done


def model_env(fake: FakeChatServer) -> dict[str, str]:
    """The environment that points a program's `--model` at the fake server."""
    return {"OPENAI_BASE_URL": fake.url, "OPENAI_API_KEY": "test-key"}


def assert_valid_traffic(fake: FakeChatServer, *, model: str = "fake-model") -> None:
    """Every request was a valid chat completion for `model`, and one paired a tool call."""
    assert fake.requests, "the program sent no request"
    assert fake.invalid == []
    assert {r["model"] for r in fake.requests} == {model}
    assert any(_pairs_a_tool_call(r["messages"]) for r in fake.requests)


def _pairs_a_tool_call(messages: list[dict[str, Any]]) -> bool:
    """Whether an assistant's tool call is answered by the tool message right after it."""
    for message, following in itertools.pairwise(messages):
        ids = {call["id"] for call in message.get("tool_calls") or []}
        if following.get("role") == "tool" and following.get("tool_call_id") in ids:
            return True
    return False
