"""Models for the workflow programs: a scripted one offline, or an OpenAI-compatible one.

Every program in this folder asks its agents' models through `ChatModel.reply`: the
messages of a sub-thread's view in, one assistant message (with its usage) out. By default
each agent has a `ScriptedModel`, a deterministic function of the conversation, so the
programs run offline; `--model NAME` gives every agent one `OpenAIModel` instead, an
OpenAI-compatible chat model reached with the `openai` client (`OPENAI_BASE_URL` and
`OPENAI_API_KEY` come from the environment).

A request is built by the library: `await thread.view(...)` picks the messages that fit
the context budget (never a tool call without its result) and
`agent_threads.formats.openai.to_messages` writes them out; `from_messages` reads the
reply back. A reply's usage is on the response, not on its message, so `OpenAIModel`
sets `Message.usage` from `response.usage` itself.

The programs run as scripts (`python workflows/routing.py`): Python puts this folder first
on `sys.path`, so `from _models import ...` finds this file without the folder being a
package (a top-level `workflows` package would clash with llama-index-workflows).
The few display helpers the programs share (`heading`, `Progress`, `describe`) are here too.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, Self, cast

import anyio
from pydantic import JsonValue

from agent_threads import (
    ApproximateTokenCounter,
    ChatMessageThread,
    MemoryStore,
    Message,
    RunStatus,
    SQLiteStore,
    StepRecord,
    ThreadStore,
    TokenCounter,
    Usage,
    WorkflowThread,
)
from agent_threads.formats.openai import from_messages, to_messages

if TYPE_CHECKING:  # imported when --model asks for it: a scripted run starts 1 s sooner
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletionMessageParam, ChatCompletionToolParam

CONTEXT_TOKENS = 8_000
"""The token budget of every view a program sends to a model."""

MAX_TOOL_ROUNDS = 4
"""How many model calls `work` makes at most; the last one offers no tools."""

ToolFunction = Callable[[dict[str, JsonValue]], Awaitable[JsonValue]]
"""Runs a tool call's arguments; raises KeyError, TypeError or ValueError on bad ones."""


@dataclass(frozen=True)
class Tool:
    """A function a model may call: its name, what it does, its arguments' JSON schema.

    `run` answers a call. The programs run their tools locally and offline (a canned
    search index, a toy order database), whichever model calls them.
    """

    name: str
    description: str
    parameters: dict[str, JsonValue]
    run: ToolFunction

    def to_openai(self) -> ChatCompletionToolParam:
        """The tool as a Chat Completions `tools` entry."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }


def schema(
    properties: Mapping[str, JsonValue], *, required: Sequence[str] = ()
) -> dict[str, JsonValue]:
    """A JSON schema of an object with these properties (all required unless listed)."""
    names = list(required) if required else list(properties)
    return {"type": "object", "properties": dict(properties), "required": list(names)}


@dataclass(frozen=True)
class Request:
    """What a scripted model is asked: the view's messages, the tools, a forced tool."""

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: str | None = None

    @property
    def last(self) -> Message:
        """The newest message of the request."""
        return self.messages[-1]

    def first_text(self, role: str) -> str:
        """The text of the first message with this role ("" when there is none)."""
        return next((m.text for m in self.messages if m.role == role), "")

    def results(self, tool: str) -> list[JsonValue]:
        """The results of every call of `tool` in the request, oldest first."""
        names = {c.call_id: c.name for m in self.messages for c in m.tool_calls}
        return [
            r.result for m in self.messages for r in m.tool_results if names.get(r.call_id) == tool
        ]


Script = Callable[[Request], Message]
"""A scripted model: the next assistant message of a conversation, deterministically."""


class ChatModel(Protocol):
    """A chat model: the messages of a view in, one assistant message with its usage out."""

    @property
    def name(self) -> str:
        """The model's name, for display."""
        ...

    async def reply(
        self,
        messages: Iterable[Message],
        *,
        tools: Sequence[Tool] = (),
        tool_choice: str | None = None,
    ) -> Message:
        """The next assistant message; `tool_choice` names a tool the model must call."""
        ...


@dataclass
class ScriptedModel:
    """A deterministic stand-in for a chat model: a script, a delay, counted usage.

    Usage is what `ApproximateTokenCounter` counts for the request and the reply, so the
    programs show token figures without a real model.
    """

    script: Script
    delay: float = 0.0
    counter: TokenCounter = field(default_factory=ApproximateTokenCounter)

    @property
    def name(self) -> str:
        return "scripted"

    async def reply(
        self,
        messages: Iterable[Message],
        *,
        tools: Sequence[Tool] = (),
        tool_choice: str | None = None,
    ) -> Message:
        request = Request(tuple(messages), tuple(tools), tool_choice)
        answer = self.script(request)
        await anyio.sleep(self.delay)  # the scripted model "thinks"
        usage = Usage(
            input_tokens=sum(self.counter.count(m) for m in request.messages),
            output_tokens=self.counter.count(answer),
        )
        return answer.model_copy(update={"usage": usage})


