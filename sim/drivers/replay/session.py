"""Replaying a recorded session with subagents: the parent's calls and each
child's through their own harness loops, all charging one session ledger,
in the recorded order of the calls (:func:`replay_session`).

A recorded run's calls with an ``agent`` (Claude Code's ``subagents/``
transcripts, imported into their parent's run) are its children's: each
child (by agent id, in order of its first call) is replayed as a run of its
own (its calls only, the candidate's parameters made for it by
:func:`~sim.drivers.replay.options.run_params`, its own detector), and so
is the parent (the calls without an agent). Every loop gets the same
ledgers, one per ``harness.shared_budgets`` entry (the harness's rule:
:class:`~sim.harness.budgets.Limits` with ``ledgers``), and the loops are
stepped in the run's recorded call order (``calls.call``, which importers
number by start time across parent and children): a loop's next call, and
the budget checks made before it, wait for that call's turn, so the ledger
holds exactly the calls recorded before it (parent's and children's) when
it decides. Rules:

- a loop that ended (stopped by a budget or the detector, or its recording
  ended) makes none of its later recorded calls; the others go on;
- when the parent ends, a child with calls still recorded after that is
  cancelled (``cancelled:parent_ended``): the session is over; a parent
  that recorded no call (Claude Code: an empty main file) ends as its
  recording does, after its children;
- the session's recorded total (``runs.cost_usd``) is not split among the
  agents: each call is priced by its own recorded cost, else its tokens.

**The concurrency cap** (``harness.subagents.max_concurrent``; unset: no
cap) reorders the calls, not their contents (:func:`scheduled`): a child
runs from its first call to its last (in call order); a child whose first
call comes while ``max_concurrent`` children run is delayed: its calls wait
(in their order) until a running child's last call, and at the latest until
its parent's next call (the parent waits for its children), then are made
before the calls recorded after that moment. ``delayed`` counts such
children; ``max_running`` is the most running at once as recorded.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Generator
from dataclasses import replace

from sim.cost.recorded import run_basis
from sim.drivers.replay.driver import RunDriver
from sim.drivers.replay.options import ReplayOptions, run_params
from sim.drivers.replay.pricing import ModelPricing
from sim.drivers.replay.replayed import PARENT, Replay, Session
from sim.harness.detector import Detector
from sim.harness.params import HarnessParams
from sim.harness.scopes import Ledger
from sim.harness.state import BUDGET_EXHAUSTED
from sim.traces.model import RunRecord

SESSION_STOP = "session"
"""The reason of a run the session budget stopped (``budget_exhausted:session``)."""


def has_children(run: RunRecord) -> bool:
    """Whether any recorded call of ``run`` is a subagent's."""
    return any(c.agent for c in run.calls)


def split_run(run: RunRecord) -> tuple[dict[str, RunRecord], list[tuple[str, int]]]:
    """``run`` as one recorded run per agent (the parent under
    :data:`PARENT`, first; the children in order of their first call; a
    child's ``run_id`` is ``<run_id>/<agent>``, its verdict and exit unknown;
    no part keeps the session's recorded total) and, for each recorded call
    in order, its agent and its index among that agent's calls."""
    calls: dict[str, list[int]] = {PARENT: []}
    order = []
    for i, call in enumerate(run.calls):
        agent = call.agent or PARENT
        mine = calls.setdefault(agent, [])
        order.append((agent, len(mine)))
        mine.append(i)
    parts = {}
    for agent, indices in calls.items():
        own = [run.calls[i] for i in indices]
        if agent == PARENT:
            parts[agent] = replace(run, calls=own, cost_usd=None)
        else:
            parts[agent] = replace(run, run_id=f"{run.run_id}/{agent}", calls=own, exit=None,
                                   resolved=None, cost_usd=None)
    return parts, order


def concurrency(order: list[tuple[str, int]]) -> int:
    """The most children running at once in ``order`` (a child runs from
    its first call to its last)."""
    spans: dict[str, list[int]] = {}
    for i, (agent, _) in enumerate(order):
        if agent != PARENT:
            spans.setdefault(agent, [i, i])[1] = i
    return max((sum(1 for a, b in spans.values() if a <= first <= b)
                for first, _ in spans.values()), default=0)


def scheduled(order: list[tuple[str, int]], cap: int | None) -> tuple[list[int], int]:
    """The indices of the recorded calls in ``order`` in the order the
    replay makes them under the concurrency ``cap`` (None: as recorded),
    and how many children the cap delayed (rules: the module docstring)."""
    if cap is None:
        return list(range(len(order))), 0
    last = {agent: i for i, (agent, _) in enumerate(order)}
    started: set[str] = set()
    running: set[str] = set()
    queue: list[str] = []
    waiting: dict[str, list[int]] = {}
    out: list[int] = []
    delayed = 0

    def start(child: str) -> None:
        calls = waiting.pop(child)
        out.extend(calls)
        if last[child] not in calls:
            running.add(child)

    for i, (agent, _) in enumerate(order):
        if agent in waiting:
            waiting[agent].append(i)
            continue
        if agent == PARENT:
            while queue:  # the parent's next call waits for its delayed children
                start(queue.pop(0))
        elif agent not in started:
            started.add(agent)
            if len(running) >= cap:
                delayed += 1
                queue.append(agent)
                waiting[agent] = [i]
                continue
            running.add(agent)
        out.append(i)
        if agent != PARENT and i == last[agent]:
            running.discard(agent)
            while queue and len(running) < cap:
                start(queue.pop(0))
    while queue:
        start(queue.pop(0))
    return out, delayed


