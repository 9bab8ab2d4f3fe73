"""A child process for tests/stores/test_processes.py: opens the store named on its command line.

Usage: python _worker.py COMMAND STORE-SPEC [ARGS...]

STORE-SPEC is `<kind>:<location>`; `OPENERS` maps each kind to a function opening that
store at that location (a directory, a file, a key prefix...). A store joins the process
tests with one entry here and one row in test_processes.PROCESS_STORES. Each command
prints one JSON document on stdout (the crash writer prints one line per append instead).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio

from agent_threads import (
    ChatMessageThread,
    JsonFileStore,
    Message,
    SQLiteStore,
    ThreadStore,
    Usage,
    tool_call,
)

REDIS_URL = os.environ.get("AGENT_THREADS_REDIS_URL", "redis://127.0.0.1:6379/0")
POSTGRES_DSN = os.environ.get(
    "AGENT_THREADS_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"
)  # the defaults of tests/stores/conftest.py, which a script cannot import


def redis_store(prefix: str) -> ThreadStore:
    """A RedisStore under a key prefix (the driver is imported only when asked for)."""
    from agent_threads.stores.redis import RedisStore

    return RedisStore(REDIS_URL, prefix=prefix)


def postgres_store(schema: str) -> ThreadStore:
    """A PostgresStore in a schema (the driver is imported only when asked for)."""
    from agent_threads.stores.postgres import PostgresStore

    return PostgresStore(POSTGRES_DSN, schema=schema, max_size=2)


OPENERS: dict[str, Callable[[str], ThreadStore]] = {
    "jsonfile": JsonFileStore,
    "sqlite": SQLiteStore,
    "redis": redis_store,
    "postgres": postgres_store,
}


def open_store(spec: str) -> ThreadStore:
    """The store a `<kind>:<location>` spec names (not opened yet)."""
    kind, _, location = spec.partition(":")
    return OPENERS[kind](location)


async def discard_store(spec: str) -> None:
    """Delete what a server store's spec holds; file stores live in a temporary directory."""
    kind, _, location = spec.partition(":")
    if kind == "redis":
        import redis.asyncio as redis

        async with redis.Redis.from_url(REDIS_URL) as client:
            pattern = "{" + location + "}:*"
            keys = [key async for key in client.scan_iter(match=pattern, count=1000)]
            if keys:
                await client.delete(*keys)
    elif kind == "postgres":
        import asyncpg

        connection = await asyncpg.connect(POSTGRES_DSN)
        try:
            await connection.execute(f'DROP SCHEMA IF EXISTS "{location}" CASCADE')
        finally:
            await connection.close()


def crash_text(tag: str, index: int) -> str:
    """The text of the crash writer's message `index`: long, and checkable for wholeness."""
    return f"{tag} {index} " + hashlib.sha256(f"{tag} {index}".encode()).hexdigest() * 8


async def write_session(store: ThreadStore, args: list[str]) -> Any:
    """Create a thread with everything a session has, and a fork; print their exports."""
    thread = await ChatMessageThread.create(
        store, title="resumable", tags={"purpose": "resume", "test": ""}, metadata={"user": "ada"}
    )
    call = tool_call("search", {"q": "tides"})
    question = Message.user("When is high tide?")
    await thread.on_new_messages(
        [
            Message.system("You are helpful."),
            question,
            Message.assistant("Let me look.", tool_calls=[call], usage=Usage(input_tokens=40)),
            Message.tool_result(call.call_id, {"high": "14:02"}),
            Message.assistant("At 14:02.", usage=Usage(output_tokens=7, cost=0.001)),
        ]
    )
    await thread.update_state({"plan": {"step": 3}, "seen": ["tides"]})
    fork = await thread.fork(message_id=question.id, title="second try")
    await fork.on_new_messages([Message.assistant("Around two in the afternoon.")])
    return {t.id: t.to_json() for t in (thread, fork)}


async def read_session(store: ThreadStore, args: list[str]) -> Any:
    """Load the threads named in `args` and print their exports."""
    return {i: (await ChatMessageThread.load(i, store=store)).to_json() for i in args}


async def append(store: ThreadStore, args: list[str]) -> Any:
    """Append `count` messages `"<tag> <i>"` one by one; fork every `fork_every` appends."""
    thread_id, tag, count, fork_every = args[0], args[1], int(args[2]), int(args[3])
    thread = await ChatMessageThread.load(thread_id, store=store)
    forks: dict[str, list[str]] = {}
    for i in range(count):
        await thread.on_new_messages([Message.user(f"{tag} {i}")])  # default retry policy
        if fork_every and (i + 1) % fork_every == 0:
            fork = await thread.fork()
            forks[fork.id] = [m.text for m in fork.messages]
    return {"forks": forks}


async def crash_writer(store: ThreadStore, args: list[str]) -> Any:
    """Append batches of `crash_text` messages until killed, printing the count after each."""
    thread_id, tag, seed = args[0], args[1], int(args[2])
    rng = random.Random(seed)
    thread = await ChatMessageThread.load(thread_id, store=store, lazy=rng.random() < 0.5)
    written = 0
    print("ready", flush=True)
    while True:
        size = rng.randint(1, 4)
        batch = [Message.user(crash_text(tag, written + i)) for i in range(size)]
        await thread.on_new_messages(batch)
        written += size
        print(written, flush=True)


COMMANDS: dict[str, Callable[[ThreadStore, list[str]], Awaitable[Any]]] = {
    "write-session": write_session,
    "read-session": read_session,
    "append": append,
    "crash-writer": crash_writer,
}


async def main(argv: list[str]) -> None:
    command, spec, *args = argv
    async with open_store(spec) as store:
        result = await COMMANDS[command](store, args)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1:])
