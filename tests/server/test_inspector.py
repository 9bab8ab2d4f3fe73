"""/ui in-process: the pages' shells and static files (the browser tests drive them)."""

from __future__ import annotations

import httpx
from fastapi import FastAPI


def _anonymous(app: FastAPI) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_pages_are_shells_naming_what_they_show(app: FastAPI) -> None:
    async with _anonymous(app) as client:  # no key: a shell holds no data, the API asks
        for path, page in [
            ("/ui", "threads"),
            ("/ui/", "threads"),
            ("/ui/runs", "runs"),
            ("/ui/threads/t1", "thread"),
            ("/ui/runs/r1", "run"),
        ]:
            answer = await client.get(path)
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/html")
            assert f'data-page="{page}"' in answer.text
            assert '<script src="/ui/static/inspector.js">' in answer.text
        assert (await client.get("/api/threads")).status_code == 401


async def test_an_id_is_escaped_in_its_page(app: FastAPI) -> None:
    async with _anonymous(app) as client:
        answer = await client.get('/ui/threads/"><b onclick=x>')
    assert "<b onclick" not in answer.text
    assert 'data-id="&quot;&gt;&lt;b onclick=x&gt;"' in answer.text


async def test_static_files_and_nothing_else(app: FastAPI) -> None:
    async with _anonymous(app) as client:
        script = await client.get("/ui/static/inspector.js")
        style = await client.get("/ui/static/inspector.css")
        assert script.headers["content-type"].startswith("text/javascript")
        assert style.headers["content-type"].startswith("text/css")
        assert "sessionStorage" in script.text
        for name in ["nothing.js", "..%2Fapp.py", "inspector.html"]:
            assert (await client.get(f"/ui/static/{name}")).status_code == 404
        schema = (await client.get("/openapi.json")).json()
    assert not [p for p in schema["paths"] if p.startswith("/ui")]
