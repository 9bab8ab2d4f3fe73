"""Export and import of workflow threads: sub-threads, execution data, step history."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from agent_threads.stores.base import ThreadStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.execution import ExecutionData, StepRecord
from agent_threads.threads.workflow.protocol import WorkflowParts
from agent_threads.threads.workflow.records import check_key


def export_content(workflow: WorkflowParts) -> dict[str, Any]:
    """The workflow part of `to_json`: each sub-thread's document, execution, steps."""
    return {
        "sub_threads": {k: json.loads(h.to_json()) for k, h in workflow.sub_threads.items()},
        "execution": workflow.execution_data.model_dump(mode="json"),
        "steps": [r.model_dump(mode="json") for r in workflow.closed_steps],
    }


async def import_parts(
    document: Mapping[str, Any], store: ThreadStore
) -> tuple[ExecutionData, list[StepRecord], dict[str, ChatMessageThread]]:
    """Validate a workflow export and import its sub-threads into `store`.

    Raises:
        ValueError: the document is malformed, naming the workflow and what is wrong.
        ConflictError: a sub-thread id is taken in `store` (nothing is left imported).
    """
    where = f"workflow export {document.get('id')!r}"
    try:
        execution = ExecutionData.model_validate(document.get("execution") or {})
        records = [StepRecord.model_validate(r) for r in document.get("steps") or []]
        sub_documents = dict(document.get("sub_threads") or {})
    except (ValidationError, TypeError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from exc
    subs = await _import_subs(sub_documents, store, where)
    return execution.model_copy(update={"checkpoint": None}), records, subs


async def _import_subs(
    documents: Mapping[str, Any], store: ThreadStore, where: str
) -> dict[str, ChatMessageThread]:
    subs: dict[str, ChatMessageThread] = {}
    try:
        for key, sub_document in documents.items():
            sub = await AgentThread.from_json(sub_document, store)
            if not isinstance(sub, ChatMessageThread):
                await sub.delete()
                raise ValueError(f"{where}: sub-thread {key!r} is not a chat thread")
            subs[check_key(key)] = sub
    except BaseException:
        for sub in subs.values():
            await sub.delete()
        raise
    return subs
