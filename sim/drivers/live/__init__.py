"""The live driver: the real harness loop against provider SDKs and real tools.

Start with :mod:`sim.drivers.live.driver` (how each effect is performed), then
:mod:`~sim.drivers.live.calls` (a provider call, provider-neutral: what goes
out, what comes back, how it fails), :mod:`~sim.drivers.live.anthropic_api`
and :mod:`~sim.drivers.live.openai_api` (each provider's wire),
:mod:`~sim.drivers.live.tools` (Python functions, shell commands and the
built-in tools, with timeouts), :mod:`~sim.drivers.live.batch` (a tasks file,
:mod:`~sim.drivers.live.tasks`, run through a scenario's harness) and
:mod:`~sim.drivers.live.otel` (the runs as OpenTelemetry spans, a pump
observer). Needs the optional extra ``live`` (``anthropic``, ``openai``,
``opentelemetry-sdk``); importing this package does not import the SDKs.
"""

from sim.drivers.live.approval import approve_all, refuse_all, terminal_prompt
from sim.drivers.live.batch import BatchResult, LiveBatch, make_model, task_params
from sim.drivers.live.calls import Answer, ModelClient, check_provider
from sim.drivers.live.driver import CommandCheck, LiveDriver
from sim.drivers.live.tasks import LiveTask, TasksFile, load_tasks
from sim.drivers.live.tools import FunctionTool, ShellTool, Tool, Toolbox, ToolContext, ToolFailure

__all__ = ["Answer", "BatchResult", "CommandCheck", "FunctionTool", "LiveBatch", "LiveDriver",
           "LiveTask", "ModelClient", "ShellTool", "TasksFile", "Tool", "ToolContext",
           "ToolFailure", "Toolbox", "approve_all", "check_provider", "load_tasks", "make_model",
           "refuse_all", "task_params", "terminal_prompt"]
