"""The HTTP service over a store (extra `server`): `create_app(store, api_keys=...)`.

Start it with `agent-threads serve --store URL`, or serve `create_app(...)` with any
ASGI server. The native API lives under `/api`, its OpenAPI description at
`/openapi.json` and `/docs`.
"""

from agent_threads.server.app import app_from_environment, create_app

__all__ = ["app_from_environment", "create_app"]
