"""A research team as a workflow: a planner fans out to three researchers who work at
once, a writer fans their findings in, a reviewer may send the writer back once, and
an editor may wait for a person's approval.

The agents are scripted models: deterministic, no network, no API key. They append
realistic conversations (tool calls and results included) to their own sub-threads.

Run `python samples/research_team.py` (what `make demo` does): it runs the team on
SQLite in ./demo.db with a progress display, then shows the step history, forks the
run at the writer's step to re-run it with another reviewer policy, travels back to a
mid-run checkpoint, resumes a run whose process was killed mid-flight, and pauses at
a human approval and resumes it with a reply.
"""

from __future__ import annotations

import json
import signal
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import anyio
from anyio.streams.buffered import BufferedByteReceiveStream
from pydantic import JsonValue

from agent_threads import Message, SQLiteStore, StepRecord, Usage, WorkflowThread, tool_call
from agent_threads.workflows import END, Step, StepContext, StepResult, Workflow, step

QUESTION = "Should our city pilot autonomous electric buses on the airport line in 2026?"
Policy = Literal["strict", "lenient"]


# -- the scripted agents -------------------------------------------------------------------


@dataclass(frozen=True)
class Angle:
    """What one researcher looks into, and what its scripted tools return."""

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


def usage(tokens_in: int, tokens_out: int) -> Usage:
    return Usage(input_tokens=tokens_in, output_tokens=tokens_out, cost=round(tokens_in * 3e-6, 6))


@step(agent="planner")
async def plan(ctx: StepContext) -> StepResult:
    """Split the question into three angles, one per researcher."""
    outline = tool_call("make_outline", {"question": ctx.input, "parts": 3})
    await ctx.emit(
        Message.system("You are a research lead. Split questions into independent angles."),
        Message.user(str(ctx.input)),
        Message.assistant("Let me outline the angles first.", tool_calls=[outline]),
        Message.tool_result(outline.call_id, [a.subtopic for a in ANGLES]),
    )
    await anyio.sleep(0.05)
    subtopics = {a.step: a.subtopic for a in ANGLES}
    await ctx.emit(
        Message.assistant(
            "Three researchers, in parallel: " + "; ".join(subtopics.values()) + ".",
            usage=usage(420, 96),
        )
    )
    return StepResult(output=subtopics, patch={"question": ctx.input, "sources": []})


async def research(ctx: StepContext) -> StepResult:
    """A researcher: search, read the best page, report a finding with its sources."""
    angle = ANGLE_BY_STEP[ctx.step]
    search = tool_call("web_search", {"query": angle.query, "top_k": 2})
    await ctx.emit(
        Message.system(f"You research {angle.subtopic}. Cite every claim."),
        Message.user(f"Research {ctx.input[ctx.step]} for: {QUESTION}"),
        Message.assistant(tool_calls=[search], usage=usage(310, 40)),
    )
    await anyio.sleep(angle.latency / 2)  # the scripted model "thinks"
    hits: JsonValue = [{"title": t, "url": u} for t, u in angle.sources]
    fetch = tool_call("fetch_page", {"url": angle.sources[0][1]})
    await ctx.emit(
        Message.tool_result(search.call_id, hits),
        Message.assistant(f"Reading {angle.sources[0][0]!r}.", tool_calls=[fetch]),
    )
    await anyio.sleep(angle.latency / 2)
    await ctx.emit(
        Message.tool_result(fetch.call_id, {"excerpt": angle.page}),
        Message.assistant(angle.finding, usage=usage(1650, 120)),
    )
    output = {"finding": angle.finding, "sources": [u for _, u in angle.sources]}
    return StepResult(output=output, patch={"sources": [u for _, u in angle.sources]})


RESEARCHERS = [step(name=a.step, agent=a.agent)(research) for a in ANGLES]


