"""The web inspector at `/ui`: pages over the same JSON API a script calls.

Every page is one HTML shell (`templates/inspector.html`) naming what it shows
(`data-page`, `data-id`); `static/inspector.js` reads it from `/api` with the caller's
key (asked once when the service has keys, kept in the tab's `sessionStorage`, sent as
`Authorization: Bearer`), so tenants and keys hold where they hold for any client.
Nothing is loaded from outside the server: the inspector works offline.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Literal

from fastapi import APIRouter, HTTPException
from fastapi.responses import HTMLResponse, Response

router = APIRouter(prefix="/ui", include_in_schema=False)

_PACKAGE = "agent_threads.server"
_STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml"}
Page = Literal["threads", "thread", "runs", "run"]


def _shell(page: Page, item_id: str = "") -> HTMLResponse:
    template = resources.files(_PACKAGE).joinpath("templates", "inspector.html").read_text()
    body = (
        template.replace("{{page}}", page)
        .replace("{{id}}", html.escape(item_id, quote=True))
        .replace("{{title}}", html.escape(f"{page} {item_id}".strip()))
    )
    return HTMLResponse(body, headers={"Cache-Control": "no-store"})


@router.get("")
@router.get("/")
async def threads_page() -> HTMLResponse:
    """The thread list: search by title, filter by tags, page through."""
    return _shell("threads")


@router.get("/threads/{thread_id}")
async def thread_page(thread_id: str) -> HTMLResponse:
    """A thread: its messages (live), checkpoint timeline and fork tree."""
    return _shell("thread", thread_id)


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
