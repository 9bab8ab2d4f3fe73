"""`agent-threads tree`: the fork lineage around a thread, with the message each fork was taken at.

Ancestors come from `thread.lineage()` (each with the last message the line below shares
with it); descendants are the threads whose `parent_id` leads back to the thread, found
by listing the store (O(threads): stores keep no index by parent).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from rich.text import Text
from rich.tree import Tree

from agent_threads.cli.errors import reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json
from agent_threads.cli.runner import DebugOption, JsonOption, on_store
from agent_threads.cli.threads import ThreadId, heads, load_thread, with_head
from agent_threads.errors import MessageNotFoundError, ThreadNotFoundError
from agent_threads.messages import Message
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.listing import MAX_LIMIT, ThreadSummary, list_threads
from agent_threads.timetravel.lineage import Ancestor

SNIPPET = 48
"""Characters of a fork point's message shown beside it."""


@dataclass(frozen=True, slots=True)
class ForkPoint:
    """The message a fork was taken at: its id, and its index and text when readable."""

    message_id: str | None
    index: int | None = None
    text: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {"fork_point": self.message_id, "fork_index": self.index, "fork_text": self.text}

    def label(self) -> str:
        if self.message_id is None:
            return "forked whole"
        where = f"#{self.index}" if self.index is not None else self.message_id
        return f"forked at {where}" + (f" “{self.text}”" if self.text else "")


@dataclass(slots=True)
class Branch:
    """A descendant fork of the thread, with the point it was forked at and its own forks."""

    thread: ThreadSummary
    point: ForkPoint
    children: list[Branch] = field(default_factory=list)

    def as_json(self, lengths: dict[str, int]) -> dict[str, Any]:
        return {
            "thread": with_head(self.thread, lengths),
            **self.point.as_json(),
            "children": [c.as_json(lengths) for c in self.children],
        }

    def walk(self) -> list[ThreadSummary]:
        """This fork and every fork below it."""
        return [self.thread, *(s for c in self.children for s in c.walk())]


@dataclass(frozen=True, slots=True)
class Lineage:
    """A thread, its ancestors (parent first, each with its fork point) and its descendants."""

    thread: ThreadSummary
    ancestors: list[tuple[Ancestor, ForkPoint]]
    children: list[Branch]
    lengths: dict[str, int]
    """The messages each chat thread of the tree holds, by id."""


def _snippet(message: Message) -> str:
    text = message.text or ", ".join(c.name for c in message.tool_calls) or message.role
    text = " ".join(text.split())
    return text if len(text) <= SNIPPET else text[: SNIPPET - 1] + "…"


async def _point(
    store: ThreadStore, thread_ids: Sequence[str], message_id: str | None
) -> ForkPoint:
    """Where `message_id` sits, looked up in the first of `thread_ids` that holds it."""
    if message_id is None:
        return ForkPoint(None)
    for thread_id in thread_ids:
        try:
            holder = await ChatMessageThread.load(thread_id, store=store, lazy=True)
            index = await holder.index_of(message_id)
        except (ThreadNotFoundError, MessageNotFoundError):
            continue
        (message,) = await holder.get_messages(index, index + 1)
        return ForkPoint(message_id, index, _snippet(message))
    return ForkPoint(message_id)


async def _everything(store: ThreadStore) -> list[ThreadSummary]:
    found: list[ThreadSummary] = []
    cursor: str | None = None
    while True:
        page = await list_threads(
            store, limit=MAX_LIMIT, after=cursor, order="asc", include_sub_threads=True
        )
        found += page.threads
        cursor = page.next_cursor
        if cursor is None:
            return found


async def _branches(
    store: ThreadStore, parent: str, by_parent: dict[str, list[ThreadSummary]], seen: set[str]
) -> list[Branch]:
    branches: list[Branch] = []
    for child in by_parent.get(parent, []):
        if child.id in seen:
            continue  # a cycle can only come of a corrupted store: shown once
        seen.add(child.id)
        point = await _point(store, [parent, child.id], child.fork_point)
        branches.append(Branch(child, point, await _branches(store, child.id, by_parent, seen)))
    return branches


async def read_lineage(store: ThreadStore, thread_id: str) -> Lineage:
    """The lineage around a thread.

    Raises:
        ThreadNotFoundError: no thread has this id.
    """
    thread = await load_thread(store, thread_id)
    ancestors = await thread.lineage()
    below = [thread_id, *(a.thread_id for a in ancestors)]
    points = [
        await _point(store, [a.thread_id, below[i]], a.fork_point) for i, a in enumerate(ancestors)
    ]
    by_parent: dict[str, list[ThreadSummary]] = {}
    for summary in await _everything(store):
        if summary.parent_id is not None:
            by_parent.setdefault(summary.parent_id, []).append(summary)
    children = await _branches(store, thread_id, by_parent, {thread_id})
    summary = ThreadSummary.of(thread.record)
    lengths = await heads(store, [summary, *(s for b in children for s in b.walk())])
    return Lineage(summary, list(zip(ancestors, points, strict=True)), children, lengths)


def lineage_json(lineage: Lineage) -> dict[str, Any]:
    """`tree --json`: the thread, its ancestors parent first, its descendants nested."""
    return {
        "thread": with_head(lineage.thread, lineage.lengths),
        "ancestors": [{**a.model_dump(mode="json"), **p.as_json()} for a, p in lineage.ancestors],
        "children": [b.as_json(lineage.lengths) for b in lineage.children],
    }


def _name(
    thread_id: str, title: str | None, count: int | None = None, *, bold: bool = False
) -> Text:
    text = Text(thread_id, style="bold green" if bold else "")
    if title:
        text.append(f" “{title}”")
    if count is not None:
        text.append(f" ({count} messages)", style="dim")
    return text


def _add_branches(node: Tree, branches: list[Branch], lengths: dict[str, int]) -> None:
    for branch in branches:
        label = _name(branch.thread.id, branch.thread.title, lengths.get(branch.thread.id))
        label.append(f"  {branch.point.label()}", style="yellow")
        _add_branches(node.add(label), branch.children, lengths)


def print_lineage(lineage: Lineage) -> None:
    """The lineage as a tree: the root ancestor at the top, the thread in bold."""
    chain = list(reversed(lineage.ancestors))  # root first
    root: Tree | None = None
    node: Tree | None = None
    for number, (ancestor, _) in enumerate(chain):
        label = _name(ancestor.thread_id, ancestor.title)
        if ancestor.deleted:
            label.append(" (deleted)", style="red")
        if number:  # forked from the one above, at that one's point
            label.append(f"  {chain[number - 1][1].label()}", style="yellow")
        node = Tree(label) if node is None else node.add(label)
        root = root or node
    s = lineage.thread
    label = _name(s.id, s.title, lineage.lengths.get(s.id), bold=True)
    if chain:
        label.append(f"  {chain[-1][1].label()}", style="yellow")
    node = Tree(label) if node is None else node.add(label)
    _add_branches(node, lineage.children, lineage.lengths)
    console().print(root or node)


def tree(
    thread_id: ThreadId,
    store: StoreOption,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Show the forks around a thread: its ancestors, its forks, and where each was taken."""
    with reported(store=store, debug=debug):
        lineage = on_store(store, lambda opened: read_lineage(opened, thread_id))
        if json_output:
            print_json(lineage_json(lineage))
        else:
            print_lineage(lineage)


__all__ = ["Branch", "ForkPoint", "Lineage", "lineage_json", "read_lineage", "tree"]