@step(agent="writer")
async def write(ctx: StepContext) -> StepResult:
    """Draft the brief from the findings; a second draft answers the reviewer's notes."""
    drafts = int(ctx.state.get("drafts", 0))
    findings = ctx.state.get("findings") or {k: v["finding"] for k, v in ctx.input.items()}
    notes = ctx.state.get_path("review.notes")
    prompt = "Write a one-paragraph brief from these findings:\n" + "\n".join(findings.values())
    if notes:
        prompt = f"Revise your brief. Reviewer notes: {notes}"
    body = (
        "Recommendation: run a 12-month pilot on the segregated airport lane with a safety"
        " operator on board. " + " ".join(findings.values())
    )
    if notes:
        body += " Cost case: at 1.9 EUR/km today, a 25% saving is ~140 kEUR a year on this line."
    await ctx.emit(Message.user(prompt), Message.assistant(body, usage=usage(900, 210)))
    await anyio.sleep(0.05)
    return StepResult(
        output=body, patch={"drafts": drafts + 1, "draft": body, "findings": findings}
    )


def reviewer(policy: Policy) -> Step:
    """The reviewer; `strict` sends a first draft back once, `lenient` approves it."""

    async def review(ctx: StepContext) -> StepResult:
        drafts = int(ctx.state["drafts"])
        revise = policy == "strict" and drafts < 2
        notes = "Quantify the cost case in euros for this line." if revise else "Clear and sourced."
        verdict = "revise" if revise else "approve"
        await ctx.emit(
            Message.user(f"Review draft {drafts}:\n{textwrap.shorten(str(ctx.input), 120)}"),
            Message.assistant(f"{verdict.upper()}: {notes}", usage=usage(700, 30)),
        )
        return StepResult(output=verdict, patch={"review": {"verdict": verdict, "notes": notes}})

    return step(name="review", agent="reviewer")(review)


@step(agent="editor")
async def approve(ctx: StepContext) -> StepResult:
    """A person approves publication: the run pauses here until someone replies."""
    answer = await ctx.interrupt({"question": "Publish this brief?", "draft": ctx.state["draft"]})
    await ctx.emit(Message.user(f"Editor's answer: {answer}"))
    published = str(answer).lower() in {"yes", "y", "publish"}
    return StepResult(output={"published": published}, patch={"published": published})


def research_team(*, policy: Policy = "strict", human_approval: bool = False) -> Workflow:
    """The team: plan -> 3 researchers (at once) -> write -> review -(once)-> write ..."""
    after_review = "approve" if human_approval else END
    workflow = Workflow("research-team")
    workflow.edge(plan, RESEARCHERS).join(RESEARCHERS, write, merge="combine_lists")
    workflow.edge(write, reviewer(policy))
    workflow.branch(
        "review",
        lambda state, verdict: "write" if verdict == "revise" else after_review,
        targets=["write", approve] if human_approval else ["write"],
    )
    return workflow


# -- the demo --------------------------------------------------------------------------------


class Progress:
    """Prints each step as it starts and ends, with the time since the run began."""

    def __init__(self) -> None:
        self.began = 0.0

    def __call__(self, record: StepRecord) -> None:
        if not self.began:
            self.began = anyio.current_time()
        elapsed = anyio.current_time() - self.began
        mark = {"running": ">", "completed": "+", "failed": "x", "interrupted": "?"}
        line = f"  {elapsed:5.2f}s  {mark.get(record.status, ' ')} superstep {record.superstep}"
        line += f"  {record.step:<16} {record.agent:<15} {record.status}"
        if record.status == "completed" and record.duration is not None:
            line += f" in {record.duration:.2f}s"
        print(line, flush=True)


def heading(text: str) -> None:
    print(f"\n=== {text} " + "=" * max(0, 74 - len(text)))


def show_history(run: WorkflowThread) -> None:
    print(f"  {'step':<3} {'name':<16} {'agent':<15} {'status':<10} try  output")
    for r in run.execution.history:
        output = textwrap.shorten(json.dumps(r.output) if r.output is not None else "", 34)
        print(
            f"  {r.superstep:<3} {r.step:<16} {r.agent:<15} {r.status:<10} {r.attempt:<4} {output}"
        )


