"""LangGraph's own time-travel tests, run against `ThreadSaver`.

The set-up downloads the source distribution of the installed `langgraph` from PyPI
(`pip download --no-binary :all:`, cached under pytest's cache directory, never in the
repository), extracts `tests/test_time_travel.py` and `tests/test_time_travel_async.py`
(replay, fork, `update_state`, interrupts and subgraphs, sync and async) and runs them in
a pytest process of their own with the fixtures of `peer_shim_langgraph`, which give their
checkpointer fixtures a `ThreadSaver`. Every test must pass. Without network the test
skips, or fails when `AGENT_THREADS_REQUIRE_SERVICES=1`.
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from ._peers import peer_sdist

pytest.importorskip("langgraph")

LANGGRAPH_VERSION = importlib.metadata.version("langgraph")
SYNC_FILE = "tests/test_time_travel.py"
ASYNC_FILE = "tests/test_time_travel_async.py"
SHIM = Path(__file__).with_name("peer_shim_langgraph.py")


@pytest.fixture(scope="module")
def langgraph_sdist(request: pytest.FixtureRequest) -> Path:
    """LangGraph's source distribution, downloaded once into pytest's cache directory."""
    name = f"langgraph-{LANGGRAPH_VERSION}.tar.gz"
    return peer_sdist(request.config, "langgraph", LANGGRAPH_VERSION, name)


@pytest.fixture(scope="module")
def peer_root(langgraph_sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """LangGraph's time-travel tests, extracted (they import only LangGraph itself)."""
    root = tmp_path_factory.mktemp("langgraph-tests")
    (root / "pytest.ini").write_text("[pytest]\n")  # not this repository's settings
    # the shim's fixtures as a conftest: they override the anyio plugin's `anyio_backend`
    fixtures = "anyio_backend, async_checkpointer, sync_checkpointer"
    (root / "conftest.py").write_text(f"from {SHIM.stem} import {fixtures}  # noqa: F401\n")
    with tarfile.open(langgraph_sdist) as archive:
        for name in (SYNC_FILE, ASYNC_FILE):
            member = archive.extractfile(f"langgraph-{LANGGRAPH_VERSION}/{name}")
            assert member is not None, f"{name} is not a file in {langgraph_sdist.name}"
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(member.read())
    return root


def _run(root: Path, store_kind: str, files: list[str], report: Path) -> dict[str, list[str]]:
    command = [
        *(sys.executable, "-m", "pytest", "-c", str(root / "pytest.ini"), "--rootdir", str(root)),
        *("-p", "no:cacheprovider", "-q", f"--junitxml={report}", *files),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SHIM.parent), env.get("PYTHONPATH")]))
    env["AGENT_THREADS_PEER_STORE"] = store_kind
    done = subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    outcome: dict[str, list[str]] = {"passed": [], "failed": [], "skipped": []}
    outcome["output"] = [done.stdout[-4000:] + done.stderr[-2000:]]
    if not report.exists():
        outcome["failed"].append("<no report>")
        return outcome
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            outcome["failed"].append(name)
        elif case.find("skipped") is not None:
            outcome["skipped"].append(name)
        else:
            outcome["passed"].append(name)
    return outcome


def test_langgraph_time_travel_tests_pass_on_a_memory_store(
    peer_root: Path, tmp_path: Path
) -> None:
    run = _run(peer_root, "memory", [SYNC_FILE, ASYNC_FILE], tmp_path / "report.xml")
    print(f"langgraph {LANGGRAPH_VERSION} time travel: {len(run['passed'])} passed")
    assert run["failed"] == [], f"{run['failed']}\n{run['output'][0]}"
    assert len(run["passed"]) == 94, run["output"][0]  # 1.2.22 to 1.2.24: 51 sync + 43 async


def test_langgraph_async_time_travel_tests_pass_on_a_sqlite_store(
    peer_root: Path, tmp_path: Path
) -> None:
    run = _run(peer_root, "sqlite", [ASYNC_FILE], tmp_path / "report.xml")
    print(f"langgraph {LANGGRAPH_VERSION} async time travel on SQLite: {len(run['passed'])}")
    assert run["failed"] == [], f"{run['failed']}\n{run['output'][0]}"
    assert len(run["passed"]) == 43, run["output"][0]  # 1.2.22 to 1.2.24
