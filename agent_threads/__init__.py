"""agent-threads: conversation state for agents and multi-agent workflows.

Threads of messages that can be appended, forked at any message in O(1), persisted in
pluggable stores and resumed later.

Glossary (each word names one thing, in the code and in the docs):

- message: one frozen `Message` (role, author, content parts, usage), id a UUIDv7.
- segment: an append-only run of rows stored once under its own id; a row sits at one
  position of one segment and never changes.
- range: positions `start <= p < end` of one segment (`core.pieces.Range`).
- piece table: a thread's content as a tuple of ranges whose concatenation is its
  message list (`core.pieces`); fork, checkpoint and rollback copy ranges, never rows.
- head: the number of messages a thread holds now (the length of its piece table).
- record: what a store keeps of a thread (or a workflow checkpoint), versioned for
  compare-and-set; its data is typed by `core.records.ThreadData`.
- log: a segment of rows that are not messages: a thread's checkpoint log, a
  workflow's step log. Nothing else is called a log.
- checkpoint: a recorded point of one thread (its piece table, state and stats then),
  one row of its checkpoint log; `at()` shows it, `rollback()` returns to it.
- cut: the consistent position across every sub-thread of a workflow plus its execution
  state; a workflow checkpoint is a recorded cut.
- snapshot: a read-only thread as it was at a checkpoint or message (`thread.at()`).
- lineage: the chain of threads a thread was forked from, parent first.
- view: the part of a thread that fits a model's context window (`thread.view()`).
- run: one execution of a `Workflow` on a `WorkflowThread`, resumable.
- step: one node of a workflow graph; a step record is one attempt of it in a run.
- superstep: the steps of a run that are ready together and run at once.
"""

import importlib.metadata

from agent_threads.core.records import ThreadStats
from agent_threads.core.tags import tag_labels
from agent_threads.errors import (
    AgentThreadsError,
    CheckpointNotFoundError,
    ConflictError,
    ContextOverflowError,
    DuplicateMessageError,
    InvalidIdError,
    InvalidValueError,
    LeaseLostError,
    MessageNotFoundError,
    NotLoadedError,
    ReadOnlyError,
    RunInProgressError,
    SchemaVersionError,
    StateConflictError,
    StepFailedError,
    StoreCorruptedError,
    StoreUnavailableError,
    SubThreadNotFoundError,
    ThreadNotFoundError,
    UnansweredToolCallError,
    WorkflowFailedError,
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
from agent_threads.stores.base import Record, Row, RowWrite, ThreadStore, VacuumReport
from agent_threads.stores.jsonfile import JsonFileStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.stores.sqlite import SQLiteStore
from agent_threads.stores.urls import open_store
from agent_threads.threads.base import AgentThread
from agent_threads.threads.chat import ChatMessageThread
from agent_threads.threads.listing import ThreadPage, ThreadSummary, count_threads, list_threads
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
from agent_threads.timetravel.checkpoint import Checkpoint
from agent_threads.timetravel.lineage import Ancestor
from agent_threads.timetravel.snapshot import ThreadSnapshot
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
    "InvalidValueError",
    "JsonFileStore",
    "LeaseLostError",
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
    "RowWrite",
    "RunInProgressError",
    "RunStatus",
    "SQLiteStore",
    "SchemaVersionError",
    "StateConflictError",
    "StepFailedError",
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
    "ThreadPage",
    "ThreadSnapshot",
    "ThreadStats",
    "ThreadStore",
    "ThreadSummary",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCallPart",
    "ToolResultPart",
    "UnansweredToolCallError",
    "Usage",
    "VacuumReport",
    "WorkflowCheckpoint",
    "WorkflowFailedError",
    "WorkflowSnapshot",
    "WorkflowThread",
    "count_threads",
    "list_threads",
    "open_store",
    "tag_labels",
    "tool_call",
]
