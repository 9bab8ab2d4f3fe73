"""/api/runs: a workflow run's status, history, sub-threads and pending interrupts."""

from __future__ import annotations

from typing import Any

import httpx

from agent_threads import Message, ThreadStore
from agent_threads.server.app import create_app
from agent_threads.workflows import StepContext, Workflow, step


async def paused_run(store: ThreadStore) -> str:
    @step
    async def draft(ctx: StepContext) -> str:
        await ctx.emit(Message.assistant("a draft"))
        return "text"

    @step(agent="editor")
    async def approve(ctx: StepContext) -> Any:
        return await ctx.interrupt({"question": "publish?"})

    run = await Workflow("approval").edge(draft, approve).run(store=store, title="release")
    return run.id


async def test_a_runs_status_history_sub_threads_and_interrupts(store: ThreadStore) -> None:
    run_id = await paused_run(store)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(store)), base_url="http://test"
    ) as client:
        listed = (await client.get("/api/runs")).json()["threads"]
        assert [(r["id"], r["run_status"], r["workflow"]) for r in listed] == [
            (run_id, "paused", "approval")
        ]
        run = (await client.get(f"/api/runs/{run_id}")).json()
        assert (run["status"], run["workflow"], run["title"]) == ("paused", "approval", "release")
        assert [(s["step"], s["status"]) for s in run["history"]] == [
            ("draft", "completed"),
            ("approve", "interrupted"),
        ]
        assert set(run["sub_threads"]) == {"main", "draft", "editor"}
        (waiting,) = (await client.get(f"/api/runs/{run_id}/interrupts")).json()
        assert (waiting["step"], waiting["prompt"]) == ("approve", {"question": "publish?"})
        subs = (await client.get(f"/api/runs/{run_id}/sub-threads")).json()
        assert [s["key"] for s in subs] == ["main", "draft", "editor"]
        draft = next(s["thread"] for s in subs if s["key"] == "draft")
        messages = (await client.get(f"/api/threads/{draft['id']}/messages")).json()["messages"]
        assert [m["contents"][0]["text"] for m in messages] == ["a draft"]
        top = (await client.get("/api/threads")).json()["threads"]
        assert [t["id"] for t in top] == [run_id]  # sub-threads are listed only when asked
        assert (await client.get(f"/api/runs/{draft['id']}")).status_code == 404
        assert (await client.get("/api/runs/nobody/interrupts")).status_code == 404
