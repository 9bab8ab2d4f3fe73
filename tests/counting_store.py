"""A store for tests that check what a handle reads from its store."""

from __future__ import annotations

from agent_threads import MemoryStore


class CountingStore(MemoryStore):
    """A MemoryStore that counts the rows it reads."""

    rows_read = 0

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        rows = await super().read_rows(segment_id, start, end)
        self.rows_read += len(rows)
        return rows
