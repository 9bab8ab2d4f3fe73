"""Stores: where threads live. Optional stores are imported from their own modules."""

from agent_threads.stores.base import Record, Row, ThreadStore, VacuumReport
from agent_threads.stores.memory import MemoryStore

__all__ = ["MemoryStore", "Record", "Row", "ThreadStore", "VacuumReport"]
