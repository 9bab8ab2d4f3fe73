"""Errors as one line and an exit code: the one place the commands map library errors.

Every command runs inside `reported(...)`: an error the library raises on purpose
becomes one line on stderr naming the thread, file or store at fault, and an exit code a
script can test; no traceback, unless `--debug` (or `AGENT_THREADS_DEBUG=1`) asks for it.

Exit codes: 1 the operation failed (a conflict, a store that cannot be reached or is
corrupted, a copy that does not verify), 2 the input is wrong (a malformed id, value,
store URL or file; Typer's usage errors too), 3 what was named does not exist (a thread,
message, checkpoint, sub-thread or file).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import typer

from agent_threads.errors import (
    AgentThreadsError,
    CheckpointNotFoundError,
    InvalidIdError,
    InvalidValueError,
    MessageNotFoundError,
    SchemaVersionError,
    StoreCorruptedError,
    StoreUnavailableError,
    SubThreadNotFoundError,
    ThreadNotFoundError,
)
from agent_threads.stores.base import redact_url

FAILED = 1
"""Exit code: the operation failed."""
BAD_INPUT = 2
"""Exit code: an argument, option, store URL or input file is wrong."""
NOT_FOUND = 3
"""Exit code: the thread, message, checkpoint or file named does not exist."""

DEBUG_ENV = "AGENT_THREADS_DEBUG"
"""Set to 1 to let errors through with their traceback (as `--debug` does)."""

_NOT_FOUND = (
    ThreadNotFoundError,
    MessageNotFoundError,
    CheckpointNotFoundError,
    SubThreadNotFoundError,
)
_BAD_INPUT = (InvalidIdError, InvalidValueError, SchemaVersionError)


class CommandError(Exception):
    """A command's own refusal: one line, and the exit code to leave with."""

    def __init__(self, message: str, *, code: int = FAILED) -> None:
        self.code = code
        super().__init__(message)


def exit_code(exc: BaseException) -> int:
    """The exit code an error leaves with (see the module docstring)."""
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, (*_NOT_FOUND, FileNotFoundError)):
        return NOT_FOUND
    if isinstance(exc, (*_BAD_INPUT, ImportError, IsADirectoryError, ValueError)):
        return BAD_INPUT
    return FAILED


def _line(exc: BaseException, store: str | None) -> str:
    """What to print of `exc`: its message, naming the store where that helps."""
    where = "" if store is None else f" (store {redact_url(store)})"
    if isinstance(exc, _NOT_FOUND):
        return f"{exc}{where}"
    if isinstance(exc, StoreUnavailableError | StoreCorruptedError):
        return f"{exc}{where}" if store and redact_url(store) not in str(exc) else str(exc)
    if isinstance(exc, OSError) and exc.filename is not None:
        return f"file {exc.filename!s}: {exc.strerror or exc}"
    if isinstance(exc, AgentThreadsError | CommandError | ImportError | ValueError):
        return str(exc)
    return f"unexpected {type(exc).__name__}: {exc} (run with --debug for the traceback)"


def _single(exc: BaseException) -> BaseException:
    """The one error inside (nested) exception groups of one error, else `exc` itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def debugging(flag: bool) -> bool:
    """Whether errors go through with their traceback: `--debug` or `$AGENT_THREADS_DEBUG`."""
    return flag or os.environ.get(DEBUG_ENV, "") not in ("", "0")


@contextlib.contextmanager
def reported(*, store: str | None = None, debug: bool = False) -> Iterator[None]:
    """Turn any error inside into one line on stderr and an exit code (`typer.Exit`).

    `store` is the URL the command works on, named in lookup errors. With `debug`, the
    error propagates, traceback and all.
    """
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:
        if debugging(debug):
            raise
        error = _single(exc)
        text = "; ".join(p.strip() for p in _line(error, store).splitlines() if p.strip())
        typer.echo(f"agent-threads: {text}", err=True)
        raise typer.Exit(exit_code(error)) from None


@contextlib.contextmanager
def naming(where: str) -> Iterator[None]:
    """Prefix the message of an error inside with `where` (a file, say), keeping its code."""
    try:
        yield
    except (AgentThreadsError, OSError, ValueError) as exc:
        if isinstance(exc, OSError) and exc.filename is not None:
            raise
        raise CommandError(f"{where}: {exc}", code=exit_code(exc)) from exc


__all__ = [
    "BAD_INPUT",
    "DEBUG_ENV",
    "FAILED",
    "NOT_FOUND",
    "CommandError",
    "debugging",
    "exit_code",
    "naming",
    "reported",
]
