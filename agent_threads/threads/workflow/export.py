"""Export and import of workflow threads: sub-threads, execution data, step history."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import anyio
from pydantic import ValidationError

from agent_threads.errors import InvalidIdError, InvalidValueError
from agent_threads.stores.base import ThreadStore
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
        raise InvalidValueError(where, reason=str(exc)) from exc
    _check_subs(sub_documents, where)  # all of it before any write: a refusal leaves nothing
    subs = await _import_subs(sub_documents, store)
    return execution.model_copy(update={"checkpoint": None}), records, subs


def _check_subs(documents: Mapping[str, Any], where: str) -> None:
    """Check every sub-thread's key and kind before the first is imported."""
    for key, sub_document in documents.items():
        try:
            check_key(key)
        except InvalidIdError as exc:
            raise InvalidValueError(f"{where} sub-thread {key!r}", reason=str(exc)) from exc
        kind = sub_document.get("kind") if isinstance(sub_document, Mapping) else None
        if kind != ChatMessageThread.type_name:
            reason = f"a sub-thread is a chat thread export, not {kind!r}"
            raise InvalidValueError(f"{where} sub-thread {key!r}", reason=reason)


async def _import_subs(
    documents: Mapping[str, Any], store: ThreadStore
) -> dict[str, ChatMessageThread]:
    """Import the sub-threads; if one is refused, delete those imported before it."""
    subs: dict[str, ChatMessageThread] = {}
    try:
        for key, sub_document in documents.items():
            sub = await ChatMessageThread.from_json(sub_document, store)
            assert isinstance(sub, ChatMessageThread)  # its kind was checked
            subs[key] = sub
    except BaseException:
        with anyio.CancelScope(shield=True):
            for sub in subs.values():
                await sub.delete()
        raise
    return subs