class OpenAIModel:
    """An OpenAI-compatible chat model, called through Chat Completions."""

    def __init__(self, name: str, client: AsyncOpenAI) -> None:
        self._name = name
        self._client = client

    @property
    def name(self) -> str:
        return self._name

    async def reply(
        self,
        messages: Iterable[Message],
        *,
        tools: Sequence[Tool] = (),
        tool_choice: str | None = None,
    ) -> Message:
        options: dict[str, Any] = {}
        if tools:
            options["tools"] = [t.to_openai() for t in tools]
        if tool_choice is not None:
            options["tool_choice"] = {"type": "function", "function": {"name": tool_choice}}
        request = cast("list[ChatCompletionMessageParam]", to_messages(messages))
        response = await self._client.chat.completions.create(
            model=self._name, messages=request, **options
        )
        (reply,) = from_messages([response.choices[0].message])
        if response.usage is None:  # some compatible servers send none
            return reply
        # from_messages reads a message; the usage is on the response around it
        usage = Usage(
            input_tokens=response.usage.prompt_tokens,
            output_tokens=response.usage.completion_tokens,
        )
        return reply.model_copy(update={"usage": usage})


class Models:
    """The models of a program's agents: each agent's script, or one chat model for all.

    Use as `async with Models(args.model) as models:`; it closes the client on exit.

    Raises:
        SystemExit: a model is named but the `openai` client or its settings are missing.
    """

    def __init__(self, model: str | None = None) -> None:
        self.model = model
        self._client = None if model is None else _client()
        self._chat = None if self._client is None else OpenAIModel(str(model), self._client)

    @property
    def label(self) -> str:
        """What the agents run on, for display."""
        return "scripted models (offline)" if self.model is None else f"model {self.model!r}"

    def get(self, script: Script, *, delay: float = 0.0) -> ChatModel:
        """The model of an agent whose scripted behaviour is `script`."""
        return ScriptedModel(script, delay) if self._chat is None else self._chat

    async def aclose(self) -> None:
        """Release the client's connections."""
        if self._client is not None:
            await self._client.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def _client() -> AsyncOpenAI:
    try:
        import openai  # only here: the scripted programs run without the client installed
    except ImportError as exc:
        raise SystemExit("--model needs the openai client: pip install openai") from exc
    try:
        return openai.AsyncOpenAI(timeout=60.0, max_retries=2)
    except openai.OpenAIError as exc:
        raise SystemExit(
            f"--model needs OPENAI_API_KEY (and OPENAI_BASE_URL for a server other than"
            f" OpenAI's): {exc}"
        ) from exc


def add_model_argument(parser: argparse.ArgumentParser) -> None:
    """Add `--model NAME` (default: the scripted models, offline) to a command line."""
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="an OpenAI-compatible chat model (OPENAI_BASE_URL / OPENAI_API_KEY from the"
        " environment); default: scripted models, offline",
    )


Demo = Callable[[ThreadStore, "Models"], Awaitable[object]]
"""A program's demo: runs on a store with the agents' models."""


class DemoProgram:
    """The command line of a program whose one job is its demo: `[DB] [--model NAME]`.

    The demo runs on SQLite in `DB` if given, else in memory.
    """

    def __init__(self, demo: Demo, description: str) -> None:
        self.demo = demo
        self.description = description

    def parse_args(self, argv: Sequence[str] | None = None) -> argparse.Namespace:
        """The command line: an optional SQLite file and `--model`."""
        parser = argparse.ArgumentParser(description=self.description)
        parser.add_argument("db", nargs="?", help="SQLite file (default: in memory)")
        add_model_argument(parser)
        return parser.parse_args(argv)

    async def start(self, args: argparse.Namespace) -> None:
        """Open the store and the models, run the demo."""
        async with Models(args.model) as models:
            if args.db is None:
                await self.demo(MemoryStore(), models)
                return
            async with SQLiteStore(Path(args.db)) as store:
                await self.demo(store, models)

    def main(self, argv: Sequence[str] | None = None) -> None:
        """Parse the command line and run."""
        anyio.run(self.start, self.parse_args(argv))


# -- turns ------------------------------------------------------------------------------


