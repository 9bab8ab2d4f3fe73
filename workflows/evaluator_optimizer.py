"""Evaluator-optimizer: a writer and a critic loop until the critic accepts a draft.

Each draft is written on its own fork (`thread.fork()`): draft 1 on a fork of the
writer's sub-thread (its instructions and the task), each later draft on a fork of the
previous draft's thread, with the critic's notes appended. So every draft keeps the
exact conversation that produced it, and none is overwritten by the next. The critic
scores each draft with its `submit_review` tool; the loop ends when it accepts, or
after `MAX_ROUNDS`. The best draft is then kept on the writer's own sub-thread; the
other drafts stay inspectable as forks (their ids are in the run's state, and their
lineage leads back to the writer's sub-thread).

Run `python workflows/evaluator_optimizer.py [DB] [--model NAME]`: DB is a SQLite file
(default: in memory). Scripted models by default (offline); `--model` uses an
OpenAI-compatible chat model.
"""

from __future__ import annotations

from typing import Any

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
)
from pydantic import JsonValue

from agent_threads import (
    ChatMessageThread,
    ImmutableState,
    Message,
    ThreadStore,
    WorkflowThread,
    tool_call,
)
from agent_threads.workflows import Step, StepContext, StepResult, Workflow, step

MAX_ROUNDS = 4
TASK = (
    "Write a two-sentence announcement of the new offline mode of our notes app, for the"
    " release notes."
)
RUBRIC = (
    "Score 1-10. Accept (8 or more) only if it says what works offline, how changes sync"
    " back, and stays within two sentences."
)
DRAFTS = (
    "Our notes app now has an offline mode! It's great.",
    "Offline mode is here: read and edit every note without a connection. It's our most"
    " requested feature.",
    "Offline mode is here: read, edit and create notes without a connection. Your changes"
    " sync back automatically the moment you are online again.",
)
REVIEWS: tuple[dict[str, JsonValue], ...] = (
    {"score": 4, "accept": False, "notes": "Say what works offline; 'great' says nothing."},
    {"score": 6, "accept": False, "notes": "Good scope; now say how changes sync back."},
    {"score": 9, "accept": True, "notes": "Clear scope and sync story, two sentences."},
)


async def record_review(arguments: dict[str, JsonValue]) -> JsonValue:
    """The critic's tool: check a review's fields, and record it."""
    score = arguments["score"]
    if not isinstance(score, int | float) or not 1 <= score <= 10:
        raise ValueError(f"score must be a number from 1 to 10, not {score!r}")
    return "Review recorded."


REVIEW = Tool(
    "submit_review",
    "Submit the review of a draft: a score, whether it is accepted, and notes.",
    schema(
        {
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "accept": {"type": "boolean"},
            "notes": {"type": "string"},
        }
    ),
    record_review,
)


# -- the scripted models ----------------------------------------------------------------


def write_script(request: Request) -> Message:
    """Draft n+1 after n rounds of notes (the fork holds all previous rounds)."""
    rounds = sum(1 for m in request.messages if m.role == "user" and "Critic" in m.text)
    return Message.assistant(DRAFTS[min(rounds, len(DRAFTS) - 1)])


def critique_script(request: Request) -> Message:
    """Score the drafts in the order the critic sees them: better each round."""
    seen = sum(1 for m in request.messages if m.role == "user" and m.text.startswith("Draft"))
    review = REVIEWS[min(seen, len(REVIEWS)) - 1]
    return Message.assistant(tool_calls=[tool_call("submit_review", dict(review))])


# -- the workflow ---------------------------------------------------------------------------


def writer(models: Models) -> Step:
    """Write the next draft on a fork of the previous one (of the brief, for draft 1)."""
    model = models.get(write_script, delay=0.02)

    async def write(ctx: StepContext) -> StepResult:
        drafts: list[Any] = list(ctx.state.get("drafts", []))
        if not drafts:
            await ctx.emit(
                Message.system("You write product copy. Take the critic's notes seriously."),
                Message.user(str(ctx.input)),
            )
            base: ChatMessageThread = ctx.thread
        else:
            base = await ChatMessageThread.load(drafts[-1]["thread"], store=ctx.workflow.store)
        number = len(drafts) + 1
        draft = await base.fork(title=f"draft {number}")
        if drafts:
            notes = ctx.state["review"]["notes"]
            await draft.on_new_messages([Message.user(f"Critic's notes: {notes} Revise it.")])
        text = (await ask(draft, model, author=ctx.agent)).text
        entry = {"round": number, "thread": draft.id, "text": text}
        return StepResult(output=entry, patch={"drafts": [*drafts, entry]})

    return step(name="write", agent="writer")(write)


