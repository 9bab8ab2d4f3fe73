"""ThreadSaver under a real LangGraph chat graph: turns, history, forks, storage, messages."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph

from agent_threads import ChatMessageThread, MemoryStore, SQLiteStore
from agent_threads.integrations.langgraph import (
    ThreadSaver,
    from_langchain,
    thread_key,
    to_langchain,
)

pytestmark = pytest.mark.anyio


def _reply(state: MessagesState) -> dict[str, list[BaseMessage]]:
    last = state["messages"][-1]
    return {"messages": [AIMessage(content=f"echo: {last.content}")]}


def _graph(saver: ThreadSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(MessagesState)
    builder.add_node("reply", _reply)
    builder.add_edge(START, "reply")
    return builder.compile(checkpointer=saver)


def _config(thread_id: str, checkpoint_id: str | None = None) -> RunnableConfig:
    configurable = {"thread_id": thread_id}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _texts(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


async def test_a_chat_graph_keeps_its_turns_in_a_thread() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        for n in range(3):
            await graph.ainvoke({"messages": [HumanMessage(f"q{n}")]}, _config("chat"))
        state = await graph.aget_state(_config("chat"))
        assert _texts(state.values["messages"]) == [
            "q0", "echo: q0", "q1", "echo: q1", "q2", "echo: q2"
        ]  # fmt: skip
        # the messages are the thread's, each appended once
        thread = await ChatMessageThread.load(thread_key("chat"), store=store)
        assert [m.role for m in thread.messages] == ["user", "assistant"] * 3
        assert [m.text for m in thread.messages] == _texts(state.values["messages"])
        # a fresh saver on the same store reads the same state
        again = await _graph(ThreadSaver(store)).aget_state(_config("chat"))
        assert again.values == state.values


async def test_history_lists_every_checkpoint_newest_first() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        for n in range(2):
            await graph.ainvoke({"messages": [HumanMessage(f"q{n}")]}, _config("h"))
        history = [s async for s in graph.aget_state_history(_config("h"))]
        # per turn: the input, the loop step before the node, the node's output
        assert [len(s.values.get("messages", [])) for s in history] == [4, 3, 2, 2, 1, 0]
        assert [s.metadata["step"] for s in history if s.metadata] == [4, 3, 2, 1, 0, -1]
        ids = [s.config["configurable"]["checkpoint_id"] for s in history]
        assert ids == sorted(ids, reverse=True)
        parents = [
            s.parent_config["configurable"]["checkpoint_id"]
            for s in history[:-1]
            if s.parent_config
        ]
        assert parents == ids[1:]


async def test_resuming_from_an_old_checkpoint_forks_and_keeps_the_first_branch() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        for n in range(3):
            await graph.ainvoke({"messages": [HumanMessage(f"q{n}")]}, _config("f"))
        history = [s async for s in graph.aget_state_history(_config("f"))]
        after_first = next(s for s in history if len(s.values.get("messages", [])) == 2)
        head = history[0]
        # replay from after the first turn with another question
        old = after_first.config
        await graph.ainvoke({"messages": [HumanMessage("other")]}, old)
        state = await graph.aget_state(_config("f"))
        assert _texts(state.values["messages"]) == ["q0", "echo: q0", "other", "echo: other"]
        # the first branch is still there
        first_branch = await graph.aget_state(head.config)
        assert len(first_branch.values["messages"]) == 6
        # update_state on an old checkpoint forks too
        forked = await graph.aupdate_state(old, {"messages": [AIMessage("edited")]})
        edited = await graph.aget_state(forked)
        assert _texts(edited.values["messages"]) == ["q0", "echo: q0", "edited"]
        assert edited.parent_config is not None
        assert (
            edited.parent_config["configurable"]["checkpoint_id"]
            == (old["configurable"]["checkpoint_id"])
        )


async def test_a_replaced_message_is_kept_and_the_old_list_still_reads() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        await graph.ainvoke({"messages": [HumanMessage("q0", id="m0")]}, _config("r"))
        before = await graph.aget_state(_config("r"))
        # add_messages replaces a message with the same id in place
        config = await graph.aupdate_state(
            _config("r"), {"messages": [HumanMessage("Q0", id="m0")]}
        )
        after = await graph.aget_state(config)
        assert _texts(after.values["messages"]) == ["Q0", "echo: q0"]
        assert _texts((await graph.aget_state(before.config)).values["messages"]) == [
            "q0",
            "echo: q0",
        ]


def _sqlite_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


async def _chat_bytes(tmp_path: Path, turns: int) -> int:
    path = tmp_path / f"chat{turns}.db"
    async with SQLiteStore(path) as store:
        graph = _graph(ThreadSaver(store))
        for n in range(turns):
            question = f"question {n}: " + "lorem ipsum " * 40
            await graph.ainvoke({"messages": [HumanMessage(question)]}, _config("long"))
    return _sqlite_bytes(path)


async def test_storage_grows_linearly_with_the_turns(tmp_path: Path, anyio_backend: str) -> None:
    if anyio_backend != "asyncio":
        pytest.skip("one backend is enough to measure bytes")
    small = await _chat_bytes(tmp_path, 20)
    large = await _chat_bytes(tmp_path, 40)
    # each turn stores its two messages and three checkpoints, never the whole list
    assert large < 2.3 * small, (small, large)


def test_the_sync_methods_run_a_graph() -> None:
    store = MemoryStore()
    saver = ThreadSaver(store)
    try:
        graph = _graph(saver)
        graph.invoke({"messages": [HumanMessage("hi")]}, _config("sync"))
        graph.invoke({"messages": [HumanMessage("again")]}, _config("sync"))
        state = graph.get_state(_config("sync"))
        assert _texts(state.values["messages"]) == ["hi", "echo: hi", "again", "echo: again"]
        assert len(list(graph.get_state_history(_config("sync")))) == 6
        saver.copy_thread("sync", "copy")
        copied = graph.get_state(_config("copy"))
        assert copied.values == state.values
        saver.prune(["sync"])
        assert [s.values for s in graph.get_state_history(_config("sync"))] == [state.values]
        saver.delete_for_runs([])
        saver.delete_thread("sync")
        assert saver.get_tuple(_config("sync")) is None
        assert len(list(saver.list(_config("copy")))) == 6
    finally:
        saver.close()


def test_langchain_messages_come_back_unchanged() -> None:
    messages: list[BaseMessage] = [
        HumanMessage("hi", id="h1", additional_kwargs={"x": 1}),
        AIMessage(
            "",
            id="a1",
            tool_calls=[{"name": "add", "args": {"a": 1}, "id": "c1", "type": "tool_call"}],
            usage_metadata={"input_tokens": 3, "output_tokens": 4, "total_tokens": 7},
        ),
        ToolMessage("2", tool_call_id="c1", id="t1"),
    ]
    for message in messages:
        stored = from_langchain(message)
        assert to_langchain(stored) == message
    assert [from_langchain(m).role for m in messages] == ["user", "assistant", "tool"]


def test_without_langgraph_the_import_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.checkpoint.base", None)
    monkeypatch.delitem(sys.modules, "agent_threads.integrations.langgraph")
    with pytest.raises(ImportError, match=r"agent-threads-framework\[langgraph\]"):
        importlib.import_module("agent_threads.integrations.langgraph")


async def test_two_savers_on_one_store_see_each_others_turns() -> None:
    async with MemoryStore() as store:
        first, second = _graph(ThreadSaver(store)), _graph(ThreadSaver(store))
        for n in range(4):
            graph = first if n % 2 == 0 else second
            await graph.ainvoke({"messages": [HumanMessage(f"q{n}")]}, _config("two"))
        for graph in (first, second):
            state = await graph.aget_state(_config("two"))
            assert _texts(state.values["messages"])[::2] == ["q0", "q1", "q2", "q3"]
            assert len([s async for s in graph.aget_state_history(_config("two"))]) == 12


async def test_vacuum_keeps_what_the_checkpoints_use() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        for n in range(2):
            await graph.ainvoke({"messages": [HumanMessage(f"q{n}")]}, _config("v"))
        before = [s.values async for s in graph.aget_state_history(_config("v"))]
        await store.vacuum(grace=0)
        fresh = _graph(ThreadSaver(store))  # no cached documents
        assert [s.values async for s in fresh.aget_state_history(_config("v"))] == before


async def test_a_message_changed_in_place_by_a_caller_changes_no_checkpoint() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        await graph.ainvoke({"messages": [HumanMessage("q0")]}, _config("m"))
        state = await graph.aget_state(_config("m"))
        state.values["messages"][0].content = "changed"  # the caller's copy only
        state.values["messages"][1].additional_kwargs["x"] = {"y": 1}
        again = await graph.aget_state(_config("m"))
        assert _texts(again.values["messages"]) == ["q0", "echo: q0"]
        assert again.values["messages"][1].additional_kwargs == {}


async def test_replacing_the_last_message_appends_only_that_one() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        await graph.ainvoke({"messages": [HumanMessage("q0", id="m0")]}, _config("l"))
        state = await graph.aget_state(_config("l"))
        last = state.values["messages"][-1]
        edited = AIMessage("edited answer", id=last.id)
        config = await graph.aupdate_state(_config("l"), {"messages": [edited]})
        assert _texts((await graph.aget_state(config)).values["messages"]) == [
            "q0",
            "edited answer",
        ]
        thread = await ChatMessageThread.load(thread_key("l"), store=store)
        assert [m.text for m in thread.messages] == ["q0", "echo: q0", "edited answer"]
        fresh = _graph(ThreadSaver(store))  # reads the ranges back from the store
        assert _texts((await fresh.aget_state(config)).values["messages"]) == [
            "q0",
            "edited answer",
        ]


async def test_a_thread_deleted_and_begun_again_elsewhere_reads_as_the_new_one() -> None:
    async with MemoryStore() as store:
        first_saver, second_saver = ThreadSaver(store), ThreadSaver(store)
        first, second = _graph(first_saver), _graph(second_saver)
        for n in range(2):
            await first.ainvoke({"messages": [HumanMessage(f"old {n}")]}, _config("d"))
        await second_saver.adelete_thread("d")
        await second.ainvoke({"messages": [HumanMessage("new")]}, _config("d"))
        state = await first.aget_state(_config("d"))
        assert _texts(state.values["messages"]) == ["new", "echo: new"]
        await first.ainvoke({"messages": [HumanMessage("next")]}, _config("d"))
        state = await second.aget_state(_config("d"))
        assert _texts(state.values["messages"]) == ["new", "echo: new", "next", "echo: next"]


async def test_a_large_channel_value_is_a_blob_vacuum_keeps() -> None:
    class State(MessagesState):
        notes: str

    def note(state: State) -> dict[str, Any]:
        return {"messages": [AIMessage("ok")], "notes": "n" * 10_000}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(State)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    async with MemoryStore() as store:
        graph = builder.compile(checkpointer=ThreadSaver(store))
        await graph.ainvoke({"messages": [HumanMessage("q")]}, _config("b"))
        assert len(await store.list_blobs()) == 1  # the notes, once
        await store.vacuum(grace=0)
        fresh = builder.compile(checkpointer=ThreadSaver(store))
        state = await fresh.aget_state(_config("b"))
        assert state.values["notes"] == "n" * 10_000


async def test_every_kind_of_message_reads_back_equal() -> None:
    def tools(state: MessagesState) -> dict[str, list[BaseMessage]]:
        call = {"name": "add", "args": {"a": [1, 2]}, "id": "c1", "type": "tool_call"}
        usage = {"input_tokens": 3, "output_tokens": 4, "total_tokens": 7}
        return {
            "messages": [
                AIMessage("", tool_calls=[call], usage_metadata=usage),
                ToolMessage("3", tool_call_id="c1", artifact={"sum": 3}),
                ChatMessage(content="fine", role="critic"),
                SystemMessage("be brief", additional_kwargs={"x": {"y": 1}}),
            ]
        }

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("tools", tools)
    builder.add_edge(START, "tools")
    async with MemoryStore() as store:
        graph = builder.compile(checkpointer=ThreadSaver(store))
        result = await graph.ainvoke({"messages": [HumanMessage("add")]}, _config("k"))
        for saver in (graph, builder.compile(checkpointer=ThreadSaver(store))):
            state = await saver.aget_state(_config("k"))
            assert state.values["messages"] == result["messages"]
            assert [type(m) for m in state.values["messages"]] == [
                type(m) for m in result["messages"]
            ]


async def test_a_message_a_node_changed_in_place_reads_as_with_langgraph_s_saver() -> None:
    def rewrite(state: MessagesState) -> dict[str, list[BaseMessage]]:
        first = state["messages"][0]
        first.additional_kwargs["seen"] = {"by": "rewrite"}  # in place, as LangGraph allows
        return {"messages": [AIMessage("ok", id=f"ok{len(state['messages'])}")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("rewrite", rewrite)
    builder.add_edge(START, "rewrite")

    async def history(saver: BaseCheckpointSaver[Any]) -> list[Any]:
        graph = builder.compile(checkpointer=saver)
        for n in range(2):
            question = HumanMessage(f"q{n}", id=f"q{n}")
            await graph.ainvoke({"messages": [question]}, _config("p"), durability="sync")
        return [s.values async for s in graph.aget_state_history(_config("p"))]

    expected = await history(InMemorySaver())
    assert expected[0]["messages"][0].additional_kwargs == {"seen": {"by": "rewrite"}}
    async with MemoryStore() as store:
        assert await history(ThreadSaver(store)) == expected
        fresh = builder.compile(checkpointer=ThreadSaver(store))
        assert [s.values async for s in fresh.aget_state_history(_config("p"))] == expected


async def test_a_saver_on_more_threads_than_it_keeps_in_memory_reads_each() -> None:
    async with MemoryStore() as store:
        graph = _graph(ThreadSaver(store))
        names = [f"t{n}" for n in range(40)]  # more than the saver keeps
        for turn in range(2):
            for name in names:
                question = f"{name} q{turn}"
                await graph.ainvoke({"messages": [HumanMessage(question)]}, _config(name))
        for name in names:
            state = await graph.aget_state(_config(name))
            assert _texts(state.values["messages"])[::2] == [f"{name} q0", f"{name} q1"]
            thread = await ChatMessageThread.load(thread_key(name), store=store)
            assert thread.head == 4  # each message appended once
