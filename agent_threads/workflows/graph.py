"""Workflow graphs: steps and the edges between them.

Edges are sequential (`edge(a, b)`), fan-out (`edge(a, [b, c])`: the targets run
concurrently), fan-in (`join([b, c], d)`: `d` waits for all its sources, with a merge
policy for their state patches) and conditional (`branch(a, router)`: a function of the
state and `a`'s output names the next steps).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Self, overload

from agent_threads.state import ImmutableState, MergePolicy
from agent_threads.stores.base import ThreadStore
from agent_threads.threads.workflow.execution import StepRecord, StepTask
from agent_threads.threads.workflow.lease import DEFAULT_LEASE_DURATION, check_duration
from agent_threads.threads.workflow.thread import WorkflowThread
from agent_threads.workflows.context import StepContext
from agent_threads.workflows.runner import StepObserver, resume_run, start_run

END = "__end__"
"""A router returns this (or None) to end its path."""

StepFunction = Callable[[StepContext], Awaitable[Any]]
"""An async function of a `StepContext`, returning an output or a `StepResult`."""

Router = Callable[[ImmutableState, Any], str | Sequence[str] | None]
"""Chooses the next steps from the merged state and the source step's output."""

_STRICTNESS: dict[str, int] = {"last_write_wins": 0, "combine_lists": 1, "raise": 2}


@dataclass(frozen=True, slots=True, eq=False)
class Step:
    """A named step: an async callable of a `StepContext`, run as `agent` on sub-thread `key`.

    `max_attempts` is how often one run tries the step before recording it as failed.
    """

    name: str
    run: StepFunction
    agent: str
    key: str
    max_attempts: int = 1

    def __post_init__(self) -> None:
        for what, value in (("name", self.name), ("agent", self.agent), ("key", self.key)):
            if not isinstance(value, str) or not value or value == END:
                raise ValueError(
                    f"step {what} must be a non-empty string other than END, got {value!r}"
                )
        if self.max_attempts < 1:
            raise ValueError(f"step {self.name!r}: max_attempts must be at least 1")
        if not _is_async(self.run):
            raise TypeError(f"step {self.name!r}: {self.run!r} is not an async callable")

    async def __call__(self, ctx: StepContext) -> Any:
        return await self.run(ctx)


def _identity(item: Step) -> tuple[object, ...]:
    """What makes two `Step`s the same step (a plain function is wrapped on each use)."""
    return (item.name, item.run, item.agent, item.key, item.max_attempts)


def _is_async(fn: object) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(type(fn), "__call__", None)  # noqa: B004 - an agent object's call
    return call is not None and inspect.iscoroutinefunction(call)


@overload
def step(fn: StepFunction, /) -> Step: ...


@overload
def step(
    *,
    name: str | None = None,
    agent: str | None = None,
    key: str | None = None,
    max_attempts: int = 1,
) -> Callable[[StepFunction], Step]: ...


def step(
    fn: StepFunction | None = None,
    /,
    *,
    name: str | None = None,
    agent: str | None = None,
    key: str | None = None,
    max_attempts: int = 1,
) -> Step | Callable[[StepFunction], Step]:
    """Make a step of an async function (or of an object with `name` and an async call).

    Use bare (`@step`) or with options (`@step(agent="researcher", max_attempts=3)`).
    The name defaults to the function's (or object's) name, the agent to the name, and
    the sub-thread key to the agent.
    """

    def make(target: StepFunction) -> Step:
        step_name = name or _name_of(target)
        step_agent = agent or step_name
        return Step(step_name, target, step_agent, key or step_agent, max_attempts)

    return make if fn is None else make(fn)


def _name_of(target: object) -> str:
    found = getattr(target, "name", None) or getattr(target, "__name__", None)
    if not isinstance(found, str) or not found:
        raise TypeError(f"{target!r} has no name: pass step(name=...)")
    return found


def as_step(item: object) -> Step:
    """A `Step` for a step, an async function, or an agent object with `name`."""
    if isinstance(item, Step):
        return item
    if not callable(item):
        raise TypeError(f"not a step: {item!r}")
    return step(item)


StepLike = Step | StepFunction | str


@dataclass(frozen=True, slots=True)
class _Branch:
    router: Router
    targets: tuple[str, ...] | None

    def choose(self, source: str, state: ImmutableState, output: Any) -> list[str]:
        chosen = self.router(state, output)
        names = [] if chosen is None else [chosen] if isinstance(chosen, str) else list(chosen)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"the router after step {source!r} returned {name!r}, not a name")
            if self.targets is not None and name != END and name not in self.targets:
                raise ValueError(
                    f"the router after step {source!r} chose {name!r},"
                    f" which is not one of its targets {list(self.targets)}"
                )
        return [n for n in names if n != END]


@dataclass(frozen=True, slots=True)
class _Join:
    sources: tuple[str, ...]
    target: str
    merge: MergePolicy | None


