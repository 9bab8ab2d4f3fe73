"""Routing: a triage agent hands each customer request to one of several specialists.

The triage agent reads the request and calls its `transfer` tool, naming a specialist
(billing, technical or accounts) and a one-line summary; a conditional edge runs that
specialist, on its own sub-thread, with the request and the summary handed over. The
specialist looks things up with its own tool and answers. Specialists that were not
chosen never start: their sub-threads do not exist.

The triage decision is checkpointed with the superstep, so a run can be forked right
after it and its specialist run again (to retry an answer, or try another model) while
triage is neither repeated nor paid for twice.

Run `python workflows/routing.py [DB] [--model NAME]`: DB is a SQLite file (default: an
in-memory store). Scripted models by default (offline); `--model` uses an
OpenAI-compatible chat model.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from _models import (
    DemoProgram,
    Models,
    Progress,
    Request,
    Tool,
    ToolFunction,
    ask,
    call_arguments,
    describe,
    heading,
    require,
    schema,
    total_usage,
    work,
)
from pydantic import JsonValue

from agent_threads import (
    Message,
    ThreadStore,
    WorkflowCheckpoint,
    WorkflowThread,
    tool_call,
)
from agent_threads.workflows import Step, StepContext, StepResult, Workflow, step

REQUESTS = (
    "Hi, I was charged twice for invoice INV-2291 this month. Can you fix that?",
    "The desktop app shows 'sync failed (E42)' since this morning and my notes don't update.",
    "I changed jobs: please move my account from ana@oldcorp.example to my new e-mail.",
)


# -- the specialists and their (offline) tools --------------------------------------------


INVOICES: dict[str, JsonValue] = {
    "INV-2291": {"amount_eur": 12.0, "charges": 2, "status": "duplicate charge, refundable"},
    "INV-2240": {"amount_eur": 12.0, "charges": 1, "status": "paid"},
}
SERVICES: dict[str, JsonValue] = {
    "sync": {"status": "degraded", "incident": "E42: sync backlog in eu-west, fix by 14:00 UTC"},
    "login": {"status": "operational"},
}
ACCOUNTS: dict[str, JsonValue] = {
    "ana@oldcorp.example": {"plan": "pro", "verified": True, "can_change_email": True},
}


def lookup(table: dict[str, JsonValue], key: str) -> ToolFunction:
    """A tool that reads one argument and looks it up in `table`."""

    async def run(arguments: dict[str, JsonValue]) -> JsonValue:
        value = str(arguments[key]).strip()
        return table.get(value, {"error": f"no {key} {value!r}"})

    return run


@dataclass(frozen=True)
class Specialist:
    """A specialist agent: what it handles, its tool, and how its script answers.

    `argument` finds the tool's argument in the request; `answer` words a reply from
    what the tool found, in full or (`brief`) in one sentence.
    """

    name: str
    handles: str
    tool: Tool
    argument: Callable[[str], str]
    answer: Callable[[dict[str, JsonValue], bool], str]


def _invoice(text: str) -> str:
    found = re.search(r"INV-\d+", text)
    return found.group(0) if found else "unknown"


def _email(text: str) -> str:
    found = re.search(r"[\w.+-]+@[\w.-]+\.\w+", text)
    return found.group(0) if found else "unknown"


def _billing_answer(found: dict[str, JsonValue], brief: bool) -> str:
    if found.get("charges") != 2:
        return "I could not find a duplicate charge; could you send the invoice number?"
    if brief:
        return f"Refund of the duplicate {found['amount_eur']} EUR charge is on its way."
    return (
        f"You were indeed charged twice ({found['amount_eur']} EUR each). I refunded the"
        " duplicate; it reaches your card within 3 working days."
    )


def _technical_answer(found: dict[str, JsonValue], brief: bool) -> str:
    if "incident" not in found:
        return "Our services look fine; could you send a screenshot of the error?"
    if brief:
        return "A known sync incident (E42); your notes sync once it is fixed, nothing is lost."
    return (
        f"This is a known incident ({found['incident']}). Your notes will sync on their"
        " own once it is fixed; nothing is lost."
    )


def _accounts_answer(found: dict[str, JsonValue], brief: bool) -> str:
    if not found.get("can_change_email"):
        return "I could not find that account; which address did you sign up with?"
    if brief:
        return "Confirmation link sent to your new address: click it to move the account."
    return (
        f"Your {found['plan']} account can move to the new address. I sent a confirmation"
        " link there; click it to finish, and your notes and plan come with you."
    )


SPECIALISTS = (
    Specialist(
        "billing",
        "invoices, charges, refunds",
        Tool(
            "lookup_invoice",
            "Look up an invoice by id (INV-1234).",
            schema({"invoice_id": {"type": "string"}}),
            lookup(INVOICES, "invoice_id"),
        ),
        _invoice,
        _billing_answer,
    ),
    Specialist(
        "technical",
        "errors, crashes, sync and login problems",
        Tool(
            "service_status",
            "The current status of a service (sync or login).",
            schema({"service": {"type": "string", "enum": ["sync", "login"]}}),
            lookup(SERVICES, "service"),
        ),
        lambda text: "sync",
        _technical_answer,
    ),
    Specialist(
        "accounts",
        "e-mail addresses, plans, access",
        Tool(
            "lookup_account",
            "Look up an account by its e-mail address.",
            schema({"email": {"type": "string"}}),
            lookup(ACCOUNTS, "email"),
        ),
        _email,
        _accounts_answer,
    ),
)
BY_NAME = {s.name: s for s in SPECIALISTS}
BRIEF = "Answer in one short sentence."
KEYWORDS = {"billing": ("charge", "invoice", "refund"), "technical": ("error", "sync", "crash")}


async def transfer(arguments: dict[str, JsonValue]) -> JsonValue:
    """The triage tool: hand the conversation to a specialist."""
    name = str(arguments["specialist"])
    if name not in BY_NAME:
        raise ValueError(f"no specialist {name!r}; choose one of {sorted(BY_NAME)}")
    return f"Transferred to {name}."


TRANSFER = Tool(
    "transfer",
    "Hand the conversation to the specialist who handles it, with a one-line summary.",
    schema(
        {
            "specialist": {"type": "string", "enum": [s.name for s in SPECIALISTS]},
            "summary": {"type": "string"},
        }
    ),
    transfer,
)


# -- the scripted models ----------------------------------------------------------------


def triage_script(request: Request) -> Message:
    """Triage by keywords; accounts when nothing else matches."""
    text = request.last.text
    chosen = next(
        (name for name, words in KEYWORDS.items() if any(w in text.lower() for w in words)),
        "accounts",
    )
    summary = f"Customer asks about {BY_NAME[chosen].handles.split(',')[0]}: {text[:60]}"
    return Message.assistant(
        tool_calls=[tool_call("transfer", {"specialist": chosen, "summary": summary})]
    )


def specialist_script(specialist: Specialist) -> Callable[[Request], Message]:
    """A specialist: look the case up with its tool, then answer from what it found."""
    key = next(iter(_properties(specialist.tool)))

    def script(request: Request) -> Message:
        found = request.results(specialist.tool.name)
        if not found:
            value = specialist.argument(request.first_text("user"))
            return Message.assistant(tool_calls=[tool_call(specialist.tool.name, {key: value})])
        result = found[-1] if isinstance(found[-1], dict) else {}
        return Message.assistant(specialist.answer(result, BRIEF in request.first_text("system")))

    return script


def _properties(tool: Tool) -> dict[str, JsonValue]:
    properties = tool.parameters["properties"]
    assert isinstance(properties, dict)
    return properties


# -- the workflow ---------------------------------------------------------------------------


def triage_step(models: Models) -> Step:
    """Read the request; call `transfer` to name the specialist."""
    model = models.get(triage_script)
    names = ", ".join(f"{s.name} ({s.handles})" for s in SPECIALISTS)

    async def triage(ctx: StepContext) -> StepResult:
        await ctx.emit(
            Message.system(f"You triage support requests. Transfer each to one of: {names}."),
            Message.user(str(ctx.input)),
        )
        reply = await ask(
            ctx.thread, model, author=ctx.agent, tools=[TRANSFER], tool_choice="transfer"
        )
        arguments = call_arguments(reply, "transfer")
        chosen = str(arguments.get("specialist"))
        chosen = chosen if chosen in BY_NAME else "accounts"  # a model may name no one we have
        summary = str(arguments.get("summary") or "")
        handoff = {"specialist": chosen, "summary": summary, "request": str(ctx.input)}
        return StepResult(output=handoff, patch={"specialist": chosen})

    return step(name="triage", agent="triage")(triage)


def specialist_step(models: Models, specialist: Specialist, *, brief: bool) -> Step:
    """A specialist: takes the handed-over conversation, uses its tool, answers."""
    model = models.get(specialist_script(specialist))
    style = f" {BRIEF}" if brief else ""

    async def handle(ctx: StepContext) -> StepResult:
        handoff = ctx.input
        await ctx.emit(
            Message.system(
                f"You are the {specialist.name} specialist ({specialist.handles})."
                f" Triage's note: {handoff['summary']}{style}"
            ),
            Message.user(handoff["request"]),
        )
        answer = await work(ctx.thread, model, author=ctx.agent, tools=[specialist.tool])
        return StepResult(output=answer.text, patch={"answer": answer.text})

    return step(name=specialist.name, agent=specialist.name)(handle)


def support_desk(models: Models, *, brief: bool = False) -> Workflow:
    """Triage, then one of billing, technical, accounts (`brief`: one-sentence answers)."""
    workflow = Workflow("support-desk")
    specialists = [specialist_step(models, s, brief=brief) for s in SPECIALISTS]
    workflow.add(triage_step(models), *specialists)
    workflow.branch("triage", lambda state, handoff: handoff["specialist"], targets=specialists)
    return workflow


# -- the demo ---------------------------------------------------------------------------------


async def show_run(run: WorkflowThread) -> None:
    """Print who handled the run, their conversation, and what it cost."""
    chosen = str(run.state["specialist"])
    print(f"  sub-threads: {', '.join(run.sub_thread_keys)}", end="")
    unused = [s.name for s in SPECIALISTS if s.name not in run.sub_thread_keys]
    print(f" ({' and '.join(unused)} never started)")
    messages: list[Message] = []
    for key in ("triage", chosen):
        thread = await run.get_sub_thread(key)
        messages += thread.messages
        for message in thread.messages[1:]:  # the system prompts are long; skip them
            print("   " + describe(message))
    usage = total_usage(messages)
    print(f"  tokens: {usage.input_tokens} in, {usage.output_tokens} out")


async def retry_specialist(run: WorkflowThread, models: Models) -> WorkflowThread:
    """Fork the run just after triage; run only its specialist again, told to be brief."""
    cuts = [c for c in await run.checkpoints() if isinstance(c, WorkflowCheckpoint)]
    after_triage = next(c for c in cuts if c.superstep == 1)
    fork = await (await run.at(after_triage)).fork(title="brief answer")
    fork = await support_desk(models, brief=True).resume(fork, on_step=Progress())
    require(fork)
    reran = [r.step for r in fork.execution.history[after_triage.history_length :]]
    print(f"  forked run {run.id[-8:]} at its checkpoint after triage: {fork.id[-8:]}")
    print(f"  the fork re-ran only {reran}: triage's decision was reused, not asked again")
    print(f"  original answer: {run.state['answer']}")
    print(f"  fork's answer:   {fork.state['answer']}")
    print("  both runs stay stored side by side; the original's sub-threads are unchanged")
    return fork


async def demo(store: ThreadStore, models: Models) -> list[WorkflowThread]:
    """Route each sample request, then retry one specialist on a fork."""
    desk = support_desk(models)
    runs = []
    for number, text in enumerate(REQUESTS, 1):
        heading(f"request {number}: triage hands over ({models.label})")
        print(f"  customer: {text}")
        run = await desk.run(text, store=store, on_step=Progress())
        require(run)
        print(f"  status {run.execution.status}: triage chose {run.state['specialist']!r}")
        await show_run(run)
        runs.append(run)
    heading("a checkpoint after triage: fork, and ask the specialist again")
    runs.append(await retry_specialist(runs[0], models))
    return runs


PROGRAM = DemoProgram(demo, "Triage hands requests to specialists.")
parse_args, start, main = PROGRAM.parse_args, PROGRAM.start, PROGRAM.main

if __name__ == "__main__":
    main()
