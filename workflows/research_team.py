"""A research team: concurrent researchers fan out, a writer fans their findings in.

A planner splits the question into three angles; three researchers work at once, each
on its own sub-thread, calling search and fetch tools; a writer drafts a brief from their
findings; a reviewer may send the writer back once; an editor may wait for a person.

Run `python workflows/research_team.py [DB] [--model NAME]` (what `make demo` does, on
./demo.db, recreated each run). It runs the team on SQLite with a progress display,
then shows the step history, forks the run at the writer's step to re-run it with
another reviewer policy, travels back to a mid-run checkpoint, resumes a run whose
process was killed mid-flight, and pauses at a human approval and resumes it.

The agents are scripted models by default (deterministic, no network, no API key);
`--model NAME` runs them all on an OpenAI-compatible chat model instead.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from _models import (
    Models,
    Progress,
    Request,
    Tool,
    add_model_argument,
    ask,
    describe,
    heading,
    require,
    schema,
    total_usage,
    work,
)
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import JsonValue

from agent_threads import Message, SQLiteStore, StepRecord, WorkflowThread, tool_call
from agent_threads.workflows import END, Step, StepContext, StepResult, Workflow, step

QUESTION = "Should our city pilot autonomous electric buses on the airport line in 2026?"
Policy = Literal["strict", "lenient"]


# -- what the researchers find (the tools are offline: a canned index per angle) --------


@dataclass(frozen=True)
class Angle:
    """What one researcher looks into, and what its offline tools return."""

    step: str
    agent: str
    subtopic: str
    query: str
    sources: tuple[tuple[str, str], ...]
    page: str
    finding: str
    latency: float


ANGLES = (
    Angle(
        "research_costs",
        "cost-analyst",
        "operating costs and ridership",
        "autonomous electric bus operating cost per km ridership pilot results",
        (
            ("Nordic AV bus pilots: 18-month review", "https://example.org/nordic-av-review"),
            ("Transit cost benchmark 2025", "https://example.org/transit-benchmark-2025"),
        ),
        "Driver wages are 55-60% of bus operating cost; AV pilots cut cost/km by 21-34%.",
        "Pilots cut operating cost per km by about a quarter; ridership held steady (+3%).",
        0.15,
    ),
    Angle(
        "research_safety",
        "safety-analyst",
        "technology readiness and safety",
        "level 4 autonomous shuttle disengagement rate mixed traffic 2025",
        (
            ("SAE L4 shuttle field data", "https://example.org/l4-field-data"),
            ("EU AV incident registry, annual report", "https://example.org/eu-av-incidents"),
        ),
        "Median 1 disengagement per 410 km on segregated lanes; 1 per 95 km in mixed traffic.",
        "Ready on segregated lanes; mixed traffic still needs a safety operator on board.",
        0.25,
    ),
    Angle(
        "research_rules",
        "policy-analyst",
        "permits and liability",
        "national framework autonomous public transport permit liability 2026",
        (
            ("Road Traffic Act amendment (draft)", "https://example.org/rta-amendment"),
            ("Insurers' position paper on AV liability", "https://example.org/av-liability"),
        ),
        "Trial permits available from Q1 2026; operator carries liability, insurer cap 10 MEUR.",
        "Trial permits open in Q1 2026; the operator, not the vendor, carries liability.",
        0.6,
    ),
)
ANGLE_BY_STEP = {angle.step: angle for angle in ANGLES}
SUBTOPICS = {a.step: a.subtopic for a in ANGLES}


def research_tools(angle: Angle) -> list[Tool]:
    """A researcher's search and fetch tools: slow like the web, offline, about its angle."""

    async def web_search(arguments: dict[str, JsonValue]) -> JsonValue:
        if not str(arguments.get("query") or "").strip():
            raise ValueError("give a query")
        await anyio.sleep(angle.latency / 2)
        return [{"title": title, "url": url} for title, url in angle.sources]

    async def fetch_page(arguments: dict[str, JsonValue]) -> JsonValue:
        url = str(arguments["url"])
        await anyio.sleep(angle.latency / 2)
        known = {u for _, u in angle.sources}
        return {"url": url, "excerpt": angle.page if url in known else "404: no such page"}

    return [
        Tool(
            "web_search",
            "Search the web; returns titles and URLs.",
            schema({"query": {"type": "string"}, "top_k": {"type": "integer"}}, required=["query"]),
            web_search,
        ),
        Tool(
            "fetch_page",
            "Fetch a web page; returns an excerpt.",
            schema({"url": {"type": "string"}}),
            fetch_page,
        ),
    ]


async def make_outline(arguments: dict[str, JsonValue]) -> JsonValue:
    """The planner's outline tool: the team has one researcher per angle."""
    if not str(arguments.get("question") or "").strip():
        raise ValueError("give the question")
    return list(SUBTOPICS.values())


