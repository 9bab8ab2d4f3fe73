"""What JsonFileStore promises beyond the protocol: its files, torn and corrupt lines, paths."""

from __future__ import annotations

import json
import logging
import os
import re
import tempfile
import time
from pathlib import Path

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_threads import (
    ChatMessageThread,
    ConflictError,
    InvalidIdError,
    JsonFileStore,
    Message,
    Record,
    Row,
    SchemaVersionError,
    StoreCorruptedError,
)


async def saved_thread(directory: Path, texts: list[str]) -> ChatMessageThread:
    async with JsonFileStore(directory) as store:
        thread = await ChatMessageThread.create(store, title="saved")
        await thread.on_new_messages([Message.user(t) for t in texts])
        return thread


def segment_file(directory: Path, thread: ChatMessageThread) -> Path:
    return directory / "segments" / f"{thread.ranges[-1].segment_id}.jsonl"


async def texts_in(directory: Path, thread_id: str) -> list[str]:
    async with JsonFileStore(directory) as store:
        return [m.text for m in (await ChatMessageThread.load(thread_id, store=store)).messages]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


async def test_a_thread_is_plain_files_a_person_can_read(tmp_path: Path) -> None:
    async with JsonFileStore(tmp_path) as store:
        thread = await ChatMessageThread.create(store, title="trip")
        await thread.on_new_messages([Message.user("hi"), Message.assistant("hello")])
        await thread.update_state({"step": 1})
    marker = json.loads((tmp_path / "agent-threads.json").read_text())
    assert marker == {"format": "agent-threads/jsonfile", "schema_version": 1}
    record = json.loads((tmp_path / "records" / "thread" / f"{thread.id}.json").read_text())
    assert (record["id"], record["version"], record["data"]["title"]) == (
        thread.id,
        thread.version,
        "trip",
    )
    lines = segment_file(tmp_path, thread).read_text().splitlines()
    assert [json.loads(line) for line in lines] == [
        {"position": i, "message_id": m.id, "message": m.model_dump(mode="json")}
        for i, m in enumerate(thread.messages)
    ]
    digest = record["data"]["state"]
    assert json.loads((tmp_path / "blobs" / digest).read_bytes()) == {"step": 1}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
row_texts = st.text() | st.builds(
    lambda value, indent: json.dumps(value, indent=indent), json_values, st.none() | st.just(2)
)


@settings(max_examples=40, deadline=None)
@given(st.lists(row_texts, min_size=1, max_size=6))
def test_any_row_text_reads_back_exactly(data: list[str]) -> None:
    async def round_trip() -> None:
        with tempfile.TemporaryDirectory() as directory:
            async with JsonFileStore(directory) as store:
                await store.append_rows("seg", 0, [Row(f"m{i}", d) for i, d in enumerate(data)])
            async with JsonFileStore(directory) as store:
                assert await store.read_rows("seg", 0, len(data)) == data

    anyio.run(round_trip)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from([1, 300, 5_000, 40_000, 200_000]), min_size=1, max_size=12),
    st.data(),
)
def test_any_range_reads_back_whatever_the_line_lengths(
    lengths: list[int], data: st.DataObject
) -> None:
    """Short and long lines mixed, so a search for a position lands anywhere in them."""
    rows = [Row(f"m{i}", json.dumps(str(i) * n)) for i, n in enumerate(lengths)]
    start = data.draw(st.integers(0, len(rows) - 1))
    end = data.draw(st.integers(start + 1, len(rows)))

    async def read_back() -> None:
        with tempfile.TemporaryDirectory() as directory:
            async with JsonFileStore(directory) as store:
                for i, row in enumerate(rows):  # one append each: the file grows as usual
                    await store.append_rows("seg", i, [row])
                assert await store.read_rows("seg", start, end) == [r.data for r in rows[start:end]]

    anyio.run(read_back)


