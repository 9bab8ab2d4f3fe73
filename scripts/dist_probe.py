"""Inside the release check's environment: the wheel works beside its neighbours.

`scripts/check_dist.py` runs this with the fresh environment's interpreter in isolated mode
(`python -I`), from a directory outside the repository, so every import below comes from
what pip installed: `agent_threads` from the wheel, `workflows` from llama-index-workflows.

Usage: python -I dist_probe.py VERSION NEIGHBOUR_MODULE...
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import sys
import sysconfig
from importlib import resources
from pathlib import Path
from typing import Any

import anyio

import agent_threads

DISTRIBUTION = "agent-threads-framework"
LLAMA_INDEX = "llama-index-workflows"


def expect(condition: bool, failure: str) -> None:
    """Stop the check with `failure` unless `condition` holds."""
    if not condition:
        raise SystemExit(f"dist check failed: {failure}")


def site_packages() -> Path:
    """The environment's site-packages, where pip put everything."""
    return Path(sysconfig.get_paths()["purelib"]).resolve()


def owners(top_level: str) -> list[str]:
    """The installed distributions that provide the top-level import name `top_level`."""
    return importlib.metadata.packages_distributions().get(top_level, [])


def check_agent_threads(version: str) -> None:
    """The wheel is what imports, at the version built, and all of its modules import."""
    location = Path(agent_threads.__path__[0]).resolve()
    expect(location == site_packages() / "agent_threads", f"agent_threads imported from {location}")
    expect(
        owners("agent_threads") == [DISTRIBUTION], f"agent_threads from {owners('agent_threads')}"
    )
    expect(agent_threads.__version__ == version, f"__version__ {agent_threads.__version__!r}")
    # Every module, stores whose drivers come from the extras included: nothing the
    # wheel ships fails to import where every extra is installed. A `__main__` runs its
    # program when imported: the console script is checked by running it instead.
    modules = [
        info.name
        for info in pkgutil.walk_packages(agent_threads.__path__, prefix="agent_threads.")
        if not info.name.endswith(".__main__")
    ]
    for name in modules:
        importlib.import_module(name)
    # The web inspector's templates and static files are package data, not modules.
    server = resources.files("agent_threads.server")
    for name in ("templates/inspector.html", "static/inspector.js", "static/inspector.css"):
        expect(server.joinpath(name).is_file(), f"the wheel lacks agent_threads/server/{name}")
    print(f"agent_threads {version}: {len(modules) + 1} modules import from {location}")


def check_llama_index_workflows() -> None:
    """`import workflows` is LlamaIndex's package, with its public names, and it runs."""
    workflows = importlib.import_module("workflows")
    location = Path(workflows.__path__[0]).resolve()
    expect(location == site_packages() / "workflows", f"workflows is {location}")
    expect(owners("workflows") == [LLAMA_INDEX], f"workflows comes from {owners('workflows')}")
    for module, names in {
        "workflows": ["Context", "Workflow", "step"],
        "workflows.context": ["Context"],
        "workflows.events": ["StartEvent", "StopEvent"],
    }.items():
        missing = [n for n in names if not hasattr(importlib.import_module(module), n)]
        expect(not missing, f"{module} lacks {missing}")
    answer = anyio.run(_run_llama_index_workflow, workflows)
    expect(answer == "hello", f"a LlamaIndex workflow answered {answer!r}")
    version = importlib.metadata.version(LLAMA_INDEX)
    print(f"workflows is {LLAMA_INDEX} {version} ({location}); an echo workflow ran")


async def _run_llama_index_workflow(workflows: Any) -> Any:
    events = importlib.import_module("workflows.events")

    async def echo(event: Any) -> Any:
        return events.StopEvent(result=event.get("text"))

    # LlamaIndex routes an event by its step's annotations: give them as real classes.
    echo.__annotations__ = {"event": events.StartEvent, "return": events.StopEvent}
    echo_workflow = type("EchoWorkflow", (workflows.Workflow,), {})
    workflows.step(workflow=echo_workflow)(echo)
    return await echo_workflow(timeout=10).run(text="hello")


def main(version: str, neighbours: list[str]) -> None:
    """Check the wheel, LlamaIndex's `workflows`, and that every neighbour imports."""
    check_agent_threads(version)
    check_llama_index_workflows()
    for name in neighbours:
        importlib.import_module(name)
    print(f"beside them, these import too: {', '.join(neighbours)}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