OUTLINE = Tool(
    "make_outline",
    "Split a question into the team's research angles.",
    schema({"question": {"type": "string"}, "parts": {"type": "integer"}}, required=["question"]),
    make_outline,
)


# -- the scripted models: what each agent says, offline ----------------------------------


def plan_script(request: Request) -> Message:
    """The planner: outline first, then assign the angles."""
    outlines = request.results("make_outline")
    if not outlines:
        call = tool_call("make_outline", {"question": request.first_text("user"), "parts": 3})
        return Message.assistant("Let me outline the angles first.", tool_calls=[call])
    return Message.assistant("Three researchers, in parallel: " + "; ".join(SUBTOPICS.values()))


def research_script(angle: Angle) -> Callable[[Request], Message]:
    """A researcher: search, read the best page, report the finding."""

    def script(request: Request) -> Message:
        if not request.results("web_search"):
            search = tool_call("web_search", {"query": angle.query, "top_k": 2})
            return Message.assistant(tool_calls=[search])
        if not request.results("fetch_page"):
            fetch = tool_call("fetch_page", {"url": angle.sources[0][1]})
            return Message.assistant(f"Reading {angle.sources[0][0]!r}.", tool_calls=[fetch])
        return Message.assistant(angle.finding)

    return script


def write_script(request: Request) -> Message:
    """The writer: a brief from the findings; a revision adds the cost case."""
    prompt = request.last.text
    if prompt.startswith("Revise"):
        previous = [m.text for m in request.messages if m.role == "assistant"][-1]
        return Message.assistant(
            previous
            + " Cost case: at 1.9 EUR/km today, a 25% saving is ~140 kEUR a year on this line."
        )
    findings = " ".join(line for line in prompt.splitlines()[1:] if line)
    return Message.assistant(
        "Recommendation: run a 12-month pilot on the segregated airport lane with a safety"
        " operator on board. " + findings
    )


def review_script(request: Request) -> Message:
    """The reviewer: the instruction says whether to ask for an improvement."""
    if "one concrete improvement" in request.last.text:
        return Message.assistant("REVISE: Quantify the cost case in euros for this line.")
    return Message.assistant("APPROVE: Clear and sourced.")


# -- the agents -------------------------------------------------------------------------


def planner(models: Models) -> Step:
    """Split the question into the three angles, one per researcher."""
    model = models.get(plan_script, delay=0.05)

    async def plan(ctx: StepContext) -> StepResult:
        await ctx.emit(
            Message.system("You are a research lead. Split questions into independent angles."),
            Message.user(str(ctx.input)),
        )
        await work(ctx.thread, model, author=ctx.agent, tools=[OUTLINE])
        return StepResult(output=SUBTOPICS, patch={"question": ctx.input, "sources": []})

    return step(name="plan", agent="planner")(plan)


def researcher(models: Models, angle: Angle) -> Step:
    """A researcher: search, read the best page, report a finding with its sources."""
    model = models.get(research_script(angle))
    tools = research_tools(angle)

    async def research(ctx: StepContext) -> StepResult:
        await ctx.emit(
            Message.system(f"You research {angle.subtopic}. Cite every claim."),
            Message.user(f"Research {ctx.input[ctx.step]} for: {QUESTION}"),
        )
        answer = await work(ctx.thread, model, author=ctx.agent, tools=tools)
        finding = answer.text or angle.finding
        sources: list[JsonValue] = [u for _, u in angle.sources]
        return StepResult(
            output={"finding": finding, "sources": sources}, patch={"sources": sources}
        )

    return step(name=angle.step, agent=angle.agent)(research)


def writer(models: Models) -> Step:
    """Draft the brief from the findings; a second draft answers the reviewer's notes."""
    model = models.get(write_script, delay=0.05)

    async def write(ctx: StepContext) -> StepResult:
        drafts = int(ctx.state.get("drafts", 0))
        findings = ctx.state.get("findings") or {k: v["finding"] for k, v in ctx.input.items()}
        notes = ctx.state.get_path("review.notes")
        prompt = "Write a one-paragraph brief from these findings:\n" + "\n".join(findings.values())
        if notes:
            prompt = f"Revise your brief. Reviewer notes: {notes}"
        await ctx.emit(Message.user(prompt))
        body = (await ask(ctx.thread, model, author=ctx.agent)).text or "(no draft)"
        return StepResult(
            output=body, patch={"drafts": drafts + 1, "draft": body, "findings": findings}
        )

    return step(name="write", agent="writer")(write)


