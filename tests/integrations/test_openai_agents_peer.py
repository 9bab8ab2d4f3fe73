"""The OpenAI Agents SDK's own session tests, run against `ThreadSession` on each store.

The set-up downloads the source distribution of the installed `openai-agents` from PyPI
(`pip download --no-binary :all:`, cached under pytest's cache directory, never in the
repository), extracts `tests/memory/test_session.py` and `tests/memory/test_session_limit.py`
with the helpers they import, and runs them in a pytest process of their own with the
`peer_shim_openai_agents` plugin, which rebinds their `SQLiteSession` to a `ThreadSession`.
Without network the test skips, or fails when `AGENT_THREADS_REQUIRE_SERVICES=1`.

The tests listed in `NOT_APPLICABLE` open the SDK's own SQLite file or reach into
`SQLiteSession`'s internals; they are deselected, and every other test must pass.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

from ._peers import peer_sdist

SDK_VERSION = importlib.metadata.version("openai-agents")
PEER_FILES = ("tests/memory/test_session.py", "tests/memory/test_session_limit.py")
HELPERS = (
    "pyproject.toml",  # the SDK's pytest settings (asyncio mode, markers)
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/testing_processor.py",
    "tests/test_responses.py",
)
SHIM = Path(__file__).with_name("peer_shim_openai_agents.py")

_SQLITE_INTERNALS = "reaches into SQLiteSession's sqlite3 connections"
NOT_APPLICABLE = {
    "test_sqlite_session_close_closes_worker_thread_connections": _SQLITE_INTERNALS,
    "test_sqlite_session_reaps_connections_from_exited_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_closes_retired_connections_before_the_next_allocation": (
        _SQLITE_INTERNALS + " (patches sqlite3.connect)"
    ),
    "test_sqlite_session_keeps_connections_of_live_worker_threads": _SQLITE_INTERNALS,
    "test_sqlite_session_closed_rejects_empty_add_items": (
        "SQLiteSession.close() closes its own database; a ThreadSession does not own its"
        " store (closed with store.aclose())"
    ),
    "test_sqlite_session_pop_item_skips_corrupt_most_recent": (
        "writes a corrupt row into the SDK's SQLite table (a store refuses undecodable rows)"
    ),
    "test_sqlite_session_pop_item_returns_none_after_dropping_only_corrupt_rows": (
        "writes a corrupt row into the SDK's SQLite table"
    ),
    "test_sqlite_session_get_items_limit_skips_corrupt_newest_rows": (
        "writes a corrupt row into the SDK's SQLite table"
    ),
    "test_sqlite_session_get_items_session_settings_limit_skips_corrupt_rows": (
        "writes a corrupt row into the SDK's SQLite table"
    ),
    "test_sqlite_session_file_lock_is_shared_across_instances": (
        "checks SQLiteSession's per-file lock registry"
    ),
    "test_sqlite_session_failed_add_items_releases_write_lock": (
        "probes the SDK's SQLite file for a held write lock and its agent_sessions table"
    ),
    "test_sqlite_session_failed_clear_session_rolls_back": (
        "drops a table of the SDK's SQLite file to make clear_session fail"
    ),
    "test_sqlite_session_failed_pop_item_releases_write_lock": (
        "drops a table of the SDK's SQLite file to make pop_item fail"
    ),
    "test_sqlite_session_rollback_failure_evicts_connection": (
        _SQLITE_INTERNALS + " (a failing rollback)"
    ),
    "test_sqlite_session_close_retries_quarantined_connection": (
        _SQLITE_INTERNALS + " (a failing close)"
    ),
    "test_sqlite_session_post_commit_cancellation_propagates_after_known_outcome": (
        "pauses SQLiteSession's sqlite3 commit to cancel after it (3 cases: add, pop, clear)"
    ),
}
"""Test functions of test_session.py that do not apply, and why."""


@pytest.fixture(scope="module")
def sdist(request: pytest.FixtureRequest) -> Path:
    """The SDK's source distribution, downloaded once into pytest's cache directory."""
    name = f"openai_agents-{SDK_VERSION}.tar.gz"
    return peer_sdist(request.config, "openai-agents", SDK_VERSION, name)


@pytest.fixture(scope="module")
def peer_root(sdist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK's session tests and the helpers they import, extracted from the sdist."""
    root = tmp_path_factory.mktemp("openai-agents-tests")
    prefix = f"openai_agents-{SDK_VERSION}/"
    with tarfile.open(sdist) as archive:
        for name in (*HELPERS, *PEER_FILES):
            member = archive.extractfile(prefix + name)
            assert member is not None, f"{name} is not a file in {sdist.name}"
            target = root / name
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(member.read())
    return root


@dataclass
class PeerRun:
    """What a run of the SDK's tests reported (from its JUnit XML)."""

    passed: list[str]
    failed: list[str]
    skipped: list[str]
    output: str

    @property
    def deselected(self) -> int:
        found = re.search(r"(\d+) deselected", self.output)
        return int(found[1]) if found else 0

    @property
    def summary(self) -> str:
        cases = len(self.passed) + len(self.failed) + len(self.skipped) + self.deselected
        return (
            f"openai-agents {SDK_VERSION} session tests {len(self.passed)}/{cases},"
            f" {self.deselected} not applicable"
        )


def run_peer_tests(root: Path, store_kind: str, report: Path) -> PeerRun:
    deselect = [
        arg for name in NOT_APPLICABLE for arg in ("--deselect", f"{PEER_FILES[0]}::{name}")
    ]
    command = [
        *(sys.executable, "-m", "pytest", "-c", str(root / "pyproject.toml")),
        *("--rootdir", str(root), "-p", SHIM.stem, "-p", "no:cacheprovider"),
        *("-q", "-o", "faulthandler_timeout=120", f"--junitxml={report}", *deselect),
        *PEER_FILES,
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SHIM.parent), env.get("PYTHONPATH")]))
    env["AGENT_THREADS_PEER_STORE"] = store_kind
    done = subprocess.run(
        command, cwd=root, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    run = PeerRun([], [], [], done.stdout[-4000:] + done.stderr[-2000:])
    if not report.exists():
        return PeerRun([], ["<no report>"], [], run.output)
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        if case.find("failure") is not None or case.find("error") is not None:
            run.failed.append(name)
        elif case.find("skipped") is not None:
            run.skipped.append(name)
        else:
            run.passed.append(name)
    return run


def test_every_test_listed_as_not_applicable_exists(peer_root: Path) -> None:
    source = (peer_root / PEER_FILES[0]).read_text()
    missing = [name for name in NOT_APPLICABLE if f"def {name}(" not in source]
    assert missing == [], f"renamed or gone in openai-agents {SDK_VERSION}: {missing}"


@pytest.mark.parametrize("store_kind", ["memory", "sqlite", "jsonfile"])
def test_the_sdk_session_tests_pass_on_thread_session(
    peer_root: Path, store_kind: str, tmp_path: Path
) -> None:
    run = run_peer_tests(peer_root, store_kind, tmp_path / "report.xml")
    print(f"{store_kind}: {run.summary}")
    assert run.failed == [], f"{run.summary}; failed: {run.failed}\n{run.output}"
    assert run.skipped == [], run.output
    limit_tests = [name for name in run.passed if "test_session_limit" in name]
    assert len(limit_tests) == 15, run.output  # all of test_session_limit.py applies
    assert (len(run.passed), run.deselected) == (53, 18), run.summary  # 0.24: 56 + 15 cases
