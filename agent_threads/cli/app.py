"""The `agent-threads` command: one Typer app, one function per command."""

from __future__ import annotations

import typer

from agent_threads.cli.serve import serve

app = typer.Typer(
    name="agent-threads",
    help="Threads of agent messages: serve them over HTTP.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.command()(serve)


@app.callback()
def _root() -> None:
    """Threads of agent messages: serve them over HTTP."""


def main() -> None:
    """Run the command line (the `agent-threads` console script)."""
    app()
