"""The `agent-threads` command line (extra `cli`; `serve` needs the extra `server`)."""

from agent_threads.cli.app import app, main

__all__ = ["app", "main"]
