"""Human approval: a run stops at an interrupt, and another process resumes it with the answer.

A support agent investigates a refund request (it looks the order up with a tool) and
proposes a refund; a supervisor step interrupts the run to ask a person. The run is
saved in a SQLite file, paused, and the first process ends. Later, any process with the
file answers: the run resumes from the store, the supervisor step runs again and gets
the answer, and the support agent issues the refund (or declines) on the same
sub-thread it investigated on. Nothing that finished before the pause runs again.

    python workflows/human_approval.py start refunds.db        # runs, pauses, exits
    python workflows/human_approval.py status refunds.db       # what is waiting
    python workflows/human_approval.py approve refunds.db --answer yes   # resumes

`--run ID` picks the run (default `refund-1042`); `--model NAME` uses an
OpenAI-compatible chat model instead of the scripted ones (offline).
"""

from __future__ import annotations

import argparse
import hashlib
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from _models import (
    Models,
    Progress,
    Request,
    Tool,
    add_model_argument,
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
    ConflictError,
    ImmutableState,
    Message,
    SQLiteStore,
    ThreadNotFoundError,
    WorkflowThread,
    tool_call,
)
from agent_threads.workflows import Step, StepContext, StepResult, Workflow, step

RUN_ID = "refund-1042"
COMPLAINT = (
    "Order 1042 arrived with a cracked screen protector and a dented case. I'd like my money"
    " back for the damaged items, please."
)
ITEMS = (("screen protector", 14.90), ("phone case", 24.90), ("charger", 19.90))
ORDER_TOTAL = round(sum(price for _, price in ITEMS), 2)
ORDERS: dict[str, dict[str, JsonValue]] = {
    "1042": {
        "customer": "Ana Lima",
        "items": [{"name": name, "price_eur": price} for name, price in ITEMS],
        "total_eur": ORDER_TOTAL,
        "delivered": "2025-05-02",
        "photos_of_damage": True,
    }
}


# -- tools (offline: a toy order book and payment service) ---------------------------------


async def lookup_order(arguments: dict[str, JsonValue]) -> JsonValue:
    """The order with this number, or an error the model can read."""
    order_id = str(arguments["order_id"]).strip().lstrip("#")
    return ORDERS.get(order_id, {"error": f"no order {order_id!r}"})


async def propose_refund(arguments: dict[str, JsonValue]) -> JsonValue:
    """Record a proposal for the supervisor (the refund is not issued here)."""
    amount = float(str(arguments["amount_eur"]))
    return f"Proposal of {amount:.2f} EUR recorded; waiting for a supervisor."


def payment_service(idempotency_key: str) -> Tool:
    """The refund tool: the same idempotency key always gives the same refund."""

    async def issue_refund(arguments: dict[str, JsonValue]) -> JsonValue:
        amount = float(str(arguments["amount_eur"]))
        refund_id = "RF-" + hashlib.sha256(idempotency_key.encode()).hexdigest()[:8].upper()
        return {"refund_id": refund_id, "amount_eur": round(amount, 2), "status": "issued"}

    return Tool(
        "issue_refund",
        "Pay a refund to the customer's card.",
        schema({"order_id": {"type": "string"}, "amount_eur": {"type": "number"}}),
        issue_refund,
    )


LOOKUP = Tool(
    "lookup_order",
    "Look up an order by its number.",
    schema({"order_id": {"type": "string"}}),
    lookup_order,
)
PROPOSE = Tool(
    "propose_refund",
    "Propose a refund for a supervisor to approve.",
    schema({"amount_eur": {"type": "number"}, "reason": {"type": "string"}}),
    propose_refund,
)


# -- the scripted model ----------------------------------------------------------------------


