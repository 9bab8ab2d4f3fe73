"""Orchestrator-workers: a planner decides at run time how many workers to start.

The planner reads the task and calls its `assign` tool with a list of subtasks; the
conditional edge after it starts one worker per subtask (up to `MAX_WORKERS`), all at
once in one superstep, each on its own sub-thread, with its own tool calls. Every worker
has an edge to the synthesizer, which therefore runs once, after all of them, and merges
their results (each worker's state patch adds its own key, so they merge cleanly).

The regulations tool is flaky: the first search of worker 2 times out, so that worker
fails once. Its partial messages are rolled back (kept as a checkpoint of its
sub-thread) and it runs again, while the finished workers are not repeated.

Run `python workflows/orchestrator_workers.py [DB] [--model NAME]`: two tasks, one
that needs two workers and one that needs four. DB is a SQLite file (default: in
memory). Scripted models by default (offline); `--model` uses an OpenAI-compatible model.
"""

from __future__ import annotations

from typing import Any

import anyio
from _models import (
    DemoProgram,
    Models,
    Progress,
    Request,
    Tool,
    ask,
    call_arguments,
    describe,
    heading,
    require,
    schema,
    work,
)
from pydantic import JsonValue

from agent_threads import (
    Message,
    ThreadStore,
    WorkflowThread,
    tool_call,
)
from agent_threads.workflows import Step, StepContext, StepResult, Workflow, step

MAX_WORKERS = 6
WORKERS = [f"worker_{i}" for i in range(1, MAX_WORKERS + 1)]
FLAKY_WORKER = "worker_2"
TASKS = (
    "How long may our notes app keep deleted notes in the EU and the US?",
    "How long may our notes app keep deleted notes in the EU, the US, Japan and Brazil?",
)

RULES: dict[str, str] = {
    "EU": "GDPR: keep no longer than necessary; 30 days of trash is a common, defensible choice.",
    "US": "No federal limit; California (CCPA) requires honouring deletion requests in 45 days.",
    "Japan": "APPI: delete without delay once no longer needed; no fixed retention period.",
    "Brazil": "LGPD: delete at the end of processing; the ANPD accepts short grace periods.",
    "Canada": "PIPEDA: keep only as long as needed for the identified purposes.",
}


class SearchTimeout(Exception):
    """The regulations search did not answer in time (raised on purpose, once)."""


def rules_tool(*, flaky: bool) -> Tool:
    """The offline regulations search; `flaky` makes it time out (a worker's first try)."""

    async def search(arguments: dict[str, JsonValue]) -> JsonValue:
        region = str(arguments["region"]).strip()
        await anyio.sleep(0.05)
        if flaky:
            raise SearchTimeout("regulations search timed out after 30 s")
        key = next((k for k in RULES if k.lower() in region.lower()), None)
        return {"region": region, "rule": RULES[key] if key else "no rule on file"}

    return Tool(
        "search_regulations",
        "Search data-retention rules of one region.",
        schema({"region": {"type": "string"}, "topic": {"type": "string"}}, required=["region"]),
        search,
    )


async def assign(arguments: dict[str, JsonValue]) -> JsonValue:
    """The planner's tool: start one worker per subtask."""
    subtasks = arguments["subtasks"]
    if not isinstance(subtasks, list) or not subtasks:
        raise ValueError("give at least one subtask")
    return f"{min(len(subtasks), MAX_WORKERS)} workers started."


ASSIGN = Tool(
    "assign",
    f"Split the task into independent subtasks, one worker each (at most {MAX_WORKERS}).",
    schema(
        {
            "subtasks": {
                "type": "array",
                "maxItems": MAX_WORKERS,
                "items": schema({"region": {"type": "string"}, "instructions": {"type": "string"}}),
            }
        }
    ),
    assign,
)


# -- the scripted models ----------------------------------------------------------------


def plan_script(request: Request) -> Message:
    """One subtask per region the task names."""
    task = request.last.text
    regions = [r for r in RULES if r in task] or ["EU"]
    subtasks: list[JsonValue] = [
        {"region": r, "instructions": f"Find how long deleted notes may be kept in {r}."}
        for r in regions
    ]
    return Message.assistant(tool_calls=[tool_call("assign", {"subtasks": subtasks})])


def worker_script(request: Request) -> Message:
    """Search the region's rules, then state the retention limit."""
    found = request.results("search_regulations")
    if not found:
        region = request.last.text.split(" in ")[-1].rstrip(".")
        return Message.assistant(
            tool_calls=[tool_call("search_regulations", {"region": region, "topic": "deletion"})]
        )
    result = found[-1] if isinstance(found[-1], dict) else {}
    return Message.assistant(f"{result.get('region')}: {result.get('rule')}")


def synthesize_script(request: Request) -> Message:
    """Merge the workers' findings into one recommendation."""
    findings = [line[2:] for line in request.last.text.splitlines() if line.startswith("- ")]
    return Message.assistant(
        f"Keep deleted notes for 30 days, then erase them; this satisfies all {len(findings)}"
        " regions: " + " | ".join(f.split(":")[0] for f in findings) + "."
    )


# -- the workflow ---------------------------------------------------------------------------


