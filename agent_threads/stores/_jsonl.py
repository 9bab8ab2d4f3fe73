"""Segment files of JsonFileStore: one JSON line per row, kept sorted by position.

A line reads `{"position":7,"message_id":"...","message":{...}}` when the row is one line
of JSON (every message is), else `{"position":7,"message_id":"...","text":"..."}`. The
row text is kept verbatim, so reading returns exactly what was written.

Only complete lines count: a last line without its newline is a write that was cut
short (its rows were never acknowledged, so no thread references them) and is ignored.
Because lines are sorted by position, a range is found by bisecting byte offsets, so
reading the last K rows of a long segment costs O(K + log size), not O(size).

Everything here is blocking file I/O on raw descriptors; JsonFileStore runs it in a
worker thread.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from agent_threads.stores.base import Row

_CHUNK = 1 << 16
_PROBE = 1 << 12
_WINDOW = 1 << 14
"""Below this many bytes, bisection gives way to a linear scan."""


class CorruptLineError(Exception):
    """A complete line that is not a row; `offset` is where the line starts."""

    def __init__(self, offset: int, reason: str) -> None:
        super().__init__(reason)
        self.offset = offset
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Line:
    """A decoded row line: its byte span in the file and what it holds."""

    start: int
    end: int
    position: int
    message_id: str
    data: str


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


def _is_one_line_json(data: str) -> bool:
    if "\n" in data or "\r" in data:
        return False
    try:
        data.encode()
        json.loads(data, parse_constant=_reject_constant)
    except ValueError:  # UnicodeEncodeError is a ValueError too
        return False
    return True


def _prefix(position: int, message_id: str, key: str) -> str:
    return f'{{"position":{position},"message_id":{json.dumps(message_id)},"{key}":'


def encode(position: int, row: Row) -> bytes:
    """The line (with its newline) that stores `row` at `position`."""
    if _is_one_line_json(row.data):
        return f"{_prefix(position, row.message_id, 'message')}{row.data}}}\n".encode()
    return f"{_prefix(position, row.message_id, 'text')}{json.dumps(row.data)}}}\n".encode()


def decode(raw: bytes, start: int) -> Line:
    """Read the line `raw` (without its newline) found at byte offset `start`.

    Raises:
        CorruptLineError: the line is not a row written by `encode`.
    """
    try:
        value = json.loads(raw, parse_constant=_reject_constant)
    except ValueError as exc:  # includes undecodable UTF-8
        raise CorruptLineError(start, f"not a JSON line ({exc})") from None
    if not isinstance(value, dict):
        raise CorruptLineError(start, "not a JSON object")
    position, message_id = value.get("position"), value.get("message_id")
    if type(position) is not int or position < 0 or not isinstance(message_id, str):
        raise CorruptLineError(start, "needs an integer position and a string message_id")
    end = start + len(raw) + 1
    if "text" in value and isinstance(value["text"], str):
        return Line(start, end, position, message_id, value["text"])
    if "message" not in value:
        raise CorruptLineError(start, 'needs a "message" or a "text" key')
    prefix = _prefix(position, message_id, "message").encode()
    if raw.startswith(prefix) and raw.endswith(b"}") and len(value) == 3:
        return Line(start, end, position, message_id, raw[len(prefix) : -1].decode())
    # edited by hand (keys reordered, reformatted): the same JSON, respelled
    data = json.dumps(value["message"], ensure_ascii=False, separators=(",", ":"))
    return Line(start, end, position, message_id, data)


def complete_end(fd: int, size: int) -> int:
    """The offset just past the last newline: where the complete lines end."""
    offset = size
    while offset > 0:
        begin = max(0, offset - _PROBE)
        chunk = os.pread(fd, offset - begin, begin)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        offset = begin
    return 0


def line_number(fd: int, offset: int) -> int:
    """The 1-based number of the line starting at `offset` (counts newlines before it)."""
    count, done = 0, 0
    while done < offset:
        chunk = os.pread(fd, min(_CHUNK, offset - done), done)
        if not chunk:
            break
        count += chunk.count(b"\n")
        done += len(chunk)
    return count + 1


def iter_lines(fd: int, start: int, limit: int, *, chunk_size: int = _CHUNK) -> Iterator[Line]:
    """Decode the complete lines from offset `start` (a line start) up to `limit`."""
    pending, line_start, offset = b"", start, start
    while offset < limit:
        chunk = os.pread(fd, min(chunk_size, limit - offset), offset)
        if not chunk:
            return
        offset += len(chunk)
        pieces = (pending + chunk).split(b"\n")
        pending = pieces.pop()
        for raw in pieces:
            if raw.strip():  # blank lines (a hand edit) hold nothing
                yield decode(raw, line_start)
            line_start += len(raw) + 1


def _line_from(fd: int, offset: int, limit: int) -> Line | None:
    """The first complete line starting at or after `offset` (a line start or not)."""
    if offset > 0:  # skip the rest of the line `offset` falls in
        while True:
            if offset >= limit:
                return None
            chunk = os.pread(fd, min(_PROBE, limit - offset + 1), offset - 1)
            newline = chunk.find(b"\n")
            if newline >= 0:
                offset += newline
                break
            if not chunk:  # the file shrank under us
                return None
            offset += len(chunk)
    if offset >= limit:
        return None
    return next(iter_lines(fd, offset, limit, chunk_size=_PROBE), None)


def seek_position(fd: int, limit: int, position: int) -> int:
    """The offset of the first line holding `position` or more (`limit` if none).

    Bisects byte offsets; correct only on a file sorted by position, which the writer
    keeps (a reader that finds rows missing falls back to a full scan).
    """
    lo, hi, best = 0, limit, limit
    while hi - lo > _WINDOW:
        mid = (lo + hi) // 2
        line = _line_from(fd, mid, limit)
        if line is None or line.start >= hi:
            hi = mid
        elif line.position < position:
            lo = line.end
        else:
            best, hi = line.start, mid
    for line in iter_lines(fd, lo, limit, chunk_size=_WINDOW):
        if line.position >= position or line.start >= hi:  # no line starts in [hi, best)
            return min(line.start, best)
    return best


def read_range(fd: int, limit: int, start: int, end: int) -> list[str]:
    """The rows at positions `start <= p < end` (fewer if some are missing)."""
    found: list[str] = []
    offset = seek_position(fd, limit, start)
    for line in iter_lines(fd, offset, limit):
        if line.position != start + len(found) or line.position >= end:
            break
        found.append(line.data)
    if len(found) == end - start:
        return found
    return scan_range(fd, limit, start, end)


def scan_range(fd: int, limit: int, start: int, end: int) -> list[str]:
    """Like `read_range`, by reading the whole file (for files not sorted by position)."""
    by_position = {
        line.position: line.data
        for line in iter_lines(fd, 0, limit)
        if start <= line.position < end
    }
    return [by_position[p] for p in range(start, end) if p in by_position]


def last_position(fd: int, limit: int) -> int | None:
    """The position of the last row line (blank lines skipped), or None if there is none."""
    while limit > 0:
        start = complete_end(fd, limit - 1)
        line = _line_from(fd, start, limit)
        if line is not None:
            return line.position
        limit = start
    return None


def merge(fd: int, limit: int, start: int, lines: Sequence[bytes]) -> bytes:
    """The whole file content with `lines` (positions `start, ...`) merged in by position.

    Raises:
        KeyError: a position of `lines` is already written (carries the position).
    """
    existing = {line.position: (line.start, line.end) for line in iter_lines(fd, 0, limit)}
    for offset in range(len(lines)):
        if start + offset in existing:
            raise KeyError(start + offset)
    content = os.pread(fd, limit, 0)
    merged = {p: content[a:b] for p, (a, b) in existing.items()}
    merged.update({start + i: line for i, line in enumerate(lines)})
    return b"".join(merged[p] for p in sorted(merged))