def show_message(message: Message) -> str:
    if message.tool_calls:
        call = message.tool_calls[0]
        return f"{message.role:>9}: -> {call.name}({json.dumps(call.arguments)})"
    if message.tool_results:
        return f"{message.role:>9}: <- {json.dumps(message.tool_results[0].result)}"
    return f"{message.role:>9}: {message.text}"


async def show_thread(run: WorkflowThread, key: str) -> None:
    for message in (await run.get_sub_thread(key)).messages:
        print("   " + textwrap.shorten(show_message(message), 100))


async def demo(db: Path) -> None:
    async with SQLiteStore(db) as store:
        heading(f"1. the research team runs on SQLite ({db})")
        print(f"  question: {QUESTION}")
        run = await research_team().run(QUESTION, store=store, on_step=Progress())
        print(f"  status: {run.execution.status} after {run.execution.superstep} supersteps")

        heading("2. step history (each step on its own sub-thread)")
        show_history(run)
        print(f"\n  sub-threads: {', '.join(run.sub_thread_keys)}; the cost analyst's:")
        await show_thread(run, "cost-analyst")

        heading("3. fork at the writer's step, re-run with a lenient reviewer")
        checkpoints = await run.checkpoints()
        at_writer = next(c for c in checkpoints if c.superstep == 2)
        fork = await (await run.at(at_writer)).fork(title="lenient review")
        print(f"  forked at checkpoint {at_writer.id} (superstep 2, writer next): {fork.id}")
        fork = await research_team(policy="lenient").resume(fork, on_step=Progress())
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
            print("   " + textwrap.shorten(show_message(message), 100))

        heading("5. a crash: the process is killed mid-run, then resumed")
        await crash_and_resume(store, db)

        heading("6. human approval: the run pauses, a reply resumes it")
        team = research_team(policy="lenient", human_approval=True)
        paused = await team.run(QUESTION, store=store, title="with approval")
        (waiting,) = paused.execution.interrupts
        prompt = waiting.prompt if isinstance(waiting.prompt, dict) else {}
        print(
            f"  status {paused.execution.status!r}: {waiting.step} asks {prompt.get('question')!r}"
        )
        resumed = await team.resume(paused.id, store=store, reply="yes")
        published = resumed.state["published"]
        print(f"  resumed with reply 'yes': {resumed.execution.status}, published={published}")
        print(f"\n  all of it is in {db}: {len(await store.list_records('thread'))} threads")


async def crash_and_resume(store: SQLiteStore, db: Path) -> None:
    command = [sys.executable, __file__, "--child", str(db), "crashing-run"]
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
    run = await research_team().resume(run, on_step=Progress())
    crashed = [r for r in run.execution.history if r.status == "failed"]
    print(f"  resumed: {run.execution.status}; rolled back and re-ran {[r.step for r in crashed]}")
    completed = [r.step for r in run.execution.history if r.status == "completed"]
    print(f"  completed once each: {completed}")
    policy = await run.get_sub_thread("policy-analyst")
    if crashed[0].branch is not None:
        kept = len((await policy.at(crashed[0].branch)).messages)
        print(f"  the partial attempt is kept as checkpoint {crashed[0].branch} ({kept} messages)")


async def child(db: Path, thread_id: str) -> None:
    """The process `crash_and_resume` kills: reports each step event on stdout."""

    def report(record: StepRecord) -> None:
        print(json.dumps({"step": record.step, "status": record.status}), flush=True)

    async with SQLiteStore(db) as store:
        await research_team().run(QUESTION, store=store, id=thread_id, on_step=report)


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        anyio.run(child, Path(sys.argv[2]), sys.argv[3])
        return
    db = Path(sys.argv[1] if len(sys.argv) > 1 else "demo.db")
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)  # a fresh database each time: the demo is repeatable
    anyio.run(demo, db)


if __name__ == "__main__":
    main()
