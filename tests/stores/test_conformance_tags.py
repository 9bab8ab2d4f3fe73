"""Thread tags on every store: round trips, listing by key and value, older records and files."""

from __future__ import annotations

import json
from pathlib import Path

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    Message,
    Record,
    ThreadStore,
    tag_labels,
)
from agent_threads.core.records import SCHEMA_VERSION, THREAD_KIND
from agent_threads.stores.base import LOGS_KEY

TAGS = {"env": "prod", "team": "search", "reviewed": ""}


async def stored_record(store: ThreadStore, thread_id: str) -> Record:
    record = await store.get_record(THREAD_KIND, thread_id)
    assert record is not None
    return record


async def test_tags_round_trip_through_create_fork_copy_update_and_load(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store, tags=TAGS)
    await thread.on_new_messages([Message.user("a")])
    fork = await thread.fork(tags={**thread.tags, "env": "staging"})
    copy = thread.copy()
    await copy.update(tags={"copy": "yes"})
    await thread.update(tags={**thread.tags, "reviewed": "by ada"})
    loaded = {
        t.id: (await ChatMessageThread.load(t.id, store=store)).tags for t in (thread, fork, copy)
    }
    assert loaded == {
        thread.id: {**TAGS, "reviewed": "by ada"},
        fork.id: {**TAGS, "env": "staging"},
        copy.id: {"copy": "yes"},
    }


async def test_tags_round_trip_through_export_and_import(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(tags=TAGS)
    await thread.on_new_messages([Message.user("a")])
    restored = await AgentThread.from_json(thread.to_json(), store=store)
    assert (await ChatMessageThread.load(restored.id, store=store)).tags == TAGS
    assert json.loads(await restored.export())["tags"] == TAGS


async def test_threads_are_listed_by_key_and_value(store: ThreadStore) -> None:
    prod = await ChatMessageThread.create(store, tags={"env": "prod", "team": "a"})
    dev = await ChatMessageThread.create(store, tags={"env": "dev", "team": "a"})
    plain = await ChatMessageThread.create(store, tags={"env": ""})
    await ChatMessageThread.create(store)
    assert await AgentThread.find(store, tags={"env": "prod"}) == [prod.id]
    assert await AgentThread.find(store, tags={"team": "a"}) == sorted([prod.id, dev.id])
    assert await AgentThread.find(store, tags={"env": ""}) == [plain.id]
    assert await AgentThread.find(store, tags={"env": "prod", "team": "b"}) == []
    by_labels = await store.list_records(THREAD_KIND, tags=tag_labels({"env": "dev"}))
    assert [r.id for r in by_labels] == [dev.id]
    by_key = await store.list_records(THREAD_KIND, tags=["env"])  # the key alone is a label
    assert [r.id for r in by_key] == sorted([prod.id, dev.id, plain.id])


async def test_a_value_too_long_for_a_label_is_listed_by_its_hash(store: ThreadStore) -> None:
    long_value = "https://example.com/" + "x" * 200
    thread = await ChatMessageThread.create(store, tags={"source": long_value})
    await ChatMessageThread.create(store, tags={"source": long_value[:-1]})
    assert await AgentThread.find(store, tags={"source": long_value}) == [thread.id]
    assert (await ChatMessageThread.load(thread.id, store=store)).tags == {"source": long_value}


# -- what older versions stored ---------------------------------------------------------


async def put_old_record(
    store: ThreadStore, thread: ChatMessageThread, *, version: int, labels: tuple[str, ...]
) -> None:
    """Rewrite the thread's record as `version` wrote it: tags as labels, none in the data."""
    record = await stored_record(store, thread.id)
    data = {k: v for k, v in record.data.items() if k != "tags"}
    data["schema_version"] = version
    if version == 1:
        data.pop(LOGS_KEY)
    old = record.model_copy(update={"data": data, "tags": labels})
    await store.put_record(old, expected_version=record.version)


async def test_a_record_of_version_2_reads_its_labels_as_tags(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await put_old_record(store, thread, version=2, labels=("x", "needs review"))
    old = await ChatMessageThread.load(thread.id, store=store)
    assert old.tags == {"x": "", "needs review": ""}
    assert await AgentThread.find(store, tags={"x": ""}) == [thread.id]
    assert await AgentThread.find(store, tags={"x": "1"}) == []
    assert (await old.fork()).tags == {"x": "", "needs review": ""}


async def test_a_record_of_version_2_is_written_as_version_3_on_its_next_write(
    store: ThreadStore,
) -> None:
    thread = await ChatMessageThread.create(store)
    await put_old_record(store, thread, version=2, labels=("x", "y"))
    old = await ChatMessageThread.load(thread.id, store=store)
    await old.on_new_messages([Message.user("a")])
    record = await stored_record(store, thread.id)
    assert record.data["schema_version"] == SCHEMA_VERSION
    assert record.data["tags"] == {"x": "", "y": ""}
    assert set(record.tags) == {"x", "x=", "y", "y="}
    by_labels = await store.list_records(THREAD_KIND, tags=tag_labels({"y": ""}))
    assert [r.id for r in by_labels] == [thread.id]


async def test_a_record_of_version_1_reads_its_labels_and_keeps_them(store: ThreadStore) -> None:
    thread = await ChatMessageThread.create(store)
    await thread.on_new_messages([Message.user("a")])
    await put_old_record(store, thread, version=1, labels=("x",))
    old = await ChatMessageThread.load(thread.id, store=store)
    assert old.tags == {"x": ""}
    await old.update(title="renamed")  # checkpoints stay records: still version 1
    assert (await stored_record(store, thread.id)).data["tags"] == {"x": ""}
    await old.checkpoint("now")  # moves it into the log: the current version
    record = await stored_record(store, thread.id)
    assert (record.data["schema_version"], record.data["tags"]) == (SCHEMA_VERSION, {"x": ""})
    assert (await ChatMessageThread.load(thread.id, store=store)).tags == {"x": ""}


async def test_an_export_file_of_version_1_imports_its_labels(
    store: ThreadStore, tmp_path: Path
) -> None:
    thread = await ChatMessageThread.create(title="old", tags={"ignored": "here"})
    await thread.on_new_messages([Message.user("a")])
    document = {**json.loads(thread.to_json()), "schema_version": 1, "tags": ["x", "y"]}
    path = tmp_path / "old-export.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    restored = await AgentThread.from_json(path.read_text(encoding="utf-8"), store=store)
    assert restored.tags == {"x": "", "y": ""}
    again = await ChatMessageThread.load(restored.id, store=store)
    assert (again.tags, again.title, len(again.messages)) == ({"x": "", "y": ""}, "old", 1)
    assert await AgentThread.find(store, tags={"y": ""}) == [restored.id]