def reviewer(models: Models, policy: Policy) -> Step:
    """The reviewer; `strict` sends a first draft back once, `lenient` approves it."""
    model = models.get(review_script)

    async def review(ctx: StepContext) -> StepResult:
        drafts = int(ctx.state["drafts"])
        revise = policy == "strict" and drafts < 2
        task = "Ask for one concrete improvement." if revise else "Approve it in one sentence."
        await ctx.emit(Message.user(f"Review draft {drafts}. {task}\n\n{ctx.input}"))
        notes = (await ask(ctx.thread, model, author=ctx.agent)).text
        verdict = "revise" if revise else "approve"
        return StepResult(output=verdict, patch={"review": {"verdict": verdict, "notes": notes}})

    return step(name="review", agent="reviewer")(review)


@step(agent="editor")
async def approve(ctx: StepContext) -> StepResult:
    """A person approves publication: the run pauses here until someone replies."""
    answer = await ctx.interrupt({"question": "Publish this brief?", "draft": ctx.state["draft"]})
    await ctx.emit(Message.user(f"Editor's answer: {answer}"))
    published = str(answer).lower() in {"yes", "y", "publish"}
    return StepResult(output={"published": published}, patch={"published": published})


def research_team(
    *, policy: Policy = "strict", human_approval: bool = False, models: Models | None = None
) -> Workflow:
    """The team: plan -> 3 researchers (at once) -> write -> review -(once)-> write ..."""
    models = Models() if models is None else models
    researchers = [researcher(models, angle) for angle in ANGLES]
    after_review = "approve" if human_approval else END
    workflow = Workflow("research-team")
    workflow.edge(planner(models), researchers)
    workflow.join(researchers, writer(models), merge="combine_lists")
    workflow.edge("write", reviewer(models, policy))
    workflow.branch(
        "review",
        lambda state, verdict: "write" if verdict == "revise" else after_review,
        targets=["write", approve] if human_approval else ["write"],
    )
    return workflow


# -- the demo --------------------------------------------------------------------------------


def show_history(run: WorkflowThread) -> None:
    """Print the run's step records, one a line."""
    print(f"  {'step':<3} {'name':<16} {'agent':<15} {'status':<10} try  output")
    for r in run.execution.history:
        output = textwrap.shorten(json.dumps(r.output) if r.output is not None else "", 34)
        print(
            f"  {r.superstep:<3} {r.step:<16} {r.agent:<15} {r.status:<10} {r.attempt:<4} {output}"
        )


async def show_usage(run: WorkflowThread) -> None:
    """Print the tokens the run's model calls used, summed over its sub-threads."""
    messages = [m for key in run.sub_thread_keys for m in (await run.get_sub_thread(key)).messages]
    usage = total_usage(messages)
    calls = sum(1 for m in messages if m.usage is not None)
    print(
        f"  {calls} model calls: {usage.input_tokens} tokens in, {usage.output_tokens} out"
        " (each reply's usage is on its message)"
    )


async def show_thread(run: WorkflowThread, key: str) -> None:
    """Print the messages of one sub-thread, one a line."""
    for message in (await run.get_sub_thread(key)).messages:
        print("   " + describe(message))


async def demo(db: Path, *, models: Models | None = None) -> None:
    """Run every part of the demo on the SQLite file `db`."""
    models = Models() if models is None else models
    async with SQLiteStore(db) as store:
        heading(f"1. the research team runs on SQLite ({db}), {models.label}")
        print(f"  question: {QUESTION}")
        run = await research_team(models=models).run(QUESTION, store=store, on_step=Progress())
        require(run)
        print(f"  status: {run.execution.status} after {run.execution.superstep} supersteps")

        heading("2. step history (each step on its own sub-thread)")
        show_history(run)
        await show_usage(run)
        print(f"\n  sub-threads: {', '.join(run.sub_thread_keys)}; the cost analyst's:")
        await show_thread(run, "cost-analyst")

        heading("3. fork at the writer's step, re-run with a lenient reviewer")
        checkpoints = await run.checkpoints()
        at_writer = next(c for c in checkpoints if c.superstep == 2)
        fork = await (await run.at(at_writer)).fork(title="lenient review")
        print(f"  forked at checkpoint {at_writer.id} (superstep 2, writer next): {fork.id}")
        lenient = research_team(policy="lenient", models=models)
        fork = await lenient.resume(fork, on_step=Progress())
        require(fork)
        drafts = (run.state["drafts"], fork.state["drafts"])
        print(f"  original: {drafts[0]} drafts, verdict {run.state['review']['verdict']!r}")
        print(f"  fork:     {drafts[1]} draft,  verdict {fork.state['review']['verdict']!r}")
        reran = [r.step for r in fork.execution.history[at_writer.history_length :]]
        print(f"  the fork re-ran only {reran}; plan and research were reused")

        heading("4. time travel to a mid-run checkpoint")
        middle = next(c for c in checkpoints if c.superstep == 4)
        then = await run.at(middle)
        done, status = len(then.execution.history), then.execution.status
        print(f"  at superstep {middle.superstep}: status {status!r}, {done} steps done,")
        print(f"  next {[t.step for t in then.execution.next]}; the verdict was")
        print(f"  {then.state['review']['verdict']!r} (now {run.state['review']['verdict']!r}).")
        print("  The writer's sub-thread then (it now holds the revision too):")
        for message in (await then.get_sub_thread("writer")).messages:
            print("   " + describe(message))

        heading("5. a crash: the process is killed mid-run, then resumed")
        await crash_and_resume(store, db, models)

        heading("6. human approval: the run pauses, a reply resumes it")
        team = research_team(policy="lenient", human_approval=True, models=models)
        paused = await team.run(QUESTION, store=store, title="with approval")
        require(paused, "paused")
        (waiting,) = paused.execution.interrupts
        prompt = waiting.prompt if isinstance(waiting.prompt, dict) else {}
        print(
            f"  status {paused.execution.status!r}: {waiting.step} asks {prompt.get('question')!r}"
        )
        resumed = await team.resume(paused.id, store=store, reply="yes")
        require(resumed)
        published = resumed.state["published"]
        print(f"  resumed with reply 'yes': {resumed.execution.status}, published={published}")
        print(f"\n  all of it is in {db}: {len(await store.list_records('thread'))} threads")