def agent_script(request: Request) -> Message:
    """The support agent: look up, propose, issue when approved, then tell the customer."""
    if request.tool_choice == "propose_refund":
        arguments: dict[str, JsonValue] = {
            "amount_eur": 39.80,
            "reason": "Screen protector and case arrived damaged (photos on file).",
        }
        return Message.assistant(tool_calls=[tool_call("propose_refund", arguments)])
    if request.tool_choice == "issue_refund":
        arguments = {"order_id": "1042", "amount_eur": 39.80}
        return Message.assistant(tool_calls=[tool_call("issue_refund", arguments)])
    if request.results("issue_refund"):
        return Message.assistant(
            "Dear Ana, we refunded 39.80 EUR for the damaged screen protector and case;"
            " it reaches your card in 3-5 days. Sorry for the trouble!"
        )
    if "declined" in request.last.text:
        return Message.assistant(
            "Dear Ana, we could not approve a refund this time; a colleague will call you"
            " about a replacement instead."
        )
    if not request.results("lookup_order"):
        return Message.assistant(
            "Let me check the order.", tool_calls=[tool_call("lookup_order", {"order_id": "1042"})]
        )
    return Message.assistant("The protector and case (39.80 EUR) are damaged; the charger is fine.")


# -- the workflow ---------------------------------------------------------------------------


def investigator(models: Models) -> Step:
    """Look the order up, then propose a refund (amount and reason)."""
    model = models.get(agent_script, delay=0.05)

    async def investigate(ctx: StepContext) -> StepResult:
        await ctx.emit(
            Message.system("You are a support agent. Refunds above 0 EUR need a supervisor."),
            Message.user(str(ctx.input)),
        )
        await work(ctx.thread, model, author=ctx.agent, tools=[LOOKUP])
        reply = await ask(
            ctx.thread, model, author=ctx.agent, tools=[PROPOSE], tool_choice=PROPOSE.name
        )
        proposal = _proposal(call_arguments(reply, PROPOSE.name))
        return StepResult(output={**proposal, "pid": os.getpid()}, patch={"proposal": proposal})

    return step(name="investigate", agent="support-agent")(investigate)


