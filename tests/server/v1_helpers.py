"""Helpers of the `/v1` tests: the `openai` client on the app in-process, a store to stall."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
import httpx2
import openai
from fastapi import FastAPI
from openai.types.responses import EasyInputMessageParam

from agent_threads import MemoryStore, StoreUnavailableError
from agent_threads.stores.base import Record, RowWrite


def openai_client(app: FastAPI, key: str, **options: Any) -> openai.AsyncOpenAI:
    """The unmodified `openai` client, talking to `app` in-process (no socket)."""
    transport = httpx2.ASGITransport(app=app)
    return openai.AsyncOpenAI(
        base_url="http://threads.test/v1",
        api_key=key,
        http_client=httpx2.AsyncClient(transport=transport),
        **options,
    )


def text_item(
    text: str, role: Literal["user", "assistant", "system", "developer"] = "user"
) -> EasyInputMessageParam:
    """An input message item in the short form (no type, string content)."""
    return {"role": role, "content": text}


def item(**fields: Any) -> Any:
    """An item written as keyword arguments (typed loosely: tests send odd ones too)."""
    return fields


class ControlledStore(MemoryStore):
    """A MemoryStore whose commits (appends, rollbacks) fail as planned, or wait for a gate.

    `plan` lists the next commits' fates, True to fail (`fail_next_commit` plans one),
    "saved" to commit and then fail as if the reply were lost (`lose_next_reply`).
    `fail_reads` is how many of the next record reads fail.
    """

    def __init__(self) -> None:
        super().__init__()
        self.commits = 0
        self.plan: list[bool | str] = []
        self.gate: anyio.Event | None = None
        self.entered = anyio.Event()
        self.fail_reads = 0

    @property
    def fail_next_commit(self) -> bool:
        return bool(self.plan and self.plan[0])

    @fail_next_commit.setter
    def fail_next_commit(self, value: bool) -> None:
        self.plan = [value]

    def lose_next_reply(self) -> None:
        self.plan = ["saved"]

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        if self.fail_reads:
            self.fail_reads -= 1
            raise StoreUnavailableError(repr(self), operation="get_record", detail="unplugged")
        return await super()._do_get_record(kind, record_id)

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        fate = self.plan.pop(0) if self.plan else False
        if fate is True:
            raise StoreUnavailableError(repr(self), operation="commit", detail="unplugged")
        if self.gate is not None:
            self.entered.set()
            await self.gate.wait()
        self.commits += 1
        stored = await super()._do_commit(writes, record, expected_version=expected_version)
        if fate == "saved":
            raise StoreUnavailableError(repr(self), operation="commit", detail="reply lost")
        return stored
