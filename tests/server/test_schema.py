"""A property-based run of the OpenAPI schema (schemathesis) against the app in-process.

Every operation of `/openapi.json` is called with requests generated from its schema (valid
and not), as tenant acme: no answer is a 5xx, and every answer has a status, content type,
headers and body the schema describes. Bounded (a few examples per operation, derandomized,
a deadline) so the whole run takes well under a minute.
"""

from __future__ import annotations

from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from agent_threads import MemoryStore
from agent_threads.server import create_app

from .conftest import KEYS, MAX_BODY

APP = create_app(
    MemoryStore(),
    api_keys=[f"{tenant}:{key}" for tenant, key in KEYS.items()],
    max_body_bytes=MAX_BODY,
    events_poll_interval=0.01,
)
SCHEMA = schemathesis.openapi.from_asgi("/openapi.json", APP)
AUTH = {"Authorization": f"Bearer {KEYS['acme']}"}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@SCHEMA.parametrize()
@settings(
    max_examples=25,
    deadline=2000,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_answer_is_described_and_none_is_a_server_error(case: Any) -> None:
    case.call_and_validate(headers=AUTH, checks=CHECKS)
