"""Routes of `/api/runs`: workflow runs, read-only (resuming one needs its workflow's code)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from agent_threads.server.api.handles import workflow_thread
from agent_threads.server.api.models import Order, PageLimit, RunInfo, SubThreadInfo, ThreadList
from agent_threads.server.auth import Store
from agent_threads.server.errors import error_responses
from agent_threads.threads.listing import ThreadSummary, list_threads
from agent_threads.threads.workflow.execution import StepRecord
from agent_threads.threads.workflow.thread import WorkflowThread

router = APIRouter(prefix="/api/runs", tags=["workflow runs"])

_READ = error_responses(401, 404, 422, 503)


@router.get("", responses=error_responses(401, 422, 503))
async def get_runs(
    store: Store,
    order: Order = "desc",
    limit: PageLimit = 20,
    after: Annotated[str | None, Query(description="the `next_cursor` of the page before")] = None,
) -> ThreadList:
    """Workflow runs (workflow threads), newest update first, with their status."""
    page = await list_threads(
        store, kind=WorkflowThread.type_name, order=order, limit=limit, after=after
    )
    return ThreadList(threads=list(page.threads), next_cursor=page.next_cursor)


@router.get("/{run_id}", responses=_READ)
async def get_run(run_id: str, store: Store) -> RunInfo:
    """A run's status, step history, current and next steps, and sub-thread ids."""
    run = await workflow_thread(store, run_id)
    return RunInfo.of(ThreadSummary.of(run.record), run.execution, dict(run.sub_thread_ids))


@router.get("/{run_id}/sub-threads", responses=_READ)
async def get_sub_threads(run_id: str, store: Store) -> list[SubThreadInfo]:
    """A run's sub-threads (one per agent key), in creation order."""
    run = await workflow_thread(store, run_id)
    return [
        SubThreadInfo(key=key, thread=ThreadSummary.of(sub.record))
        for key, sub in run.sub_threads.items()
    ]


@router.get("/{run_id}/interrupts", responses=_READ)
async def get_interrupts(run_id: str, store: Store) -> list[StepRecord]:
    """The steps of a run waiting for a reply (their `prompt` says what they ask)."""
    run = await workflow_thread(store, run_id)
    return list(run.execution.interrupts)
