"""ui: serve a store on loopback and open the inspector's URL in a browser."""

from __future__ import annotations

import socket
import threading
import webbrowser
from typing import Any

import pytest

from agent_threads.server import launch
from tests.cli.conftest import Sample, as_json, ok


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def test_ui_serves_on_loopback_and_opens_the_inspector(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[str] = []
    browsed = threading.Event()
    served: dict[str, Any] = {}

    def browse(url: str) -> bool:
        opened.append(url)
        browsed.set()
        return True

    def serve(store_url: str, **options: Any) -> None:
        served.update(options, store=store_url)
        with socket.create_server((options["host"], options["port"])) as server:
            server.settimeout(10)
            assert browsed.wait(10)  # the browser opens once the port answers

    monkeypatch.setattr(webbrowser, "open", browse)
    monkeypatch.setattr(launch, "serve", serve)
    port = free_port()
    text = ok("ui", "--store", sample.url, "--port", str(port))
    url = f"http://127.0.0.1:{port}/ui"
    assert f"inspector: {url}" in text
    assert served == {"store": sample.url, "host": "127.0.0.1", "port": port}
    assert opened == [url]


def test_ui_without_a_browser_prints_the_url(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webbrowser, "open", lambda url: pytest.fail("no browser asked for"))
    monkeypatch.setattr(launch, "serve", lambda store_url, **options: None)
    assert as_json("ui", "--store", sample.url, "--port", "8123", "--no-browser") == {
        "url": "http://127.0.0.1:8123/ui"
    }
