"""Build the release and prove it installs into a crowded environment (`make dist`).

1. Build the sdist and the wheel into dist/ (`python -m build`); `twine check` them.
2. The wheel holds one top-level name, `agent_threads`, and nothing else (a top-level
   `workflows` would clash with llama-index-workflows).
3. A fresh virtual environment in build/dist-venv gets the wheel with every extra it
   declares, beside llama-index-workflows, openai-agents and langgraph from the registry;
   `pip check` finds nothing broken.
4. From a directory outside the repository, that environment's interpreter runs
   `scripts/dist_probe.py` (every module of the wheel imports, `import workflows` is
   LlamaIndex's and runs, the neighbours import) and the README quickstart
   (`samples/quickstart.py`).

Run by the project's own interpreter (.venv), which has `build` and `twine` (dev extra).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from email.message import Message
from email.parser import Parser
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DIST = ROOT / "dist"
VENV = ROOT / "build" / "dist-venv"
PACKAGE = "agent_threads"
NEIGHBOURS = {
    "llama-index-workflows": "workflows",
    "openai-agents": "agents",
    "langgraph": "langgraph.graph",
}
"""Registry distributions installed beside the wheel, and a module of each to import."""
TOOLING_EXTRAS = {"dev"}
"""Extras for working on the project, not for users: left out of the install."""


def fail(reason: str) -> SystemExit:
    """The exit that stops `make dist` with `reason`."""
    return SystemExit(f"dist check failed: {reason}")


def run(*args: str | Path, cwd: Path | None = None) -> None:
    """Run a command, echoing it; stop the check if it fails."""
    command = [str(a) for a in args]
    print("$", " ".join(command), flush=True)
    code = subprocess.run(command, check=False, cwd=cwd).returncode
    if code != 0:
        raise fail(f"{' '.join(command[:3])} ... exited with {code}")


def build() -> Path:
    """Build the sdist and wheel into a fresh dist/, check them, and give the wheel's path."""
    shutil.rmtree(DIST, ignore_errors=True)
    run(sys.executable, "-m", "build", "--quiet", "--outdir", DIST, ROOT)
    artifacts = sorted(DIST.iterdir())
    run(sys.executable, "-m", "twine", "check", "--strict", *artifacts)
    wheels = [a for a in artifacts if a.suffix == ".whl"]
    if len(wheels) != 1:
        raise fail(f"expected one wheel in {DIST}, found {[w.name for w in wheels]}")
    return wheels[0]


def top_level_names(wheel: Path) -> set[str]:
    """The names a wheel installs at the top of site-packages, from its file list."""
    names = set()
    with zipfile.ZipFile(wheel) as archive:
        for path in archive.namelist():
            parts = path.split("/")
            if parts[0].endswith(".dist-info"):
                continue
            if parts[0].endswith(".data"):  # only purelib and platlib land in site-packages
                if len(parts) > 2 and parts[1] in {"purelib", "platlib"}:
                    names.add(parts[2])
                continue
            names.add(parts[0])
    return names


def metadata(wheel: Path) -> Message:
    """The wheel's core metadata (the METADATA file of its .dist-info)."""
    with zipfile.ZipFile(wheel) as archive:
        (path,) = [p for p in archive.namelist() if p.endswith(".dist-info/METADATA")]
        return Parser().parsestr(archive.read(path).decode())


def fresh_venv() -> Path:
    """A new virtual environment in build/dist-venv (any old one removed); its python."""
    shutil.rmtree(VENV, ignore_errors=True)
    run(sys.executable, "-m", "venv", VENV)
    return VENV / "bin" / "python"


def main() -> None:
    """Build, check the wheel's contents, install it in a crowd, and run the probe there."""
    started = time.monotonic()
    wheel = build()
    names = top_level_names(wheel)
    print(f"wheel {wheel.name} top-level names: {', '.join(sorted(names))}")
    if names != {PACKAGE}:
        raise fail(f"the wheel must hold only {PACKAGE!r}, it holds {sorted(names)}")
    info = metadata(wheel)
    extras = sorted(set(info.get_all("Provides-Extra", [])) - TOOLING_EXTRAS)
    python = fresh_venv()
    run(python, "-m", "pip", "install", "--quiet", f"{wheel}[{','.join(extras)}]", *NEIGHBOURS)
    run(python, "-m", "pip", "check")
    with tempfile.TemporaryDirectory(prefix="agent-threads-dist-") as outside:
        here = Path(outside).resolve()
        if here.is_relative_to(ROOT):
            raise fail(f"{here} is inside the repository")
        probe = [ROOT / "scripts" / "dist_probe.py", info["Version"], *NEIGHBOURS.values()]
        run(python, "-I", *probe, cwd=here)  # -I: neither the script's folder nor PYTHONPATH
        run(python, "-I", ROOT / "samples" / "quickstart.py", cwd=here)
        run(python.parent / "agent-threads", "--help", cwd=here)  # the console script
    beside = ", ".join(NEIGHBOURS)
    print(f"dist ok: {wheel.name} [{','.join(extras)}] installs and runs beside {beside}")
    print(f"make dist took {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
