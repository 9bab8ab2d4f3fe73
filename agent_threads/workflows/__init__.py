"""workflows: run many agents concurrently, each on its own sub-thread, resumably.

Define steps as async functions of a `StepContext`, connect them in a `Workflow`
(sequential, fan-out, fan-in, conditional edges), and `await workflow.run(input,
store=...)`. Every step's completion is stored the moment it ends and every superstep
ends with a workflow checkpoint, so a crashed, cancelled, failed or paused run
continues with `await workflow.resume(thread, store=...)`, running only what is left.
A run in progress holds a lease in its thread's record (`WorkflowThread.lease`), so a
second runner is refused (`RunInProgressError`) instead of running a step twice.
"""

from agent_threads.workflows.context import StepContext, StepInterrupt, StepResult
from agent_threads.workflows.graph import END, Router, Step, StepFunction, Workflow, as_step, step
from agent_threads.workflows.runner import CRASHED, StepObserver

__all__ = [
    "CRASHED",
    "END",
    "Router",
    "Step",
    "StepContext",
    "StepFunction",
    "StepInterrupt",
    "StepObserver",
    "StepResult",
    "Workflow",
    "as_step",
    "step",
]
