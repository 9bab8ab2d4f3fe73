"""JsonFileStore: threads kept as plain files a person can read, copy and back up."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import anyio
import anyio.to_thread
from pydantic import ValidationError

from agent_threads.core.copies import replaced
from agent_threads.core.ids import validate_digest, validate_id
from agent_threads.errors import ConflictError, SchemaVersionError, StoreCorruptedError
from agent_threads.stores import _files, _jsonl
from agent_threads.stores.base import (
    CONNECTION_ERRORS,
    Record,
    Row,
    RowWrite,
    StoreBase,
    VacuumReport,
    digest_of,
    stored_version,
    version_conflict,
)

SCHEMA_VERSION = 1
"""Version of the directory layout this code writes (kept in `agent-threads.json`)."""

_FORMAT = "agent-threads/jsonfile"
_MARKER = "agent-threads.json"
_LOCK = ".lock"
_files.TEMP_SUFFIX = ".tmp"

logger = logging.getLogger(__name__)

T = TypeVar("T")


def _corrupted(path: Path, fd: int, exc: _jsonl.CorruptLineError) -> StoreCorruptedError:
    line = _jsonl.line_number(fd, exc.offset)
    return StoreCorruptedError(f"{path} line {line}", detail=exc.reason)


def _complete_end(path: Path, fd: int, *, action: str) -> tuple[int, int]:
    """Where the complete lines of a segment file end, and its size; reports a torn line."""
    size = os.fstat(fd).st_size
    end = _jsonl.complete_end(fd, size)
    if end < size:
        logger.warning(
            "%s line %d: torn last line (%d bytes, a write cut short) %s",
            path,
            _jsonl.line_number(fd, end),
            size - end,
            action,
        )
    return end, size


def _parse_record(path: Path, raw: bytes, kind: str, record_id: str) -> Record:
    try:
        record = Record.model_validate_json(raw)
    except ValidationError as exc:
        raise StoreCorruptedError(str(path), detail=f"undecodable record: {exc}") from exc
    if (record.kind, record.id) != (kind, record_id):
        raise StoreCorruptedError(
            str(path), detail=f"holds record {record.kind}/{record.id}, not {kind}/{record_id}"
        )
    return record


def _check_marker(path: Path) -> None:
    """Create the format marker of a new store, or check an existing one's version."""
    raw = _files.read_bytes(path)
    if raw is None:
        marker = {"format": _FORMAT, "schema_version": SCHEMA_VERSION}
        _files.write_atomic(path, (json.dumps(marker, indent=2) + "\n").encode())
        return
    try:
        marker = json.loads(raw)
    except ValueError as exc:
        raise StoreCorruptedError(str(path), detail=f"undecodable marker: {exc}") from exc
    if not isinstance(marker, dict) or marker.get("format") != _FORMAT:
        raise StoreCorruptedError(str(path), detail=f"not a {_FORMAT} directory marker")
    found = marker.get("schema_version")
    if type(found) is not int or not 1 <= found <= SCHEMA_VERSION:
        raise SchemaVersionError(str(path), found=found, supported=SCHEMA_VERSION)


def _entries(directory: Path, suffix: str) -> Iterator[tuple[str, os.DirEntry[str]]]:
    """`(stem, entry)` of files named `<valid id><suffix>`; temporaries are skipped."""
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return
    for entry in entries:
        stem = entry.name.removesuffix(suffix)
        if entry.name.endswith(suffix) and not entry.name.startswith("."):
            try:
                yield validate_id(stem), entry
            except ValueError:
                continue


def _stats(entries: Iterator[tuple[str, os.DirEntry[str]]]) -> dict[str, os.stat_result]:
    """The stat of each listed file still there (another process may delete some)."""
    stats = {}
    for name, entry in entries:
        try:
            stats[name] = entry.stat()
        except FileNotFoundError:
            continue
    return stats


class _IndexedFile:
    __slots__ = ("entries", "inode", "scanned")

    def __init__(self, inode: int) -> None:
        self.inode = inode
        self.scanned = 0
        self.entries: list[tuple[str, int]] = []


