"""What replaying one recorded run gave (:class:`Replay`, with :class:`Session` for a
run with subagents; made by
:func:`sim.drivers.replay.driver.replay_run`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.harness.state import HarnessState
from sim.traces.model import RunRecord

PARENT = ""
"""The parent's agent id in :class:`Session` (a child's is its own id)."""


@dataclass(frozen=True)
class Session:
    """What the shared budgets did to a session with children.

    ``children``: each child's id and how its replay ended (``status:reason``),
    in order of its first call; ``stopped_by``: the agent whose call the
    session budget refused first (:data:`PARENT` for the parent's; None: it
    refused none), ``stopped_call`` that call's index in the run
    (``calls.call``) and ``agent_call`` its index among its agent's calls;
    ``spent_tokens`` what the session had spent before it (prompt, cached or
    not, plus output and thinking), ``running_tokens`` that plus the call's
    recorded tokens (the running sum it would have reached) and
    ``limit_tokens`` the session budget's tokens (None: unlimited);
    ``cap`` (``harness.subagents.max_concurrent``; None: unset), ``max_running``
    (the most children running at once as recorded) and ``delayed`` (children
    the cap delayed): :mod:`sim.drivers.replay.session`."""

    children: tuple[tuple[str, str], ...]
    stopped_by: str | None = None
    stopped_call: int | None = None
    agent_call: int | None = None
    spent_tokens: int | None = None
    running_tokens: int | None = None
    limit_tokens: int | None = None
    cap: int | None = None
    max_running: int = 0
    delayed: int = 0
    parts: dict[str, Replay] = field(default_factory=dict)
    """Each agent's replay (the parent under :data:`PARENT`)."""

    def text(self) -> str:
        """One line: where the session budget stopped the session, e.g.
        ``stopped by the session budget at child a3's call 4 (running sum
        51,200 > 50,000)``, else ``not stopped by the session budget``."""
        if self.stopped_by is None:
            return "not stopped by the session budget"
        who = "the parent" if self.stopped_by == PARENT else f"child {self.stopped_by}"
        where = f"stopped by the session budget at {who}'s call {self.agent_call}"
        if self.running_tokens is None:
            return where
        limit = self.limit_tokens
        if limit is not None and self.running_tokens > limit:
            return f"{where} (running sum {self.running_tokens:,} > {limit:,})"
        return (f"{where} (spent {self.spent_tokens or 0:,}; the call's worst case would "
                f"pass the limit)")


@dataclass
class Replay:
    """What the candidate did to one recorded run.

    ``state`` is the harness's state when the replay ended; ``ended_by`` is
    ``harness`` (a terminal state), ``recording`` (no recorded call left) or
    ``intervention`` (stop mode); ``outcome``, ``status`` and ``reason`` are
    the run's result (see the module docstring). ``calls`` and ``cost_usd``
    count the model calls answered (a worst-case compaction included) and their
    cost (USD, recorded where recorded), ``priced_usd`` their cost at the run's
    prices; ``recorded_calls_usd`` and ``recorded_priced_usd`` are the same for
    every recorded call; ``tools_run`` counts tool requests answered (first
    attempts). ``stopped_at`` is the index of the recorded call at which the
    candidate stopped the run (None: it did not); ``interventions`` and
    ``firings`` list ``(call index, kind or detector signal)``.

    Fidelity: ``prompt_counts`` is the harness's own count of each step's
    prompt, in order; ``prompt_mismatches`` counts the calls whose count
    differs from the recording (up to the first intervention, which changes the
    history itself) and ``prompt_max_deviation`` is the largest difference
    (tokens); ``resized`` counts steps whose recorded result sizes were scaled
    down to the recorded growth; ``text_turns`` the mid-run text-only calls
    replayed as ``reply_to_user``; ``unrecorded_arguments`` the tool calls
    without recorded arguments (each made distinct, so never a repetition);
    ``verdict_unknown`` whether a verifier checked an answer the source does
    not judge; ``passed_over`` the recorded compaction or verifier calls (sim's
    own runs) the candidate did not ask for (their cost is saved).

    Money: each recorded call's cost is its one price
    (:mod:`sim.cost.recorded`): ``recorded_calls_usd`` is the run's price and
    ``basis`` what it rests on (``recorded``, ``fitted``, ``catalogue``,
    ``scenario`` or ``unpriced``).

    A run with children (:mod:`sim.drivers.replay.session`): the counters,
    calls and costs are the session's (parent and children), indices are the
    run's call numbers, and ``session`` says what its shared budgets did."""

    run: RunRecord
    state: HarnessState
    ended_by: str
    outcome: str
    status: str
    reason: str
    calls: int
    tools_run: int
    cost_usd: float
    stopped_at: int | None = None
    interventions: list[tuple[int, str]] = field(default_factory=list)
    firings: list[tuple[int, str]] = field(default_factory=list)
    prompt_mismatches: int = 0
    prompt_max_deviation: int = 0
    resized: int = 0
    text_turns: int = 0
    unrecorded_arguments: int = 0
    verdict_unknown: bool = False
    priced_usd: float = 0.0
    recorded_calls_usd: float = 0.0
    recorded_priced_usd: float = 0.0
    prompt_counts: list[int] = field(default_factory=list)
    passed_over: int = 0
    basis: str = "recorded"
    session: Session | None = None
    """A run with children: what the shared budgets did to its session
    (:mod:`sim.drivers.replay.session`); None for a run without."""

    @property
    def stopped(self) -> bool:
        """Whether the candidate ended the run before the recording did."""
        return self.stopped_at is not None

    @property
    def diverged(self) -> bool:
        """Whether the candidate intervened where the recording cannot answer."""
        return bool(self.interventions)

    @property
    def saved_usd(self) -> float:
        """Cost of the recorded calls (``recorded_calls_usd``) minus the cost of
        the calls replayed (``cost_usd``): 0.0 exactly for a run replayed whole."""
        return self.recorded_calls_usd - self.cost_usd

    @property
    def saved_priced_usd(self) -> float:
        """The same saving at the run's prices."""
        return self.recorded_priced_usd - self.priced_usd
