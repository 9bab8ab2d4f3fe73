"""Tags are a dict[str, str] on threads, forks, copies, updates, exports and imports."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_threads import (
    AgentThread,
    ChatMessageThread,
    InvalidValueError,
    MemoryStore,
    Message,
    SchemaVersionError,
    WorkflowThread,
    tag_labels,
)
from agent_threads.core.records import SCHEMA_VERSION, THREAD_KIND
from agent_threads.core.tags import MAX_KEY_LENGTH, MAX_LABEL_LENGTH, MAX_VALUE_LENGTH
from agent_threads.stores.base import validate_tag
from agent_threads.threads.base import EXPORT_SCHEMA_VERSION

TAGS = {"env": "prod", "team": "search", "reviewed": ""}


async def tagged(store: MemoryStore | None = None, **tags: str) -> ChatMessageThread:
    thread = await ChatMessageThread.create(store or MemoryStore(), title="t", tags=tags or TAGS)
    await thread.on_new_messages([Message.user("a"), Message.assistant("b")])
    return thread


# -- what a thread holds -------------------------------------------------------------------


async def test_create_keeps_every_key_and_value() -> None:
    thread = await tagged()
    assert thread.tags == TAGS
    assert dict(thread.tags) == TAGS
    assert list(thread.tags) == sorted(TAGS)  # read back sorted by key, in every store


async def test_tags_are_read_only() -> None:
    thread = await tagged()
    tags: Any = thread.tags
    with pytest.raises(TypeError):
        tags["env"] = "dev"
    assert thread.tags["env"] == "prod"


async def test_changing_the_dict_given_to_create_does_not_change_the_thread() -> None:
    given_tags = {"env": "prod"}
    thread = await ChatMessageThread.create(tags=given_tags)
    given_tags["env"] = "dev"
    assert thread.tags == {"env": "prod"}


async def test_a_thread_without_tags_has_an_empty_mapping() -> None:
    assert (await ChatMessageThread.create()).tags == {}


async def test_load_reads_the_tags_back() -> None:
    store = MemoryStore()
    thread = await tagged(store)
    assert (await ChatMessageThread.load(thread.id, store=store)).tags == TAGS


async def test_fork_inherits_the_tags_by_default() -> None:
    parent = await tagged()
    assert (await parent.fork()).tags == TAGS
    assert (await parent.fork(message_id=parent.messages[0].id)).tags == TAGS


async def test_fork_with_tags_replaces_them_and_leaves_the_parent_unchanged() -> None:
    parent = await tagged()
    child = await parent.fork(tags={**parent.tags, "env": "staging"})
    assert child.tags == {**TAGS, "env": "staging"}
    assert parent.tags == TAGS
    assert (await parent.fork(tags={})).tags == {}


async def test_copy_keeps_the_tags_and_changes_to_either_stay_apart() -> None:
    original = await tagged()
    twin = original.copy()
    assert twin.tags == TAGS
    await twin.update(tags={"env": "dev"})
    assert (twin.tags, original.tags) == ({"env": "dev"}, TAGS)
    loaded = await ChatMessageThread.load(twin.id, store=twin.store)
    assert loaded.tags == {"env": "dev"}


async def test_update_replaces_all_tags_and_none_leaves_them() -> None:
    thread = await tagged()
    await thread.update(title="renamed")
    assert thread.tags == TAGS
    await thread.update(tags={"env": "dev"})
    assert thread.tags == {"env": "dev"}
    await thread.update(tags={})
    assert thread.tags == {}
    again = await ChatMessageThread.load(thread.id, store=thread.store)
    assert (again.tags, again.title) == ({}, "renamed")


async def test_a_snapshot_fork_takes_the_threads_tags_or_its_own() -> None:
    thread = await tagged()
    point = await thread.checkpoint("two")
    snapshot = await thread.at(point)
    assert (await snapshot.fork()).tags == TAGS
    assert (await snapshot.fork(tags={"from": "snapshot"})).tags == {"from": "snapshot"}


async def test_export_writes_an_object_and_import_reads_it_back() -> None:
    thread = await tagged()
    document = json.loads(thread.to_json())
    assert (document["schema_version"], document["tags"]) == (EXPORT_SCHEMA_VERSION, TAGS)
    restored = await AgentThread.from_json(thread.to_json(), store=MemoryStore())
    assert restored.tags == TAGS
    assert json.loads(restored.to_json())["tags"] == TAGS


async def test_workflow_threads_carry_tags_through_fork_copy_and_export() -> None:
    run = await WorkflowThread.create(tags={"workflow": "research"})
    assert run.tags == {"workflow": "research"}
    assert (await run.fork()).tags == {"workflow": "research"}
    assert (await run.fork(tags={"try": "2"})).tags == {"try": "2"}
    assert run.copy().tags == {"workflow": "research"}
    restored = await AgentThread.from_json(run.to_json(), store=MemoryStore())
    assert isinstance(restored, WorkflowThread) and restored.tags == {"workflow": "research"}
    await run.update(tags={"workflow": "research", "done": ""})
    loaded = await WorkflowThread.load(run.id, store=run.store)
    assert loaded.tags == {"workflow": "research", "done": ""}


# -- what is refused ---------------------------------------------------------------------

WRONG: dict[str, object] = {
    "a list of labels": ["x", "y"],
    "a tuple of labels": ("x",),
    "a set of labels": {"x"},
    "a string": "env=prod",
    "bytes": b"env",
    "an int": 5,
    "an int value": {"n": 1},
    "a list value": {"env": ["prod"]},
    "a None value": {"env": None},
    "a bool value": {"on": True},
    "an int key": {1: "x"},
    "an empty key": {"": "x"},
    "a key with =": {"env=prod": ""},
    "a key with a space": {"my tag": ""},
    "a key with a non-ASCII letter": {"résumé": ""},
    "a key starting with #": {"#x": ""},
    "a key too long": {"k" * (MAX_KEY_LENGTH + 1): ""},
    "a value too long": {"k": "v" * (MAX_VALUE_LENGTH + 1)},
    "a value with a newline": {"k": "a\nb"},
    "a value with NUL": {"k": "a\x00b"},
}


@pytest.mark.parametrize("tags", WRONG.values(), ids=WRONG.keys())
async def test_create_refuses_tags_that_are_not_valid_and_writes_nothing(tags: Any) -> None:
    store = MemoryStore()
    with pytest.raises(InvalidValueError) as caught:
        await ChatMessageThread.create(store, id="bad", tags=tags)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    assert "thread 'bad' tags" in caught.value.where
    assert await store.list_records(THREAD_KIND) == []


@pytest.mark.parametrize("tags", WRONG.values(), ids=WRONG.keys())
async def test_update_and_fork_refuse_them_and_change_nothing(tags: Any) -> None:
    thread = await tagged()
    before = thread.to_json()
    with pytest.raises(InvalidValueError, match=thread.id):
        await thread.update(tags=tags)
    with pytest.raises(InvalidValueError):
        await thread.fork(tags=tags)
    again = await ChatMessageThread.load(thread.id, store=thread.store)
    assert again.to_json() == before
    assert [r.id for r in await thread.store.list_records(THREAD_KIND)] == [thread.id]


async def test_the_error_names_the_key_at_fault() -> None:
    tags: Any = {"env": "prod", "count": 3}
    with pytest.raises(InvalidValueError) as caught:
        await ChatMessageThread.create(id="t1", tags=tags)
    assert caught.value.where == "thread 't1' tags['count']"
    assert "string, not int" in str(caught.value)


async def test_a_list_of_labels_gets_a_hint_to_pass_a_dict() -> None:
    labels: Any = ["urgent", "billing"]
    with pytest.raises(InvalidValueError, match=r"\{'urgent': '', 'billing': ''\}"):
        await ChatMessageThread.create(tags=labels)


# -- store labels and listing ----------------------------------------------------------------


async def test_the_record_holds_the_key_and_the_pair_as_labels() -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store, tags={"env": "prod", "reviewed": ""})
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None
    assert set(record.tags) == {"env", "env=prod", "reviewed", "reviewed="}
    assert record.data["tags"] == {"env": "prod", "reviewed": ""}
    assert tag_labels({"env": "prod"}) == ("env", "env=prod")


async def test_a_pair_too_long_for_a_label_is_labelled_by_its_hash() -> None:
    key, value = "k" * MAX_KEY_LENGTH, "v" * MAX_VALUE_LENGTH
    labels = tag_labels({key: value})
    assert labels[0] == key and labels[1].startswith("#") and len(labels[1]) == 65
    store = MemoryStore()
    thread = await ChatMessageThread.create(store, tags={key: value, "other": "x"})
    assert await ChatMessageThread.find(store, tags={key: value}) == [thread.id]
    assert await ChatMessageThread.find(store, tags={key: value[:-1]}) == []


async def test_find_matches_keys_and_values_exactly() -> None:
    store = MemoryStore()
    prod = await ChatMessageThread.create(store, tags={"env": "prod", "team": "a"})
    dev = await ChatMessageThread.create(store, tags={"env": "dev", "team": "a"})
    bare = await ChatMessageThread.create(store, tags={"env": ""})
    await ChatMessageThread.create(store)
    assert await ChatMessageThread.find(store, tags={"env": "prod"}) == [prod.id]
    assert await ChatMessageThread.find(store, tags={"team": "a"}) == sorted([prod.id, dev.id])
    assert await ChatMessageThread.find(store, tags={"env": ""}) == [bare.id]
    assert await ChatMessageThread.find(store, tags={"env": "dev", "team": "b"}) == []
    assert len(await AgentThread.find(store, tags={})) == 4


async def test_find_on_a_subclass_lists_only_its_type() -> None:
    store = MemoryStore()
    chat = await ChatMessageThread.create(store, tags={"env": "prod"})
    run = await WorkflowThread.create(store, tags={"env": "prod"})
    assert await ChatMessageThread.find(store, tags={"env": "prod"}) == [chat.id]
    assert await WorkflowThread.find(store, tags={"env": "prod"}) == [run.id]
    assert await AgentThread.find(store, tags={"env": "prod"}) == sorted([chat.id, run.id])


async def test_find_refuses_tags_that_are_not_a_dict() -> None:
    labels: Any = ["env"]
    with pytest.raises(InvalidValueError, match="find tags"):
        await AgentThread.find(MemoryStore(), tags=labels)


KEYS = st.text(
    alphabet="abcXYZ019_-.:/",
    min_size=1,
    max_size=MAX_KEY_LENGTH,
)
VALUES = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs")), max_size=MAX_VALUE_LENGTH
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tags=st.dictionaries(KEYS, VALUES, max_size=6))
async def test_any_valid_tags_round_trip_and_label_the_record(tags: dict[str, str]) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store, tags=tags)
    assert (await ChatMessageThread.load(thread.id, store=store)).tags == tags
    assert (await AgentThread.from_json(thread.to_json())).tags == tags
    labels = tag_labels(tags)
    assert all(validate_tag(label) and len(label) <= MAX_LABEL_LENGTH for label in labels)
    assert len(labels) == 2 * len(tags)
    assert await ChatMessageThread.find(store, tags=tags) == [thread.id]


# -- older versions ------------------------------------------------------------------------


def old_export(document: dict[str, Any], labels: list[str]) -> dict[str, Any]:
    """The document as version 1 of the export format wrote it: tags as a list of labels."""
    return {**document, "schema_version": 1, "tags": labels}


async def test_an_export_of_version_1_imports_its_labels_as_empty_values() -> None:
    document = old_export(json.loads((await tagged()).to_json()), ["x", "y"])
    store = MemoryStore()
    restored = await AgentThread.from_json(json.dumps(document), store=store)
    assert restored.tags == {"x": "", "y": ""}
    record = await store.get_record(THREAD_KIND, restored.id)
    assert record is not None and record.data["schema_version"] == SCHEMA_VERSION
    assert await AgentThread.find(store, tags={"x": ""}) == [restored.id]


async def test_an_old_label_outside_the_key_rules_still_forks_and_round_trips() -> None:
    document = old_export(json.loads((await tagged()).to_json()), ["needs review", "ok"])
    restored = await AgentThread.from_json(document)
    assert restored.tags == {"needs review": "", "ok": ""}
    assert (await restored.fork()).tags == restored.tags
    await restored.update(tags=restored.tags)  # a thread's own tags are taken as they are
    again = await AgentThread.from_json(restored.to_json())
    assert again.tags == {"needs review": "", "ok": ""}
    with pytest.raises(InvalidValueError, match="needs review"):  # a new dict: the rules
        await restored.update(tags={**restored.tags, "new": ""})


async def test_a_workflow_export_of_version_1_imports_its_labels_and_sub_threads() -> None:
    run = await WorkflowThread.create(tags={"a": "1"})
    document = json.loads(run.to_json())
    old = old_export(document, ["flow"])
    old["sub_threads"] = {k: old_export(d, ["sub"]) for k, d in document["sub_threads"].items()}
    restored = await AgentThread.from_json(old)
    assert isinstance(restored, WorkflowThread) and restored.tags == {"flow": ""}
    assert (await restored.get_sub_thread("main")).tags == {"sub": ""}


async def test_an_export_of_version_2_with_a_list_is_refused_with_the_hint() -> None:
    document = {**json.loads((await tagged()).to_json()), "tags": ["x"]}
    with pytest.raises(InvalidValueError, match=r"\{'x': ''\}"):
        await AgentThread.from_json(document)


async def test_an_export_of_a_newer_version_is_refused() -> None:
    document = json.loads((await tagged()).to_json())
    with pytest.raises(SchemaVersionError):
        await AgentThread.from_json({**document, "schema_version": EXPORT_SCHEMA_VERSION + 1})


async def test_a_record_of_a_newer_version_is_refused_by_load_and_find() -> None:
    store = MemoryStore()
    thread = await tagged(store)
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None
    newer = {**record.data, "schema_version": SCHEMA_VERSION + 1}
    await store.put_record(
        record.model_copy(update={"data": newer}), expected_version=record.version
    )
    with pytest.raises(SchemaVersionError):
        await ChatMessageThread.load(thread.id, store=store)
    with pytest.raises(SchemaVersionError):
        await AgentThread.find(store, tags={"env": "prod"})