async def ask(
    thread: ChatMessageThread,
    model: ChatModel,
    *,
    author: str,
    tools: Sequence[Tool] = (),
    tool_choice: str | None = None,
) -> Message:
    """One model call on `thread`: its view in, the reply and its tool results appended.

    Every tool call gets a result in the same write, so the thread never holds a call
    without its answer. Returns the reply.
    """
    view = await thread.view(max_tokens=CONTEXT_TOKENS, keep_first=1)
    reply = await model.reply(view, tools=tools, tool_choice=tool_choice)
    reply = reply.model_copy(update={"author": author})
    results = [await _answer(call.name, call.arguments, tools) for call in reply.tool_calls]
    await thread.on_new_messages(
        [
            reply,
            *(
                Message.tool_result(call.call_id, result, is_error=failed, author=author)
                for call, (result, failed) in zip(reply.tool_calls, results, strict=True)
            ),
        ]
    )
    return reply


async def _answer(
    name: str, arguments: dict[str, JsonValue], tools: Sequence[Tool]
) -> tuple[JsonValue, bool]:
    """A tool call's result and whether it is an error (a bad call is the model's to fix)."""
    tool = next((t for t in tools if t.name == name), None)
    if tool is None:
        return f"there is no tool {name!r}", True
    try:
        return await tool.run(arguments), False
    except (KeyError, TypeError, ValueError) as exc:
        return f"bad arguments for {name}: {type(exc).__name__}: {exc}", True


async def work(
    thread: ChatMessageThread,
    model: ChatModel,
    *,
    author: str,
    tools: Sequence[Tool] = (),
    max_rounds: int = MAX_TOOL_ROUNDS,
) -> Message:
    """Let the model call tools until it answers in text; returns that answer.

    The last of `max_rounds` calls offers no tools, so the answer always comes.
    """
    for round_ in range(max_rounds):
        offered = tools if round_ < max_rounds - 1 else ()
        reply = await ask(thread, model, author=author, tools=offered)
        if not reply.tool_calls:
            return reply
    return reply


def call_arguments(reply: Message, tool: str) -> dict[str, JsonValue]:
    """The arguments of the reply's first call of `tool` ({} when it made none)."""
    return next((dict(c.arguments) for c in reply.tool_calls if c.name == tool), {})


# -- display ----------------------------------------------------------------------------


def describe(message: Message, width: int = 96) -> str:
    """One short line for a message: who said what, or which tool was called."""
    who = message.author or message.role
    if message.tool_calls:
        calls = ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in message.tool_calls)
        line = f"{who} -> {calls}"
    elif message.tool_results:
        result = message.tool_results[0].result
        line = f"{who} <- {result if isinstance(result, str) else json.dumps(result)}"
    else:
        line = f"{who}: {message.text}"
    return textwrap.shorten(f"{message.role:>9}  {line}", width, placeholder=" ...")


def total_usage(messages: Iterable[Message]) -> Usage:
    """The sum of the usage the messages carry."""
    tokens_in = tokens_out = 0
    for message in messages:
        if message.usage is not None:
            tokens_in += message.usage.input_tokens
            tokens_out += message.usage.output_tokens
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out)


def require(run: WorkflowThread, status: RunStatus = "completed") -> None:
    """Stop the program with the run's error unless the run has `status`.

    Raises:
        SystemExit: naming the run, its status and its error.
    """
    if run.execution.status != status:
        raise SystemExit(
            f"run {run.id} is {run.execution.status!r}, not {status!r}: {run.execution.error}"
        )


def heading(text: str) -> None:
    """Print a section heading."""
    print(f"\n=== {text} " + "=" * max(0, 74 - len(text)), flush=True)


_MARKS = {"running": ">", "completed": "+", "failed": "x", "interrupted": "?"}


class Progress:
    """Prints each step as it starts and ends, with the time since the run began.

    Pass it as `on_step=Progress()` to `Workflow.run` or `Workflow.resume`.
    """

    def __init__(self) -> None:
        self.began: float | None = None

    def __call__(self, record: StepRecord) -> None:
        if self.began is None:
            self.began = anyio.current_time()
        elapsed = anyio.current_time() - self.began
        line = f"  {elapsed:5.2f}s  {_MARKS.get(record.status, ' ')} superstep"
        line += f" {record.superstep}  {record.step:<16} {record.agent:<15} {record.status}"
        if record.attempt > 1:
            line += f" (attempt {record.attempt})"
        if record.status == "completed" and record.duration is not None:
            line += f" in {record.duration:.2f}s"
        if record.status == "failed" and record.error:
            line += f": {textwrap.shorten(record.error, 60)}"
        print(line, flush=True)
