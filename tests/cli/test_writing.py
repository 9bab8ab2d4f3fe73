"""fork, checkpoint, rollback, rm, export, import and vacuum on the sample store."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest

from agent_threads import AgentThread, SQLiteStore
from tests.cli.conftest import Sample, as_json, fails, ok


def _export(url_path: Path, thread_id: str) -> dict[str, object]:
    async def main() -> dict[str, object]:
        async with SQLiteStore(url_path) as store:
            document: dict[str, object] = json.loads(
                await (await AgentThread.load(thread_id, store=store)).export()
            )
            return document

    return anyio.run(main)


def test_fork_at_a_message_with_an_id_title_and_tags(sample: Sample) -> None:
    fork = as_json(
        "fork", "support", "--store", sample.url, "--at", sample.messages[1],
        "--id", "branch", "--title", "Branch", "--tag", "env=lab", "--tag", "draft",
    )  # fmt: skip
    assert (fork["id"], fork["title"], fork["tags"], fork["head"]) == (
        "branch",
        "Branch",
        {"draft": "", "env": "lab"},
        2,
    )
    assert (fork["parent_id"], fork["fork_point"]) == ("support", sample.messages[1])
    assert "forked support as " in ok("fork", "support", "--store", sample.url)
    whole = as_json("fork", "support", "--store", sample.url, "--keep-stats")
    assert (whole["head"], whole["tags"]) == (5, {"env": "prod", "team": "care"})
    assert whole["message_count"] == 5  # stats kept


def test_checkpoint_then_rollback_and_undo(sample: Sample) -> None:
    made = as_json("checkpoint", "support", "--store", sample.url, "--label", "cli")
    assert (made["label"], made["message_count"]) == ("cli", 5)
    back = as_json("rollback", "support", "--store", sample.url, "--to-checkpoint", "asked")
    assert back["thread"]["head"] == 3 and back["undo"]["reason"] == "rollback"
    text = ok("rollback", "support", "--store", sample.url, "--to-message", sample.messages[0])
    assert "1 messages now" in text
    undo = text.split("--to-checkpoint ")[1].split()[0]
    ok("rollback", "support", "--store", sample.url, "--to-checkpoint", undo)
    shown = as_json("show", "support", "--store", sample.url)
    assert [m["id"] for m in shown["messages"]] == sample.messages[:3]


def test_rollback_needs_exactly_one_target(sample: Sample) -> None:
    assert "exactly one" in fails("rollback", "support", "--store", sample.url, code=2)
    both = ("--to-checkpoint", "asked", "--to-message", sample.messages[0])
    assert "exactly one" in fails("rollback", "support", "--store", sample.url, *both, code=2)
    line = fails("rollback", "run-1", "--store", sample.url, "--to-message", "m", code=2)
    assert "run-1" in line and "checkpoint" in line


def test_rm_deletes_a_thread_and_a_workflow_with_its_sub_threads(sample: Sample) -> None:
    assert as_json("rm", "other", "--store", sample.url) == {"id": "other", "deleted": True}
    assert "deleted run-1" in ok("rm", "run-1", "--store", sample.url)
    left = {t["id"] for t in as_json("ls", "--store", sample.url, "--sub-threads")["threads"]}
    assert left == {"support", "retry", "retry-2"}  # the run's sub-threads went with it
    assert "'other' not found" in fails("rm", "other", "--store", sample.url, code=3)


def test_export_and_import_round_trip_under_another_id(sample: Sample, tmp_path: Path) -> None:
    file = tmp_path / "support.json"
    done = as_json("export", "support", "--store", sample.url, "-o", str(file))
    assert done["file"] == str(file) and done["bytes"] == file.stat().st_size
    document = json.loads(file.read_text())
    assert document["id"] == "support" and len(document["messages"]) == 5
    assert json.loads(ok("export", "support", "--store", sample.url)) == document
    target = tmp_path / "other.db"
    url = f"sqlite:///{target}"
    (imported,) = as_json("import", str(file), "--store", url)["threads"]
    assert (imported["id"], imported["head"]) == ("support", 5)
    assert _export(target, "support") == document  # checkpoints and all
    (copy,) = as_json("import", str(file), "--store", url, "--as", "support-2")["threads"]
    assert copy["id"] == "support-2"
    log = as_json("log", "support-2", "--store", url)["checkpoints"]
    assert [c["label"] for c in log] == ["asked", "done"]
    line = fails("import", str(file), "--store", url, code=1)
    assert str(file) in line and "'support'" in line


def test_import_reads_standard_input_and_renames_a_workflows_sub_threads(sample: Sample) -> None:
    document = ok("export", "run-1", "--store", sample.url)
    (imported,) = as_json("import", "-", "--as", "run-2", "--store", sample.url, input=document)[
        "threads"
    ]
    assert imported["id"] == "run-2"
    run = as_json("runs", "run-2", "--store", sample.url)
    original = as_json("runs", "run-1", "--store", sample.url)
    assert run["status"] == "paused" and len(run["history"]) == len(original["history"])
    assert set(run["sub_threads"]) == set(original["sub_threads"])
    assert set(run["sub_threads"].values()).isdisjoint(original["sub_threads"].values())


def test_import_refuses_what_is_not_an_export(sample: Sample, tmp_path: Path) -> None:
    (tmp_path / "broken.json").write_text("{")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    for name in ("broken.json", "list.json", "other.json"):
        line = fails("import", str(tmp_path / name), "--store", sample.url, code=2)
        assert name in line
    assert "missing.json" in fails("import", str(tmp_path / "missing.json"), code=3)
    two = (str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert "one file" in fails("import", *two, "--as", "x", "--store", sample.url, code=2)


def test_vacuum_frees_what_a_deleted_thread_alone_held(sample: Sample) -> None:
    assert as_json("vacuum", "--store", sample.url, "--grace", "0") == {
        "segments_deleted": 0,
        "blobs_deleted": 0,
    }
    ok("rm", "retry-2", "--store", sample.url)
    ok("rm", "retry", "--store", sample.url)
    freed = as_json("vacuum", "--store", sample.url, "--grace", "0")
    assert freed["segments_deleted"] >= 1
    assert "deleted 0 segments" in ok("vacuum", "--store", sample.url, "--grace", "0")
    assert len(as_json("show", "support", "--store", sample.url)["messages"]) == 5


def test_the_store_defaults_to_the_environment_then_threads_db(
    sample: Sample, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENT_THREADS_STORE", sample.url)
    assert len(as_json("ls")["threads"]) == 5
    monkeypatch.delenv("AGENT_THREADS_STORE")
    monkeypatch.chdir(tmp_path)
    line = fails("ls", code=3)
    assert "threads.db does not exist" in line and not (tmp_path / "threads.db").exists()
    ok("fork", "support", "--store", sample.url)  # a write may create its store:
    ok("import", "-", input=ok("export", "support", "--store", sample.url))
    assert (tmp_path / "threads.db").exists()
    assert [t["id"] for t in as_json("ls")["threads"]] == ["support"]
