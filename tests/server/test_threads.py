"""/api/threads: create, list, read, change, delete, fork, export and import."""

from __future__ import annotations

import httpx

from .conftest import error_of, new_thread, text


async def test_a_thread_is_created_with_its_first_messages(client: httpx.AsyncClient) -> None:
    body = {
        "id": "t1",
        "title": "Billing",
        "tags": {"env": "prod"},
        "metadata": {"customer": 42},
        "messages": [text("hello"), text("hi", role="assistant")],
    }
    created = await client.post("/api/threads", json=body)
    assert created.status_code == 201
    summary = created.json()
    assert (summary["id"], summary["kind"], summary["title"]) == ("t1", "chat", "Billing")
    assert (summary["tags"], summary["metadata"], summary["message_count"]) == (
        {"env": "prod"},
        {"customer": 42},
        2,
    )
    assert (await client.get("/api/threads/t1")).json() == summary


async def test_a_thread_whose_messages_are_refused_is_not_kept(client: httpx.AsyncClient) -> None:
    twice = text("same", id="m1")
    answer = await client.post("/api/threads", json={"id": "t1", "messages": [twice, twice]})
    assert error_of(answer, 409)["param"] == "m1"
    error_of(await client.get("/api/threads/t1"), 404)


async def test_listing_filters_by_tag_kind_and_title_and_pages_with_a_cursor(
    client: httpx.AsyncClient,
) -> None:
    for n in range(5):
        await new_thread(client, title=f"Support {n}", tags={"env": "prod" if n % 2 else "dev"})
    await new_thread(client, title="other", tags={"flag": ""})
    prod = (await client.get("/api/threads", params={"tag": "env:prod"})).json()
    assert [t["title"] for t in prod["threads"]] == ["Support 3", "Support 1"]
    assert [t["title"] for t in (await client.get("/api/threads?tag=flag")).json()["threads"]] == [
        "other"
    ]
    found = await client.get(
        "/api/threads", params={"title": "SUPPORT", "kind": "chat", "limit": 2}
    )
    page = found.json()
    assert [t["title"] for t in page["threads"]] == ["Support 4", "Support 3"]
    rest = await client.get(
        "/api/threads", params={"title": "support", "limit": 2, "after": page["next_cursor"]}
    )
    assert [t["title"] for t in rest.json()["threads"]] == ["Support 2", "Support 1"]
    oldest = await client.get("/api/threads", params={"order": "asc", "limit": 1})
    assert oldest.json()["threads"][0]["title"] == "Support 0"


async def test_listing_refuses_bad_limits_and_cursors_naming_them(
    client: httpx.AsyncClient,
) -> None:
    for limit in (0, 101):
        assert error_of(await client.get(f"/api/threads?limit={limit}"), 422)["param"] == (
            "query.limit"
        )
    assert error_of(await client.get("/api/threads?after=nope"), 422)["param"] == "after"
    assert error_of(await client.get("/api/threads?tag=bad key:x"), 422)["param"].startswith("tags")


async def test_patch_changes_title_tags_and_metadata(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a", title="old", tags={"x": "1"})
    changed = await client.patch(
        f"/api/threads/{thread['id']}", json={"title": "new", "tags": {"y": "2"}}
    )
    assert changed.status_code == 200
    assert (changed.json()["title"], changed.json()["tags"]) == ("new", {"y": "2"})
    assert changed.json()["updated_at"] > thread["updated_at"]
    metadata = await client.patch(f"/api/threads/{thread['id']}", json={"metadata": {"k": [1]}})
    assert (metadata.json()["title"], metadata.json()["metadata"]) == ("new", {"k": [1]})
    bad = await client.patch(f"/api/threads/{thread['id']}", json={"tags": {"bad key": "v"}})
    assert "bad key" in error_of(bad, 422)["param"]


async def test_delete_removes_the_thread_but_not_its_forks(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a", "b")
    fork = (await client.post(f"/api/threads/{thread['id']}/fork", json={})).json()
    deleted = await client.delete(f"/api/threads/{thread['id']}")
    assert deleted.json() == {"id": thread["id"], "deleted": True}
    error_of(await client.get(f"/api/threads/{thread['id']}"), 404)
    error_of(await client.delete(f"/api/threads/{thread['id']}"), 404)
    assert (await client.get(f"/api/threads/{fork['id']}/messages")).json()["head"] == 2


async def test_fork_at_a_message_with_its_own_id_title_and_tags(client: httpx.AsyncClient) -> None:
    thread = await new_thread(client, "a", "b", "c", tags={"env": "prod"})
    messages = (await client.get(f"/api/threads/{thread['id']}/messages")).json()["messages"]
    body = {
        "id": "f1",
        "title": "what if",
        "tags": {"env": "lab"},
        "from_message_id": messages[1]["id"],
        "reset_metrics": False,
    }
    forked = await client.post(f"/api/threads/{thread['id']}/fork", json=body)
    assert forked.status_code == 201
    fork = forked.json()
    assert (fork["id"], fork["title"], fork["tags"], fork["parent_id"]) == (
        "f1",
        "what if",
        {"env": "lab"},
        thread["id"],
    )
    assert (fork["fork_point"], fork["message_count"]) == (messages[1]["id"], 2)
    reset = (await client.post(f"/api/threads/{thread['id']}/fork", json={})).json()
    assert (reset["message_count"], reset["tags"]) == (0, {"env": "prod"})


async def test_fork_answers_404_for_an_unknown_thread_or_message_and_409_for_a_taken_id(
    client: httpx.AsyncClient,
) -> None:
    thread = await new_thread(client, "a")
    error_of(await client.post("/api/threads/nobody/fork", json={}), 404)
    unknown = await client.post(
        f"/api/threads/{thread['id']}/fork", json={"from_message_id": "nowhere"}
    )
    assert error_of(unknown, 404)["param"] == "nowhere"
    taken = await client.post(f"/api/threads/{thread['id']}/fork", json={"id": thread["id"]})
    assert error_of(taken, 409)["type"] == "conflict"
    extra = await client.post(f"/api/threads/{thread['id']}/fork", json={"surprise": 1})
    assert error_of(extra, 422)["param"] == "body.surprise"


async def test_export_and_import_round_trip_a_thread_with_its_checkpoints(
    client: httpx.AsyncClient, other: httpx.AsyncClient
) -> None:
    thread = await new_thread(client, "a", "b", id="exported")
    await client.post(f"/api/threads/{thread['id']}/checkpoints", json={"label": "two"})
    exported = await client.get(f"/api/threads/{thread['id']}/export")
    assert exported.headers["content-type"] == "application/json"
    document = exported.json()
    assert (document["format"], document["id"]) == ("agent-threads/thread", "exported")
    error_of(await client.post("/api/threads/import", json=document), 409)
    imported = await other.post("/api/threads/import", json=document)
    assert imported.status_code == 201 and imported.json()["message_count"] == 2
    checkpoints = (await other.get("/api/threads/exported/checkpoints")).json()["checkpoints"]
    assert [c["label"] for c in checkpoints] == ["two"]
    bad = await other.post("/api/threads/import", json={"format": "something else"})
    assert error_of(bad, 422)["param"] == "thread export"
