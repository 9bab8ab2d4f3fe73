"""Segment files of JsonFileStore: one JSON line per row, kept sorted by position.

A line reads `{"position":7,"message_id":"...","message":{...}}` when the row is one line
of JSON (every message is), else `{"position":7,"message_id":"...","text":"..."}`. The
row text is kept verbatim, so reading returns exactly what was written.

Only complete lines count: a last line without its newline is a write that was cut
short (its rows were never acknowledged, so no thread references them) and is ignored.
Because lines are sorted by position, a range is found by bisecting byte offsets, so
reading the last K rows of a long segment costs O(K + log size), not O(size).

Lines may be long (a message of megabytes): every read that has not found the end of a
line yet asks for as many bytes again as it has, so a line of n bytes takes O(log n)
reads and O(n) time, never one fixed-size chunk after another (whose joins cost O(n^2)).

Everything here is blocking file I/O on raw descriptors; JsonFileStore runs it in a
worker thread.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from agent_threads.stores.base import Row

_CHUNK = 1 << 16
_PROBE = 1 << 12
_WINDOW = 1 << 14
"""Below this many bytes, bisection gives way to a linear scan."""

_ENCODED_POSITION = re.compile(rb'\{"position":(0|[1-9][0-9]*),"message_id":')
"""How a line `encode` wrote begins: its position is readable from its first bytes."""


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
        text = raw.decode()  # once: the row's text is a slice of it
        value = json.loads(text, parse_constant=_reject_constant)
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
    prefix = _prefix(position, message_id, "message")
    if text.startswith(prefix) and text.endswith("}") and len(value) == 3:
        return Line(start, end, position, message_id, text[len(prefix) : -1])
    # edited by hand (keys reordered, reformatted): the same JSON, respelled
    data = json.dumps(value["message"], ensure_ascii=False, separators=(",", ":"))
    return Line(start, end, position, message_id, data)


def complete_end(fd: int, size: int) -> int:
    """The offset just past the last newline before `size`: where the complete lines end."""
    return _after_last_newline(fd, size, 0)


def _after_last_newline(fd: int, end: int, floor: int) -> int:
    """The offset just past the last newline in `[floor, end)`, else `floor`.

    Reads backwards in reads that double (a long line: O(log n) of them).
    """
    offset, probe = end, _PROBE
    while offset > floor:
        begin = max(floor, offset - probe)
        chunk = os.pread(fd, offset - begin, begin)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return begin + newline + 1
        offset, probe = begin, probe * 2
    return floor


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


def _raw_lines(fd: int, start: int, limit: int, chunk_size: int) -> Iterator[tuple[int, bytes]]:
    """`(offset, line without its newline)` of the complete lines from `start` to `limit`.

    A line longer than `chunk_size` is read in reads that each ask for as many bytes
    again as the line has so far, and joined once.
    """
    held: list[bytes] = []  # the part read so far of a line not ended yet
    held_size, line_start, offset = 0, start, start
    while offset < limit:
        chunk = os.pread(fd, min(max(chunk_size, held_size), limit - offset), offset)
        if not chunk:
            return
        offset += len(chunk)
        newline = chunk.find(b"\n")
        if newline < 0:
            held.append(chunk)
            held_size += len(chunk)
            continue
        held.append(chunk[:newline])
        pieces = chunk[newline + 1 :].split(b"\n")
        for raw in [b"".join(held), *pieces[:-1]]:
            yield line_start, raw
            line_start += len(raw) + 1
        held, held_size = [pieces[-1]], len(pieces[-1])


def iter_lines(fd: int, start: int, limit: int, *, chunk_size: int = _CHUNK) -> Iterator[Line]:
    """Decode the complete lines from offset `start` (a line start) up to `limit`."""
    for line_start, raw in _raw_lines(fd, start, limit, chunk_size):
        if raw.strip():  # blank lines (a hand edit) hold nothing
            yield decode(raw, line_start)


def _position_at(fd: int, start: int, limit: int) -> int | None:
    """The position of the line starting at `start`, reading only its first bytes.

    A line not as `encode` writes it (edited by hand) is decoded whole; None if there
    is no complete line there.
    """
    found = _ENCODED_POSITION.match(os.pread(fd, min(_PROBE, limit - start), start))
    if found is not None:
        return int(found.group(1))
    line = next(iter_lines(fd, start, limit, chunk_size=_PROBE), None)
    return None if line is None else line.position


def _line_start_from(fd: int, offset: int, stop: int) -> int | None:
    """The first line start at or after `offset` and before `stop`, else None.

    Reads only up to `stop`, in reads that double (a long line: O(log n) of them).
    """
    if offset == 0:
        return 0 if stop > 0 else None
    offset, probe = offset - 1, _PROBE  # a newline just before `offset` starts a line there
    while offset < stop - 1:
        chunk = os.pread(fd, min(probe, stop - 1 - offset), offset)
        if not chunk:  # the file shrank under us
            return None
        newline = chunk.find(b"\n")
        if newline >= 0:
            return offset + newline + 1
        offset, probe = offset + len(chunk), probe * 2
    return None


def seek_position(fd: int, limit: int, position: int) -> int:
    """The offset of the first line holding `position` or more (`limit` if none).

    Bisects byte offsets; correct only on a file sorted by position, which the writer
    keeps (a reader that finds rows missing falls back to a full scan). Each step reads
    the first bytes of one line (its position) and looks for newlines only between the
    bounds; a step that lands in a line running past the upper bound takes that line's
    start as the new bound. So every step at least halves the bounds and reads at most
    what lies between them: a long line costs its length about twice, not once a step.
    """
    first = _position_at(fd, 0, limit) if limit > 0 else None
    if first is not None and first >= position:  # reading from the start: no search
        return 0
    lo, hi, best = 0, limit, limit
    while hi - lo > _WINDOW:
        mid = (lo + hi) // 2
        start = _line_start_from(fd, mid, hi)
        if start is None:  # no line starts in [mid, best): look at the one holding mid - 1
            start = _after_last_newline(fd, mid - 1, lo)
            found = _position_at(fd, start, limit)
            if found is None or found < position:
                return best
            best = hi = start
            continue
        found = _position_at(fd, start, limit)
        if found is None:  # blank lines to the end
            hi = mid
        elif found < position:
            lo = start  # a line start: the scan below reads from it
        else:
            best, hi = start, mid
    found = _scan_window(fd, lo, hi, limit, position)
    return best if found is None else found  # no line starts in [hi, best)


def _scan_window(fd: int, lo: int, hi: int, limit: int, position: int) -> int | None:
    """The first line start in `[lo, hi)` (`lo` is one) of a line holding `position` or more.

    One read of the window (and a little more: the first bytes of the lines starting
    near its end); only a line running past it is read on, up to `hi` at most.
    """
    window = os.pread(fd, min(hi + _PROBE, limit) - lo, lo)
    start = lo
    while start < hi:
        encoded = _ENCODED_POSITION.match(window, start - lo)
        found = int(encoded.group(1)) if encoded else _position_at(fd, start, limit)
        if found is not None and found >= position:
            return start
        newline = window.find(b"\n", start - lo)
        if newline >= 0:
            start = lo + newline + 1
            continue
        after = _line_start_from(fd, lo + len(window), hi)
        if after is None:
            return None
        start = after
    return None


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
        found = _position_at(fd, start, limit)  # None: a blank line (a hand edit)
        if found is not None:
            return found
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
