"""PostgresStore: threads shared by many processes and machines, durable in PostgreSQL.

On asyncpg (extra `postgres`). Every store operation is one transaction, most of them
one statement in one round trip (`commit`, an append's rows and its record, included),
every value is a query parameter, and the only identifier ever written into SQL text
is the schema name, checked against a strict pattern first.

The tables live in their own schema (default `agent_threads`), created on first use.
The schema evolves by `MIGRATIONS`: migration `i` takes it from version `i` to
`i + 1`, and table `schema_version` holds one row per version applied. A schema
written by a newer release is refused with `SchemaVersionError`, never guessed at.

    records        (kind, id) primary key, version, owner, tags text[], data json
    segments       segment_id primary key, written_at (Unix time of the last write)
    segment_rows   (segment_id, position) primary key, message_id, data text;
                   a statement writing rows writes their segment too, and deleting
                   a segment deletes its rows (see `_do_delete_segments`)
    blobs          digest primary key, data bytea, written_at

Timestamps are the writing client's clock, as `vacuum()` compares them with the
vacuuming client's clock. Rows and blobs written alone commit without waiting for the
disk (see `_UNFLUSHED`); records, which make them reachable, wait for it (and so does a
`commit`, rows and record in one transaction). Record data is `json`, not `jsonb`: the
server checks the text and keeps it as written (no parsing into `jsonb` on every write
and printing back on every read), and it stays queryable (`data->>'title'`).
PostgreSQL cannot hold the NUL character in text, so rows containing one are refused
with a ValueError (record data holds it escaped, as JSON does).

A connection the server ended while it sat idle in the pool (a restart, an operator's
`pg_terminate_backend`) is replaced if word of its end reached the client before the
next statement was sent: the statement runs on another connection, as nothing of it
took effect. Otherwise, as for a connection lost during a statement, the call raises
`StoreUnavailableError` and the statement is not run again (it may have committed); the
next call gets another connection.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from typing import Any, TypeVar

import anyio
from pydantic import JsonValue, ValidationError
from pydantic_core import to_json

try:
    import asyncpg
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "PostgresStore needs: pip install 'agent-threads-framework[postgres]'"
    ) from exc

from agent_threads.core.copies import replaced
from agent_threads.errors import (
    ConflictError,
    InvalidIdError,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
)
from agent_threads.stores.base import (
    CONNECTION_ERRORS,
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_CONNECT_TIMEOUT,
    ErrorRule,
    Record,
    Row,
    RowWrite,
    StoreBase,
    check_read,
    check_timeout,
    first_version,
    redact_url,
    version_conflict,
)

MIGRATIONS: tuple[tuple[str, ...], ...] = (
    (  # 0 -> 1: records, segments and their rows, blobs
        """CREATE TABLE records (
            kind text COLLATE "C" NOT NULL,
            id text COLLATE "C" NOT NULL,
            version bigint NOT NULL CHECK (version > 0),
            owner text COLLATE "C",
            tags text[] NOT NULL DEFAULT '{}',
            data jsonb NOT NULL,
            PRIMARY KEY (kind, id))""",
        "CREATE INDEX records_by_owner ON records (owner) WHERE owner IS NOT NULL",
        "CREATE INDEX records_by_tags ON records USING gin (tags)",
        """CREATE TABLE segments (
            segment_id text COLLATE "C" PRIMARY KEY,
            written_at double precision NOT NULL)""",
        """CREATE TABLE segment_rows (
            segment_id text COLLATE "C" NOT NULL REFERENCES segments ON DELETE CASCADE,
            position bigint NOT NULL CHECK (position >= 0),
            message_id text COLLATE "C" NOT NULL,
            data text NOT NULL,
            PRIMARY KEY (segment_id, position))""",
        "CREATE INDEX segment_rows_by_message ON segment_rows (message_id)",
        """CREATE TABLE blobs (
            digest text COLLATE "C" PRIMARY KEY,
            data bytea NOT NULL,
            written_at double precision NOT NULL)""",
    ),
    (  # 1 -> 2: record data as the JSON text written (jsonb parsing: 7-9% of a commit statement)
        "ALTER TABLE records ALTER COLUMN data TYPE json USING data::json",
    ),
    (  # 2 -> 3: no foreign key from rows to segments (its check: 10-14% of a commit statement)
        "ALTER TABLE segment_rows DROP CONSTRAINT segment_rows_segment_id_fkey",
    ),
)
"""The schema's history: migration `i` upgrades version `i` to `i + 1`. Only append."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this code writes and reads."""

