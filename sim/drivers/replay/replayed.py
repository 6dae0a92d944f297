"""What replaying one recorded run gave (:class:`Replay`, made by
:func:`sim.drivers.replay.driver.replay_run`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sim.drivers.recorded_runs import RecordedRun
from sim.harness.state import HarnessState


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
    ``scenario`` or ``unpriced``)."""

    run: RecordedRun
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