async def test_a_torn_last_line_is_reported_ignored_and_replaced(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    thread = await saved_thread(tmp_path, ["a", "b", "c"])
    path = segment_file(tmp_path, thread)
    with path.open("ab") as file:  # a crash in the middle of writing line 4
        file.write(b'{"position":3,"message_id":"x","message":{"id":"x","ro')
    with caplog.at_level(logging.WARNING, logger="agent_threads.stores.jsonfile"):
        async with JsonFileStore(tmp_path) as store:
            loaded = await ChatMessageThread.load(thread.id, store=store)
            assert [m.text for m in loaded.messages] == ["a", "b", "c"]
            await loaded.on_new_messages([Message.user("d")])
    assert f"{path} line 4: torn last line" in caplog.text
    assert await texts_in(tmp_path, thread.id) == ["a", "b", "c", "d"]
    assert [json.loads(line)["position"] for line in path.read_text().splitlines()] == [0, 1, 2, 3]


async def test_a_corrupt_line_below_the_head_names_the_file_and_line(tmp_path: Path) -> None:
    thread = await saved_thread(tmp_path, ["a", "b", "c"])
    path = segment_file(tmp_path, thread)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(lines[0] + b"not json at all\n" + lines[2])
    async with JsonFileStore(tmp_path) as store:
        with pytest.raises(StoreCorruptedError, match=rf"{re.escape(str(path))} line 2"):
            await ChatMessageThread.load(thread.id, store=store)


async def test_a_hand_edited_line_with_the_same_json_still_reads(tmp_path: Path) -> None:
    thread = await saved_thread(tmp_path, ["a", "b"])
    path = segment_file(tmp_path, thread)
    lines = path.read_text().splitlines()
    edited = json.loads(lines[1])
    lines[1] = json.dumps({"message": edited["message"], **edited}, indent=None)
    path.write_text("\n".join(lines) + "\n\n")  # reordered keys, spaces, a blank line
    assert await texts_in(tmp_path, thread.id) == ["a", "b"]
    async with JsonFileStore(tmp_path) as store:
        with pytest.raises(ConflictError):
            await store.append_rows(thread.ranges[-1].segment_id, 1, [Row("x", "{}")])
        loaded = await ChatMessageThread.load(thread.id, store=store)
        await loaded.on_new_messages([Message.user("c")])
    assert await texts_in(tmp_path, thread.id) == ["a", "b", "c"]


async def test_a_directory_written_by_a_newer_version_is_refused(tmp_path: Path) -> None:
    await saved_thread(tmp_path, ["a"])
    marker = tmp_path / "agent-threads.json"
    marker.write_text(json.dumps({"format": "agent-threads/jsonfile", "schema_version": 2}))
    with pytest.raises(SchemaVersionError, match=re.escape(str(marker))) as caught:
        async with JsonFileStore(tmp_path):
            pass
    assert (caught.value.found, caught.value.supported) == (2, 1)


async def test_hostile_ids_are_refused_before_any_path_is_touched(tmp_path: Path) -> None:
    directory = tmp_path / "store"
    async with JsonFileStore(directory) as store:
        before = tree(tmp_path)
        for bad in ["../escape", "a/b", "..", "x\x00y", "", "a" * 200]:
            with pytest.raises(InvalidIdError):
                await store.put_record(Record(kind=bad, id="x"), expected_version=0)
            with pytest.raises(InvalidIdError):
                await store.put_record(Record(kind="thread", id=bad), expected_version=0)
            with pytest.raises(InvalidIdError):
                await store.append_rows(bad, 0, [Row("m", "{}")])
            with pytest.raises(InvalidIdError):
                await store.delete_segments([bad])
            with pytest.raises(InvalidIdError):
                await store.delete_record("thread", bad)
        with pytest.raises(InvalidIdError):
            await store.get_blob("../../../etc/passwd")
        assert tree(tmp_path) == before


async def test_an_append_below_written_rows_keeps_the_file_sorted(tmp_path: Path) -> None:
    async with JsonFileStore(tmp_path) as store:
        await store.append_rows("seg", 10, [Row("m10", '"ten"'), Row("m11", '"eleven"')])
        await store.append_rows("seg", 0, [Row("m0", '"zero"')])
        lines = (tmp_path / "segments" / "seg.jsonl").read_text().splitlines()
        assert [json.loads(line)["position"] for line in lines] == [0, 10, 11]
        assert await store.read_rows("seg", 10, 12) == ['"ten"', '"eleven"']
        assert await store.locate_message("m0") == [("seg", 0)]


async def test_reading_the_tail_of_a_long_segment_reads_a_few_kilobytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    padding = "x" * 480
    async with JsonFileStore(tmp_path) as store:
        for start in range(0, 20_000, 2_000):
            rows = [Row(f"m{i}", json.dumps(f"{i} {padding}")) for i in range(start, start + 2_000)]
            await store.append_rows("long", start, rows)
        read = 0
        pread = os.pread

        def counting_pread(fd: int, size: int, offset: int) -> bytes:
            nonlocal read
            data = pread(fd, size, offset)
            read += len(data)
            return data

        monkeypatch.setattr(os, "pread", counting_pread)
        tail = await store.read_rows("long", 19_995, 20_000)
    assert [json.loads(r).split()[0] for r in tail] == [str(i) for i in range(19_995, 20_000)]
    assert (tmp_path / "segments" / "long.jsonl").stat().st_size > 10_000_000
    assert read < 200_000


class _Reads:
    """Counts `os.pread` calls and the bytes they return."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls = self.bytes = 0
        self._pread = os.pread
        monkeypatch.setattr(os, "pread", self._counting)

    def _counting(self, fd: int, size: int, offset: int) -> bytes:
        data = self._pread(fd, size, offset)
        self.calls += 1
        self.bytes += len(data)
        return data

    def reset(self) -> None:
        self.calls = self.bytes = 0


LONG_LINE = 20_000_000
READS = 64
"""A few scans of the long line at most, each O(log n) reads that double."""
SLACK = 1 << 20
"""Bytes read beside the long line itself (its neighbours, probes of line starts)."""


async def test_a_long_line_is_read_in_a_few_reads_whatever_its_length(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Linear, not quadratic: a line of n bytes takes O(log n) reads, each growing.

    Reads of a fixed size (64 KiB: ~300 of them for 20 MB, 4 KiB: ~5,000) joined one by
    one cost O(n^2) copies; reads that double cost O(n) however they are joined. So
    counting reads guards the time it takes, without timing anything.
    """
    long = json.dumps({"text": "x" * LONG_LINE})
    async with JsonFileStore(tmp_path) as store:
        await store.append_rows("seg", 0, [Row("m0", '"first"'), Row("m1", long)])
        size = (tmp_path / "segments" / "seg.jsonl").stat().st_size
        reads = _Reads(monkeypatch)
        await store.append_rows("seg", 2, [Row("m2", '"after"')])  # finds the last position
        assert reads.calls <= READS and reads.bytes <= 2 * size + SLACK
        for start, end in [(0, 3), (1, 2), (2, 3)]:  # from the start; at it; past it
            reads.reset()
            rows = await store.read_rows("seg", start, end)
            assert len(rows) == end - start and rows[0] == ['"first"', long, '"after"'][start]
            assert reads.calls <= READS and reads.bytes <= 2 * size + SLACK, (start, end)
        reads.reset()
        assert await store.locate_message("m2") == [("seg", 2)]  # indexes every line
        assert reads.calls <= READS and reads.bytes <= 2 * size + SLACK


def test_the_store_runs_on_trio(tmp_path: Path) -> None:
    async def session() -> list[str]:
        async with JsonFileStore(tmp_path) as store:
            thread = await ChatMessageThread.create(store)
            await thread.on_new_messages([Message.user("on trio")])
            fork = await thread.fork()
            loaded = await ChatMessageThread.load(fork.id, store=store, lazy=True)
            return [m.text for m in await loaded.get_messages(-1)]

    assert anyio.run(session, backend="trio") == ["on trio"]


async def test_vacuum_removes_temporary_files_a_crash_left(tmp_path: Path) -> None:
    thread = await saved_thread(tmp_path, ["a"])
    stale = tmp_path / "records" / "thread" / f".{thread.id}.json.dead.tmp"
    fresh = tmp_path / "blobs" / ".abc.beef.tmp"
    for path in (stale, fresh):
        path.write_bytes(b"half a rec")
    an_hour_ago = time.time() - 3600
    os.utime(stale, (an_hour_ago, an_hour_ago))
    async with JsonFileStore(tmp_path) as store:
        await store.vacuum(grace=60)
        assert [m.text for m in (await ChatMessageThread.load(thread.id, store=store)).messages]
    assert not stale.exists() and fresh.exists()


async def test_damaged_records_and_blobs_are_reported_by_file(tmp_path: Path) -> None:
    async with JsonFileStore(tmp_path) as store:
        digest = await store.put_blob(b"state")
        await store.put_record(Record(kind="thread", id="t1"), expected_version=0)
        (tmp_path / "blobs" / digest).write_bytes(b"other")
        (tmp_path / "records" / "thread" / "t2.json").write_text(
            (tmp_path / "records" / "thread" / "t1.json").read_text()
        )
        with pytest.raises(StoreCorruptedError, match=digest):
            await store.get_blob(digest)
        with pytest.raises(StoreCorruptedError, match=r"t2\.json.*holds record thread/t1"):
            await store.get_record("thread", "t2")


async def test_an_unopened_store_says_how_to_open_it(tmp_path: Path) -> None:
    store = JsonFileStore(tmp_path)
    with pytest.raises(RuntimeError, match="async with"):
        await store.get_record("thread", "t1")
    assert os.listdir(tmp_path) == []  # constructing it did no I/O
