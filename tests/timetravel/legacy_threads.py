"""Threads as version 0.1 stored them: no checkpoint log, a record per checkpoint."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from agent_threads import ChatMessageThread, Checkpoint, Record, ThreadStore
from agent_threads.core.ids import new_id
from agent_threads.core.records import THREAD_KIND
from agent_threads.stores.base import LOGS_KEY
from agent_threads.timetravel.checkpoints import CHECKPOINT_KIND, checkpoint_from_record


async def make_legacy(
    store: ThreadStore, thread: ChatMessageThread, points: Sequence[tuple[str, int]]
) -> list[Checkpoint]:
    """Turn `thread` into a version-1 thread with a checkpoint record per (label, count).

    Each checkpoint holds the first `count` messages of the thread's first range.
    """
    record = await store.get_record(THREAD_KIND, thread.id)
    assert record is not None
    data = {k: v for k, v in record.data.items() if k != LOGS_KEY}
    await store.put_record(
        record.model_copy(update={"data": {**data, "schema_version": 1}}),
        expected_version=record.version,
    )
    first = thread.ranges[0]
    made = []
    for label, count in points:
        stored = Record(
            kind=CHECKPOINT_KIND,
            id=new_id(),
            owner=thread.id,
            tags=(label,),
            data={
                "schema_version": 1,
                "label": label,
                "created_at": datetime.now(UTC).isoformat(),
                "last_message_id": thread.messages[count - 1].id,
                "stats": {"message_count": count},
                "ranges": [[first.segment_id, first.start, first.start + count]],
            },
        )
        await store.put_record(stored, expected_version=0)
        made.append(checkpoint_from_record(stored))
    return made