_DRIVER_ERRORS = (
    # class 08 (connection exceptions), 57 (the server shutting down, terminating the
    # backend, cancelling the statement), and the client's own closed connection
    ErrorRule(
        (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError),
        StoreUnavailableError,
    ),
    ErrorRule(asyncpg.InterfaceError, StoreUnavailableError, "connection is closed"),
    # a statement refused on a connection the server had ended, its farewell read and its
    # close not yet (see `_Pool.acquire`), where no other connection is tried: one just opened
    ErrorRule(asyncpg.InternalClientError, StoreUnavailableError, "another operation (2)"),
    ErrorRule(  # too many clients already; a lock not granted within lock_timeout
        (asyncpg.TooManyConnectionsError, asyncpg.LockNotAvailableError), StoreUnavailableError
    ),
    # lost races: a key written first by another client, a transaction chosen to fail
    ErrorRule(
        (asyncpg.UniqueViolationError, asyncpg.SerializationError, asyncpg.DeadlockDetectedError),
        ConflictError,
    ),
    ErrorRule((asyncpg.DataCorruptedError, asyncpg.IndexCorruptedError), StoreCorruptedError),
    *CONNECTION_ERRORS,
)
"""What asyncpg's errors mean here (see `StoreBase`)."""

_T = TypeVar("_T")

# the statements `PostgresStore._run` runs, as functions of a connection
_FETCH: Callable[..., Awaitable[list[asyncpg.Record]]] = asyncpg.Connection.fetch
_FETCHROW: Callable[..., Awaitable[asyncpg.Record | None]] = asyncpg.Connection.fetchrow
_EXECUTE: Callable[..., Awaitable[str]] = asyncpg.Connection.execute

_SCHEMA_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}")

_RECORD_COLUMNS = "kind, id, version, owner, tags, data::text"


_WRITE_RECORD = {
    True: """
    INSERT INTO records (kind, id, version, owner, tags, data)
    VALUES ($1, $2, $3::bigint, $4, $5, $6::json)
    ON CONFLICT (kind, id) DO NOTHING
    RETURNING version""",
    False: """
    UPDATE records SET version = version + 1, owner = $4, tags = $5, data = $6::json
    WHERE kind = $1 AND id = $2 AND version = $3
    RETURNING version""",
}
"""A commit's compare-and-set of its record: a new one (`True`) stored at version $3 (drawn by
`first_version`), or (`False`) one stored at version $3, written over as $3 + 1."""

LISTED_ROWS = 4
"""A commit of at most this many rows sends each value as a parameter of its own; more go
in arrays (encoding and unnesting arrays cost 15% of a one-row commit statement)."""


