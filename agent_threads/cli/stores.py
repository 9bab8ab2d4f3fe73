"""`agent-threads copy` and `vacuum`: whole stores, moved and cleaned.

`copy` moves threads from one store to another (SQLite to PostgreSQL when an application
outgrows one machine) at the level of the store protocol, through
`agent_threads.threads.transfer`: records, segment rows and blobs keep their ids, so
segments shared by forks and checkpoints stay shared; what the target already holds
equal is skipped, so running the same copy again resumes it; the end verifies every
thread's message count, state hash and checkpoints in the target.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

import anyio
import typer
from rich.progress import Progress, TaskID
from rich.table import Table

from agent_threads.cli import render
from agent_threads.cli.errors import FAILED, CommandError, reported
from agent_threads.cli.options import StoreOption
from agent_threads.cli.render import console, print_json, progress_bar, short_hash
from agent_threads.cli.runner import DebugOption, JsonOption, on_store, opened
from agent_threads.stores.base import DEFAULT_VACUUM_GRACE, ThreadStore, VacuumReport, redact_url
from agent_threads.threads.transfer import (
    CopyPlan,
    CopyReport,
    ThreadCheck,
    Unit,
    plan_copy,
    verify_copy,
)


class _Bars:
    """The copy's progress: one bar for blobs, rows, records, and the verification."""

    def __init__(self, bar: Progress, plan: CopyPlan) -> None:
        self.bar = bar
        self.tasks: dict[str, TaskID] = {
            "blobs": bar.add_task("blobs", total=len(plan.blobs)),
            "rows": bar.add_task("rows", total=plan.row_count),
            "records": bar.add_task("records", total=len(plan.records)),
            "verified": bar.add_task("verifying", total=len(plan.thread_ids)),
        }

    def __call__(self, unit: Unit | str, count: int) -> None:
        self.bar.advance(self.tasks[unit], count)


async def _copy(
    source_url: str,
    target_url: str,
    thread_ids: list[str] | None,
    *,
    replace: bool,
    quiet: bool,
) -> tuple[CopyPlan, CopyReport, list[ThreadCheck]]:
    source = opened(source_url, existing=True)
    target = opened(target_url, existing=False)
    async with source, target:
        with progress_bar(quiet=quiet) as bar:
            reading = bar.add_task("reading the source", total=None)
            plan = await plan_copy(source, thread_ids=thread_ids)
            bar.update(reading, total=1, completed=1)
            tell = _Bars(bar, plan)
            report = await plan.run(source, target, progress=tell, replace=replace)
            checks = []
            for thread_id in plan.thread_ids:
                checks += await verify_copy(source, target, [thread_id])
                tell("verified", 1)
    return plan, report, checks


def _copy_json(
    source: str, target: str, report: CopyReport, checks: list[ThreadCheck]
) -> dict[str, Any]:
    return {
        "from": redact_url(source),
        "to": redact_url(target),
        "records_copied": report.records_copied,
        "records_skipped": report.records_skipped,
        "rows_copied": report.rows_copied,
        "rows_skipped": report.rows_skipped,
        "blobs_copied": report.blobs_copied,
        "blobs_skipped": report.blobs_skipped,
        "conflicts": report.conflicts,
        "threads": [c.model_dump(mode="json") for c in checks],
        "ok": not report.conflicts and all(c.ok for c in checks),
    }


def _problems_table(checks: list[ThreadCheck]) -> Table:
    table = render.table("thread", "kind", "messages", "state", "checkpoints", "problem")
    for c in checks:
        table.add_row(
            c.thread_id,
            c.kind,
            f"{c.messages[0]} → {c.messages[1]}",
            f"{short_hash(c.state[0])} → {short_hash(c.state[1])}",
            f"{c.checkpoints[0]} → {c.checkpoints[1]}",
            c.problem or "",
        )
    return table


def _print_copy(report: CopyReport, checks: list[ThreadCheck]) -> None:
    out = console()
    out.print(
        f"records: {report.records_copied} copied, {report.records_skipped} already there\n"
        f"rows: {report.rows_copied} copied, {report.rows_skipped} already there\n"
        f"blobs: {report.blobs_copied} copied, {report.blobs_skipped} already there"
    )
    for conflict in report.conflicts:
        out.print(
            f"[red]conflict[/red]: the target holds {conflict} with other content:"
            " left as is (--replace replaces it)"
        )
    bad = [c for c in checks if not c.ok]
    if bad:
        out.print(_problems_table(bad))
    messages = sum(c.messages[1] for c in checks)
    out.print(
        f"verified {len(checks) - len(bad)} of {len(checks)} threads ({messages} messages):"
        " message counts, state hashes and checkpoints equal"
    )


def copy(
    source: Annotated[str, typer.Option("--from", help="The store URL to copy from.")],
    target: Annotated[str, typer.Option("--to", help="The store URL to copy into.")],
    thread: Annotated[
        list[str],
        typer.Option(
            "--thread",
            help="Copy this thread (with its ancestors, sub-threads and checkpoints);"
            " repeatable. Default: the whole store.",
        ),
    ] = [],  # noqa: B006 - typer reads the default, never changes it
    replace: Annotated[
        bool,
        typer.Option(
            "--replace", help="Replace the target's threads that differ (default: report them)."
        ),
    ] = False,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Copy threads with their checkpoints and lineage into another store, then verify them.

    Ids are kept, and so is the sharing of messages between forks. Run it again to
    resume a copy that stopped: what is there already is skipped. A thread the target
    holds with other content is left alone and reported (exit code 1), unless --replace.
    """
    with reported(debug=debug):
        _, report, checks = anyio.run(
            functools.partial(
                _copy, source, target, thread or None, replace=replace, quiet=json_output
            )
        )
        if json_output:
            print_json(_copy_json(source, target, report, checks))
        else:
            _print_copy(report, checks)
        if report.conflicts or not all(c.ok for c in checks):
            raise CommandError("the copy is not equal to the source (see above)", code=FAILED)


def vacuum(
    store: StoreOption,
    grace: Annotated[
        float,
        typer.Option(
            min=0, help="Spare what was written in the last SECONDS (an append in flight)."
        ),
    ] = DEFAULT_VACUUM_GRACE,
    json_output: JsonOption = False,
    debug: DebugOption = False,
) -> None:
    """Free the messages and states no thread or checkpoint references any more."""
    with reported(store=store, debug=debug):

        async def clean(opened_store: ThreadStore) -> VacuumReport:
            with progress_bar(quiet=json_output) as bar:
                bar.add_task("vacuuming", total=None)
                return await opened_store.vacuum(grace=grace)

        report = on_store(store, clean)
        if json_output:
            print_json(
                {"segments_deleted": report.segments_deleted, "blobs_deleted": report.blobs_deleted}
            )
            return
        console().print(
            f"deleted {report.segments_deleted} segments and {report.blobs_deleted} blobs"
        )


__all__ = ["copy", "vacuum"]
