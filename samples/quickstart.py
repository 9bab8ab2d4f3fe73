"""Quickstart: create a thread, fork it at a message, continue both branches side by side."""

from __future__ import annotations

import textwrap

import anyio

from agent_threads import ChatMessageThread, MemoryStore, Message, Usage, tool_call


def side_by_side(left: list[str], right: list[str], width: int = 44) -> str:
    lines = [f"{'original':<{width}} | fork", f"{'-' * width}-+-{'-' * width}"]
    for i in range(max(len(left), len(right))):
        a = left[i] if i < len(left) else ""
        b = right[i] if i < len(right) else ""
        lines.append(f"{textwrap.shorten(a, width):<{width}} | {textwrap.shorten(b, width)}")
    return "\n".join(lines)


def show(message: Message) -> str:
    if message.tool_calls:
        call = message.tool_calls[0]
        return f"{message.role}: -> {call.name}({call.arguments})"
    if message.tool_results:
        return f"tool: <- {message.tool_results[0].result}"
    return f"{message.role}: {message.text}"


async def main() -> None:
    async with MemoryStore() as store:
        thread = await ChatMessageThread.create(store, title="weekend plans")
        question = Message.user("Plan a Saturday in Lisbon for two.")
        weather = tool_call("get_forecast", {"city": "Lisbon", "day": "Saturday"})
        await thread.on_new_messages(
            [
                Message.system("You are a concise travel planner."),
                question,
                Message.assistant(
                    tool_calls=[weather], usage=Usage(input_tokens=40, output_tokens=12)
                ),
                Message.tool_result(weather.call_id, {"sky": "sunny", "high_c": 24}),
            ]
        )
        # Branch right after the question: the fork holds messages up to and including it.
        fork = await thread.fork(message_id=question.id, title="rainy-day variant")

        await thread.on_new_messages(
            [
                Message.assistant(
                    "Sunny, 24°C: Belém in the morning, a tram 28 ride, sunset at a miradouro."
                )
            ]
        )
        await fork.on_new_messages(
            [
                Message.assistant(
                    "Assume rain: Gulbenkian museum, lunch at Time Out Market, fado at night."
                ),
                Message.user("Great, book the fado."),
            ]
        )

        print(f"thread {thread.id} ({len(thread.messages)} messages, {len(thread.ranges)} range)")
        print(f"fork   {fork.id} ({len(fork.messages)} messages, parent {fork.parent_id})\n")
        print(side_by_side([show(m) for m in thread.messages], [show(m) for m in fork.messages]))
        print(f"\nstats: original {thread.stats.model_dump()}, fork {fork.stats.model_dump()}")

        reopened = await ChatMessageThread.load(fork.id, store=store)
        assert reopened.messages == fork.messages
        print("reloaded the fork from the store: identical")


if __name__ == "__main__":
    anyio.run(main)