def replay_session(run: RunRecord, template: HarnessParams, options: ReplayOptions,
                   pricing: ModelPricing,
                   make_detector: Callable[[HarnessParams], Detector] | None = None) -> Replay:
    """Replay a run with children (rules: the module docstring) under
    ``template``; return the session as one :class:`Replay` (its counters,
    calls and costs summed over parent and children, ``stopped_at`` the
    index of the first call a part's harness refused, the parent's status
    and outcome) whose ``session`` says what the shared budgets did."""
    parts, order = split_run(run)
    cap = template.subagents.max_concurrent if template.subagents is not None else None
    base = replace(template, subagents=None)  # the recorded spawn tool is a recorded tool
    ledgers = [Ledger(b) for b in template.shared_budgets]
    session = next((g for g in ledgers if g.budget.scope == "session"), None)
    drivers: dict[str, RunDriver] = {}
    steppers: dict[str, Generator[None, None, Replay]] = {}
    done: dict[str, Replay] = {}
    stop: tuple[str, int, int, int] | None = None  # agent, call, agent's call, spent
    made, delayed = scheduled(order, cap)
    for i in made:
        agent = order[i][0]
        if agent in done:
            continue
        if PARENT in done:  # the session is over: the parent ended
            break
        if agent not in steppers:
            params = run_params(base, parts[agent], None, options, pricing)
            drivers[agent] = RunDriver(parts[agent], params, options, pricing.fill)
            steppers[agent] = drivers[agent].stepwise(
                make_detector(params) if make_detector is not None else None, ledgers)
            next(steppers[agent])  # started: paused before its first effect
        spent = session.tokens if session is not None else 0
        try:
            next(steppers[agent])
        except StopIteration as ended:
            done[agent] = ended.value
            if stop is None and _stopped_by_session(ended.value):
                stop = (agent, i, _agent_index(order, i), spent)
    ended_early = PARENT in done  # before the calls of its children recorded after it
    left = sorted((a for a in steppers if a not in done), key=lambda a: a == PARENT)
    for agent in left:  # what is left after the last recorded call: children, then parent
        stepper = steppers[agent]
        if ended_early:
            done[agent] = drivers[agent].cancel(stepper)
            continue
        try:
            while True:
                next(stepper)
        except StopIteration as ended:
            done[agent] = ended.value
    for agent, part in parts.items():  # not started: a child whose first call came
        if agent in done:                  # after the parent ended, or a parent of no call
            continue
        params = run_params(base, part, None, options, pricing)
        driver = RunDriver(part, params, options, pricing.fill)
        done[agent] = (driver.cancel(driver.stepwise(None)) if agent != PARENT
                       else driver.drive(make_detector(params) if make_detector else None))
    result = Session(
        children=tuple((a, f"{done[a].status}:{done[a].reason}") for a in parts if a != PARENT),
        cap=cap, max_running=concurrency(order), delayed=delayed,
        limit_tokens=session.budget.tokens if session is not None else None,
        parts={a: done[a] for a in parts})
    if stop is not None:
        agent, call, index, spent = stop
        u = run.calls[call].usage
        result = replace(result, stopped_by=agent, stopped_call=call, agent_call=index,
                         spent_tokens=spent,
                         running_tokens=spent + u.prompt_tokens + u.output_tokens
                         + u.thinking_tokens)
    return _merged(run, done, order, result)


def _agent_index(order: list[tuple[str, int]], i: int) -> int:
    return order[i][1]


def _stopped_by_session(replay: Replay) -> bool:
    return (replay.stopped and replay.status == BUDGET_EXHAUSTED
            and replay.reason == SESSION_STOP)


def _merged(run: RunRecord, done: dict[str, Replay], order: list[tuple[str, int]],
            session: Session) -> Replay:
    """The session as one Replay: the parent's, with the children's counters,
    calls and costs added and indices mapped to the run's calls."""
    parent = done[PARENT]
    where = {(agent, k): i for i, (agent, k) in enumerate(order)}
    state = copy.copy(parent.state)
    for agent, r in done.items():
        if agent == PARENT:
            continue
        s = r.state
        for name in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                     "thinking_tokens", "money_usd", "active_s", "turns", "tool_calls",
                     "retries", "nudges", "verifier_rejections", "compactions"):
            setattr(state, name, getattr(state, name) + getattr(s, name))
    parts = list(done.items())

    def mapped(agent: str, items: list[tuple[int, str]]) -> list[tuple[int, str]]:
        return [(where.get((agent, k), k), kind) for k, kind in items]

    stops = sorted(where[(a, r.stopped_at)] for a, r in parts if r.stopped_at is not None)
    interventions = sorted(x for a, r in parts for x in mapped(a, r.interventions))
    firings = sorted(x for a, r in parts for x in mapped(a, r.firings))
    fsum = math.fsum
    return replace(
        parent, run=run, state=state, calls=sum(r.calls for _, r in parts),
        tools_run=sum(r.tools_run for _, r in parts),
        cost_usd=fsum(r.cost_usd for _, r in parts),
        stopped_at=stops[0] if stops else None, interventions=interventions, firings=firings,
        prompt_mismatches=sum(r.prompt_mismatches for _, r in parts),
        prompt_max_deviation=max(r.prompt_max_deviation for _, r in parts),
        resized=sum(r.resized for _, r in parts), text_turns=sum(r.text_turns for _, r in parts),
        unrecorded_arguments=sum(r.unrecorded_arguments for _, r in parts),
        verdict_unknown=parent.verdict_unknown,
        priced_usd=fsum(r.priced_usd for _, r in parts),
        recorded_calls_usd=fsum(r.recorded_calls_usd for _, r in parts),
        recorded_priced_usd=fsum(r.recorded_priced_usd for _, r in parts),
        prompt_counts=[c for _, r in parts for c in r.prompt_counts],
        passed_over=sum(r.passed_over for _, r in parts),
        basis=run_basis([r.basis for _, r in parts]), session=session)