class _MessageIndex:
    """Where each message id sits, for `locate_message`.

    Built in memory on first use and caught up on every call by reading only the lines
    appended since (segment files only grow; a replaced file has a new inode).
    """

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._mutex = threading.Lock()
        self._files: dict[str, _IndexedFile] = {}
        self._places: dict[str, set[tuple[str, int]]] = {}

    def locate(self, message_id: str) -> list[tuple[str, int]]:
        with self._mutex:
            current = _stats(_entries(self._directory, ".jsonl"))
            self._forget_unlocked([sid for sid in self._files if sid not in current])
            for segment_id, stat in current.items():
                known = self._files.get(segment_id)
                if known is None or known.inode != stat.st_ino or known.scanned > stat.st_size:
                    self._forget_unlocked([segment_id])
                    known = self._files[segment_id] = _IndexedFile(stat.st_ino)
                if stat.st_size > known.scanned:
                    self._scan(segment_id, known)
            return sorted(self._places.get(message_id, ()))

    def forget(self, segment_ids: Collection[str]) -> None:
        with self._mutex:
            self._forget_unlocked(segment_ids)

    def _forget_unlocked(self, segment_ids: Collection[str]) -> None:
        for segment_id in segment_ids:
            known = self._files.pop(segment_id, None)
            for message_id, position in known.entries if known else ():
                places = self._places.get(message_id)
                if places is not None:
                    places.discard((segment_id, position))
                    if not places:
                        del self._places[message_id]

    def _scan(self, segment_id: str, known: _IndexedFile) -> None:
        path = self._directory / f"{segment_id}.jsonl"
        try:
            with _files.open_fd(path) as fd:
                limit = _jsonl.complete_end(fd, os.fstat(fd).st_size)
                try:
                    for line in _jsonl.iter_lines(fd, known.scanned, limit):
                        known.entries.append((line.message_id, line.position))
                        self._places.setdefault(line.message_id, set()).add(
                            (segment_id, line.position)
                        )
                except _jsonl.CorruptLineError as exc:
                    raise _corrupted(path, fd, exc) from None
                known.scanned = max(known.scanned, limit)
        except FileNotFoundError:
            self._forget_unlocked([segment_id])


