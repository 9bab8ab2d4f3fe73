"""workflows/research_team.py with `--model`: the whole demo against a fake server."""

from __future__ import annotations

from pathlib import Path

from tests.programs.fake_chat import FakeChatServer
from tests.programs.programs import assert_valid_traffic, model_env, run_program


def test_research_team_runs_on_an_openai_compatible_server(
    fake_chat: FakeChatServer, tmp_path: Path
) -> None:
    db = str(tmp_path / "demo.db")
    done = run_program("research_team", [db, "--model", "fake-model"], env=model_env(fake_chat))
    assert "rolled back and re-ran ['research_rules']" in done.stdout  # the child process too
    assert "published=True" in done.stdout
    assert_valid_traffic(fake_chat)
    searches = [r for r in fake_chat.requests if any(m["role"] == "tool" for m in r["messages"])]
    assert len(searches) >= 3  # each researcher's tool result went back to the model
