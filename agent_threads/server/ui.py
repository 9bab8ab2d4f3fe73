"""The web inspector at `/ui`: pages over the same JSON API a script calls.

Every page is one HTML shell (`templates/inspector.html`) naming what it shows
(`data-page`, `data-id`); `static/inspector.js` reads it from `/api` with the caller's
key (asked once when the service has keys, kept in the tab's `sessionStorage`, sent as
`Authorization: Bearer`), so tenants and keys hold where they hold for any client.
A service without keys has nothing to ask: there the thread list and a thread's first
messages are rendered into the shell by calling the same route functions, readable
without JavaScript, which then draws the full page. Nothing is loaded from outside the
server: the inspector works offline.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Literal

from fastapi import APIRouter, HTTPException, Request
from fastapi.responses import HTMLResponse, Response

from agent_threads.errors import AgentThreadsError
from agent_threads.messages import Message
from agent_threads.server.api.messages import get_messages
from agent_threads.server.api.threads import get_thread, get_threads
from agent_threads.server.auth import Tenants
from agent_threads.stores.base import ThreadStore

router = APIRouter(prefix="/ui", include_in_schema=False)

_PACKAGE = "agent_threads.server"
_STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
Page = Literal["threads", "thread", "runs", "run"]


def _shell(page: Page, item_id: str = "", content: str = "") -> HTMLResponse:
    template = resources.files(_PACKAGE).joinpath("templates", "inspector.html").read_text()
    body = (
        template.replace("{{page}}", page)
        .replace("{{id}}", html.escape(item_id, quote=True))
        .replace("{{title}}", html.escape(f"{page} {item_id}".strip()))
        .replace("{{content}}", content)
    )
    return HTMLResponse(body, headers={"Cache-Control": "no-store"})


def _anonymous_store(request: Request) -> ThreadStore | None:
    """The whole store when the service has no keys (None: the page asks for a key)."""
    tenants: Tenants = request.app.state.tenants
    return None if tenants.names else tenants.store_for(None)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


async def _thread_rows(store: ThreadStore, request: Request) -> str:
    query = request.query_params
    tags = " ".join(query.get("tag", "").split())
    listing = await get_threads(
        store,
        tag=tags.split(" ") if tags else [],
        kind=query.get("kind") or None,
        title=query.get("title") or None,
        after=query.get("after") or None,
    )
    rows = "".join(
        f'<tr><td><a href="/ui/{"runs" if t.kind == "workflow" else "threads"}/{_e(t.id)}">'
        f"{_e(t.title or '(untitled)')}</a></td><td class=mono>{_e(t.id)}</td>"
        f"<td>{_e(t.kind)}</td><td class=num>{t.message_count}</td>"
        f"<td>{_e(t.updated_at.isoformat(timespec='seconds'))}</td></tr>"
        for t in listing.threads
    )
    return (
        "<h1>Threads</h1><table><thead><tr><th>Title</th><th>Id</th><th>Kind</th>"
        f"<th>Messages</th><th>Updated</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _message_text(message: Message) -> str:
    shown = []
    for part in message.contents:
        if part.type in ("text", "summary"):
            shown.append(_e(getattr(part, "text", "")))
        elif part.type == "tool_call":
            shown.append(f"<code>tool call {_e(part.name)}</code>")
        elif part.type == "tool_result":
            shown.append(f"<code>tool result {_e(part.call_id)}</code>")
    return "<br>".join(shown)


async def _thread_messages(store: ThreadStore, thread_id: str) -> str:
    summary = await get_thread(thread_id, store)
    if summary.kind == "workflow":
        return f"<h1>{_e(summary.title or thread_id)}</h1>"
    page = await get_messages(thread_id, store, limit=100)
    items = "".join(
        f"<article class='message role-{_e(m.role)}'><div class=meta><b>{_e(m.role)}</b></div>"
        f"<div class=text>{_message_text(m)}</div></article>"
        for m in page.messages
    )
    more = f"<p class=muted>{page.head - len(page.messages)} more</p>" if page.has_more else ""
    return f"<h1>{_e(summary.title or '(untitled)')}</h1><section>{items}</section>{more}"


@router.get("")
@router.get("/")
async def threads_page(request: Request) -> HTMLResponse:
    """The thread list: search by title, filter by tags, page through."""
    store = _anonymous_store(request)
    try:
        content = "" if store is None else await _thread_rows(store, request)
    except AgentThreadsError:  # a bad filter or cursor: the script tells what is wrong
        content = ""
    return _shell("threads", content=content)


@router.get("/threads/{thread_id}")
async def thread_page(thread_id: str, request: Request) -> HTMLResponse:
    """A thread: its messages (live), checkpoint timeline and fork tree."""
    store = _anonymous_store(request)
    try:
        content = "" if store is None else await _thread_messages(store, thread_id)
    except AgentThreadsError:  # no such thread: the script tells it
        content = ""
    return _shell("thread", thread_id, content)


@router.get("/runs")
async def runs_page() -> HTMLResponse:
    """The workflow runs."""
    return _shell("runs")


@router.get("/runs/{run_id}")
async def run_page(run_id: str) -> HTMLResponse:
    """A workflow run: its agents' sub-threads, step history and pending interrupts."""
    return _shell("run", run_id)


@router.get("/static/{name}")
async def static_file(name: str) -> Response:
    """A file of `static/` (no subfolders); 404 for any other name."""
    suffix = name[name.rfind(".") :] if "." in name else ""
    folder = resources.files(_PACKAGE).joinpath("static")
    names = {entry.name for entry in folder.iterdir()}
    if name not in names or suffix not in _STATIC_TYPES:
        raise HTTPException(404, f"no static file {name!r}")
    return Response(
        folder.joinpath(name).read_bytes(),
        media_type=_STATIC_TYPES[suffix],
        headers={"Cache-Control": "no-cache"},
    )


__all__ = ["router"]
