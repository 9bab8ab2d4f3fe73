"""The `agent-threads` command: one Typer app, one function per command."""

from __future__ import annotations

import typer

from agent_threads.cli.files import export, import_command
from agent_threads.cli.runs import runs
from agent_threads.cli.serve import serve
from agent_threads.cli.show import show
from agent_threads.cli.stores import copy, vacuum
from agent_threads.cli.threads import fork, list_command, remove
from agent_threads.cli.timetravel import checkpoint, log, rollback
from agent_threads.cli.tree import tree
from agent_threads.cli.ui import ui

app = typer.Typer(
    name="agent-threads",
    help="Threads of agent messages: list, read, fork, travel, copy and serve them.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command("ls")(list_command)
app.command()(show)
app.command()(tree)
app.command()(log)
app.command()(fork)
app.command()(checkpoint)
app.command()(rollback)
app.command("rm")(remove)
app.command()(export)
app.command("import")(import_command)
app.command()(copy)
app.command()(vacuum)
app.command()(runs)
app.command()(serve)
app.command()(ui)


@app.callback()
def _root() -> None:
    """Threads of agent messages: list, read, fork, travel, copy and serve them."""


def main() -> None:
    """Run the command line (the `agent-threads` console script)."""
    app()