CHILD_LEASE = 1.0
"""Seconds of the lease the child's run holds: a second runner may take over after that."""


async def crash_and_resume(store: SQLiteStore, db: Path, models: Models) -> None:
    """Start a run in a child process, SIGKILL it mid-superstep, resume it here."""
    command = [sys.executable, __file__, str(db), "--child", "crashing-run"]
    if models.model is not None:
        command += ["--model", models.model]
    async with await anyio.open_process(command) as child:
        assert child.stdout is not None
        lines = BufferedByteReceiveStream(child.stdout)
        while True:  # kill it once two researchers are done and the third is mid-task
            event = json.loads(await lines.receive_until(b"\n", 1 << 16))
            print(f"  child: {event['step']:<16} {event['status']}")
            if event == {"step": "research_safety", "status": "completed"}:
                break
        child.send_signal(signal.SIGKILL)
        await child.wait()
    print(f"  child killed with SIGKILL (exit {child.returncode})")
    run = await WorkflowThread.load("crashing-run", store=store)
    current = ", ".join(f"{r.step}={r.status}" for r in run.execution.current)
    print(
        f"  stored: status {run.execution.status!r}, superstep {run.execution.superstep}: {current}"
    )
    partial = len((await run.get_sub_thread("policy-analyst")).messages)
    print(f"  the policy analyst's sub-thread holds {partial} messages of its unfinished attempt")
    # the dead child still holds the run's lease until it expires: wait for that
    print(f"  waiting for the dead runner's {CHILD_LEASE:g} s lease to expire, then resuming")
    team = research_team(models=models)
    run = await team.resume(run, on_step=Progress(), wait_for_lease=CHILD_LEASE * 4)
    require(run)
    crashed = [r for r in run.execution.history if r.status == "failed"]
    print(f"  resumed: {run.execution.status}; rolled back and re-ran {[r.step for r in crashed]}")
    completed = [r.step for r in run.execution.history if r.status == "completed"]
    print(f"  completed once each: {completed}")
    policy = await run.get_sub_thread("policy-analyst")
    if crashed and crashed[0].branch is not None:
        kept = len((await policy.at(crashed[0].branch)).messages)
        print(f"  the partial attempt is kept as checkpoint {crashed[0].branch} ({kept} messages)")


async def child(db: Path, thread_id: str, models: Models) -> None:
    """The process `crash_and_resume` kills: reports each step event on stdout."""

    def report(record: StepRecord) -> None:
        print(json.dumps({"step": record.step, "status": record.status}), flush=True)

    async with SQLiteStore(db) as store:
        team = research_team(models=models)
        await team.run(
            QUESTION, store=store, id=thread_id, on_step=report, lease_duration=CHILD_LEASE
        )


async def start(args: argparse.Namespace) -> None:
    """Run the demo, or the child process of its crash."""
    db = Path(args.db)
    async with Models(args.model) as models:
        if args.child:
            await child(db, args.child, models)
            return
        for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
            path.unlink(missing_ok=True)  # a fresh database each time: the demo is repeatable
        await demo(db, models=models)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line: an optional SQLite file and `--model`."""
    parser = argparse.ArgumentParser(description="A research team of concurrent agents.")
    parser.add_argument("db", nargs="?", default="demo.db", help="SQLite file (recreated)")
    parser.add_argument("--child", metavar="RUN_ID", help=argparse.SUPPRESS)
    add_model_argument(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run."""
    anyio.run(start, parse_args(argv))


if __name__ == "__main__":
    main()
