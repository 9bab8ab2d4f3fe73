"""The web inspector at /ui in headless Chromium, against uvicorn over a sample store.

Playwright comes with the dev extra; skipped when Chromium (/usr/bin/chromium) is missing, unless
AGENT_THREADS_REQUIRE_SERVICES=1: then they fail.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.sync_api import Browser, Page, expect, sync_playwright

from agent_threads import SQLiteStore
from agent_threads.server import create_app
from agent_threads.stores.tenant import TenantStore
from tests.server.inspector_sample import CHROMIUM_ARGS, Sample, build_sample, serving

CHROMIUM = Path("/usr/bin/chromium")
REQUIRED = os.environ.get("AGENT_THREADS_REQUIRE_SERVICES") == "1"


def _missing() -> str | None:
    if not CHROMIUM.exists():
        return f"Chromium is not at {CHROMIUM}"
    return None


@pytest.fixture(scope="module")
def sample_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Sample]]:
    """uvicorn on a free loopback port over a SQLite store holding the sample."""
    missing = _missing()
    if missing:
        if REQUIRED:
            pytest.fail(f"{missing} and AGENT_THREADS_REQUIRE_SERVICES=1")
        pytest.skip(missing)
    path = tmp_path_factory.mktemp("inspector") / "threads.db"

    async def fill() -> Sample:
        async with SQLiteStore(path) as store:
            return await build_sample(store)

    sample = anyio.run(fill)
    app = create_app(SQLiteStore(path), manage_store=True, events_poll_interval=0.05)
    with serving(app) as base:
        yield base, sample


@pytest.fixture(scope="module")
def browser(sample_server: tuple[str, Sample]) -> Iterator[Browser]:
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    opened = context.new_page()
    errors: list[Any] = []
    opened.on("pageerror", lambda error: errors.append(error))
    yield opened
    context.close()
    assert not errors, f"JavaScript errors: {errors}"


def test_search_a_thread_and_open_it(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui")
    expect(page.locator("#threads tbody tr")).to_have_count(5)  # sub-threads are left out
    page.fill("input[name=title]", "lisbon")
    page.click("#search button[type=submit]")
    expect(page.locator("#threads tbody tr")).to_have_count(2)
    page.fill("input[name=title]", "")
    page.fill("input[name=tag]", "project:travel team:ops")
    page.click("#search button[type=submit]")
    expect(page.locator("#threads tbody tr")).to_have_count(3)
    page.fill("input[name=tag]", "project:eng")
    page.click("#search button[type=submit]")
    expect(page.locator("#threads tbody tr")).to_have_count(1)
    page.click("text=Flaky test triage")
    expect(page).to_have_url(f"{base}/ui/threads/{sample.other}")
    expect(page.locator("#messages .message")).to_have_count(1)


def test_paging_through_threads(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, _ = sample_server
    page.goto(f"{base}/ui?limit=2")
    rows = page.locator("#threads tbody tr")
    seen: list[str] = []
    for expected in (2, 2, 1):
        expect(rows).to_have_count(expected)
        seen += rows.all_inner_texts()
        if expected == 2:
            page.click("#next-page")
    expect(page.locator("#next-page")).to_have_count(0)
    assert len(set(seen)) == 5


def test_a_tool_call_opens_beside_its_result(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui/threads/{sample.trip}")
    expect(page.locator("#messages .message")).to_have_count(5)
    call = page.locator(f"details.tool-call[data-call-id={sample.call_id}]")
    expect(call.locator(".pair")).not_to_be_visible()
    call.locator("summary").click()
    expect(call.locator(".pair")).to_be_visible()
    expect(call.locator(".result pre")).to_contain_text("sunny, 24C")
    expect(call.locator(".pair > div").first).to_contain_text('"city": "Lisbon"')
    thinking = page.locator("details.thinking").first
    expect(thinking.locator("pre")).not_to_be_visible()
    expect(page.locator("#total-usage")).to_contain_text("330 in")
    expect(page.locator(".message .usage").first).to_contain_text("120 in")


def test_fork_tree_leads_to_a_fork(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui/threads/{sample.trip}")
    page.click("#show-fork-tree")
    nodes = page.locator("#fork-tree a.fork-node")
    expect(nodes).to_have_count(3)
    expect(page.locator("#fork-tree .fork-point")).to_have_count(2)
    page.locator(f"#fork-tree a.fork-node[data-id='{sample.fork_of_fork}']").click()
    expect(page).to_have_url(f"{base}/ui/threads/{sample.fork_of_fork}")
    expect(page.locator("h1")).to_contain_text("Trip to Porto (by train)")
    expect(page.locator("#messages .message")).to_have_count(4)


def test_a_checkpoint_shows_the_thread_as_it_was(
    page: Page, sample_server: tuple[str, Sample]
) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui/threads/{sample.trip}")
    page.click(f"#timeline button[data-checkpoint='{sample.checkpoint}']")
    expect(page.locator("#checkpoint-banner")).to_be_visible()
    expect(page.locator("#checkpoint-count")).to_have_text("3 messages then")
    expect(page.locator("#messages .message.kept")).to_have_count(3)
    expect(page.locator("#messages .message.added")).to_have_count(2)
    page.click("#back-to-now")
    expect(page.locator("#checkpoint-banner")).to_be_hidden()
    expect(page.locator("#messages .message.added")).to_have_count(0)


def test_new_messages_show_live(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui/threads/{sample.other}")
    expect(page.locator("#messages .message")).to_have_count(1)
    answer = page.request.post(
        f"{base}/api/threads/{sample.other}/messages",
        data={"messages": [{"role": "assistant", "contents": [{"type": "text", "text": "a"}]}]},
    )
    assert answer.status == 201
    expect(page.locator("#messages .message")).to_have_count(2)


def test_a_workflow_run(page: Page, sample_server: tuple[str, Sample]) -> None:
    base, sample = sample_server
    page.goto(f"{base}/ui/runs")
    page.click("text=Release 1.4")
    expect(page).to_have_url(f"{base}/ui/runs/{sample.run}")
    expect(page.locator("#run-status")).to_have_text("paused")
    expect(page.locator("#steps tbody tr")).to_have_count(2)
    expect(page.locator("#interrupts")).to_contain_text("publish the notes?")
    expect(page.locator(".agent-column")).to_have_count(3)
    expect(page.locator(".agent-column[data-key=draft]")).to_contain_text("A draft of the")
    page.screenshot(path=str(Path(os.environ.get("TMPDIR", "/tmp")) / "inspector-run.png"))


def test_with_keys_the_page_asks_for_one(browser: Browser, tmp_path: Path) -> None:
    async def fill() -> Sample:
        async with SQLiteStore(tmp_path / "keys.db") as store:
            return await build_sample(TenantStore(store, "acme"))

    with ThreadPoolExecutor(1) as worker:  # Playwright's loop runs in this thread
        worker.submit(anyio.run, fill).result()
    app = create_app(SQLiteStore(tmp_path / "keys.db"), api_keys=["acme:k1"], manage_store=True)
    with serving(app) as base:
        context = browser.new_context()
        page = context.new_page()
        page.goto(f"{base}/ui")
        expect(page.locator("#key-form")).to_be_visible()
        page.fill("#key-input", "wrong")
        page.click("#key-form button")
        expect(page.locator("#key-form")).to_be_visible()
        page.fill("#key-input", "k1")
        page.click("#key-form button")
        expect(page.locator("#threads tbody tr")).to_have_count(5)
        page.click("text=Trip to Lisbon >> nth=0")
        expect(page.locator("#messages .message").first).to_be_visible()
        context.close()


def test_a_rollback_shows_live_and_its_undo_checkpoint_holds_what_went(
    page: Page, sample_server: tuple[str, Sample]
) -> None:
    base, _ = sample_server

    def say(text: str) -> dict[str, Any]:
        return {"role": "user", "contents": [{"type": "text", "text": text}]}

    created = page.request.post(
        f"{base}/api/threads", data={"title": "rolled back", "messages": [say("one")]}
    ).json()
    thread = f"{base}/api/threads/{created['id']}"
    page.request.post(f"{thread}/checkpoints", data={"label": "start"})
    page.request.post(f"{thread}/messages", data={"messages": [say("two"), say("three")]})
    page.goto(f"{base}/ui/threads/{created['id']}")
    expect(page.locator("#messages .message")).to_have_count(3)
    undo = page.request.post(f"{thread}/rollback", data={"checkpoint": "start"}).json()["undo"]
    expect(page.locator("#messages .message")).to_have_count(1)  # the stream's reset
    page.reload()
    page.click(f"#timeline button[data-checkpoint='{undo['id']}']")
    expect(page.locator("#messages .message.gone")).to_have_count(2)
    expect(page.locator("#messages .message.kept")).to_have_count(1)
    expect(page.locator("#checkpoint-banner .gone-count")).to_have_text("2 not in the thread now")
    page.request.delete(thread)  # the other tests count the sample's threads


def test_without_javascript_the_list_and_a_thread_still_read(
    browser: Browser, sample_server: tuple[str, Sample]
) -> None:
    base, sample = sample_server
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{base}/ui?title=lisbon")
    expect(page.locator("main table tbody tr")).to_have_count(2)
    page.click("text=Trip to Lisbon (Porto instead)")
    expect(page).to_have_url(f"{base}/ui/threads/{sample.fork}")
    expect(page.locator("main .message")).to_have_count(3)
    expect(page.locator("main")).to_contain_text("tool call weather")
    context.close()
