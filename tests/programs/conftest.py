"""Fixtures of the program tests: a fake chat-completions server on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.programs.fake_chat import FakeChatServer, fake_chat_server
from tests.programs.programs import PROXY_VARIABLES, model_env


@pytest.fixture
def fake_chat() -> Iterator[FakeChatServer]:
    with fake_chat_server() as server:
        yield server


@pytest.fixture
def fake_model(fake_chat: FakeChatServer, monkeypatch: pytest.MonkeyPatch) -> FakeChatServer:
    """The fake server, with this process's environment pointing `--model` at it."""
    for name, value in model_env(fake_chat).items():
        monkeypatch.setenv(name, value)
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    return fake_chat
