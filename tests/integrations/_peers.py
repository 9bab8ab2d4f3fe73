"""What the peer-suite tests share: fetching a peer's pinned source distribution."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import NoReturn

import pytest


def unavailable(reason: str) -> NoReturn:
    """Skip the test, or fail it where services are required (CI)."""
    if os.environ.get("AGENT_THREADS_REQUIRE_SERVICES") == "1":
        pytest.fail(reason)
    pytest.skip(reason)


def peer_sdist(config: pytest.Config, project: str, version: str, filename: str) -> Path:
    """`project==version`'s source distribution (`filename`), downloaded once from PyPI
    into pytest's cache directory; never into the repository."""
    cache = config.cache
    assert cache is not None, "the cache provider is needed to keep the download"
    directory = cache.mkdir(f"{project}-{version}-sdist")
    if (directory / filename).exists():
        return directory / filename
    command = [
        *(sys.executable, "-m", "pip", "download", f"{project}=={version}"),
        *("--no-deps", "--no-binary", ":all:", "--dest", str(directory), "--quiet"),
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    except subprocess.TimeoutExpired:
        unavailable(f"pip download {project}=={version} took over 10 minutes")
    if done.returncode != 0 or not (directory / filename).exists():
        unavailable(
            f"could not download the {project} {version} source distribution from PyPI"
            f" (pip exited {done.returncode}): {done.stderr.strip()[-600:]}"
        )
    return directory / filename
