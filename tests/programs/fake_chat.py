"""A fake OpenAI Chat Completions server on 127.0.0.1, for the programs' `--model` runs.

It checks every request body (`problems`) and answers like a model that always uses
its tools: a forced `tool_choice` is called; otherwise, while the newest message is not
a tool result, the first offered tool is called; else it answers in text. Arguments are
made up from each tool's JSON schema: the first enum value, two items per array, and
booleans that are false the first time a tool is called and true after, so a loop
waiting for `accept: true` goes round once.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROLES = {"system", "developer", "user", "assistant", "tool"}


def problems(body: Any) -> list[str]:
    """What makes `body` an invalid Chat Completions request (empty when it is valid)."""
    if not isinstance(body, dict):
        return ["the body is not a JSON object"]
    found: list[str] = []
    if not isinstance(body.get("model"), str) or not body["model"]:
        found.append("no model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return [*found, "no messages list"]
    found += _message_problems(messages)
    found += _tool_problems(body)
    return found


def _message_problems(messages: list[Any]) -> list[str]:
    found: list[str] = []
    expected: set[str] = set()  # tool_call_ids still to be answered, in the messages right after
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ROLES:
            found.append(f"message {i}: role {role!r}")
            continue
        if role == "tool":
            call_id = message.get("tool_call_id")
            if call_id not in expected:
                found.append(f"message {i}: tool result {call_id!r} answers no open call")
            expected.discard(call_id)
            if not isinstance(message.get("content"), str):
                found.append(f"message {i}: tool content is not text")
            continue
        if expected:
            found.append(f"message {i}: tool calls {sorted(expected)} have no result before it")
            expected = set()
        content = message.get("content")
        calls = message.get("tool_calls") or []
        if not (isinstance(content, str | list) or (role == "assistant" and calls)):
            found.append(f"message {i}: content {content!r}")
        for call in calls:
            found += _call_problems(i, call)
            expected.add(str(call.get("id")) if isinstance(call, dict) else "?")
    if expected:
        found.append(f"the last tool calls {sorted(expected)} have no result")
    return found


def _call_problems(i: int, call: Any) -> list[str]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call.get("id"), str) or call.get("type") != "function":
        return [f"message {i}: tool call {call!r}"]
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        return [f"message {i}: tool call function {function!r}"]
    try:
        arguments = json.loads(function["arguments"])
    except (KeyError, TypeError, ValueError):
        return [f"message {i}: tool call arguments are not JSON text"]
    return [] if isinstance(arguments, dict) else [f"message {i}: arguments are not an object"]


def _tool_problems(body: dict[str, Any]) -> list[str]:
    tools = body.get("tools", [])
    names = []
    for tool in tools if isinstance(tools, list) else [None]:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("parameters"), dict):
            return [f"tool {tool!r}"]
        names.append(function.get("name"))
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and choice.get("function", {}).get("name") not in names:
        return [f"tool_choice {choice!r} names no offered tool"]
    return []


class FakeChatServer:
    """What the server received (every request body; the invalid ones and why) and its url."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.invalid: list[tuple[int, list[str]]] = []
        self.url = ""
        self._lock = threading.Lock()
        self._called: set[str] = set()

    def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """The status and JSON answer for one request body."""
        found = problems(body)
        with self._lock:
            self.requests.append(body)
            number = len(self.requests)
            if found:
                self.invalid.append((number, found))
                error = {"message": "; ".join(found), "type": "invalid_request_error"}
                return 400, {"error": {**error, "param": None, "code": None}}
            message = self._reply(body, number)
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return 200, {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": 1_700_000_000,
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 100 + number, "completion_tokens": 10, "total_tokens": 110},
        }

    def _reply(self, body: dict[str, Any], number: int) -> dict[str, Any]:
        tools = {t["function"]["name"]: t["function"] for t in body.get("tools", [])}
        choice = body.get("tool_choice")
        name = choice["function"]["name"] if isinstance(choice, dict) else None
        if name is None and tools and body["messages"][-1]["role"] != "tool":
            name = next(iter(tools))
        if name is None:
            last = str(body["messages"][-1].get("content") or "")[:60]
            return {"role": "assistant", "content": f"Fake answer {number} to: {last}"}
        arguments = self._value(tools[name].get("parameters", {}), name, name)
        self._called.add(name)
        function = {"name": name, "arguments": json.dumps(arguments)}
        call = {"id": f"call_fake_{number}", "type": "function", "function": function}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    def _value(self, schema: dict[str, Any], key: str, tool: str) -> Any:
        kind = schema.get("type")
        if "enum" in schema:
            return schema["enum"][0]
        if kind == "object":
            properties = schema.get("properties", {})
            return {k: self._value(v, k, tool) for k, v in properties.items()}
        if kind == "array":
            count = min(max(2, schema.get("minItems", 0)), schema.get("maxItems", 2))
            return [self._value(schema.get("items", {}), key, tool) for _ in range(count)]
        if kind == "boolean":
            return tool in self._called
        if kind in ("integer", "number"):
            return schema.get("minimum", 1)
        return f"fake {key}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        try:
            body = json.loads(self.rfile.read(length))
        except ValueError:
            body = None
        if not self.path.endswith("/chat/completions"):
            status, answer = 404, {"error": {"message": f"no route {self.path}"}}
        else:
            status, answer = self.server.fake.answer(body)
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: pytest shows what the tests assert."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, fake: FakeChatServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.fake = fake


@contextmanager
def fake_chat_server() -> Iterator[FakeChatServer]:
    """Serve a `FakeChatServer` on an ephemeral loopback port until the block ends."""
    fake = FakeChatServer()
    server = _Server(fake)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
