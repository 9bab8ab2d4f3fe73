"""workflows/research_team.py with `--model`: the whole demo against a fake server."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, load_program


async def test_research_team_runs_on_an_openai_compatible_server(
    fake_model: FakeChatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    program = load_program("research_team")
    argv = [str(tmp_path / "demo.db"), "--model", "fake-model"]
    with anyio.fail_after(60):
        await program.start(program.parse_args(argv))
    out = capsys.readouterr().out
    assert "rolled back and re-ran ['research_rules']" in out  # the killed child used it too
    assert "published=True" in out
    assert_valid_traffic(fake_model)
    answered = [r for r in fake_model.requests if any(m["role"] == "tool" for m in r["messages"])]
    assert len(answered) >= 3  # each researcher's tool result went back to the model