@functools.cache
def _commit_statement(new: bool, segments: int, rows: int | None) -> str:
    """`commit` in one statement: its record's compare-and-set, and its rows if that wrote.

    $1-$6 the record (`_WRITE_RECORD`); with rows, $7 the time, then, listed (`rows`
    rows): the `segments` segment ids written (each once), then each row's segment,
    position, message id and data; or in arrays (`rows` None): $8 the segment ids, $9-$12
    the rows' segments, positions, message ids and data.
    """
    if rows is None:
        segment_ids = "unnest($8::text[])"
        row_values = "unnest($9::text[], $10::bigint[], $11::text[], $12::text[])"
    else:
        first_row = 8 + segments
        segment_ids = "(VALUES " + ", ".join(f"(${n}::text)" for n in range(8, first_row)) + ")"
        row_values = (
            "(VALUES "
            + ", ".join(
                f"(${n}::text, ${n + 1}::bigint, ${n + 2}::text, ${n + 3}::text)"
                for n in range(first_row, first_row + 4 * rows, 4)
            )
            + ")"
        )
    writes = f""",
touched AS (
    INSERT INTO segments (segment_id, written_at)
    SELECT segment_id, $7::double precision FROM {segment_ids} AS s(segment_id)
    WHERE EXISTS (SELECT FROM written)
    ON CONFLICT (segment_id) DO UPDATE SET written_at = EXCLUDED.written_at),
appended AS (
    INSERT INTO segment_rows (segment_id, position, message_id, data)
    SELECT * FROM {row_values} AS r
    WHERE EXISTS (SELECT FROM written))"""
    return f"""
WITH written AS ({_WRITE_RECORD[new]}){writes if rows != 0 else ""}
SELECT (SELECT version FROM written), (SELECT version FROM records WHERE kind = $1 AND id = $2)
"""


def _commit_values(writes: Sequence[RowWrite]) -> tuple[int, int | None, list[object]]:
    """The parameters after the record's of `_commit_statement(new, segments, rows)`.

    Returns `segments`, `rows` and the values: listed, or in arrays past `LISTED_ROWS`.
    """
    segments = list(dict.fromkeys(write.segment_id for write in writes))
    count = sum(len(write.rows) for write in writes)
    if count == 0:
        return 0, 0, []
    values: list[object] = [time.time()]
    if count <= LISTED_ROWS:
        values += segments
        for segment_id, start, rows in writes:
            for position, row in enumerate(rows, start):
                values += (segment_id, position, row.message_id, row.data)
        return len(segments), count, values
    row_segments: list[str] = []
    positions: list[int] = []
    for segment_id, start, rows in writes:
        row_segments += [segment_id] * len(rows)
        positions += range(start, start + len(rows))
    message_ids = [row.message_id for write in writes for row in write.rows]
    data = [row.data for write in writes for row in write.rows]
    return 0, None, [*values, segments, row_segments, positions, message_ids, data]


_DELETE_RECORD = """
WITH deleted AS (
    DELETE FROM records WHERE kind = $1 AND id = $2 AND ($3::bigint IS NULL OR version = $3)
    RETURNING version)
SELECT (SELECT version FROM deleted), (SELECT version FROM records WHERE kind = $1 AND id = $2)
"""

_UNFLUSHED = "(SELECT set_config('synchronous_commit', 'off', true)) AS unflushed"
"""A FROM item making the statement's own transaction commit without waiting for its
WAL to reach the disk (`SET LOCAL synchronous_commit TO off`, without the round trips
of a transaction block). For rows and blobs only: nothing references them until a
record commits after them, in the same write-ahead log, and flushing that commit
flushes them too. A crash before it loses only data nothing referenced."""

_APPEND_ROWS = f"""
WITH touched AS (
    INSERT INTO segments (segment_id, written_at) SELECT $1, $5 FROM {_UNFLUSHED}
    ON CONFLICT (segment_id) DO UPDATE SET written_at = EXCLUDED.written_at)
INSERT INTO segment_rows (segment_id, position, message_id, data)
SELECT $1, $2::bigint + n - 1, message_id, data
FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS r(message_id, data, n)
"""

_PUT_BLOB = f"""
INSERT INTO blobs (digest, data, written_at) SELECT $1, $2, $3 FROM {_UNFLUSHED}
ON CONFLICT (digest) DO UPDATE SET written_at = EXCLUDED.written_at
"""