class JsonFileStore(StoreBase):
    """A store in a directory of plain files; for sessions a person can read and copy.

    Layout (every name is a validated id or a SHA-256 digest)::

        agent-threads.json           format and layout version
        .lock                        serializes writers across processes (flock)
        records/<kind>/<id>.json     one record per file: threads, checkpoints
        segments/<segment id>.jsonl  one message per line, sorted by position
        blobs/<sha256>               content-addressed bytes (thread states)

    Records and blobs are replaced atomically (temporary file, fsync, rename, fsync of
    the directory); segment lines are appended and fsynced before the call returns.
    Writers take the lock file, so several processes may share a directory; readers
    take no lock. A last line cut short by a crash is reported (a warning on the
    `agent_threads.stores.jsonfile` logger) and ignored: no thread references it. File
    I/O runs in worker threads. Linux and macOS (it needs `fcntl.flock`).
    """

    driver_errors = CONNECTION_ERRORS  # a network file system out of reach

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._root = Path(directory)
        self._lock = anyio.Lock()
        self._lock_fd: int | None = None
        self._index = _MessageIndex(self._root / "segments")

    @property
    def directory(self) -> Path:
        """The store's directory."""
        return self._root

    def __repr__(self) -> str:
        return f"JsonFileStore({str(self._root)!r})"

    async def _do_open(self) -> None:
        async with self._lock:
            if self._lock_fd is None:
                self._lock_fd = await anyio.to_thread.run_sync(self._open_sync)

    async def _do_close(self) -> None:
        async with self._lock:
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None

    def _open_sync(self) -> int:
        _files.make_dir(self._root)
        for name in ("records", "segments", "blobs"):
            _files.make_dir(self._root / name)
        fd = os.open(self._root / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            self._with_file_lock(fd, self._check_directory)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _check_directory(self) -> None:
        _check_marker(self._root / _MARKER)
        for _, entry in _entries(self._root / "segments", ".jsonl"):
            with _files.open_fd(Path(entry.path)) as fd:
                _complete_end(Path(entry.path), fd, action="ignored")

    @staticmethod
    def _with_file_lock(fd: int, work: Callable[[], T]) -> T:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            return work()
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def _lock_file(self) -> int:
        if self._lock_fd is None:
            raise RuntimeError(
                f"{self!r} is not open: use `async with JsonFileStore(directory) as store:`"
            )
        return self._lock_fd

    async def _read(self, work: Callable[[], T]) -> T:
        self._lock_file()
        return await anyio.to_thread.run_sync(work)

    async def _write(self, work: Callable[[], T]) -> T:
        """Run `work` in a worker thread holding the lock file (one writer at a time)."""
        async with self._lock:
            fd = self._lock_file()
            return await anyio.to_thread.run_sync(self._with_file_lock, fd, work)

    # -- paths (StoreBase validated every id before it reaches one) ----------------------

    def _record_path(self, kind: str, record_id: str) -> Path:
        return self._root / "records" / kind / f"{record_id}.json"

    def _segment_path(self, segment_id: str) -> Path:
        return self._root / "segments" / f"{segment_id}.jsonl"

    def _blob_path(self, digest: str) -> Path:
        return self._root / "blobs" / digest

    # -- records --------------------------------------------------------------------

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        path = self._record_path(kind, record_id)
        raw = await self._read(lambda: _files.read_bytes(path))
        return None if raw is None else _parse_record(path, raw, kind, record_id)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        return await self._write(lambda: self._put_locked(record, expected_version))

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        """The version checked, each segment's lines appended, the record replaced.

        All under the lock file, in one worker-thread call, so no other writer gets in
        between; a crash part way leaves rows that nothing references, as between calls.
        """
        appends = [
            (
                self._segment_path(w.segment_id),
                w.segment_id,
                w.start,
                [_jsonl.encode(w.start + i, row) for i, row in enumerate(w.rows)],
            )
            for w in writes
        ]

        def commit() -> Record:
            self._check_version(record, expected_version)
            for path, segment_id, start, lines in appends:
                self._append_lines(path, segment_id, start, lines)
            return self._replace_record(record, expected_version)

        return await self._write(commit)

    def _check_version(self, record: Record, expected_version: int) -> None:
        path = self._record_path(record.kind, record.id)
        found = self._stored_version(path, record.kind, record.id)
        if found != expected_version:
            raise version_conflict(record.kind, record.id, expected_version, found)

    def _put_locked(self, record: Record, expected_version: int) -> Record:
        """`put_record`, for a caller holding the lock file."""
        self._check_version(record, expected_version)
        return self._replace_record(record, expected_version)

    def _replace_record(self, record: Record, expected_version: int) -> Record:
        """Write the record at `stored_version(expected_version)` (its version was checked)."""
        path = self._record_path(record.kind, record.id)
        stored = replaced(record, {"version": stored_version(expected_version)})
        _files.make_dir(path.parent)
        _files.write_atomic(path, (stored.model_dump_json(indent=2) + "\n").encode())
        return stored

    @staticmethod
    def _stored_version(path: Path, kind: str, record_id: str) -> int:
        raw = _files.read_bytes(path)
        return 0 if raw is None else _parse_record(path, raw, kind, record_id).version

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
        path = self._record_path(kind, record_id)

        def delete() -> bool:
            found = self._stored_version(path, kind, record_id)
            if found == 0:
                return False
            if expected_version is not None and found != expected_version:
                raise version_conflict(kind, record_id, expected_version, found)
            path.unlink()
            _files.fsync_dir(path.parent)
            return True

        return await self._write(delete)

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        records = await self._read(lambda: self._read_records(kind))
        return [r for r in records if (owner is None or r.owner == owner) and tags <= set(r.tags)]

    def _read_records(self, kind: str | None) -> list[Record]:
        kinds = [kind] if kind is not None else sorted(self._record_kinds())
        found = []
        for record_kind in kinds:
            directory = self._root / "records" / record_kind
            for record_id, entry in sorted(_entries(directory, ".json")):
                raw = _files.read_bytes(Path(entry.path))
                if raw is not None:  # None: deleted since the listing
                    found.append(_parse_record(Path(entry.path), raw, record_kind, record_id))
        return found

    def _record_kinds(self) -> Iterator[str]:
        for entry in os.scandir(self._root / "records"):
            if entry.is_dir() and not entry.name.startswith("."):
                try:
                    yield validate_id(entry.name)
                except ValueError:
                    continue

    # -- segments -------------------------------------------------------------------

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        path = self._segment_path(segment_id)
        lines = [_jsonl.encode(start + i, row) for i, row in enumerate(rows)]
        await self._write(lambda: self._append_lines(path, segment_id, start, lines))

    def _append_lines(self, path: Path, segment_id: str, start: int, lines: list[bytes]) -> None:
        created = not path.exists()
        with _files.open_fd(path, os.O_RDWR | os.O_CREAT) as fd:
            limit, size = _complete_end(path, fd, action="removed before appending")
            try:
                last = _jsonl.last_position(fd, limit)
                if last is None or start > last:  # the usual case: after every written row
                    if size > limit:
                        os.ftruncate(fd, limit)
                    _files.write_all(fd, b"".join(lines), limit)
                    os.fsync(fd)
                else:
                    content = _jsonl.merge(fd, limit, start, lines)
                    _files.write_atomic(path, content)
            except _jsonl.CorruptLineError as exc:
                raise _corrupted(path, fd, exc) from None
            except KeyError as exc:
                raise ConflictError(
                    f"segment {segment_id!r}", detail=f"position {exc.args[0]} is already written"
                ) from None
        now = time.time()
        os.utime(path, (now, now))  # exact: file times are only as fine as the kernel tick
        if created:
            _files.fsync_dir(path.parent)

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        path = self._segment_path(segment_id)
        found = await self._read(lambda: self._read_lines(path, start, end))
        if len(found) != max(0, end - start):
            raise StoreCorruptedError(
                f"segment {segment_id!r} ({path})",
                detail=f"positions {start}..{end - 1} requested, {len(found)} rows found",
            )
        return found

    @staticmethod
    def _read_lines(path: Path, start: int, end: int) -> list[str]:
        if end <= start:
            return []
        try:
            with _files.open_fd(path) as fd:
                limit = _jsonl.complete_end(fd, os.fstat(fd).st_size)
                try:
                    return _jsonl.read_range(fd, limit, start, end)
                except _jsonl.CorruptLineError as exc:
                    raise _corrupted(path, fd, exc) from None
        except FileNotFoundError:
            return []

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        return await self._read(lambda: self._index.locate(message_id))

    async def _do_list_segments(self) -> dict[str, float]:
        return await self._read(lambda: self._times(self._root / "segments", ".jsonl"))

    @staticmethod
    def _times(directory: Path, suffix: str) -> dict[str, float]:
        return {name: stat.st_mtime for name, stat in _stats(_entries(directory, suffix)).items()}

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:
        paths = {self._segment_path(s): s for s in segment_ids}
        deleted = await self._write(lambda: self._unlink_all(list(paths), not_written_since))
        self._index.forget([paths[p] for p in deleted])
        return len(deleted)

    @staticmethod
    def _unlink_all(paths: Sequence[Path], not_written_since: float | None) -> list[Path]:
        """Unlink the files not modified after `not_written_since`; the ones unlinked.

        Under the lock file, as every write and mark is: a file's time cannot change
        between its check and its unlinking.
        """
        deleted = []
        for path in paths:
            try:
                if not_written_since is None or path.stat().st_mtime <= not_written_since:
                    path.unlink()
                    deleted.append(path)
            except FileNotFoundError:
                continue
        for directory in {p.parent for p in deleted}:
            _files.fsync_dir(directory)
        return deleted

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        segments = {self._segment_path(s): s for s in segment_ids}
        blobs = {self._blob_path(d): d for d in digests}
        missing = await self._write(lambda: self._set_times([*segments, *blobs], now))
        gone_segments = {segments[p] for p in missing if p in segments}
        return gone_segments, {blobs[p] for p in missing if p in blobs}

    @staticmethod
    def _set_times(paths: Sequence[Path], now: float) -> list[Path]:
        """Set each file's times to `now` (under the lock file); the files missing."""
        missing = []
        for path in paths:
            try:
                os.utime(path, (now, now))
            except FileNotFoundError:
                missing.append(path)
        return missing

    # -- blobs ----------------------------------------------------------------------

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        path = self._blob_path(digest)

        def put() -> None:
            now = time.time()
            if path.exists():
                os.utime(path, (now, now))  # written again: young again for vacuum
            else:
                _files.write_atomic(path, bytes(data))
                os.utime(path, (now, now))

        await self._write(put)

    async def _do_get_blob(self, digest: str) -> bytes | None:
        path = self._blob_path(digest)
        raw = await self._read(lambda: _files.read_bytes(path))
        if raw is not None and digest_of(raw) != digest:
            raise StoreCorruptedError(str(path), detail="content does not match its digest")
        return raw

    async def _do_list_blobs(self) -> dict[str, float]:
        times = await self._read(lambda: self._times(self._root / "blobs", ""))
        return {name: t for name, t in times.items() if _is_digest(name)}

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        paths = [self._blob_path(d) for d in digests]
        return len(await self._write(lambda: self._unlink_all(paths, not_written_since)))

    # -- garbage ----------------------------------------------------------------------

    async def _do_vacuum(self, *, grace: float) -> VacuumReport:
        """Delete unreferenced segments and blobs, and temporary files a crash left."""
        report = await super()._do_vacuum(grace=grace)
        cutoff = time.time() - grace
        await self._write(lambda: self._remove_temporaries(cutoff))
        return report

    def _remove_temporaries(self, cutoff: float) -> None:
        directories = [self._root / "segments", self._root / "blobs", self._root]
        directories += [self._root / "records" / kind for kind in self._record_kinds()]
        for directory in directories:
            for entry in os.scandir(directory):
                name = entry.name
                is_temporary = name.startswith(".") and name.endswith(_files.TEMP_SUFFIX)
                if is_temporary and entry.stat().st_mtime <= cutoff:
                    Path(entry.path).unlink(missing_ok=True)


def _is_digest(name: str) -> bool:
    try:
        validate_digest(name)
    except ValueError:
        return False
    return True


__all__ = ["SCHEMA_VERSION", "JsonFileStore"]