def critic(models: Models) -> Step:
    """Score the draft with `submit_review`; accepting ends the loop."""
    model = models.get(critique_script)

    async def critique(ctx: StepContext) -> StepResult:
        if ctx.thread.head == 0:
            await ctx.emit(Message.system(f"You are a demanding editor. {RUBRIC}"))
        await ctx.emit(Message.user(f"Draft {ctx.input['round']}:\n{ctx.input['text']}"))
        reply = await ask(
            ctx.thread, model, author=ctx.agent, tools=[REVIEW], tool_choice=REVIEW.name
        )
        review = _review(call_arguments(reply, REVIEW.name))
        scores = {**ctx.state.get("scores", {}), str(ctx.input["round"]): review["score"]}
        return StepResult(output=review, patch={"review": review, "scores": scores})

    return step(name="critique", agent="critic")(critique)


def _review(arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The review the critic submitted; a malformed one counts as a score of 1."""
    score = arguments.get("score")
    valid = isinstance(score, int | float) and 1 <= score <= 10
    return {
        "score": score if valid else 1,
        "accept": arguments.get("accept") is True and valid,
        "notes": str(arguments.get("notes") or "No notes."),
    }


@step(agent="writer")
async def keep(ctx: StepContext) -> StepResult:
    """Keep the best draft on the writer's own sub-thread; the others stay as forks."""
    drafts = list(ctx.state["drafts"])
    scores = ctx.state["scores"]
    best = max(drafts, key=lambda d: (scores[str(d["round"])], d["round"]))
    await ctx.emit(
        Message.assistant(best["text"], metadata={"kept_from": best["thread"]}),
    )
    return StepResult(output=best, patch={"kept": best["round"]})


def next_step(state: ImmutableState, review: Any) -> str:
    """Back to the writer, unless the critic accepted or the rounds are used up."""
    if review["accept"] or len(state["drafts"]) >= MAX_ROUNDS:
        return "keep"
    return "write"


def evaluator_optimizer(models: Models) -> Workflow:
    """Write -> critique -> (write again | keep the best)."""
    workflow = Workflow("evaluator-optimizer")
    workflow.edge(writer(models), critic(models))
    workflow.branch("critique", next_step, targets=["write", keep])
    return workflow


# -- the demo ---------------------------------------------------------------------------------


async def show_drafts(run: WorkflowThread) -> None:
    """Print each draft's fork, score and lineage, and what the writer kept."""
    store = run.store
    scores = run.state["scores"]
    kept = run.state["kept"]
    for entry in run.state["drafts"]:
        draft = await ChatMessageThread.load(entry["thread"], store=store)
        lineage = " <- ".join(a.title or a.thread_id[-8:] for a in await draft.lineage())
        mark = "kept" if entry["round"] == kept else "fork"
        print(
            f"  draft {entry['round']}  score {scores[str(entry['round'])]:>2}  [{mark}]"
            f"  {draft.id[-8:]}: {len(draft.messages)} messages, forked from {lineage}"
        )
        print("    " + describe(draft.messages[-1]))
    writer = await run.get_sub_thread("writer")
    print("  the writer's own sub-thread ends with the kept draft:")
    print("   " + describe(writer.messages[-1]))


async def demo(store: ThreadStore, models: Models) -> WorkflowThread:
    """Run the loop on the task, then show every draft and the one kept."""
    heading(f"evaluator-optimizer ({models.label})")
    print(f"  task: {TASK}")
    run = await evaluator_optimizer(models).run(TASK, store=store, on_step=Progress())
    require(run)
    rounds = len(run.state["drafts"])
    accepted = run.state["review"]["accept"]
    print(f"  {rounds} rounds; the critic {'accepted' if accepted else 'never accepted'}")
    heading("every draft is its own fork")
    await show_drafts(run)
    return run


PROGRAM = DemoProgram(demo, "A writer and a critic loop until accepted.")
parse_args, start, main = PROGRAM.parse_args, PROGRAM.start, PROGRAM.main

if __name__ == "__main__":
    main()
