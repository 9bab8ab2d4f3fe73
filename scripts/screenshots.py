"""Screenshots of the web inspector for the README: `python scripts/screenshots.py [DIR]`.

Builds the sample store of the browser tests (tests/server/inspector_sample.py) in a
temporary SQLite file, serves it with uvicorn on a free loopback port, and has headless
Chromium (/usr/bin/chromium, through Playwright: the dev extra) write into DIR (default
docs/): inspector-threads.png, inspector-thread.png (a tool call opened beside its
result), inspector-checkpoint.png, inspector-fork-tree.png and inspector-run.png.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import anyio
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.server.inspector_sample, run from anywhere

from agent_threads import SQLiteStore  # noqa: E402
from agent_threads.server import create_app  # noqa: E402
from tests.server.inspector_sample import (  # noqa: E402
    CHROMIUM_ARGS,
    Sample,
    build_sample,
    serving,
)

CHROMIUM = "/usr/bin/chromium"


def _shoot(page: Page, path: Path) -> None:
    page.wait_for_timeout(400)  # not "networkidle": a thread page keeps its event stream open
    page.screenshot(path=str(path), full_page=False)
    print(path)


def main(folder: Path) -> None:
    """Write the screenshots into `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "threads.db"

        async def fill() -> Sample:
            async with SQLiteStore(path) as store:
                return await build_sample(store)

        sample = anyio.run(fill)
        app = create_app(SQLiteStore(path), manage_store=True)
        with serving(app) as base, sync_playwright() as driver:
            browser = driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            page.goto(f"{base}/ui")
            page.locator("#threads tbody tr").first.wait_for()
            _shoot(page, folder / "inspector-threads.png")
            page.goto(f"{base}/ui/threads/{sample.trip}")
            page.locator(f"details.tool-call[data-call-id={sample.call_id}] summary").click()
            page.locator("details.thinking summary").first.click()
            _shoot(page, folder / "inspector-thread.png")
            page.click(f"#timeline button[data-checkpoint='{sample.checkpoint}']")
            page.locator("#checkpoint-banner").wait_for()
            _shoot(page, folder / "inspector-checkpoint.png")
            page.goto(f"{base}/ui/threads/{sample.fork}")
            page.click("#show-fork-tree")
            page.locator("#fork-tree").wait_for()
            _shoot(page, folder / "inspector-fork-tree.png")
            page.goto(f"{base}/ui/runs/{sample.run}")
            page.locator(".agent-column").first.wait_for()
            _shoot(page, folder / "inspector-run.png")
            browser.close()


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs")
