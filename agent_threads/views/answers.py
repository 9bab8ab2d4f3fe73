"""Tool answers: each tool call in a request followed at once by its results.

Providers take a message with tool calls only when the results of all its calls come right
after it, before any other message (OpenAI Chat Completions and the Anthropic Messages API
both answer 400 otherwise). `arrange` puts a list of messages in that shape; views and the
format converters both use it:

- **Linking.** A tool result answers the call with its `call_id` in the latest earlier
  message holding one. A result that answers nothing stays where it is (views leave such
  *orphan* results out before this point).
- **Placing.** A message whose parts are all results answering one message moves whole
  to the answers of that message, in the order the results were written. Any other
  message holding results (results beside other parts, or answering several messages)
  is split: each of its results becomes a tool message of its own (same author and
  time, id derived from the message's id) among the answers of its call's message; the
  rest of it stays in place.
- **Unanswered calls.** A call no result in the list answers (a process stopped between
  the call and its result, or the tools of the newest message are still running) is
  treated by the policy, `unanswered_tool_calls`:

  - `"interrupt"` (the default): a synthetic result follows the call's other answers: a
    tool message with `is_error=True` and the text `INTERRUPTED`, and
    `metadata["synthetic"] == "interrupted"`.
  - `"drop"`: the call part is left out; so is its message, when nothing but thinking
    remains of it.
  - `"error"`: `UnansweredToolCallError` names the message and the call.

  The format converters also take `"keep"` (the call is sent as written), for converting
  part of a conversation rather than a whole request; a view never holds such a call.

Nothing here writes to a thread: once the real result is appended, the next view shows it
instead of the synthetic one. A list already in this shape comes back unchanged, so a
view passed to a converter is not changed again.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Sequence
from typing import Literal, cast, get_args

from agent_threads.errors import InvalidValueError, UnansweredToolCallError
from agent_threads.messages import Message, ThinkingPart, ToolCallPart, ToolResultPart

UnansweredToolCalls = Literal["interrupt", "drop", "error"]
"""What a view or a converter does with a tool call that has no result (see the module)."""

Mode = Literal["interrupt", "drop", "error", "keep"]
"""A policy, or "keep": unanswered calls stay as written (converters take it; a view weighs
its messages so under "error", which raises instead of sending them)."""

POLICIES: tuple[str, ...] = get_args(UnansweredToolCalls)
MODES: tuple[str, ...] = get_args(Mode)

INTERRUPTED = "interrupted: no result was recorded for this call"
"""The text of the synthetic result standing in for an unanswered call."""

_DERIVED = uuid.UUID("5c1c3e5e-0a7e-4a55-9c1b-2f6f1d1a7e01")
"""Namespace of the ids of messages a view derives (deterministic: equal views compare equal)."""


def check_policy(policy: object) -> UnansweredToolCalls:
    """`policy` if it is one of `POLICIES` (what a view takes), else ValueError naming them."""
    if policy not in POLICIES:
        raise InvalidValueError(
            f"unanswered_tool_calls={policy!r}",
            reason=f"use one of {list(POLICIES)}",
        )
    return cast(UnansweredToolCalls, policy)


def check_mode(mode: object) -> Mode:
    """`mode` if it is one of `MODES` (what a converter takes), else ValueError naming them."""
    if mode not in MODES:
        raise InvalidValueError(
            f"unanswered_tool_calls={mode!r}", reason=f"use one of {list(MODES)}"
        )
    return cast(Mode, mode)


def _derived_id(message: Message, tag: str) -> str:
    return str(uuid.uuid5(_DERIVED, f"{message.id}\x00{tag}"))


def interrupted_result(message: Message, call: ToolCallPart) -> Message:
    """The synthetic result standing in for `call` of `message`, which has none."""
    part = ToolResultPart(call_id=call.call_id, result=INTERRUPTED, is_error=True)
    return Message(
        id=_derived_id(message, f"interrupted\x00{call.call_id}"),
        role="tool",
        contents=(part,),
        created_at=message.created_at,
        metadata={"synthetic": "interrupted"},
    )


def split_result(message: Message, index: int) -> Message:
    """Result part `index` of `message` as a tool message of its own."""
    return Message(
        id=_derived_id(message, f"result\x00{index}"),
        role="tool",
        author=message.author,
        contents=(message.contents[index],),
        created_at=message.created_at,
        metadata={"split_from": message.id},
    )


def _without(message: Message, leave_out: Collection[int]) -> Message | None:
    """`message` without the parts at `leave_out`; None when nothing but thinking remains."""
    if not leave_out:
        return message
    parts = tuple(p for k, p in enumerate(message.contents) if k not in leave_out)
    if all(isinstance(p, ThinkingPart) for p in parts):
        return None
    return message.model_copy(update={"contents": parts})


def answer_form(
    message: Message, unanswered: Collection[str], mode: Mode, *, thread_id: str | None
) -> tuple[Message | None, list[Message]]:
    """`message` with the policy applied to its `unanswered` calls, and the results it adds.

    Raises:
        UnansweredToolCallError: mode "error" and a call is unanswered.
    """
    if not unanswered or mode == "keep":
        return message, []
    calls = [
        (k, p)
        for k, p in enumerate(message.contents)
        if isinstance(p, ToolCallPart) and p.call_id in unanswered
    ]
    if mode == "error":
        raise UnansweredToolCallError(
            calls[0][1].call_id, message_id=message.id, thread_id=thread_id
        )
    if mode == "drop":
        return _without(message, {k for k, _ in calls}), []
    return message, [interrupted_result(message, call) for _, call in calls]


def presented(
    message: Message, *, split: bool, unanswered: Collection[str], mode: Mode
) -> list[Message]:
    """Every message a view shows for `message` (wherever each is placed): for token counts.

    `split`: its results (all linked, as in a view) become tool messages of their own.
    """
    out: list[Message] = []
    base: Message | None = message
    if split:
        results = [k for k, p in enumerate(message.contents) if isinstance(p, ToolResultPart)]
        out.extend(split_result(message, k) for k in results)
        base = _without_results(message, results)
    if base is not None:
        kept, added = answer_form(base, unanswered, mode, thread_id=None)
        out.extend([kept, *added] if kept is not None else added)
    return out


def _without_results(message: Message, results: Collection[int]) -> Message | None:
    if len(results) == len(message.contents):
        return None
    return message.model_copy(
        update={"contents": tuple(p for k, p in enumerate(message.contents) if k not in results)}
    )


# -- arranging a list ----------------------------------------------------------------------


class _Links:
    """Which message each result of a list answers, and which calls stay unanswered."""

    def __init__(self, messages: Sequence[Message]) -> None:
        latest: dict[str, int] = {}
        self.targets: dict[int, list[tuple[int, int]]] = {}  # message -> (part, target)
        self.answered: set[tuple[int, str]] = set()
        for i, message in enumerate(messages):
            linked: list[tuple[int, int]] = []
            for k, part in enumerate(message.contents):
                if isinstance(part, ToolResultPart) and part.call_id in latest:
                    target = latest[part.call_id]
                    linked.append((k, target))
                    self.answered.add((target, part.call_id))
            if linked:
                self.targets[i] = linked
            for part in message.contents:
                if isinstance(part, ToolCallPart):
                    latest[part.call_id] = i

    def moves_whole(self, message: Message, i: int) -> bool:
        linked = self.targets[i]
        return len(linked) == len(message.contents) and len({t for _, t in linked}) == 1

    def unanswered(self, message: Message, i: int) -> list[str]:
        return [
            p.call_id
            for p in message.contents
            if isinstance(p, ToolCallPart) and (i, p.call_id) not in self.answered
        ]


def arrange(
    messages: Sequence[Message], mode: Mode = "interrupt", *, thread_id: str | None = None
) -> list[Message]:
    """`messages` with every call's results right after it and the policy applied (see module).

    Raises:
        UnansweredToolCallError: mode "error" and a call has no result.
    """
    links = _Links(messages)
    answers: dict[int, list[Message]] = {}
    in_place: dict[int, Message | None] = {}
    for i, linked in links.targets.items():
        message = messages[i]
        if links.moves_whole(message, i):
            answers.setdefault(linked[0][1], []).append(message)
            in_place[i] = None
            continue
        for k, target in linked:
            answers.setdefault(target, []).append(split_result(message, k))
        in_place[i] = _without_results(message, [k for k, _ in linked])
    out: list[Message] = []
    for i, message in enumerate(messages):
        base = in_place.get(i, message)
        if base is None:
            continue
        kept, added = answer_form(base, links.unanswered(message, i), mode, thread_id=thread_id)
        if kept is not None:
            out.append(kept)
        out.extend(answers.get(i, ()))
        out.extend(added)
    return out


__all__ = [
    "INTERRUPTED",
    "MODES",
    "POLICIES",
    "Mode",
    "UnansweredToolCalls",
    "answer_form",
    "arrange",
    "check_mode",
    "check_policy",
    "interrupted_result",
    "presented",
    "split_result",
]
