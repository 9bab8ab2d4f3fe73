"""`agent-threads show`: a thread's messages, tool calls beside their results, long text folded.

`--at CHECKPOINT` shows the thread as it was then (`thread.at(...)`). A workflow shows
each of its sub-threads in turn.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol

import typer
from rich.console import Console
from rich.padding import Padding
from rich.text import Text

from agent_threads.cli.errors import reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, tags_text, when
from agent_threads.cli.runner import DebugOption, JsonOption, on_store
from agent_threads.cli.threads import ThreadId, load_thread
from agent_threads.messages import (
    DataPart,
    Message,
    Part,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.listing import ThreadSummary
from agent_threads.threads.workflow.thread import WorkflowThread
from agent_threads.timetravel.checkpoint import Checkpoint

FOLD_CHARS = 400
"""Text longer than this is folded (`--full` shows it all)."""
FOLD_LINES = 12
"""Text of more lines than this is folded."""
THINKING_CHARS = 80
"""How much of a thinking part shows, folded or not (`--full` shows it all)."""


@dataclass(frozen=True, slots=True)
class Conversation:
    """The messages shown of one thread: from index `first_index` to its end."""

    key: str | None
    thread_id: str
    message_count: int
    first_index: int
    messages: list[Message]


@dataclass(frozen=True, slots=True)
class Shown:
    """What `show` prints: a thread (at a checkpoint, maybe) and its conversations."""

    thread: ThreadSummary
    checkpoint: Checkpoint | None
    conversations: list[Conversation]


# -- reading -------------------------------------------------------------------------------


class _Readable(Protocol):
    """A thread or a snapshot of one: what a conversation is read from."""

    @property
    def message_count(self) -> int: ...

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]: ...


async def _conversation(
    key: str | None, thread_id: str, source: _Readable, last: int | None
) -> Conversation:
    count = source.message_count
    first = 0 if last is None else max(0, count - last)
    return Conversation(key, thread_id, count, first, await source.get_messages(first, count))


async def _chat(
    thread: ChatMessageThread, at: str | None, last: int | None
) -> tuple[list[Conversation], Checkpoint | None]:
    if at is None:
        return [await _conversation(None, thread.id, _Now(thread), last)], None
    snapshot = await thread.at(at)
    return [await _conversation(None, thread.id, snapshot, last)], snapshot.checkpoint


@dataclass(frozen=True, slots=True)
class _Now:
    """A chat thread as it is now, read as a snapshot is."""

    thread: ChatMessageThread

    @property
    def message_count(self) -> int:
        return self.thread.head

    async def get_messages(self, start: int = 0, end: int | None = None) -> list[Message]:
        return await self.thread.get_messages(start, end)


async def _workflow(
    workflow: WorkflowThread, at: str | None, last: int | None
) -> tuple[list[Conversation], Checkpoint | None]:
    if at is None:
        return [
            await _conversation(key, sub.id, _Now(sub), last)
            for key, sub in workflow.sub_threads.items()
        ], None
    snapshot = await workflow.at(at)
    conversations = []
    for key in snapshot.sub_thread_keys:
        sub = await snapshot.get_sub_thread(key)
        conversations.append(await _conversation(key, sub.thread_id, sub, last))
    return conversations, snapshot.checkpoint


async def read_shown(
    store: ThreadStore, thread_id: str, *, at: str | None, last: int | None
) -> Shown:
    """The thread's messages (the last `last` of them), now or at checkpoint `at`.

    Raises:
        ThreadNotFoundError: no thread has this id.
        CheckpointNotFoundError: it has no checkpoint `at`.
    """
    thread: AgentThread = await load_thread(store, thread_id)
    summary = ThreadSummary.of(thread.record)
    if isinstance(thread, ChatMessageThread):
        conversations, checkpoint = await _chat(thread, at, last)
        return Shown(summary, checkpoint, conversations)
    if isinstance(thread, WorkflowThread):
        conversations, checkpoint = await _workflow(thread, at, last)
        return Shown(summary, checkpoint, conversations)
    checkpoint = None if at is None else (await thread.at(at)).checkpoint
    return Shown(summary, checkpoint, [])


# -- tool calls and their results ----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pair:
    """A tool call and the message (index) and part that answer it, if any."""

    call: ToolCallPart
    call_index: int
    result: ToolResultPart | None
    result_index: int | None


def pair_calls(messages: Sequence[Message], first_index: int) -> dict[str, Pair]:
    """Each tool call of `messages`, by call id, with its result if one follows."""
    results: dict[str, tuple[int, ToolResultPart]] = {}
    for index, message in enumerate(messages, first_index):
        for part in message.tool_results:
            results.setdefault(part.call_id, (index, part))
    pairs: dict[str, Pair] = {}
    for index, message in enumerate(messages, first_index):
        for call in message.tool_calls:
            found = results.get(call.call_id)
            pairs[call.call_id] = Pair(
                call,
                index,
                None if found is None else found[1],
                None if found is None else found[0],
            )
    return pairs


def _pairs_json(pairs: dict[str, Pair], messages: Sequence[Message], first: int) -> list[Any]:
    return [
        {
            "call_id": call_id,
            "name": pair.call.name,
            "call_message_id": messages[pair.call_index - first].id,
            "result_message_id": None
            if pair.result_index is None
            else messages[pair.result_index - first].id,
            "is_error": None if pair.result is None else pair.result.is_error,
        }
        for call_id, pair in pairs.items()
    ]


# -- for people ----------------------------------------------------------------------------


def _fold(text: str, *, full: bool) -> str:
    if full:
        return text
    lines = text.splitlines()
    cut = text
    if len(lines) > FOLD_LINES:
        cut = "\n".join(lines[:FOLD_LINES])
    cut = cut[:FOLD_CHARS]
    hidden = len(text) - len(cut)
    return cut if hidden <= 0 else f"{cut}… [{hidden:,} more characters: --full shows them]"


def _compact(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _usage(usage: Usage | None) -> str:
    if usage is None:
        return ""
    text = f" · {usage.input_tokens} in / {usage.output_tokens} out"
    return text + (f" · ${usage.cost:.4f}" if usage.cost else "")


def _header(index: int, message: Message) -> Text:
    header = Text(f"#{index} ", style="bold")
    header.append(message.role, style="bold cyan")
    if message.author:
        header.append(f" · {message.author}", style="magenta")
    header.append(f" · {when(message.created_at)}{_usage(message.usage)}", style="dim")
    header.append(f"  {message.id}", style="dim")
    return header


def _result_text(result: ToolResultPart, *, full: bool, prefix: str) -> Text:
    value = result.result if isinstance(result.result, str) else _compact(result.result)
    label = "error" if result.is_error else "result"
    return Text(f"{prefix}{label}: {_fold(value, full=full)}", "red" if result.is_error else "")


def _part_lines(part: Part, index: int, pairs: dict[str, Pair], *, full: bool) -> list[Text]:
    if isinstance(part, TextPart):
        return [Text(_fold(part.text, full=full))]
    if isinstance(part, ThinkingPart):
        shown = part.text if full else part.text[:THINKING_CHARS]
        more = "" if full or len(part.text) <= THINKING_CHARS else f"… [{len(part.text):,} chars]"
        return [Text(f"(thinking) {shown}{more}", style="dim italic")]
    if isinstance(part, ToolCallPart):
        return _call_lines(part, pairs, full=full)
    if isinstance(part, ToolResultPart):
        return _result_lines(part, index, pairs, full=full)
    if isinstance(part, DataPart):
        source = part.uri if part.uri is not None else f"{len(part.data or ''):,} base64 characters"
        return [Text(f"[data {part.media_type}: {source}]", style="dim")]
    assert isinstance(part, SummaryPart)
    return [Text(f"(summary of {part.start_id}..{part.end_id}) {_fold(part.text, full=full)}")]


def _call_lines(call: ToolCallPart, pairs: dict[str, Pair], *, full: bool) -> list[Text]:
    lines = [Text(f"┌ call {call.name}({_compact(call.arguments)})  [{call.call_id}]", "yellow")]
    pair = pairs.get(call.call_id)
    if pair is None or pair.result is None:
        lines.append(Text("└ no result yet", style="dim"))
    else:
        lines.append(_result_text(pair.result, full=full, prefix="└ "))
        lines[-1].append(f"  (#{pair.result_index})", style="dim")
    return lines


def _result_lines(
    result: ToolResultPart, index: int, pairs: dict[str, Pair], *, full: bool
) -> list[Text]:
    pair = pairs.get(result.call_id)
    if pair is not None and pair.result_index == index:
        return [Text(f"↳ result of {result.call_id}: shown with #{pair.call_index}", style="dim")]
    return [_result_text(result, full=full, prefix=f"{result.call_id} (call not shown) ")]


def print_conversation(out: Console, conversation: Conversation, *, full: bool) -> None:
    """The messages of one conversation, each with its parts indented below its header."""
    pairs = pair_calls(conversation.messages, conversation.first_index)
    if conversation.first_index:
        out.print(Text(f"… {conversation.first_index} earlier messages", style="dim"))
    for index, message in enumerate(conversation.messages, conversation.first_index):
        out.print(_header(index, message))
        for part in message.contents:
            for line in _part_lines(part, index, pairs, full=full):
                out.print(Padding(line, (0, 0, 0, 4), expand=False))
    if not conversation.messages:
        out.print(Text("(no messages)", style="dim"))


def _title(shown: Shown) -> Text:
    s = shown.thread
    title = Text(s.id, style="bold")
    title.append(f"  {s.kind}" + (f" ({s.run_status})" if s.run_status else ""))
    if s.title:
        title.append(f"  “{s.title}”")
    if s.tags:
        title.append(f"  [{tags_text(s.tags)}]", style="dim")
    if s.parent_id:
        title.append(f"  fork of {s.parent_id}", style="dim")
    return title


def print_shown(shown: Shown, *, full: bool) -> None:
    """`show`'s answer for a person."""
    out = console()
    out.print(_title(shown))
    if shown.checkpoint is not None:
        c = shown.checkpoint
        label = f" {c.label!r}" if c.label else ""
        out.print(Text(f"as it was at checkpoint {c.id}{label}, {when(c.created_at)}", "yellow"))
    for conversation in shown.conversations:
        if conversation.key is not None:
            out.rule(f"{conversation.key}: {conversation.thread_id}")
        print_conversation(out, conversation, full=full)


