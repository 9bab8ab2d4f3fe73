"""Stores shared between processes: resume elsewhere, two writers at once, SIGKILL mid-append.

Every child is `python tests/stores/_worker.py COMMAND SPEC ...`, a separate interpreter
that opens the store from its spec. A store joins with one row in PROCESS_STORES (a
function from a fresh temporary directory to a spec) and one opener in _worker.OPENERS.
"""

from __future__ import annotations

import json
import random
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.streams.buffered import BufferedByteReceiveStream

from agent_threads import ChatMessageThread, Message

from ._worker import crash_text, discard_store, open_store
from .conftest import needs_server

WORKER = Path(__file__).with_name("_worker.py")

SpecFactory = Callable[[Path], str]

SERVER_STORES = [  # the stores made for many machines: a fresh key prefix or schema each
    pytest.param(
        lambda tmp: f"redis:test-{uuid.uuid4().hex}", id="redis", marks=needs_server("redis")
    ),
    pytest.param(
        lambda tmp: f"postgres:test_{uuid.uuid4().hex}",
        id="postgres",
        marks=needs_server("postgres"),
    ),
]

PROCESS_STORES = [
    pytest.param(lambda tmp: f"jsonfile:{tmp / 'store'}", id="jsonfile"),
    pytest.param(lambda tmp: f"sqlite:{tmp / 'threads.db'}", id="sqlite"),
    *SERVER_STORES,
]

KILL_TRIALS = 20


@pytest.fixture(params=PROCESS_STORES)
async def spec(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    make: SpecFactory = request.param
    made = make(tmp_path)
    yield made
    await discard_store(made)


async def run_worker(*args: str) -> Any:
    result = await anyio.run_process([sys.executable, str(WORKER), *args], check=False)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


async def texts_of(spec: str, thread_id: str) -> list[str]:
    async with open_store(spec) as store:
        thread = await ChatMessageThread.load(thread_id, store=store)
        return [m.text for m in thread.messages]


async def new_thread(spec: str) -> str:
    async with open_store(spec) as store:
        return (await ChatMessageThread.create(store, title="shared")).id


# -- resume -------------------------------------------------------------------------


async def test_a_new_process_resumes_a_session_exactly(spec: str) -> None:
    written = await run_worker("write-session", spec)
    read = await run_worker("read-session", spec, *written)
    assert read == written
    thread, fork = (json.loads(read[i]) for i in written)
    assert len(thread["messages"]) == 5 and thread["state"] == {
        "plan": {"step": 3},
        "seen": ["tides"],
    }
    assert thread["stats"]["input_tokens"] == 40 and thread["tags"] == {
        "purpose": "resume",
        "test": "",
    }
    assert (fork["parent_id"], fork["fork_point"]) == (thread["id"], thread["messages"][1]["id"])
    assert fork["messages"][:2] == thread["messages"][:2] and fork["title"] == "second try"


# -- two writers ----------------------------------------------------------------------


async def test_two_processes_appending_to_one_thread_lose_nothing(spec: str) -> None:
    thread_id = await new_thread(spec)
    results: dict[str, Any] = {}

    async def append(tag: str, fork_every: int) -> None:
        results[tag] = await run_worker("append", spec, thread_id, tag, "500", str(fork_every))

    async with anyio.create_task_group() as group:
        group.start_soon(append, "a", 100)
        group.start_soon(append, "b", 125)

    final = await texts_of(spec, thread_id)
    assert len(final) == 1_000 and len(set(final)) == 1_000
    for tag in ("a", "b"):
        assert [t for t in final if t.split()[0] == tag] == [f"{tag} {i}" for i in range(500)]
    forks = {**results["a"]["forks"], **results["b"]["forks"]}
    assert len(forks) == 9
    for fork_id, seen in forks.items():
        assert await texts_of(spec, fork_id) == seen == final[: len(seen)]


@pytest.mark.parametrize("spec", SERVER_STORES, indirect=True)
async def test_four_processes_appending_to_one_thread_keep_each_message_once_in_order(
    spec: str,
) -> None:
    """Many hosts' workers on one thread (file stores: see the two-writer test above)."""
    thread_id = await new_thread(spec)
    async with anyio.create_task_group() as group:
        for tag in "abcd":
            group.start_soon(run_worker, "append", spec, thread_id, tag, "250", "0")
    final = await texts_of(spec, thread_id)
    assert len(final) == 1_000 and len(set(final)) == 1_000
    for tag in "abcd":
        assert [t for t in final if t.split()[0] == tag] == [f"{tag} {i}" for i in range(250)]


# -- crashes ----------------------------------------------------------------------------


SETTLE_AFTER_KILL = 0.3
"""Seconds after a kill within which a dead writer's last statement has surely ended."""


async def kill_writer(spec: str, thread_id: str, tag: str, rng: random.Random) -> int:
    """Start a crash writer, SIGKILL it at a random point; return the appends it finished."""
    command = [sys.executable, str(WORKER), "crash-writer", spec, thread_id, tag]
    async with await anyio.open_process([*command, str(rng.randrange(2**32))]) as process:
        assert process.stdout is not None
        lines = BufferedByteReceiveStream(process.stdout)
        assert await lines.receive_until(b"\n", 100) == b"ready"
        finished = 0
        for _ in range(rng.randint(0, 8)):
            finished = int(await lines.receive_until(b"\n", 100))
        await anyio.sleep(rng.uniform(0, 0.004))  # lands anywhere in the next append
        process.kill()
        await process.wait()
    # A statement (PostgreSQL) or script (Redis) the writer sent before it died runs to
    # its end on the server: its append may still land, whole, after the kill. Let it
    # settle, so that what the test reads next is all the dead writer ever wrote.
    await anyio.sleep(SETTLE_AFTER_KILL)
    return finished


async def test_a_writer_killed_at_random_points_leaves_a_whole_prefix(spec: str) -> None:
    rng = random.Random(20_240_531)
    thread_id = await new_thread(spec)
    expected: list[str] = []
    for trial in range(KILL_TRIALS):
        tag = f"trial{trial}"
        finished = await kill_writer(spec, thread_id, tag, rng)
        async with open_store(spec) as store:
            thread = await ChatMessageThread.load(thread_id, store=store)
            found = [m.text for m in thread.messages]
            assert found[: len(expected)] == expected
            new = found[len(expected) :]
            assert new == [crash_text(tag, i) for i in range(len(new))]  # a prefix, all whole
            assert len(new) >= finished  # nothing acknowledged is lost
            await thread.on_new_messages([Message.user(f"after {tag}")])
            expected = [*found, f"after {tag}"]
    assert await texts_of(spec, thread_id) == expected
