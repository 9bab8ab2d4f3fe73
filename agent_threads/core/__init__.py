"""The pure core: the piece table, typed records, id rules (no I/O)."""
