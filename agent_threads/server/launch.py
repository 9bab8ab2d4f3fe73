"""Starting the service on uvicorn: what `agent-threads serve` runs."""

from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from typing import Any

import uvicorn

from agent_threads.server.app import CORS_ENV, MAX_BODY_ENV
from agent_threads.server.auth import (
    API_KEYS_ENV,
    api_keys_from_env,
    check_bind_address,
    parse_api_keys,
)
from agent_threads.server.middleware import DEFAULT_MAX_BODY_BYTES
from agent_threads.stores.urls import STORE_URL_ENV, open_store

FACTORY = "agent_threads.server.app:app_from_environment"
"""The app factory every worker process calls (it reads what `serve` put in the environment)."""


def _log_config() -> dict[str, Any]:
    """Uvicorn's logging, plus the service's one line per request (uvicorn's own is off)."""
    config: dict[str, Any] = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["agent_threads.server"] = {
        "handlers": ["default"],
        "level": "INFO",
        "propagate": False,
    }
    return config


def serve(
    store_url: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    api_keys: Sequence[str] = (),
    workers: int = 1,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    cors_origins: Sequence[str] = (),
) -> None:
    """Serve the store on `host:port` until interrupted, with `workers` processes.

    `api_keys` (`TENANT:KEY`) add to those of `AGENT_THREADS_API_KEYS`. Everything is
    checked before a worker starts; the workers build their app from the environment
    (`app_from_environment`), so each opens its own connection to the store.

    Raises:
        InvalidValueError: a key is malformed, the store URL is, or `host` is not a
            loopback address while there are no keys.
    """
    keys = {**api_keys_from_env(os.environ.get(API_KEYS_ENV)), **parse_api_keys(api_keys)}
    check_bind_address(host, has_keys=bool(keys))
    open_store(store_url)  # a bad URL is told here, once
    os.environ[STORE_URL_ENV] = store_url
    os.environ[API_KEYS_ENV] = ",".join(f"{tenant}:{key}" for key, tenant in keys.items())
    os.environ[MAX_BODY_ENV] = str(max_body_bytes)
    os.environ[CORS_ENV] = ",".join(cors_origins)
    uvicorn.run(
        FACTORY,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        access_log=False,
        log_config=_log_config(),
    )


__all__ = ["FACTORY", "serve"]
