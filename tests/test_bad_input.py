"""Every public entry point answers malformed input with an AgentThreadsError, losing nothing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from agent_threads import (
    AgentThread,
    AgentThreadsError,
    ChatMessageThread,
    MemoryStore,
    Message,
    WorkflowThread,
)
from agent_threads.core.retry import RetryPolicy
from agent_threads.formats import anthropic, openai

Call = Callable[[ChatMessageThread], Awaitable[object]]
BAD: dict[str, Call] = {
    "create with a path as id": lambda t: ChatMessageThread.create(t.store, id="a/b"),
    "create with a number as id": lambda t: ChatMessageThread.create(t.store, id=5),  # type: ignore[arg-type]
    "create with a number as title": lambda t: ChatMessageThread.create(t.store, title=5),  # type: ignore[arg-type]
    "create with a list as metadata": lambda t: ChatMessageThread.create(t.store, metadata=[1]),  # type: ignore[arg-type]
    "load a path": lambda t: ChatMessageThread.load("../x", store=t.store),
    "append a string": lambda t: t.on_new_messages("hello"),  # type: ignore[arg-type]
    "append dicts": lambda t: t.on_new_messages([{"role": "user"}]),  # type: ignore[list-item]
    "append None": lambda t: t.on_new_messages(None),  # type: ignore[arg-type]
    "append with a negative deadline": lambda t: t.on_new_messages(
        [Message.user("x")], deadline=-1
    ),
    "fork at a number": lambda t: t.fork(message_id=5),  # type: ignore[arg-type]
    "fork under a bad id": lambda t: t.fork(id="a b"),
    "checkpoint labelled by a number": lambda t: t.checkpoint(5),  # type: ignore[arg-type]
    "rollback to nothing": lambda t: t.rollback(),
    "rollback to an unknown label": lambda t: t.rollback("nope"),
    "travel to a number": lambda t: t.at(5),  # type: ignore[arg-type]
    "get a checkpoint by number": lambda t: t.get_checkpoint(5),  # type: ignore[arg-type]
    "update the state with a list": lambda t: t.update_state([1]),  # type: ignore[arg-type]
    "update the state with None": lambda t: t.update_state(None),  # type: ignore[arg-type]
    "update the title to a number": lambda t: t.update(title=5),  # type: ignore[arg-type]
    "read messages by text": lambda t: t.get_messages("a"),  # type: ignore[arg-type]
    "view a negative budget": lambda t: t.view(max_tokens=-1),
    "view a text budget": lambda t: t.view(max_tokens="x"),  # type: ignore[arg-type]
    "view an unknown policy": lambda t: t.view(unanswered_tool_calls="x"),  # type: ignore[arg-type]
    "import broken JSON": lambda t: AgentThread.from_json("{", store=t.store),
    "import bytes that are not text": lambda t: AgentThread.from_json(b"\xff\xfe", store=t.store),
    "import a list": lambda t: AgentThread.from_json("[]", store=t.store),
    "import a number": lambda t: AgentThread.from_json(5, store=t.store),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("call", BAD.values(), ids=BAD.keys())
async def test_bad_input_raises_a_library_error_and_changes_nothing(call: Call) -> None:
    store = MemoryStore()
    thread = await ChatMessageThread.create(store, title="kept")
    await thread.on_new_messages([Message.user("a")])
    before = json.loads(await thread.export())
    threads_before = [r.id for r in await store.list_records("thread")]
    with pytest.raises(AgentThreadsError):
        await call(thread)
    assert json.loads(await thread.export()) == before
    assert [r.id for r in await store.list_records("thread")] == threads_before


FORMATS: dict[str, Callable[[], object]] = {
    "openai: a role it does not know": lambda: openai.from_messages([{"role": "wizard"}]),
    "openai: arguments that are not JSON": lambda: openai.from_messages(
        [
            {
                "role": "assistant",
                "tool_calls": [{"id": "c", "function": {"name": "f", "arguments": "{"}}],
            }
        ]
    ),
    "anthropic: a role it does not know": lambda: anthropic.from_messages([{"role": "tool"}]),
    "a retry policy with a negative deadline": lambda: RetryPolicy(deadline=-1),
}


@pytest.mark.parametrize("call", FORMATS.values(), ids=FORMATS.keys())
def test_bad_provider_messages_raise_a_library_error(call: Callable[[], Any]) -> None:
    with pytest.raises(AgentThreadsError):
        call()


async def test_a_refused_workflow_import_leaves_no_sub_thread_behind() -> None:
    source = await WorkflowThread.create(MemoryStore())
    for key in ("a", "b"):
        sub = await source.create_sub_thread("agent", key)
        await sub.on_new_messages([Message.user(key)])
    document = json.loads(source.to_json())
    subs = document["sub_threads"]
    for bad_subs in [
        {**subs, "b": {**subs["b"], "kind": "workflow"}},  # the second one is refused
        {**subs, "b": {**subs["b"], "messages": [{"role": "wizard"}]}},
        {**subs, "bad\nkey": subs["a"]},
    ]:
        store = MemoryStore()
        with pytest.raises(AgentThreadsError):
            await AgentThread.from_json({**document, "sub_threads": bad_subs}, store=store)
        assert await store.list_records() == []
    assert isinstance(await AgentThread.from_json(document, store=MemoryStore()), WorkflowThread)