def planner(models: Models) -> Step:
    """Call `assign` with the subtasks; how many there are decides the fan-out."""
    model = models.get(plan_script)

    async def plan(ctx: StepContext) -> StepResult:
        await ctx.emit(
            Message.system(
                "You plan research. Split the task into one subtask per region it names."
            ),
            Message.user(str(ctx.input)),
        )
        reply = await ask(ctx.thread, model, author=ctx.agent, tools=[ASSIGN], tool_choice="assign")
        subtasks = _subtasks(call_arguments(reply, "assign"), str(ctx.input))
        return StepResult(output={"subtasks": subtasks}, patch={"task": ctx.input})

    return step(name="plan", agent="planner")(plan)


def _subtasks(arguments: dict[str, JsonValue], task: str) -> list[JsonValue]:
    """The planner's subtasks, cut to `MAX_WORKERS`; the whole task when it gave none."""
    given = arguments.get("subtasks")
    subtasks = [s for s in given if isinstance(s, dict)] if isinstance(given, list) else []
    if not subtasks:
        subtasks = [{"region": "all", "instructions": task}]
    return list(subtasks[:MAX_WORKERS])


def worker(models: Models, name: str, index: int) -> Step:
    """Worker `index`: do subtask `index` of the plan with the regulations tool."""
    model = models.get(worker_script, delay=0.1)

    async def run(ctx: StepContext) -> StepResult:
        subtask: dict[str, Any] = ctx.input["subtasks"][index]
        await ctx.emit(
            Message.system("You research one region's rules. Cite the rule you found."),
            Message.user(str(subtask.get("instructions"))),
        )
        flaky = ctx.step == FLAKY_WORKER and ctx.attempt == 1
        tools = [rules_tool(flaky=flaky)]
        answer = await work(ctx.thread, model, author=ctx.agent, tools=tools)
        result = {"region": subtask.get("region"), "finding": answer.text}
        return StepResult(output=result, patch={"results": {ctx.step: result}})

    return step(name=name, agent=name.replace("_", "-"), max_attempts=2)(run)


def synthesizer(models: Models) -> Step:
    """Merge every worker's finding into one answer."""
    model = models.get(synthesize_script)

    async def synthesize(ctx: StepContext) -> StepResult:
        results = ctx.state["results"]
        lines = "\n".join(f"- {r['finding']}" for r in results.values())
        await ctx.emit(
            Message.system("You merge research findings into one recommendation."),
            Message.user(f"Task: {ctx.state['task']}\nFindings:\n{lines}"),
        )
        answer = await ask(ctx.thread, model, author=ctx.agent)
        return StepResult(output=answer.text, patch={"answer": answer.text})

    return step(name="synthesize", agent="synthesizer")(synthesize)


def orchestrator(models: Models) -> Workflow:
    """Plan -> N workers at once (N from the plan) -> synthesize."""
    workflow = Workflow("orchestrator-workers")
    workers = [worker(models, name, i) for i, name in enumerate(WORKERS)]
    workflow.add(planner(models))
    workflow.branch("plan", lambda state, plan: WORKERS[: len(plan["subtasks"])], targets=workers)
    synthesize = synthesizer(models)
    for item in workers:  # the edges of one superstep deliver to one task: it runs once
        workflow.edge(item, synthesize)
    return workflow


# -- the demo ---------------------------------------------------------------------------------


async def show_run(run: WorkflowThread) -> None:
    """Print the fan-out, the retry, and the synthesized answer."""
    width = len(run.state["results"])
    workers = [r for r in run.execution.history if r.step.startswith("worker_")]
    print(f"  the planner chose {width} workers; they ran in superstep 1, at once:")
    for record in workers:
        took = f"{record.duration:.2f}s" if record.duration is not None else "?"
        line = f"    {record.step} attempt {record.attempt}: {record.status} in {took}"
        if record.error:
            line += f" ({record.error})"
        print(line)
    failed = next((r for r in workers if r.status == "failed"), None)
    if failed is not None and failed.branch is not None:
        sub = await run.get_sub_thread(failed.key)
        kept = await sub.at(failed.branch)
        print(
            f"  {failed.step}'s failed attempt was rolled back; its {len(kept.messages)}"
            f" messages are kept as checkpoint {failed.branch[-8:]} of its sub-thread"
        )
    print(f"  sub-threads: {', '.join(run.sub_thread_keys)}")
    sub = await run.get_sub_thread(workers[-1].key)
    print(f"  {workers[-1].key}'s conversation:")
    for message in sub.messages[1:]:
        print("   " + describe(message))
    print(f"  answer: {run.state['answer']}")


async def demo(store: ThreadStore, models: Models) -> list[WorkflowThread]:
    """Run each task: the planner picks the fan-out width at run time."""
    workflow = orchestrator(models)
    runs = []
    for task in TASKS:
        heading(f"orchestrator-workers ({models.label})")
        print(f"  task: {task}")
        run = await workflow.run(task, store=store, on_step=Progress())
        print(f"  status: {run.execution.status}")
        require(run)
        await show_run(run)
        runs.append(run)
    return runs


PROGRAM = DemoProgram(demo, "A planner starts workers; a synthesizer merges.")
parse_args, start, main = PROGRAM.parse_args, PROGRAM.start, PROGRAM.main

if __name__ == "__main__":
    main()
