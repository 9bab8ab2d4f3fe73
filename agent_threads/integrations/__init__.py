"""Adapters that plug threads into agent frameworks, each behind its own extra.

- `integrations.openai_agents`: `ThreadSession`, the OpenAI Agents SDK's `Session` on a
  thread (`pip install 'agent-threads-framework[openai-agents]'`).
- `integrations.langgraph`: `ThreadSaver`, a LangGraph checkpointer storing a graph's
  messages as thread appends (`pip install 'agent-threads-framework[langgraph]'`).
- `integrations.agent_framework`: `ThreadHistoryProvider`, a Microsoft Agent Framework
  history provider keeping each agent session in a thread, with fork, checkpoints and
  rollback (`pip install 'agent-threads-framework[agent-framework]'`).

Nothing here is imported by `agent_threads` itself: import the module you use.
"""
