"""An operator's cancel of one DES task, wherever it waits.

A :class:`~sim.engines.des_task.TaskRun` notes what it waits for in its
``mode`` (the constants below); :func:`cancel_task` takes the task's
callback off that wait and undoes it: a request queued for its tenant's cap
or a sandbox is withdrawn (held slots given back) and the run ends as
cancelled without being driven; a task waiting for a human leaves the parked
count and ends the same way; a task in a step gives back what the step held
(a queued or granted model slot, a counted approval), has its call in flight
aborted and answered as cancelled after the seconds it ran
(:data:`~sim.engines.perform.EFFECTS`), and the harness ends the run.

Units: seconds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sim.engines.perform import EFFECTS
from sim.harness.loop import cancel
from sim.harness.state import request_abort

if TYPE_CHECKING:
    from sim.engines.des_task import TaskRun

# what a task waits for (TaskRun.mode), to undo it when cancelled
CAP, SANDBOX, PARK, QUEUED, MODEL, TIMER, HELD, HUMAN = range(8)
_TIMED = frozenset((MODEL, TIMER, HELD, HUMAN))  # waits on the task's timer


def cancel_task(run: TaskRun) -> None:
    """An operator cancels ``run`` wherever it waits (nothing if it has
    ended): queued for capacity or waiting for a human, it ends as
    cancelled; in a step, the call in flight is aborted and answered as
    cancelled after the seconds it ran, and the harness ends the run."""
    if not run.alive:
        return
    mode, now = run.mode, run.env.now
    if mode in _TIMED:  # only this task's callback is on its timer
        run.tick.callbacks.clear()  # type: ignore[union-attr]
    else:
        run.target.callbacks.remove(run.waiting)  # type: ignore[union-attr, arg-type]
    if mode in (CAP, SANDBOX):
        if mode == SANDBOX:
            run.left_sandbox_queue()
        for resource, request in run.held:
            if request is None or request.triggered:
                resource.release(request, now)
            else:
                resource.cancel(request)
        run.waits[0] += now - run.asked
    elif mode == HUMAN:
        run.unpark(now)
    else:
        _abort(run, mode, now)
        return
    run.state = cancel(run.params, run.state)
    run.end(now)


def _abort(run: TaskRun, mode: int, now: float) -> None:
    """``run`` cancelled in a step at ``now``: undo the wait, answer the
    effect as cancelled."""
    gateway = run.engine.gateway
    if mode == PARK:
        run.unpark(now)
    elif mode == QUEUED:
        gateway.left(run.began, run.waits, now)
        gateway.slots.release(run.slot, now)  # type: ignore[union-attr]
    elif mode == MODEL:
        gateway.done(run.slot, now)
    elif mode == HELD:
        run.counted.record((now, -1))
    run.tick = None  # the old timer may still be due: a new one
    request_abort(run.state)
    # parked at a step boundary, the effect had not begun
    elapsed = 0.0 if mode == PARK else now - run.began
    run.go_on(EFFECTS[run.kind].cancelled(elapsed), now)
