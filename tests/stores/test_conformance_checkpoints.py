"""Checkpoints, time travel and rollback on every store, against a reference model.

The model keeps, per thread, its message ids, state and stats now and at the point it
started from, and, per checkpoint, the same triple as recorded. Random sequences of
appends, state updates, checkpoints, rollbacks (to a checkpoint, a label or a message),
roll-forwards, forks (of live threads and of snapshots), reloads, writes through a
second (stale) handle, deletes, vacuums and export (`to_json()` of a refreshed handle,
which must equal what a fresh `export()` reads) and re-import run against it. After
every step a fresh lazy handle per thread (which reads everything from the store)
must show exactly the model: the thread, its checkpoint list, and every checkpoint.
Vacuum runs with no grace period, so a message a thread or checkpoint still references
that the store lost would show up as an error here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from agent_threads import AgentThread, ChatMessageThread, Checkpoint, Message, Usage
from agent_threads.core.ids import new_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.timetravel.checkpoints import ROLLBACK_LABEL

from .conftest import StoreFactory

LABELS = st.sampled_from([None, "plan", "draft"])
KEYS = st.sampled_from(["a", "b", "c"])


def index_in(size: int) -> st.SearchStrategy[int]:
    """A message index, often the last one (where a checkpoint and "now" tie)."""
    return st.just(size - 1) | st.integers(0, size - 1)


@dataclass(frozen=True)
class Point:
    """Message ids, state and (message count, input tokens) at one point."""

    messages: tuple[str, ...] = ()
    state: tuple[tuple[str, Any], ...] = ()
    stats: tuple[int, int] = (0, 0)

    def state_dict(self) -> dict[str, Any]:
        return dict(self.state)


@dataclass
class ModelThread:
    now: Point
    origin: Point
    auto: bool
    checkpoints: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ModelCheckpoint:
    point: Point
    label: str | None
    reason: str


class CheckpointModel(RuleBasedStateMachine):
    """The machine; the test binds it to a portal, a store factory and a directory."""

    portal: BlockingPortal
    factory: StoreFactory
    root: Path

    def __init__(self) -> None:
        super().__init__()
        self.opened = self.portal.wrap_async_context_manager(self.factory(self.root / new_id()))
        self.store = self.opened.__enter__()
        self.threads: dict[str, ModelThread] = {}
        self.saved: dict[str, ModelCheckpoint] = {}
        self.tokens: dict[str, int] = {}
        self.handles: dict[str, list[ChatMessageThread]] = {}
        self.touched: set[str] = set()  # threads to check; deletes and vacuums: all

    def teardown(self) -> None:
        self.opened.__exit__(None, None, None)

    # -- helpers ----------------------------------------------------------

    def load(self, thread_id: str, *, lazy: bool = False) -> ChatMessageThread:
        return self.portal.call(
            lambda: ChatMessageThread.load(thread_id, store=self.store, lazy=lazy)
        )

    def adopt(self, thread: ChatMessageThread, model: ModelThread) -> None:
        self.touched.add(thread.id)
        self.threads[thread.id] = model
        self.handles[thread.id] = [thread, self.load(thread.id)]

    def pick(self, data: st.DataObject) -> tuple[str, ChatMessageThread]:
        thread_id = data.draw(st.sampled_from(sorted(self.threads)), label="thread")
        self.touched.add(thread_id)
        handle = data.draw(st.sampled_from(self.handles[thread_id]), label="handle")
        return thread_id, handle

    def fresh(self, data: st.DataObject) -> tuple[str, ChatMessageThread]:
        """A handle that has seen every write (ops that act on the handle's view)."""
        thread_id, handle = self.pick(data)
        self.portal.call(handle.refresh)
        return thread_id, handle

    def record(self, thread_id: str, cp: Checkpoint, point: Point) -> None:
        self.saved[cp.id] = ModelCheckpoint(point, cp.label, cp.reason)
        self.threads[thread_id].checkpoints.append(cp.id)

    def point_at(self, thread_id: str, count: int) -> Point:
        """The model of `at(message_id=...)`: nearest known point on the path."""
        model = self.threads[thread_id]
        target = model.now.messages[:count]
        known = [
            Point(),
            model.origin,
            *(self.saved[c].point for c in model.checkpoints),
            model.now,
        ]
        base = Point()
        for point in known:
            size = len(point.messages)
            if len(base.messages) <= size <= count and target[:size] == point.messages:
                base = point
        added = target[len(base.messages) :]
        stats = (
            base.stats[0] + len(added),
            base.stats[1] + sum(self.tokens[m] for m in added),
        )
        return Point(target, base.state, stats)

    def check_to_json(self, handle: ChatMessageThread) -> dict[str, Any]:
        """`to_json()` of a handle that saw every write is what the store holds now.

        A lazy handle has no `to_json()`: its `export()` is returned instead.
        """
        fresh: dict[str, Any] = json.loads(self.portal.call(self.load(handle.id).export))
        if handle.is_lazy:
            return fresh
        held: dict[str, Any] = json.loads(handle.to_json())
        assert held == fresh
        return held

    def roll(self, thread_id: str, cp: Checkpoint, target: Point) -> None:
        self.record(thread_id, cp, self.threads[thread_id].now)
        self.threads[thread_id].now = target

    # -- rules ------------------------------------------------------------

    @initialize(auto=st.booleans(), data=st.data())
    def create(self, auto: bool, data: st.DataObject) -> None:
        thread = self.portal.call(
            lambda: ChatMessageThread.create(self.store, auto_checkpoint=auto)
        )
        self.adopt(thread, ModelThread(Point(), Point(), auto))
        self.update_state(data, "a", 0)
        self.append(data, [1, 2])

    @rule(data=st.data(), tokens=st.lists(st.integers(0, 5), min_size=1, max_size=3))
    def append(self, data: st.DataObject, tokens: list[int]) -> None:
        thread_id, handle = self.pick(data)
        batch = [Message.user(f"m{i}", usage=Usage(input_tokens=t)) for i, t in enumerate(tokens)]
        self.portal.call(handle.on_new_messages, batch)
        self.tokens.update((m.id, t) for m, t in zip(batch, tokens, strict=True))
        model = self.threads[thread_id]
        count, spent = model.now.stats
        model.now = replace(
            model.now,
            messages=model.now.messages + tuple(m.id for m in batch),
            stats=(count + len(batch), spent + sum(tokens)),
        )
        if model.auto:
            cps = self.portal.call(handle.checkpoints)
            self.record(thread_id, cps[-1], model.now)

    @rule(data=st.data(), key=KEYS, value=st.none() | st.integers(0, 3))
    def update_state(self, data: st.DataObject, key: str, value: int | None) -> None:
        thread_id, handle = self.pick(data)
        self.portal.call(handle.update_state, {key: value})
        model = self.threads[thread_id]
        state = model.now.state_dict()
        if value is None:
            state.pop(key, None)
        else:
            state[key] = value
        model.now = replace(model.now, state=tuple(sorted(state.items())))

    @rule(data=st.data(), label=LABELS)
    def checkpoint(self, data: st.DataObject, label: str | None) -> None:
        thread_id, handle = self.fresh(data)
        cp = self.portal.call(lambda: handle.checkpoint(label))
        self.record(thread_id, cp, self.threads[thread_id].now)
        self.check_to_json(handle)  # the checkpoint joined the handle's history

    @rule(data=st.data(), how=st.sampled_from(["object", "id", "label"]))
    def rollback_to_checkpoint(self, data: st.DataObject, how: str) -> None:
        thread_id, handle = self.pick(data)  # possibly stale: rollback must catch up
        ids = self.threads[thread_id].checkpoints
        if not ids:
            return
        chosen = data.draw(st.sampled_from(ids), label="checkpoint")
        label = self.saved[chosen].label
        if how == "label" and label is not None:
            chosen = [c for c in ids if self.saved[c].label == label][-1]
            target: Checkpoint | str = label
        else:
            cp = self.portal.call(lambda: handle.get_checkpoint(chosen))
            target = cp if how == "object" else chosen
        point = self.saved[chosen].point
        self.roll(thread_id, self.portal.call(lambda: handle.rollback(target)), point)

    @rule(data=st.data(), vacuum=st.booleans())
    def roll_forward(self, data: st.DataObject, vacuum: bool) -> None:
        thread_id, handle = self.pick(data)
        ids = self.threads[thread_id].checkpoints
        undo = [c for c in ids if self.saved[c].label == ROLLBACK_LABEL]
        if not undo:
            return
        point = self.saved[undo[-1]].point
        self.roll(thread_id, self.portal.call(lambda: handle.rollback(ROLLBACK_LABEL)), point)
        if vacuum:
            self.vacuum()

    @rule(data=st.data(), vacuum=st.booleans())
    def rollback_to_message(self, data: st.DataObject, vacuum: bool) -> None:
        thread_id, handle = self.fresh(data)
        messages = self.threads[thread_id].now.messages
        if not messages:
            return
        index = data.draw(index_in(len(messages)), label="index")
        point = self.point_at(thread_id, index + 1)
        cp = self.portal.call(lambda: handle.rollback(message_id=messages[index]))
        self.roll(thread_id, cp, point)
        self.check_to_json(handle)
        if vacuum:
            self.vacuum()

    @rule(data=st.data())
    def fork_live(self, data: st.DataObject) -> None:
        thread_id, handle = self.fresh(data)
        model = self.threads[thread_id]
        size = len(model.now.messages)
        cut = data.draw(st.none() | index_in(max(1, size)), label="cut")
        at = None if cut is None or not size else model.now.messages[cut]
        child = self.portal.call(lambda: handle.fork(message_id=at))
        messages = model.now.messages if at is None else model.now.messages[: cut + 1]  # type: ignore[operator]
        start = Point(messages, model.now.state, (0, 0))
        self.adopt(child, ModelThread(start, start, model.auto))

    @rule(data=st.data())
    def fork_snapshot(self, data: st.DataObject) -> None:
        thread_id, handle = self.fresh(data)
        model = self.threads[thread_id]
        if data.draw(st.booleans(), label="at checkpoint") and model.checkpoints:
            chosen = data.draw(st.sampled_from(model.checkpoints), label="checkpoint")
            snap = self.portal.call(lambda: handle.at(chosen))
            point = self.saved[chosen].point
        elif model.now.messages:
            index = data.draw(index_in(len(model.now.messages)), label="index")
            snap = self.portal.call(lambda: handle.at(message_id=model.now.messages[index]))
            point = self.point_at(thread_id, index + 1)
        else:
            return
        child = self.portal.call(snap.fork)
        assert child.parent_id == thread_id
        start = replace(point, stats=(0, 0))
        self.adopt(child, ModelThread(start, start, model.auto))

    @rule(data=st.data(), lazy=st.booleans())
    def reload(self, data: st.DataObject, lazy: bool) -> None:
        thread_id, _ = self.pick(data)
        self.handles[thread_id][0] = self.load(thread_id, lazy=lazy)

    @precondition(lambda self: len(self.threads) > 1)
    @rule(data=st.data())
    def delete_and_vacuum(self, data: st.DataObject) -> None:
        thread_id, handle = self.pick(data)
        self.portal.call(handle.delete)
        self.touched.update(self.threads)
        for cp_id in self.threads.pop(thread_id).checkpoints:
            del self.saved[cp_id]
        del self.handles[thread_id]
        self.vacuum()
        left = self.portal.call(lambda: self.store.get_record(THREAD_KIND, thread_id))
        assert left is None  # and with the record, the thread's checkpoint log

    @rule(data=st.data(), vacuum=st.booleans())
    def export_delete_and_import(self, data: st.DataObject, vacuum: bool) -> None:
        thread_id, handle = self.fresh(data)
        document = self.check_to_json(handle)
        self.portal.call(self.load(thread_id).delete)
        if vacuum:
            self.vacuum()
        imported = self.portal.call(lambda: AgentThread.from_json(document, store=self.store))
        assert isinstance(imported, ChatMessageThread)
        self.handles[thread_id] = [imported, self.load(thread_id)]

    def vacuum(self) -> None:
        self.portal.call(lambda: self.store.vacuum(grace=0))
        self.touched.update(self.threads)

    # -- what must always hold ----------------------------------------------

    @invariant()
    def every_thread_and_checkpoint_reads_back_from_the_store(self) -> None:
        """Checked for every thread a step may have changed (all of them after a
        delete or vacuum, which are what could take data from the others)."""
        touched, self.touched = self.touched & set(self.threads), set()
        for thread_id in sorted(touched):
            model = self.threads[thread_id]
            reader = self.load(thread_id, lazy=True)  # nothing cached: rows from store
            self.check(reader, model.now, thread_id)
            assert reader.auto_checkpoint == model.auto
            cps = self.portal.call(reader.checkpoints)
            assert [c.id for c in cps] == model.checkpoints, thread_id
            for cp in cps:
                expected = self.saved[cp.id]
                assert (cp.label, cp.reason) == (expected.label, expected.reason)
                snap = self.portal.call(reader.at, cp)
                self.check(snap, expected.point, cp.id)

    def check(self, view: Any, point: Point, where: str) -> None:
        messages = self.portal.call(view.get_messages)
        assert tuple(m.id for m in messages) == point.messages, where
        assert view.state.to_dict() == point.state_dict(), where
        assert (view.stats.message_count, view.stats.input_tokens) == point.stats, where


def test_checkpoints_always_equal_their_reference_model(
    store_factory: StoreFactory, tmp_path: Path
) -> None:
    with start_blocking_portal(backend="asyncio") as portal:
        bound = type(
            "BoundCheckpointModel",
            (CheckpointModel,),
            {"portal": portal, "factory": staticmethod(store_factory), "root": tmp_path},
        )
        run_state_machine_as_test(
            bound,
            settings=settings(
                max_examples=12,
                stateful_step_count=30,
                deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
            ),
        )