_MARK_WRITTEN = """
WITH segments_marked AS (
    UPDATE segments SET written_at = $3 WHERE segment_id = ANY($1::text[])
    RETURNING segment_id),
blobs_marked AS (
    UPDATE blobs SET written_at = $3 WHERE digest = ANY($2::text[])
    RETURNING digest)
SELECT ARRAY(SELECT segment_id FROM segments_marked), ARRAY(SELECT digest FROM blobs_marked)
"""


def _json_text(value: JsonValue) -> str:
    """The JSON text of record data, as every other store writes it (`model_dump_json`).

    Non-finite floats become null; a `json` column keeps numbers as written, so floats
    read back as floats.
    """
    return to_json(value, inf_nan_mode="null").decode()


@contextmanager
def _refusing_nul(what: str) -> Iterator[None]:
    """Report PostgreSQL's refusal of the NUL character as the caller's bad input."""
    try:
        yield
    except (asyncpg.UntranslatableCharacterError, asyncpg.CharacterNotInRepertoireError) as exc:
        raise ValueError(
            f"{what} holds a character PostgreSQL cannot store (NUL, \\u0000): {exc}"
        ) from exc


class _EndedWhileIdle(Exception):
    """The server ended a pooled connection while it sat idle: nothing run on it took effect."""


