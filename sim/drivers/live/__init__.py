"""The live driver: the real harness loop against provider SDKs and real tools.

Start with :mod:`sim.drivers.live.driver` (how each effect is performed), then
:mod:`~sim.drivers.live.anthropic_api` and :mod:`~sim.drivers.live.openai_api`
(requests built from the effect, responses and errors mapped back),
:mod:`~sim.drivers.live.tools` (Python functions and shell commands with
timeouts) and :mod:`~sim.drivers.live.batch` (a tasks file run through a
scenario's harness). Needs the optional extra ``live`` (``anthropic``,
``openai``, ``opentelemetry-sdk``); importing this package does not import the
SDKs.
"""

from sim.drivers.live.approval import approve_all, refuse_all, terminal_prompt
from sim.drivers.live.batch import BatchResult, LiveBatch, make_model, task_params
from sim.drivers.live.calls import Answer, ModelClient
from sim.drivers.live.driver import CommandCheck, LiveDriver
from sim.drivers.live.tasks import LiveTask, TasksFile, load_tasks
from sim.drivers.live.tools import FunctionTool, ShellTool, Tool, Toolbox, ToolContext, ToolFailure
from sim.drivers.live.wire import check_provider

__all__ = ["Answer", "BatchResult", "CommandCheck", "FunctionTool", "LiveBatch", "LiveDriver",
           "LiveTask", "ModelClient", "ShellTool", "TasksFile", "Tool",
           "ToolContext", "ToolFailure", "Toolbox", "approve_all", "check_provider",
           "load_tasks", "make_model", "refuse_all", "task_params", "terminal_prompt"]
