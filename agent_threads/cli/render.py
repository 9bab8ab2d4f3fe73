"""Shaping answers for people (Rich) and for scripts (`--json`), shared by the commands."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime

import typer
from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

HASH_WIDTH = 12
"""The characters of a state hash shown in tables (the JSON has it whole)."""


def console() -> Console:
    """A console on stdout (made per command: the test runner swaps stdout)."""
    return Console(highlight=False)


def print_json(value: object) -> None:
    """`value` (models, mappings, lists of them) as indented JSON on stdout."""
    typer.echo(json.dumps(to_jsonable_python(value), ensure_ascii=False, indent=2))


def when(moment: datetime | None) -> str:
    """A time as a person reads it: local, to the second."""
    return "" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")


def tags_text(tags: Mapping[str, str]) -> str:
    """Tags as `key=value` (a key alone for the value ""), comma-separated."""
    return ", ".join(k if not v else f"{k}={v}" for k, v in tags.items())


def short_hash(digest: str | None) -> str:
    """The start of a state hash ("-" for the empty state)."""
    return "-" if digest is None else digest[:HASH_WIDTH]


_WHOLE = frozenset({"id", "thread", "key"})
"""Columns kept at least 8 characters wide."""
_NUMBERS = frozenset({"#", "messages", "superstep", "attempt", "seconds", "waiting"})


def table(*columns: str, title: str | None = None) -> Table:
    """A plain table with these columns: nothing cut short, numbers to the right."""
    made = Table(show_edge=False, pad_edge=False, title=title, title_justify="left")
    for name in columns:
        made.add_column(
            name,
            justify="right" if name in _NUMBERS else "left",
            overflow="fold",  # nothing is cut short: a long word folds onto the next line
            min_width=8 if name in _WHOLE else None,
            no_wrap=name in _WHOLE,  # ids are the last to be narrowed
        )
    return made


def progress_bar(*, quiet: bool) -> Progress:
    """A progress display on stderr (nothing shown if `quiet` or stderr is not a terminal)."""
    return Progress(
        SpinnerColumn(),
        TextColumn("[progress.description]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        transient=True,
        disable=quiet,
    )


__all__ = [
    "HASH_WIDTH",
    "console",
    "print_json",
    "progress_bar",
    "short_hash",
    "table",
    "tags_text",
    "when",
]
