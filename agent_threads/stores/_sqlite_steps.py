"""A SQLite write as a sequence of statements, run inline or through aiosqlite.

A write that needs several statements in one transaction, each chosen on what the one
before it found (a commit: the segment's id, whether its positions are free, then the
rows and the record), is a generator of `Step`s. It is sent each statement's answer
and returns why it refused to go on (None: it went through). It does no I/O itself, so
the same write runs on the event loop's thread (`run`, on the inline connection) or on
aiosqlite's (`run_async`), and the caller begins and ends the transaction.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Generator, Sequence
from typing import Any, TypeVar

import aiosqlite

RefusalT = TypeVar("RefusalT")


Step = tuple[str, Sequence[Any], bool]
"""One statement: its SQL, its parameters, and whether its answer is its rows (else how
many rows it changed). A plain tuple: a NamedTuple's constructor is a Python call."""


Steps = Generator[Step, Any, RefusalT]
"""A write: sent each step's answer, it returns its outcome (a refusal, or None)."""


def run(cursor: sqlite3.Cursor, steps: Steps[RefusalT]) -> RefusalT:
    """Run the steps through `cursor`, inside a transaction the caller holds.

    One cursor for them all: `Connection.execute` makes a cursor a statement, ~1,100
    instructions each (callgrind), 8% of what the sqlite3 module spends on a commit.
    """
    answer: Any = None
    try:
        while True:
            sql, parameters, rows = steps.send(answer)
            cursor.execute(sql, parameters)
            answer = cursor.fetchall() if rows else cursor.rowcount
    except StopIteration as done:
        outcome: RefusalT = done.value
        return outcome


async def run_async(connection: aiosqlite.Connection, steps: Steps[RefusalT]) -> RefusalT:
    """`run` through aiosqlite's thread (a round trip a statement)."""
    answer: Any = None
    try:
        while True:
            sql, parameters, rows = steps.send(answer)
            if rows:
                answer = list(await connection.execute_fetchall(sql, parameters))
            else:
                async with connection.execute(sql, parameters) as cursor:
                    answer = cursor.rowcount
    except StopIteration as done:
        outcome: RefusalT = done.value
        return outcome


__all__ = ["Step", "Steps", "run", "run_async"]
