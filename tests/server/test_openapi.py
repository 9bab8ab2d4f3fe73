"""The OpenAPI description: every route with its models and error answers; /docs."""

from __future__ import annotations

import httpx


async def test_every_route_documents_its_error_answers(anonymous: httpx.AsyncClient) -> None:
    schema = (await anonymous.get("/openapi.json")).json()
    assert schema["info"]["title"] == "agent-threads"
    operations = [
        (path, method, op) for path, item in schema["paths"].items() for method, op in item.items()
    ]
    assert len(operations) >= 20
    for path, method, op in operations:
        codes = set(op["responses"])
        malformed = "400" if path.startswith("/v1/") else "422"  # as OpenAI answers it
        assert {"401", malformed, "503"} <= codes, (path, method)
        assert not path.startswith("/v1/") or "422" not in codes, (path, method)
        if "{" in path:
            assert "404" in codes, (path, method)
        for code in codes - {"200", "201"}:
            ref = op["responses"][code]["content"]["application/json"]["schema"]["$ref"]
            assert ref.endswith("/ErrorBody"), (path, method, code)
    fork = schema["paths"]["/api/threads/{thread_id}/fork"]["post"]
    assert {"201", "404", "409"} <= set(fork["responses"])
    assert "ForkRequest" in str(fork["requestBody"])


async def test_docs_are_served(anonymous: httpx.AsyncClient) -> None:
    docs = await anonymous.get("/docs")
    assert docs.status_code == 200 and "openapi.json" in docs.text
