"""API keys and tenants: which store a request works on.

Each API key belongs to one tenant (`--api-key TENANT:KEY`, or `AGENT_THREADS_API_KEYS`
holding such pairs separated by commas). A request names its key as
`Authorization: Bearer KEY` and works on its tenant's `TenantStore`, one per tenant for
the life of the app (so the handles of one tenant's requests share their writer locks).
Without keys, the service has one anonymous tenant working on the whole store, and
`check_bind_address` refuses any address but a loopback one.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Annotated

from fastapi import Depends, Request

from agent_threads.errors import InvalidValueError
from agent_threads.server.errors import UnauthorizedError
from agent_threads.stores.base import ThreadStore
from agent_threads.stores.tenant import TenantStore, validate_tenant

API_KEYS_ENV = "AGENT_THREADS_API_KEYS"
"""The environment variable holding `TENANT:KEY` pairs, separated by commas."""


def parse_api_keys(pairs: Iterable[str]) -> dict[str, str]:
    """The key -> tenant map of `TENANT:KEY` pairs (empty items are skipped).

    Raises:
        InvalidValueError: a pair is malformed, its tenant name is not valid, or a key is
            given to two tenants (the key is never shown).
    """
    keys: dict[str, str] = {}
    for number, pair in enumerate((p.strip() for p in pairs), 1):
        if not pair:
            continue
        tenant, colon, key = pair.partition(":")
        where = f"API key {number}"
        if not colon or not key:
            raise InvalidValueError(where, reason="write TENANT:KEY")
        validate_tenant(tenant)
        if keys.get(key, tenant) != tenant:
            raise InvalidValueError(where, reason="this key is given to two tenants")
        keys[key] = tenant
    return keys


def api_keys_from_env(value: str | None) -> dict[str, str]:
    """`parse_api_keys` of the environment variable's comma-separated pairs."""
    return parse_api_keys((value or "").split(","))


def check_bind_address(host: str, *, has_keys: bool) -> None:
    """Refuse to serve without API keys on an address other machines can reach.

    Raises:
        InvalidValueError: `host` is not a loopback address and there are no keys.
    """
    if has_keys or host == "localhost":
        return
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise InvalidValueError(
            f"host {host!r}",
            reason="without API keys the service listens on a loopback address only"
            " (127.0.0.1, ::1, localhost): give --api-key TENANT:KEY (or set"
            f" {API_KEYS_ENV}) to listen on other addresses",
        )


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


class Tenants:
    """The tenants of an app: each key's tenant and each tenant's store."""

    def __init__(self, store: ThreadStore, keys: Mapping[str, str]) -> None:
        self._by_digest = {_digest(k): t for k, t in keys.items()}
        self._stores: dict[str, ThreadStore] = {
            t: TenantStore(store, t) for t in sorted(set(keys.values()))
        }
        self._anonymous = None if keys else store

    @property
    def names(self) -> tuple[str, ...]:
        """The tenants' names (none: the service is anonymous)."""
        return tuple(self._stores)

    def store_for(self, authorization: str | None) -> ThreadStore:
        """The store of the tenant an `Authorization` header names.

        Raises:
            UnauthorizedError: keys are configured and the header holds none of them.
        """
        if self._anonymous is not None:
            return self._anonymous
        scheme, _, key = (authorization or "").partition(" ")
        tenant = self._by_digest.get(_digest(key.strip())) if scheme.lower() == "bearer" else None
        if tenant is None:
            raise UnauthorizedError("a valid API key is needed: Authorization: Bearer KEY")
        return self._stores[tenant]


async def tenant_store(request: Request) -> ThreadStore:
    """The store of the caller's tenant (a FastAPI dependency).

    Async though it never awaits: FastAPI runs a plain `def` dependency in a worker
    thread, a hop per request (~0.3 ms of an append's ~2 ms through the app).
    """
    tenants: Tenants = request.app.state.tenants
    store = tenants.store_for(request.headers.get("authorization"))
    request.state.tenant = getattr(store, "tenant", None)
    return store


Store = Annotated[ThreadStore, Depends(tenant_store)]
"""A route parameter receiving the caller's tenant store."""

__all__ = [
    "API_KEYS_ENV",
    "Store",
    "Tenants",
    "api_keys_from_env",
    "check_bind_address",
    "parse_api_keys",
    "tenant_store",
]
