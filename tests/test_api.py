"""The public API is explicit: sorted, complete, nothing private."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType

import pytest

import agent_threads
import agent_threads.workflows

PACKAGES = [agent_threads, agent_threads.workflows]


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_root_exports_are_sorted_and_complete(package: ModuleType) -> None:
    public = {
        n
        for n, v in vars(package).items()
        if not n.startswith("_") and not isinstance(v, ModuleType)
    }
    assert package.__all__ == sorted(package.__all__)
    assert set(package.__all__) == public


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_every_exported_class_and_function_is_documented(package: ModuleType) -> None:
    for name in package.__all__:
        value = getattr(package, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__doc__, name


API_0_2 = {
    "AgentThread", "AgentThreadsError", "Ancestor", "ApproximateTokenCounter",
    "ChatMessageThread", "Checkpoint", "CheckpointNotFoundError", "ConflictError",
    "ContextOverflowError", "ContextView", "DataPart", "DroppedRange", "DuplicateMessageError",
    "ExecutionState", "ImmutableState", "InvalidIdError", "JsonFileStore", "MemoryStore",
    "MergePolicy", "Message", "MessageNotFoundError", "NotLoadedError", "Part", "ReadOnlyError",
    "Record", "Role", "Row", "RunStatus", "SQLiteStore", "SchemaVersionError",
    "StateConflictError", "StepRecord", "StepStatus", "StepTask", "StoreCorruptedError",
    "SubThreadCut", "SubThreadNotFoundError", "SummaryPart", "TextPart", "ThinkingPart",
    "ThreadNotFoundError", "ThreadSnapshot", "ThreadStats", "ThreadStore", "TiktokenCounter",
    "TokenCounter", "ToolCallPart", "ToolResultPart", "Usage", "VacuumReport",
    "WorkflowCheckpoint", "WorkflowSnapshot", "WorkflowThread", "tool_call",
}  # fmt: skip
"""The root's public names in 0.2: the move into subpackages kept every one."""


def test_every_public_name_of_0_2_is_still_exported() -> None:
    assert set(agent_threads.__all__) >= API_0_2


def test_the_workflow_engine_keeps_its_public_names_under_agent_threads() -> None:
    assert agent_threads.workflows.__all__ == [
        "CRASHED", "END", "Router", "Step", "StepContext", "StepFunction", "StepInterrupt",
        "StepObserver", "StepResult", "Workflow", "as_step", "step",
    ]  # fmt: skip


def test_the_repository_workflows_folder_is_not_an_import_package() -> None:
    root = Path(__file__).resolve().parents[1]
    assert not (root / "workflows" / "__init__.py").exists()
    assert (root / "agent_threads" / "workflows" / "__init__.py").exists()
