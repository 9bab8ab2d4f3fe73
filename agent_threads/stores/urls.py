"""Store URLs: `open_store(url)` makes the store a URL names, one opener per scheme.

    memory://                              MemoryStore()
    sqlite:///relative/threads.db          SQLiteStore("relative/threads.db")
    sqlite:////absolute/threads.db         SQLiteStore("/absolute/threads.db")
    file:///absolute/directory             JsonFileStore("/absolute/directory")
    redis://host:6379/0?prefix=NAME        RedisStore(url, prefix=NAME)  (also rediss://)
    postgresql://user@host:5432/db?schema=NAME
                                           PostgresStore(dsn, schema=NAME)  (also postgres://)
    http://host:8080                       HttpStore(url), the service's store, its API key
                                           from AGENT_THREADS_API_KEY  (also https://)

The query parameters named here are the store's; any other one of a Redis or
PostgreSQL URL goes to the driver as it is. Redis and PostgreSQL stores are imported
only when asked for, so a base install opens the others without their drivers (and a
missing driver names the extra to install). A new kind of store joins by one opener
in `_OPENERS`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple
from urllib.parse import SplitResult, parse_qsl, urlencode, urlsplit, urlunsplit

from agent_threads.errors import InvalidValueError
from agent_threads.stores.base import ThreadStore, redact_url
from agent_threads.stores.jsonfile import JsonFileStore
from agent_threads.stores.memory import MemoryStore
from agent_threads.stores.sqlite import SQLiteStore


class StoreUrl(NamedTuple):
    """A store URL taken apart: the whole of it, its parts, and its query parameters."""

    url: str
    parts: SplitResult
    query: dict[str, str]


Opener = Callable[[StoreUrl], ThreadStore]


def _problem(url: str, reason: str) -> InvalidValueError:
    return InvalidValueError(f"store URL {redact_url(url)!r}", reason=reason)


def _no_query(url: StoreUrl, *, allowed: tuple[str, ...] = ()) -> None:
    unknown = sorted(set(url.query) - set(allowed))
    if unknown:
        known = f" (it takes {', '.join(allowed)})" if allowed else ""
        raise _problem(url.url, f"unknown query parameter {unknown[0]!r}{known}")


def _memory(url: StoreUrl) -> ThreadStore:
    if url.parts.netloc or url.parts.path not in ("", "/"):
        raise _problem(url.url, "a memory store has no host or path: write memory://")
    _no_query(url)
    return MemoryStore()


def _sqlite(url: StoreUrl) -> ThreadStore:
    path = url.parts.path[1:]  # sqlite:///a.db -> a.db, sqlite:////tmp/a.db -> /tmp/a.db
    if url.parts.netloc or not path:
        raise _problem(
            url.url,
            "write sqlite:///relative/path.db or sqlite:////absolute/path.db (no host)",
        )
    _no_query(url)
    return SQLiteStore(path)


def _file(url: StoreUrl) -> ThreadStore:
    if url.parts.netloc not in ("", "localhost") or not url.parts.path.startswith("/"):
        raise _problem(url.url, "write file:///absolute/directory (a local, absolute path)")
    _no_query(url)
    return JsonFileStore(url.parts.path)


def _driver_url(url: StoreUrl, *, without: str) -> str:
    """The URL for the driver: the store's own query parameter taken out."""
    try:
        url.parts.port  # noqa: B018 - parsing it is the check: ValueError if malformed
    except ValueError as exc:
        raise _problem(url.url, f"malformed port: {exc}") from exc
    query = urlencode([(k, v) for k, v in url.query.items() if k != without])
    return urlunsplit(url.parts._replace(query=query))


def _redis(url: StoreUrl) -> ThreadStore:
    options = {"prefix": url.query["prefix"]} if "prefix" in url.query else {}
    module = importlib.import_module("agent_threads.stores.redis")  # needs the extra
    store: ThreadStore = module.RedisStore(_driver_url(url, without="prefix"), **options)
    return store


def _postgres(url: StoreUrl) -> ThreadStore:
    options = {"schema": url.query["schema"]} if "schema" in url.query else {}
    module = importlib.import_module("agent_threads.stores.postgres")  # needs the extra
    store: ThreadStore = module.PostgresStore(_driver_url(url, without="schema"), **options)
    return store


def _http(url: StoreUrl) -> ThreadStore:
    module = importlib.import_module("agent_threads.stores.http")  # needs the extra
    store: ThreadStore = module.store_from_url(url.url)
    return store


_OPENERS: dict[str, Opener] = {
    "memory": _memory,
    "sqlite": _sqlite,
    "file": _file,
    "redis": _redis,
    "rediss": _redis,
    "postgresql": _postgres,
    "postgres": _postgres,
    "http": _http,
    "https": _http,
}

STORE_URL_ENV = "AGENT_THREADS_STORE"
"""The environment variable naming the store of the command line and the service."""

DEFAULT_STORE_URL = "sqlite:///threads.db"
"""The store when `AGENT_THREADS_STORE` is not set: `threads.db` in the working directory."""

STORE_URL_FORMS = (
    "memory://",
    "sqlite:///relative.db",
    "sqlite:////absolute.db",
    "file:///absolute/directory",
    "redis://host:port/db",
    "postgresql://user@host:port/db",
    "http://host:port",
)
"""One example of each form `open_store` takes, for messages and help texts."""


def open_store(url: str) -> ThreadStore:
    """The store a URL names, not opened yet.

    Open it with `async with open_store(url) as store:`; the module docstring lists the
    forms. Constructing it does no I/O: a server that is down shows when it is opened.

    Raises:
        InvalidValueError: the URL is malformed or its scheme unknown, naming the URL
            (without its password) and the forms accepted.
        ImportError: the store's driver is not installed, naming the extra.
    """
    if not isinstance(url, str):
        raise InvalidValueError("store URL", reason=f"must be a string, not {url!r:.60}")
    try:
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    except ValueError as exc:
        raise _problem(url, f"malformed: {exc}") from exc
    opener = _OPENERS.get(parts.scheme.lower())
    if opener is None:
        raise _problem(
            url,
            f"unknown scheme {parts.scheme!r}: the schemes are {', '.join(sorted(_OPENERS))}"
            f" ({', '.join(STORE_URL_FORMS)})",
        )
    return opener(StoreUrl(url, parts, query))


__all__ = [
    "DEFAULT_STORE_URL",
    "STORE_URL_ENV",
    "STORE_URL_FORMS",
    "StoreUrl",
    "open_store",
]
