"""Stores: where threads live. Optional stores are imported from their own modules."""

from agent_threads.stores.base import Record, Row, RowWrite, ThreadStore, VacuumReport
from agent_threads.stores.jsonfile import JsonFileStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.stores.sqlite import SQLiteStore

__all__ = [
    "JsonFileStore",
    "MemoryStore",
    "Record",
    "Row",
    "RowWrite",
    "SQLiteStore",
    "ThreadStore",
    "VacuumReport",
]
