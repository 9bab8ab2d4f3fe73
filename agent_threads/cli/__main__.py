"""`python -m agent_threads.cli`: the `agent-threads` command."""

from agent_threads.cli import main

main()
