"""Fixtures of the program tests: a fake chat-completions server on a loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.programs.fake_chat import FakeChatServer, fake_chat_server


@pytest.fixture
def fake_chat() -> Iterator[FakeChatServer]:
    with fake_chat_server() as server:
        yield server