def shown_json(shown: Shown) -> dict[str, Any]:
    """`show --json`: the thread, the checkpoint, and each conversation's messages."""
    conversations = [
        {
            "key": c.key,
            "thread_id": c.thread_id,
            "message_count": c.message_count,
            "first_index": c.first_index,
            "messages": [m.model_dump(mode="json") for m in c.messages],
            "tool_calls": _pairs_json(
                pair_calls(c.messages, c.first_index), c.messages, c.first_index
            ),
        }
        for c in shown.conversations
    ]
    checkpoint = (
        None
        if shown.checkpoint is None
        else shown.checkpoint.model_dump(mode="json", exclude={"ranges"})
    )
    body: dict[str, Any] = {
        "thread": shown.thread.model_dump(mode="json"),
        "checkpoint": checkpoint,
    }
    if shown.thread.kind == WorkflowThread.type_name:
        body["sub_threads"] = conversations
    elif conversations:
        body.update({k: v for k, v in conversations[0].items() if k not in ("key", "thread_id")})
    return body


def show(
    thread_id: ThreadId,
    store: StoreOption,
    at: Annotated[
        str | None,
        typer.Option("--at", help="Show the thread as it was at this checkpoint (id or label)."),
    ] = None,
    last: Annotated[int | None, typer.Option(min=0, help="Show only the last N messages.")] = None,
    full: Annotated[
        bool, typer.Option("--full", help="Do not fold long text and thinking.")
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show a thread's messages: roles, authors, tool calls with their results."""
    with reported(store=store, debug=debug):
        shown = on_store(store, lambda opened: read_shown(opened, thread_id, at=at, last=last))
        if json_output:
            print_json(shown_json(shown))
        else:
            print_shown(shown, full=full)


__all__ = ["Conversation", "Pair", "Shown", "pair_calls", "read_shown", "show"]