class _Pool:
    """Connections to reuse, at most `max_size` in use at once.

    Lighter than `asyncpg.Pool` (whose release shields a task and arms an idle timer:
    about 60 us per operation, a fifth of a single append): taking and giving back an
    idle connection does no I/O and never yields to the event loop. After a statement
    that succeeded or that the server refused, the connection is idle again. After an
    interruption mid-statement (a timeout, a cancellation), asyncpg has sent the server
    a cancel request: the pool waits for it (a write waiting for a lock must not land
    later), up to `settle_timeout`, shielded from cancellation, and closes the
    connection if it does not answer then, or if it was lost. Idle connections stay
    open until `close()`.

    A server ends a connection with an error message, then closes it. Once asyncpg has
    read the message but not yet the close (a busy event loop reads them in different
    passes), the connection looks open, yet refuses every statement before sending it
    ("another operation is in progress"). On a connection taken idle, that refusal
    raises `_EndedWhileIdle` (the connection is dropped) for the caller to run its
    work again on another connection.
    """

    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        max_size: int,
        settle_timeout: float,
    ) -> None:
        self._connect = connect
        self._settle_timeout = settle_timeout
        self._slots = anyio.Semaphore(max_size, fast_acquire=True)
        self._idle: list[asyncpg.Connection] = []
        self._closed = False

    async def fill(self, count: int) -> None:
        """Open connections until `count` are idle."""
        while len(self._idle) < count:
            self._idle.append(await self._connect())

    @asynccontextmanager
    async def acquire(self) -> AsyncIterator[asyncpg.Connection]:
        async with self._slots:
            connection = None
            while self._idle and connection is None:
                connection = self._idle.pop()
                if connection.is_closed():  # its server went away while it was idle
                    connection = None
            was_idle = connection is not None
            if connection is None:
                connection = await self._connect()
            try:
                yield connection
            except BaseException as exc:
                if was_idle and _ended_before_sending(exc):
                    connection.terminate()
                    raise _EndedWhileIdle from exc
                if _statement_over(exc):
                    self._give_back(connection)
                else:
                    await self._settle(connection)
                raise
            self._give_back(connection)

    def _give_back(self, connection: asyncpg.Connection) -> None:
        if self._closed or connection.is_closed() or connection.is_in_transaction():
            connection.terminate()
        else:
            self._idle.append(connection)

    async def _settle(self, connection: asyncpg.Connection) -> None:
        """Give back a connection interrupted mid-statement once it answers again."""
        with (
            anyio.CancelScope(shield=True),
            anyio.move_on_after(self._settle_timeout),
            suppress(Exception),  # lost meanwhile: closed below
        ):
            if not connection.is_closed():
                # asyncpg runs it once the interrupted statement's cancel request is done
                await connection.execute("SELECT 1")
                self._give_back(connection)
                return
        connection.terminate()

    async def close(self) -> None:
        """Close the idle connections; those in use close when given back."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            try:
                await connection.close(timeout=self._settle_timeout)
            except Exception:  # the server is out of reach already: just drop it
                connection.terminate()

    def terminate(self) -> None:
        """Close every idle connection at once, without a word to the server."""
        self._closed = True
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.terminate()


def _ended_before_sending(exc: BaseException) -> bool:
    """Whether asyncpg refused a statement on a connection its server had ended.

    An error message that comes while the connection sits idle (the server's farewell) leaves
    asyncpg's protocol in state 2 (consuming an error), which refuses every statement
    before it runs; a transaction open on the connection ended with it.
    """
    return isinstance(exc, asyncpg.InternalClientError) and "another operation (2)" in str(exc)


def _statement_over(exc: BaseException) -> bool:
    """Whether the statement that raised `exc` is over, its connection idle again.

    So it is after an error the server reported for it, unless the connection is lost
    with it.
    """
    return isinstance(exc, asyncpg.PostgresError) and not isinstance(
        exc, (asyncpg.PostgresConnectionError, asyncpg.exceptions.OperatorInterventionError)
    )


def _position_taken(exc: asyncpg.UniqueViolationError, writes: Sequence[RowWrite]) -> ConflictError:
    """The ConflictError naming the segment and position a unique violation reports.

    PostgreSQL's detail reads `Key (segment_id, "position")=(s, 7) already exists.`
    (segment ids hold no `,`); without it, the range of the first write is named.
    """
    found = re.search(r"=\((.+), (\d+)\) already exists", getattr(exc, "detail", "") or "")
    if found:
        where, detail = found.group(1), f"position {found.group(2)} is already written"
    else:
        first = writes[0] if writes else RowWrite("?", 0, ())
        end = first.start + len(first.rows) - 1
        where, detail = first.segment_id, f"a position in {first.start}..{end} is already written"
    return ConflictError(f"segment {where!r}", detail=detail)


class PostgresStore(StoreBase):
    """A ThreadStore on PostgreSQL, through a pool of asyncpg connections.

    Args:
        dsn: a libpq connection URI, e.g. `postgresql://user@host:5432/db`.
        schema: the schema holding this store's tables; stores in different schemas
            never see each other's data.
        min_size: connections opened with the store (more open as needed, and stay
            open until the store closes).
        max_size: connections in use at most (operations beyond wait for one).
        connect_timeout: seconds to open a connection (TCP and the server's handshake),
            after which the operation raises `StoreUnavailableError`.
        command_timeout: seconds to wait for the answer to a statement, after which
            the operation raises `StoreUnavailableError` (the statement is cancelled,
            so a write rolls back; a lock waited for counts); None waits forever. The
            error comes once the server has taken the cancel request, or, from a server
            gone silent, after `connect_timeout` more (its connection closed then).

    Raises:
        InvalidIdError: `schema` is not a plain identifier (letters, digits, `_`).
        ValueError: a timeout is not a positive number.
    """

    driver_errors = _DRIVER_ERRORS

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = "agent_threads",
        min_size: int = 1,
        max_size: int = 10,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        command_timeout: float | None = DEFAULT_COMMAND_TIMEOUT,
    ) -> None:
        if not isinstance(schema, str) or not _SCHEMA_NAME.fullmatch(schema):
            raise InvalidIdError(
                schema,
                what="PostgreSQL schema",
                reason="must be 1-63 letters, digits or _, not starting with a digit",
            )
        self._dsn = dsn
        self._schema = schema
        self._min_size = min_size
        self._max_size = max_size
        self._connect_timeout = check_timeout(connect_timeout, what="connect_timeout", none=False)
        self._command_timeout = check_timeout(command_timeout, what="command_timeout")
        self._pool: _Pool | None = None
        self._open_lock = anyio.Lock()

    @property
    def schema(self) -> str:
        """The schema holding this store's tables."""
        return self._schema

    def __repr__(self) -> str:
        return f"PostgresStore({redact_url(self._dsn)!r}, schema={self._schema!r})"

    async def _do_open(self) -> None:
        await self._connection_pool()

    async def _do_close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()

    # -- connections and schema -------------------------------------------------------

    async def _connection_pool(self) -> _Pool:
        if self._pool is not None:  # the usual case: no lock to take
            return self._pool
        async with self._open_lock:
            if self._pool is None:
                pool = _Pool(self._connect, self._max_size, self._connect_timeout)
                try:
                    async with pool.acquire() as connection:
                        await self._migrate(connection)
                    await pool.fill(self._min_size)
                except BaseException:
                    pool.terminate()  # no await: this may be a cancellation
                    raise
                self._pool = pool
            return self._pool

    async def _connect(self) -> asyncpg.Connection:
        connection: asyncpg.Connection = await asyncpg.connect(
            self._dsn,
            timeout=self._connect_timeout,
            command_timeout=self._command_timeout,
            server_settings={"search_path": f'"{self._schema}"'},
        )
        return connection

    async def _run(self, work: Callable[..., Awaitable[_T]], *args: object) -> _T:
        """`work(connection, *args)` on a connection of the pool.

        `work` is one statement (`_FETCH`, `_FETCHROW`, `_EXECUTE`) or one transaction
        (`_transaction`'s). It runs again on another connection if the server had ended
        the one it was given while that sat idle (`_EndedWhileIdle`): nothing of `work`
        took effect, which holds only for one statement or one transaction. Each pass
        takes one more idle connection, or opens a new one, so the passes are few.
        """
        pool = self._pool or await self._connection_pool()
        while True:
            try:
                async with pool.acquire() as connection:
                    return await work(connection, *args)
            except _EndedWhileIdle:
                continue

    async def _transaction(self, work: Callable[[asyncpg.Connection], Awaitable[_T]]) -> _T:
        """`work`, any number of statements, in one transaction (see `_run`)."""

        async def transact(connection: asyncpg.Connection) -> _T:
            async with connection.transaction():
                return await work(connection)

        return await self._run(transact)

    async def _fetch_pair(self, query: str, *args: object) -> tuple[Any, Any]:
        """The two columns of the one row `query` returns (the CAS statements always return one)."""
        row = await self._run(_FETCHROW, query, *args)
        if row is None:  # pragma: no cover - a SELECT without FROM returns exactly one row
            raise RuntimeError(f"no row from {query!r}")
        return row[0], row[1]

    async def _migrate(self, connection: asyncpg.Connection) -> None:
        """Bring the schema to SCHEMA_VERSION, or refuse a newer one."""
        try:
            found = await connection.fetchval("SELECT max(version) FROM schema_version")
        except asyncpg.UndefinedTableError:
            found = None
        if found == SCHEMA_VERSION:  # the usual case: one query, no lock
            return
        self._check_version(found or 0)
        async with connection.transaction():
            # one migrator at a time; the others wait, then find the work done
            await connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext($1))", f"agent_threads:{self._schema}"
            )
            await connection.execute(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
            await connection.execute(
                """CREATE TABLE IF NOT EXISTS schema_version (
                    version integer PRIMARY KEY,
                    applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            current = await connection.fetchval(
                "SELECT coalesce(max(version), 0) FROM schema_version"
            )
            self._check_version(current)
            for version in range(current, SCHEMA_VERSION):
                for statement in MIGRATIONS[version]:
                    await connection.execute(statement)
                await connection.execute(
                    "INSERT INTO schema_version (version) VALUES ($1)", version + 1
                )

    def _check_version(self, found: int) -> None:
        if found > SCHEMA_VERSION:
            raise SchemaVersionError(
                f"PostgreSQL schema {self._schema!r}", found=found, supported=SCHEMA_VERSION
            )

    # -- records ----------------------------------------------------------------------

    def _decode_record(self, row: asyncpg.Record) -> Record:
        kind, record_id, version, owner, tags, data = row
        try:
            return Record(
                kind=kind,
                id=record_id,
                version=version,
                owner=owner,
                tags=tuple(tags),
                data=json.loads(data),
            )
        except (ValidationError, ValueError) as exc:
            where = f"PostgreSQL record {kind}/{record_id} in schema {self._schema!r}"
            raise StoreCorruptedError(where, detail=f"undecodable record: {exc}") from exc

    async def _do_get_record(self, kind: str, record_id: str) -> Record | None:
        row = await self._run(
            _FETCHROW,
            f"SELECT {_RECORD_COLUMNS} FROM records WHERE kind = $1 AND id = $2",
            kind,
            record_id,
        )
        return None if row is None else self._decode_record(row)

    async def _do_put_record(self, record: Record, *, expected_version: int) -> Record:
        return await self._do_commit((), record, expected_version=expected_version)

    async def _do_commit(
        self, writes: Sequence[RowWrite], record: Record, *, expected_version: int
    ) -> Record:
        """The rows of every write and the record in one statement: one round trip.

        The rows are inserted only if the record's compare-and-set wrote it, and a row
        at a position already written fails the whole statement (its own transaction).
        """
        new = expected_version == 0
        segments, rows, values = _commit_values(writes)
        statement = _commit_statement(new, segments, rows)
        try:
            with _refusing_nul(f"{record.kind} {record.id!r} or its rows"):
                written, stored = await self._fetch_pair(
                    statement,
                    record.kind,
                    record.id,
                    first_version() if new else expected_version,
                    record.owner,
                    list(record.tags),
                    _json_text(record.data),
                    *values,
                )
        except asyncpg.UniqueViolationError as exc:  # the statement wrote nothing
            raise _position_taken(exc, writes) from exc
        if written is None:
            if stored == expected_version:  # the statement waited for the winner's write
                raise ConflictError(
                    f"{record.kind} {record.id!r}",
                    detail=f"expected version {stored}, written meanwhile by another client",
                )
            raise version_conflict(record.kind, record.id, expected_version, stored or 0)
        return replaced(record, {"version": written})

    async def _do_delete_record(
        self, kind: str, record_id: str, *, expected_version: int | None
    ) -> bool:
        deleted, stored = await self._fetch_pair(_DELETE_RECORD, kind, record_id, expected_version)
        if deleted is None and stored is not None:
            raise version_conflict(kind, record_id, expected_version, stored)
        return deleted is not None

    async def _do_list_records(
        self, kind: str | None, *, tags: set[str], owner: str | None
    ) -> list[Record]:
        conditions = ["tags @> $1::text[]"]
        args: list[object] = [sorted(tags)]
        if kind is not None:
            args.append(kind)
            conditions.append(f"kind = ${len(args)}")
        if owner is not None:
            args.append(owner)
            conditions.append(f"owner = ${len(args)}")
        query = (  # only fixed fragments and $n placeholders: values go as parameters
            f"SELECT {_RECORD_COLUMNS} FROM records WHERE {' AND '.join(conditions)}"
            " ORDER BY kind, id"
        )
        return [self._decode_record(row) for row in await self._run(_FETCH, query, *args)]

    # -- segments ---------------------------------------------------------------------

    async def _do_append_rows(self, segment_id: str, start: int, rows: Sequence[Row]) -> None:
        message_ids = [row.message_id for row in rows]
        data = [row.data for row in rows]
        try:
            with _refusing_nul(f"a row of segment {segment_id!r}"):
                await self._run(
                    _EXECUTE, _APPEND_ROWS, segment_id, start, message_ids, data, time.time()
                )
        except asyncpg.UniqueViolationError as exc:  # the statement wrote nothing
            raise _position_taken(exc, [RowWrite(segment_id, start, rows)]) from exc

    async def _do_read_rows(self, segment_id: str, start: int, end: int) -> list[str]:
        rows = await self._run(
            _FETCH,
            "SELECT data FROM segment_rows"
            " WHERE segment_id = $1 AND position >= $2 AND position < $3 ORDER BY position",
            segment_id,
            start,
            end,
        )
        return check_read(segment_id, start, end, [row[0] for row in rows])

    async def _do_locate_message(self, message_id: str) -> list[tuple[str, int]]:
        rows = await self._run(
            _FETCH,
            "SELECT segment_id, position FROM segment_rows WHERE message_id = $1"
            " ORDER BY segment_id, position",
            message_id,
        )
        return [(segment_id, position) for segment_id, position in rows]

    async def _do_locate_messages(self, message_ids: list[str]) -> dict[str, list[tuple[str, int]]]:
        rows = await self._run(
            _FETCH,
            "SELECT message_id, segment_id, position FROM segment_rows"
            " WHERE message_id = ANY($1::text[]) ORDER BY segment_id, position",
            message_ids,
        )
        places: dict[str, list[tuple[str, int]]] = {m: [] for m in message_ids}
        for message_id, segment_id, position in rows:
            places[message_id].append((segment_id, position))
        return places

    async def _do_list_segments(self) -> dict[str, float]:
        rows = await self._run(_FETCH, "SELECT segment_id, written_at FROM segments")
        return {row[0]: row[1] for row in rows}

    async def _do_delete_segments(
        self, segment_ids: list[str], *, not_written_since: float | None
    ) -> int:

        async def delete(connection: asyncpg.Connection) -> int:
            # a row a concurrent write or mark updated is checked again after it (read
            # committed); such a write holds its segment's row until it commits
            deleted = await connection.fetch(
                "DELETE FROM segments WHERE segment_id = ANY($1::text[])"
                " AND ($2::double precision IS NULL OR written_at <= $2) RETURNING segment_id",
                segment_ids,
                not_written_since,
            )
            # a statement of its own, as a cascade would be: it sees the rows of a write
            # the deletion waited for
            await connection.execute(
                "DELETE FROM segment_rows WHERE segment_id = ANY($1::text[])",
                [row[0] for row in deleted],
            )
            return len(deleted)

        return await self._transaction(delete)

    async def _do_mark_written(
        self, segment_ids: list[str], digests: list[str], now: float
    ) -> tuple[set[str], set[str]]:
        segments, blobs = await self._fetch_pair(_MARK_WRITTEN, segment_ids, digests, now)
        return set(segment_ids) - set(segments), set(digests) - set(blobs)

    # -- blobs ------------------------------------------------------------------------

    async def _do_put_blob(self, digest: str, data: bytes) -> None:
        await self._run(_EXECUTE, _PUT_BLOB, digest, bytes(data), time.time())

    async def _do_get_blob(self, digest: str) -> bytes | None:
        row = await self._run(_FETCHROW, "SELECT data FROM blobs WHERE digest = $1", digest)
        data: bytes | None = None if row is None else row[0]
        return data

    async def _do_list_blobs(self) -> dict[str, float]:
        rows = await self._run(_FETCH, "SELECT digest, written_at FROM blobs")
        return {row[0]: row[1] for row in rows}

    async def _do_delete_blobs(self, digests: list[str], *, not_written_since: float | None) -> int:
        deleted = await self._run(
            _FETCH,
            "DELETE FROM blobs WHERE digest = ANY($1::text[])"
            " AND ($2::double precision IS NULL OR written_at <= $2) RETURNING 1",
            digests,
            not_written_since,
        )
        return len(deleted)


__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "PostgresStore"]
