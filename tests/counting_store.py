"""A store for tests that check what a handle reads from its store."""

from __future__ import annotations

from collections.abc import Sequence

from agent_threads import MemoryStore, Record


class CountingStore(MemoryStore):
    """A MemoryStore that counts the rows and records it reads and the message ids it looks up."""

    rows_read = 0
    records_read = 0
    looked_up = 0

    async def get_record(self, kind: str, record_id: str) -> Record | None:
        self.records_read += 1
        return await super().get_record(kind, record_id)

    async def read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        rows = await super().read_rows(segment_id, start, end)
        self.rows_read += len(rows)
        return rows

    async def locate_messages(self, message_ids: Sequence[str]) -> dict[str, list[tuple[str, int]]]:
        self.looked_up += len(message_ids)
        return await super().locate_messages(message_ids)
