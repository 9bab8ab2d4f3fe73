"""Routes of `/api/threads`: create, list, read, change, delete and fork threads."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agent_threads.errors import AgentThreadsError, InvalidValueError
from agent_threads.server.api import writes
from agent_threads.server.api.handles import any_thread
from agent_threads.server.api.models import (
    Deleted,
    ForkRequest,
    Order,
    PageLimit,
    ThreadCreate,
    ThreadList,
    ThreadPatch,
)
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.server.lean_route import lean_post
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.listing import ThreadSummary, list_threads, thread_summary

router = APIRouter(prefix="/api/threads", tags=["threads"])

_COMMON = error_responses(401, 422, 503)


def parse_tag_filters(values: list[str]) -> dict[str, str]:
    """`key:value` query values as tags (`key` alone, or `key:`, is the tag with value "").

    Raises:
        InvalidValueError: a key is given twice, naming the parameter `tag`.
    """
    tags: dict[str, str] = {}
    for value in values:
        key, _, item = value.partition(":")
        if key in tags:
            raise InvalidValueError("tag", reason=f"the key {key!r} is given twice")
        tags[key] = item
    return tags


@router.post("", status_code=201, responses={**_COMMON, **error_responses(409, 413)})
async def create_thread(body: ThreadCreate, store: Store) -> ThreadSummary:
    """Create a chat thread, with its first messages if given (all or nothing)."""
    thread = await ChatMessageThread.create(
        store, id=body.id, title=body.title, tags=body.tags, metadata=body.metadata
    )
    if body.messages:
        try:
            await writes.append(thread, body.messages)  # saved before a store failure: kept
        except AgentThreadsError:
            await thread.delete()  # refused messages: the thread is not kept either
            raise
    return ThreadSummary.of(thread.record)  # from memory: no read can fail after the write


@router.get("", responses=_COMMON)
async def get_threads(
    store: Store,
    tag: Annotated[list[str], Query(description='`key:value` (or `key` for value "")')] = [],  # noqa: B006
    kind: str | None = None,
    title: Annotated[str | None, Query(description="text the title contains, any case")] = None,
    order: Order = "desc",
    limit: PageLimit = 20,
    after: Annotated[str | None, Query(description="the `next_cursor` of the page before")] = None,
    include_sub_threads: bool = False,
) -> ThreadList:
    """List threads, newest update first, filtered by tags, kind and title text."""
    page = await list_threads(
        store,
        kind=kind,
        tags=parse_tag_filters(tag),
        title_contains=title,
        order=order,
        limit=limit,
        after=after,
        include_sub_threads=include_sub_threads,
    )
    return ThreadList(threads=list(page.threads), next_cursor=page.next_cursor)


@router.get("/{thread_id}", responses={**_COMMON, **error_responses(404)})
async def get_thread(thread_id: str, store: Store) -> ThreadSummary:
    """A thread's summary (no messages: see `/messages`)."""
    return await thread_summary(store, thread_id)


@router.patch("/{thread_id}", responses={**_COMMON, **error_responses(404, 409, 413)})
async def patch_thread(thread_id: str, body: ThreadPatch, store: Store) -> ThreadSummary:
    """Change a thread's title, or replace its tags or metadata."""
    thread = await any_thread(store, thread_id)
    await thread.update(title=body.title, tags=body.tags, metadata=body.metadata)
    return ThreadSummary.of(thread.record)


@router.delete("/{thread_id}", responses={**_COMMON, **error_responses(404, 409)})
async def delete_thread(thread_id: str, store: Store) -> Deleted:
    """Delete a thread and its checkpoints; its forks keep working."""
    thread = await any_thread(store, thread_id)
    await thread.delete()
    return Deleted(id=thread_id)


@lean_post(
    router,
    "/{thread_id}/fork",
    status_code=201,
    responses={**_COMMON, **error_responses(404, 409, 413)},
)
async def fork_thread(thread_id: str, body: ForkRequest, store: Store) -> ThreadSummary:
    """Fork a thread (whole, or up to and including `from_message_id`): the fork's summary."""
    source = await any_thread(store, thread_id)
    fork = await source.fork(
        body.from_message_id,
        id=body.id,
        title=body.title,
        tags=body.tags,
        reset_stats=body.reset_metrics,
    )
    return ThreadSummary.of(fork.record)