def _proposal(arguments: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """The proposed amount, at most the order's total (a model may propose anything)."""
    try:
        amount = float(str(arguments.get("amount_eur")))
    except ValueError:
        amount = 0.0
    return {
        "order_id": "1042",
        "amount_eur": round(min(max(amount, 0.0), ORDER_TOTAL), 2),
        "reason": str(arguments.get("reason") or "damaged items"),
    }


@step(agent="supervisor")
async def approve(ctx: StepContext) -> StepResult:
    """Ask a person; the run pauses here until someone answers."""
    proposal = ctx.input
    answer = await ctx.interrupt(
        {
            "question": f"Refund {proposal['amount_eur']:.2f} EUR for order"
            f" {proposal['order_id']}?",
            "reason": proposal["reason"],
        }
    )
    await ctx.emit(Message.user(f"Supervisor's answer: {answer}"))
    approved = str(answer).strip().lower() in {"yes", "y", "approve", "approved"}
    return StepResult(output={"approved": approved, "answer": answer}, patch={"approved": approved})


def refunder(models: Models) -> Step:
    """Issue the approved refund (idempotently), then tell the customer."""
    model = models.get(agent_script, delay=0.05)

    async def refund(ctx: StepContext) -> StepResult:
        proposal = ctx.state["proposal"]
        tool = payment_service(ctx.idempotency_key)
        await ctx.emit(Message.user(f"Approved: refund {proposal['amount_eur']:.2f} EUR."))
        reply = await ask(ctx.thread, model, author=ctx.agent, tools=[tool], tool_choice=tool.name)
        letter = await ask(ctx.thread, model, author=ctx.agent)
        return StepResult(
            output={"refund": call_arguments(reply, tool.name), "pid": os.getpid()},
            patch={"letter": letter.text},
        )

    return step(name="refund", agent="support-agent")(refund)


def decliner(models: Models) -> Step:
    """Tell the customer the refund was declined."""
    model = models.get(agent_script, delay=0.05)

    async def decline(ctx: StepContext) -> StepResult:
        await ctx.emit(Message.user("The supervisor declined the refund. Tell the customer."))
        letter = await ask(ctx.thread, model, author=ctx.agent)
        return StepResult(output={"pid": os.getpid()}, patch={"letter": letter.text})

    return step(name="decline", agent="support-agent")(decline)


def after_approval(state: ImmutableState, output: Any) -> str:
    """The refund when the supervisor approved, else the decline."""
    return "refund" if output["approved"] else "decline"


def refund_desk(models: Models) -> Workflow:
    """Investigate -> approve (a person) -> refund | decline."""
    workflow = Workflow("refund-desk")
    workflow.edge(investigator(models), approve)
    workflow.branch(approve, after_approval, targets=[refunder(models), decliner(models)])
    return workflow


# -- the commands ---------------------------------------------------------------------------


def show_waiting(run: WorkflowThread) -> None:
    """Print the question a paused run waits on."""
    for record in run.execution.interrupts:
        prompt: Any = record.prompt
        question = prompt.get("question") if isinstance(prompt, dict) else prompt
        print(f"  {record.step} ({record.agent}) asks: {question}")
        if isinstance(prompt, dict) and "reason" in prompt:
            print(f"    reason: {prompt['reason']}")


def show_history(run: WorkflowThread) -> None:
    """Print every step attempt, with the process that ran it when it says."""
    for r in run.execution.history:
        pid = r.output.get("pid") if isinstance(r.output, dict) else None
        where = f"  (process {pid})" if pid else ""
        print(f"  superstep {r.superstep}  {r.step:<12} attempt {r.attempt}  {r.status}{where}")


async def start_run(store: SQLiteStore, run_id: str, models: Models, db: Path) -> None:
    """Run until the approval interrupt; the run is saved and paused."""
    heading(f"start: run {run_id!r} in {db} ({models.label})")
    print(f"  customer: {COMPLAINT}")
    try:
        run = await refund_desk(models).run(COMPLAINT, store=store, id=run_id, on_step=Progress())
    except ConflictError:
        raise SystemExit(
            f"{db} already holds run {run_id!r}: approve it, or start --run NEW"
        ) from None
    require(run, "paused")
    print(f"  status {run.execution.status!r}, saved at superstep {run.execution.superstep}:")
    show_waiting(run)
    checkpoints = await run.checkpoints()
    print(f"  {len(checkpoints)} workflow checkpoints stored; this process ends now. Answer with:")
    print(f"    python workflows/human_approval.py approve {db} --answer yes  (or no)")


async def approve_run(store: SQLiteStore, run_id: str, models: Models, answer: str) -> None:
    """Load the paused run from the store and resume it with the person's answer."""
    run = await _load(store, run_id)
    heading(f"approve: run {run_id!r}, process {os.getpid()} ({models.label})")
    print(f"  loaded from the store: status {run.execution.status!r}")
    show_waiting(run)
    print(f"  the answer: {answer!r}")
    run = await refund_desk(models).resume(run, reply=answer, on_step=Progress())
    require(run)
    print(f"  status {run.execution.status!r}; the step history across both processes:")
    show_history(run)
    agent = await run.get_sub_thread("support-agent")
    print(f"  the support agent's sub-thread ({len(agent.messages)} messages, both processes):")
    for message in agent.messages[1:]:
        print("   " + describe(message))


async def show_status(store: SQLiteStore, run_id: str) -> None:
    """Print where a run stands."""
    run = await _load(store, run_id)
    heading(f"status: run {run_id!r}")
    print(f"  {run.execution.status!r} at superstep {run.execution.superstep}")
    show_waiting(run)
    show_history(run)


async def _load(store: SQLiteStore, run_id: str) -> WorkflowThread:
    try:
        return await WorkflowThread.load(run_id, store=store)
    except ThreadNotFoundError:
        raise SystemExit(f"no run {run_id!r} in this file: run `start` first") from None


async def run_command(args: argparse.Namespace) -> None:
    """Open the store and the models, and run the command."""
    db = Path(args.db)
    async with Models(args.model) as models, SQLiteStore(db) as store:
        if args.command == "start":
            await start_run(store, args.run, models, db)
        elif args.command == "approve":
            await approve_run(store, args.run, models, args.answer)
        else:
            await show_status(store, args.run)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the command line and run."""
    parser = argparse.ArgumentParser(description="A refund that waits for a person.")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (
        ("start", "run until the approval, then exit"),
        ("approve", "answer the waiting approval and finish the run"),
        ("status", "show where the run stands"),
    ):
        command = commands.add_parser(name, help=text)
        command.add_argument("db", help="SQLite file holding the runs")
        command.add_argument("--run", default=RUN_ID, help=f"run id (default {RUN_ID})")
        add_model_argument(command)
        if name == "approve":
            command.add_argument("--answer", required=True, help="the person's answer: yes or no")
    anyio.run(run_command, parser.parse_args(argv))


if __name__ == "__main__":
    main()
