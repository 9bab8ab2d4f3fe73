"""Provider message formats: a thread's messages (or a ContextView) to and from the wire.

- `formats.openai`: Chat Completions messages (`tool_calls`, `role: "tool"`, content parts).
- `formats.anthropic`: Messages API messages, with the system prompt separated out.

Both take a `ContextView` or any iterable of `Message`s. Nothing here imports a provider
SDK: the output is the plain JSON-like dicts their clients accept.
"""

from . import anthropic, openai

__all__ = ["anthropic", "openai"]
