"""Provider message formats: a thread's messages (or a ContextView) to and from the wire.

- `formats.openai`: Chat Completions messages (`tool_calls`, `role: "tool"`, content parts).
- `formats.anthropic`: Messages API messages, with the system prompt separated out.
- `formats.openai_responses`: Responses API items (`message`, `function_call`,
  `function_call_output`, `reasoning`, ...), one message per item, nothing lost.

Both take a `ContextView` or any iterable of `Message`s. Nothing here imports a provider
SDK: the output is the plain JSON-like dicts their clients accept.
"""

from . import anthropic, openai, openai_responses

__all__ = ["anthropic", "openai", "openai_responses"]
