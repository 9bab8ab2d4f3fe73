"""Thread handles: the AgentThread base, chat threads and workflow threads."""