@dataclass(slots=True)
class _Routing:
    deliveries: dict[str, dict[str, Any]] = field(default_factory=dict)
    joined: set[str] = field(default_factory=set)

    def deliver(self, target: str, source: str, output: Any) -> None:
        self.deliveries.setdefault(target, {})[source] = output

    def tasks(self) -> list[StepTask]:
        tasks = []
        for target, payload in self.deliveries.items():
            single = len(payload) == 1 and target not in self.joined
            tasks.append(
                StepTask(step=target, input=next(iter(payload.values())) if single else payload)
            )
        return tasks


class Workflow:
    """A graph of steps; `await workflow.run(input, store=...)` executes it.

    Steps passed as objects are added on first use; steps named by string must be
    added (`add`) before the run. The first step added is the start unless `start` says
    otherwise (several start steps run concurrently).

    `lease_duration` (seconds, default 30) is how long a run's lease outlives a runner
    that stops renewing it (a runner renews it every third of it while it lives): the
    time another process must wait before it can take over the run of one that died.
    `run` and `resume` may override it.
    """

    def __init__(
        self,
        name: str,
        *,
        start: StepLike | Sequence[StepLike] | None = None,
        merge: MergePolicy = "last_write_wins",
        lease_duration: float = DEFAULT_LEASE_DURATION,
    ) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a workflow name must be a non-empty string, got {name!r}")
        self.name = name
        self.merge: MergePolicy = merge
        self.lease_duration = check_duration(lease_duration)
        self._steps: dict[str, Step] = {}
        self._edges: dict[str, list[str]] = {}
        self._branches: dict[str, list[_Branch]] = {}
        self._joins: dict[str, _Join] = {}
        self._start: list[str] = []
        if start is not None:
            items = [start] if isinstance(start, str) or not isinstance(start, Sequence) else start
            self._start = [self._ref(s) for s in items]

    def __repr__(self) -> str:
        return f"<Workflow {self.name!r} steps={list(self._steps)}>"

    # -- building -----------------------------------------------------------------

    def add(self, *steps: StepLike) -> Self:
        """Add steps (functions, agents or `Step`s)."""
        for item in steps:
            self._ref(item)
        return self

    def edge(self, source: StepLike, target: StepLike | Sequence[StepLike]) -> Self:
        """After `source`, run `target`; a list of targets fans out (they run at once)."""
        targets = (
            [target] if isinstance(target, str) or not isinstance(target, Sequence) else target
        )
        name = self._ref(source)
        self._edges.setdefault(name, []).extend(self._ref(t) for t in targets)
        return self

    def join(
        self, sources: Sequence[StepLike], target: StepLike, *, merge: MergePolicy | None = None
    ) -> Self:
        """Fan in: `target` runs once every source has finished.

        Its input maps source names to their outputs. `merge` is the policy for the
        sources' state patches when they finish in the same superstep (default: the
        workflow's).
        """
        names = tuple(self._ref(s) for s in sources)
        if not names:
            raise ValueError("a join needs at least one source step")
        target_name = self._ref(target)
        if target_name in self._joins:
            raise ValueError(f"step {target_name!r} already has a join; give it one join")
        self._joins[target_name] = _Join(names, target_name, merge)
        return self

    def branch(
        self,
        source: StepLike,
        router: Router,
        *,
        targets: Sequence[StepLike] | None = None,
    ) -> Self:
        """After `source`, run the steps `router(state, output)` names (END or None: none).

        With `targets`, a router choosing any other step is an error naming it.
        """
        names = None if targets is None else tuple(self._ref(t) for t in targets if t != END)
        self._branches.setdefault(self._ref(source), []).append(_Branch(router, names))
        return self

    def _ref(self, item: StepLike) -> str:
        if isinstance(item, str):
            return item
        found = as_step(item)
        known = self._steps.get(found.name)
        if known is not None and _identity(known) != _identity(found):
            raise ValueError(
                f"workflow {self.name!r} already has another step named {found.name!r}"
            )
        if known is None:
            self._steps[found.name] = found
            if not self._start:
                self._start = [found.name]
        return found.name

    # -- reading ------------------------------------------------------------------

    @property
    def steps(self) -> Mapping[str, Step]:
        """The steps, by name."""
        return dict(self._steps)

    @property
    def start(self) -> tuple[str, ...]:
        """The names of the steps a run starts with."""
        return tuple(self._start)

    def get_step(self, name: str) -> Step:
        """The step with this name.

        Raises:
            ValueError: naming the unknown step and the known ones.
        """
        found = self._steps.get(name)
        if found is None:
            raise ValueError(
                f"workflow {self.name!r} has no step {name!r} (steps: {sorted(self._steps)})"
            )
        return found

    def validate(self) -> None:
        """Check that every step an edge names exists and that there is a start.

        Raises:
            ValueError: naming the first problem found.
        """
        if not self._start:
            raise ValueError(f"workflow {self.name!r} has no steps")
        named = [*self._start, *self._edges, *self._branches]
        named += [t for ts in self._edges.values() for t in ts]
        named += [n for b in self._branches.values() for br in b for n in br.targets or ()]
        named += [n for j in self._joins.values() for n in (*j.sources, j.target)]
        for name in named:
            self.get_step(name)

    # -- routing (used by the runner) --------------------------------------------------

    def start_tasks(self, input: Any) -> list[StepTask]:
        """The first superstep: every start step, with the run's input.

        Raises:
            TypeError: the input is not JSON-serializable.
        """
        try:
            json.dumps(input, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"the input of workflow {self.name!r} must be JSON: {exc}") from exc
        return [StepTask(step=name, input=input) for name in self._start]

    def merge_policy(self, steps: Sequence[str]) -> MergePolicy:
        """The policy for merging these steps' patches.

        The strictest of the joins they feed (raise, then combine_lists, then
        last_write_wins), else the workflow's.
        """
        policies = [
            j.merge for j in self._joins.values() if j.merge and set(j.sources) & set(steps)
        ]
        return max(policies, key=_STRICTNESS.__getitem__, default=self.merge)

    def route(
        self,
        completed: Sequence[StepRecord],
        state: ImmutableState,
        waiting: Mapping[str, Mapping[str, Any]],
    ) -> tuple[list[StepTask], dict[str, dict[str, Any]]]:
        """The next superstep's tasks and the fan-ins still waiting, after `completed`.

        A step reached by several edges in one superstep runs once, with a dict of the
        outputs by source step as its input.
        """
        routing = _Routing()
        still: dict[str, dict[str, Any]] = {t: dict(v) for t, v in waiting.items()}
        for record in completed:
            for target in self._edges.get(record.step, ()):
                routing.deliver(target, record.step, record.output)
            for branch in self._branches.get(record.step, ()):
                for target in branch.choose(record.step, state, record.output):
                    routing.deliver(target, record.step, record.output)
            for join in self._joins.values():
                if record.step in join.sources:
                    still.setdefault(join.target, {})[record.step] = record.output
        for target, join in self._joins.items():
            arrived = still.get(target, {})
            if all(s in arrived for s in join.sources):
                for source in join.sources:
                    routing.deliver(target, source, arrived[source])
                routing.joined.add(target)
                del still[target]
        return routing.tasks(), still

    # -- running ------------------------------------------------------------------

    async def run(
        self,
        input: Any = None,
        *,
        store: ThreadStore | None = None,
        id: str | None = None,
        title: str | None = None,
        tags: Mapping[str, str] | None = None,
        on_step: StepObserver | None = None,
        lease_duration: float | None = None,
    ) -> WorkflowThread:
        """Run the workflow from its start steps on a new `WorkflowThread`, and return it.

        Returns when the run completed or paused at an interrupt (`status ==
        "paused"`). `on_step` is called with every step record as it changes (for
        progress displays). The run holds the thread's lease while it runs (see
        `resume`); `lease_duration` overrides the workflow's.

        Raises:
            StepFailedError: a step failed on its last attempt; the run is stored as
                failed (`execution.error`), the step's exception is the `__cause__` and
                `error.run` the thread, to resume once the cause is fixed.
            WorkflowFailedError: ending a superstep failed (a merge conflict under
                policy "raise", a router error); stored as failed too.
            TypeError: the input is not JSON-serializable.
        """
        return await start_run(
            self,
            input,
            store=store,
            id=id,
            title=title,
            tags=tags,
            on_step=on_step,
            lease_duration=self._lease_duration(lease_duration),
        )

    async def resume(
        self,
        thread: WorkflowThread | str,
        *,
        store: ThreadStore | None = None,
        reply: Any = None,
        replies: Mapping[str, Any] | None = None,
        on_step: StepObserver | None = None,
        lease_duration: float | None = None,
        wait_for_lease: float = 0.0,
    ) -> WorkflowThread:
        """Continue a paused, failed, cancelled, crashed or forked run; returns its thread.

        Completed steps never run again. A step that was running when its process died
        has its partial messages rolled back (kept as a checkpoint of its sub-thread)
        and runs again. `reply` answers the step waiting at an interrupt (`replies`
        answers several, by step name). `thread` is a handle or an id in `store`.

        One runner at a time: the run's lease, stored in the thread's record, names the
        runner running it and when that lease expires. It is taken before anything
        runs, renewed every third of `lease_duration` (default: the workflow's, 30 s)
        while this call runs, and given back when it returns or raises. While another
        runner, in this process or another, holds a live lease, this call raises
        `RunInProgressError` at once and runs nothing; with `wait_for_lease=seconds`
        it waits that long for the lease to be released or to expire first (then it
        may find the run completed, and return it). A runner that died keeps its lease
        until it expires: after that, resuming takes the run over.

        Raises:
            RunInProgressError: another runner holds the run's lease (naming it and the
                expiry), still after `wait_for_lease` seconds.
            StepFailedError, WorkflowFailedError: the run failed, as for `run`.
            LeaseLostError: this runner was stalled past its lease and another one took
                the run over; this one stopped without writing.
            ValueError: the thread was run by another workflow, or a reply was given
                that no step waits for.
        """
        return await resume_run(
            self,
            thread,
            store=store,
            reply=reply,
            replies=replies,
            on_step=on_step,
            lease_duration=self._lease_duration(lease_duration),
            wait_for_lease=wait_for_lease,
        )

    def _lease_duration(self, override: float | None) -> float:
        return self.lease_duration if override is None else check_duration(override)
