"""Errors: one line naming the thread, file or store, a non-zero exit code, no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Sample, fails, run

EVERY_COMMAND_ON_A_THREAD = [
    ["show", "nobody"],
    ["tree", "nobody"],
    ["log", "nobody"],
    ["fork", "nobody"],
    ["checkpoint", "nobody"],
    ["rollback", "nobody", "--to-checkpoint", "x"],
    ["rm", "nobody"],
    ["export", "nobody"],
    ["runs", "nobody"],
]


@pytest.mark.parametrize("args", EVERY_COMMAND_ON_A_THREAD, ids=lambda a: a[0])
def test_an_unknown_thread_exits_3_naming_it_and_the_store(sample: Sample, args: list[str]) -> None:
    line = fails(*args, "--store", sample.url, code=3)
    assert "'nobody' not found" in line and sample.url in line


@pytest.mark.parametrize("args", EVERY_COMMAND_ON_A_THREAD, ids=lambda a: a[0])
def test_a_malformed_id_exits_2_naming_it(sample: Sample, args: list[str]) -> None:
    bad = [a if a != "nobody" else "../etc" for a in args]
    assert "'../etc'" in fails(*bad, "--store", sample.url, code=2)


@pytest.mark.parametrize(
    "args",
    [["ls"], ["show", "x"], ["vacuum"], ["runs"], ["import", "f.json"], ["ui", "--no-browser"]],
    ids=lambda a: a[0],
)
def test_an_unknown_store_scheme_exits_2_naming_the_url(args: list[str]) -> None:
    line = fails(*args, "--store", "ftp://host/x", code=2)
    assert "'ftp://host/x'" in line and "unknown scheme 'ftp'" in line


def test_copy_names_a_bad_url_on_either_side(sample: Sample) -> None:
    assert "'ftp://a'" in fails("copy", "--from", "ftp://a", "--to", sample.url, code=2)
    assert "scheme 'nope'" in fails("copy", "--from", sample.url, "--to", "nope:x", code=2)


def test_a_missing_message_or_checkpoint_is_named(sample: Sample) -> None:
    line = fails("fork", "support", "--at", "m-1", "--store", sample.url, code=3)
    assert "message 'm-1'" in line and "'support'" in line
    line = fails("show", "support", "--at", "never", "--store", sample.url, code=3)
    assert "checkpoint 'never'" in line


def test_a_bad_tag_or_cursor_is_refused(sample: Sample) -> None:
    assert "given twice" in fails(
        "ls", "--tag", "a=1", "--tag", "a=2", "--store", sample.url, code=2
    )
    assert "'bad key!'" in fails("ls", "--tag", "bad key!=1", "--store", sample.url, code=2)
    assert "after" in fails("ls", "--after", "garbage", "--store", sample.url, code=2)


def test_an_unreachable_server_is_named(sample: Sample) -> None:
    line = fails("ls", "--store", "postgresql://postgres@127.0.0.1:9/test", code=1)
    assert "127.0.0.1:9" in line and "unavailable" in line


def test_debug_shows_the_traceback(sample: Sample, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LookupError):
        run("show", "nobody", "--store", sample.url, "--debug")
    monkeypatch.setenv("AGENT_THREADS_DEBUG", "1")
    with pytest.raises(LookupError):
        run("show", "nobody", "--store", sample.url)


def test_a_local_store_that_is_not_there_is_not_created(tmp_path: Path) -> None:
    for url in (f"sqlite:///{tmp_path}/none.db", f"file://{tmp_path}/none"):
        assert "does not exist" in fails("ls", "--store", url, code=3)
    assert list(tmp_path.iterdir()) == []
