"""Durable file operations for JsonFileStore: atomic replace, synced directories."""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

TEMP_SUFFIX = ".tmp"
"""Temporary files are named `.<target name>.<random><TEMP_SUFFIX>` beside their target."""


def write_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of `data` at `offset` (a short write is continued, never left torn)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


def fsync_dir(path: Path) -> None:
    """Make the directory's entries (created, renamed, removed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path) -> None:
    """Create `path` if missing, durably (its parent's entry is synced)."""
    if not path.is_dir():
        path.mkdir(parents=True, exist_ok=True)
        fsync_dir(path.parent)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` by `data` all at once: temporary file, fsync, rename, fsync dir."""
    temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        try:
            write_all(fd, data, 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def read_bytes(path: Path) -> bytes | None:
    """The file's content, or None if there is no such file."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


@contextmanager
def open_fd(path: Path, flags: int = os.O_RDONLY) -> Iterator[int]:
    """A raw file descriptor, closed on exit."""
    fd = os.open(path, flags, 0o644)
    try:
        yield fd
    finally:
        os.close(fd)
