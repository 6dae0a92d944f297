"""Human approval of a tool call: a callback, a terminal prompt by default.

An approver is a callable taking the :class:`~sim.harness.effects.ApprovalRequest`
and returning True (approved), False (refused) or an
:class:`~sim.harness.effects.ApprovalDecision` (with a reason). The driver
calls it in a daemon thread and waits at most the request's ``timeout_s``
seconds: no answer by then is ``timed_out``. The time waited is parked time,
which the harness keeps out of the active-time budget.

:func:`terminal_prompt` asks on the terminal (``/dev/tty``): the call, its
effect class and its arguments, then ``approve? [y/N]``. Without a terminal
(CI, a pipe) it refuses at once, with that reason, rather than wait for an
answer that cannot come. :func:`approve_all` and :func:`refuse_all` are the
unattended choices.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from sim.harness.effects import ApprovalDecision, ApprovalRequest

Approver = Callable[[ApprovalRequest], bool | ApprovalDecision]


def terminal_prompt(request: ApprovalRequest) -> ApprovalDecision:
    """Ask a person at the terminal; refuse when there is no terminal."""
    call = request.call
    try:
        tty = open("/dev/tty", "r+", encoding="utf-8")  # noqa: SIM115 (closed below)
    except OSError:
        return ApprovalDecision(False, reason="no terminal to ask for approval")
    with tty:
        tty.write(f"\napproval needed: {call.name} ({request.effect})\n"
                  f"  arguments: {json.dumps(call.input, sort_keys=True)[:2000]}\n"
                  f"approve? [y/N] ")
        tty.flush()
        answer = tty.readline().strip().lower()
    if answer in ("y", "yes"):
        return ApprovalDecision(True)
    return ApprovalDecision(False, reason="refused at the terminal")


def approve_all(request: ApprovalRequest) -> bool:
    """Approve every call (unattended runs that trust their tools)."""
    return True


def refuse_all(request: ApprovalRequest) -> ApprovalDecision:
    """Refuse every call that needs approval."""
    return ApprovalDecision(False, reason="approvals are refused in this run")
