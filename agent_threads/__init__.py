"""agent-threads: conversation state for agents and multi-agent workflows.

Threads of messages that can be appended, forked at any message in O(1), persisted in
pluggable stores and resumed later.
"""

import importlib.metadata

from agent_threads.core.records import ThreadStats
from agent_threads.errors import (
    AgentThreadsError,
    CheckpointNotFoundError,
    ConflictError,
    ContextOverflowError,
    DuplicateMessageError,
    InvalidIdError,
    MessageNotFoundError,
    NotLoadedError,
    ReadOnlyError,
    SchemaVersionError,
    StateConflictError,
    StoreCorruptedError,
    StoreUnavailableError,
    SubThreadNotFoundError,
    ThreadNotFoundError,
    UnansweredToolCallError,
)
from agent_threads.messages import (
    DataPart,
    Message,
    Part,
    Role,
    SummaryPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
    tool_call,
)
from agent_threads.state import ImmutableState, MergePolicy
from agent_threads.stores.base import Record, Row, ThreadStore, VacuumReport
from agent_threads.stores.jsonfile import JsonFileStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.stores.sqlite import SQLiteStore
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.workflow.checkpoints import (
    SubThreadCut,
    WorkflowCheckpoint,
    WorkflowSnapshot,
)
from agent_threads.threads.workflow.execution import (
    ExecutionState,
    RunStatus,
    StepRecord,
    StepStatus,
    StepTask,
)
from agent_threads.threads.workflow.thread import WorkflowThread
from agent_threads.timetravel.checkpoints import Ancestor, Checkpoint, ThreadSnapshot
from agent_threads.views.context import (
    ApproximateTokenCounter,
    ContextView,
    DroppedRange,
    TiktokenCounter,
    TokenCounter,
)

# pyproject.toml holds the version; the installed metadata carries it here.
__version__ = importlib.metadata.version("agent-threads-framework")

__all__ = [
    "AgentThread",
    "AgentThreadsError",
    "Ancestor",
    "ApproximateTokenCounter",
    "ChatMessageThread",
    "Checkpoint",
    "CheckpointNotFoundError",
    "ConflictError",
    "ContextOverflowError",
    "ContextView",
    "DataPart",
    "DroppedRange",
    "DuplicateMessageError",
    "ExecutionState",
    "ImmutableState",
    "InvalidIdError",
    "JsonFileStore",
    "MemoryStore",
    "MergePolicy",
    "Message",
    "MessageNotFoundError",
    "NotLoadedError",
    "Part",
    "ReadOnlyError",
    "Record",
    "Role",
    "Row",
    "RunStatus",
    "SQLiteStore",
    "SchemaVersionError",
    "StateConflictError",
    "StepRecord",
    "StepStatus",
    "StepTask",
    "StoreCorruptedError",
    "StoreUnavailableError",
    "SubThreadCut",
    "SubThreadNotFoundError",
    "SummaryPart",
    "TextPart",
    "ThinkingPart",
    "ThreadNotFoundError",
    "ThreadSnapshot",
    "ThreadStats",
    "ThreadStore",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "UnansweredToolCallError",
    "Usage",
    "VacuumReport",
    "WorkflowCheckpoint",
    "WorkflowSnapshot",
    "WorkflowThread",
    "tool_call",
]
