"""What-if replay: the real harness loop, its effects answered from a recorded run.

:func:`replay_run` drives :func:`sim.harness.loop.agent_loop` (unchanged) with
candidate harness parameters and answers each effect from one
:class:`~sim.traces.model.RunRecord`:

- a **model request** (a loop step) gets the next recorded call's response: a
  text block of the recorded text size, one tool_use block per recorded tool
  call (its real name and arguments), the recorded usage (input, cache read,
  cache write, output, reasoning as thinking), the finish reason mapped to a
  stop_reason and the recorded latency;
- a **tool request** gets the recorded result (a :class:`ToolResult` of the
  recorded size and duration, its output the result's SHA-256 so the
  no-progress detector sees when results repeat) or, for a result flagged as
  an error, a :class:`ToolError` of ``tool_error_kind`` (traces do not record
  the kind; the default ``validation`` is passed to the model, as the old
  harness did; ``transient`` asks what a harness that retries them would do);
- a **verification** gets the recorded ``resolved`` (a run the source does not
  judge passes, as it did when it was recorded); approvals are granted, waits
  and checkpoints need no answer.

**Prompt sizes are the recorded ones.** The replayed history starts with call
0's whole prompt as the first message, and the tokens entering between call k
and call k+1 (call k's output and reasoning, which the harness appends itself,
plus the tool results and the non-tool messages such as a user's reply) are
sized so that the harness's own count of call k+1's prompt equals the
recorded one: what the recorded growth holds beyond the output and the
recorded result sizes travels on the step's last tool result, and recorded
result sizes larger than the growth (an approximate count) are scaled down to
fit. So every budget sees the recorded numbers. A growth smaller than the
previous call's output cannot be expressed (the source compacted, or dropped
reasoning from the history): the harness then counts more than the recording
for that call, the replay counts it per run (``prompt_mismatches``) and the
next step's growth is sized to return to the recorded count.

**Text turns.** In a conversational source (tau2) the agent sends text-only
messages to a simulated user and the conversation continues; the harness
would take a response without tool calls as a final answer. So a text-only
response that is not the run's last call is given to the harness as a call of
the synthetic tool ``reply_to_user`` whose result is the user's reply (the
call's ``observation_tokens``). Its arguments are derived from the text
(``text_sha256`` when the source records it, else the call's index, so only
identical messages can repeat), and it is a polling tool for the detector:
keyed on the message *and* the reply, so answering a changing conversation is
never a repetition. The run's last call, when it has no tool calls, is the
final answer the harness verifies or accepts.

**Divergence is stated, never hidden.** The recording can be followed while
the candidate does what the old harness did:

- the candidate *stops* a run earlier (a budget, a detector stop, a spent retry
  budget, a fatal error): exact; the run ends there in the harness's terminal
  state, with the cost of the calls made;
- the candidate *intervenes* in a way the recording cannot answer (a nudge or
  another injected message, a retry of a tool error the old harness passed on,
  a rejected claim, a compaction): with ``after_intervention="continue"`` the
  run goes on as recorded (an upper bound on its cost; the run is flagged
  ``diverged``), with ``"stop"`` it ends there as ``diverged:<kind>`` (a lower
  bound). A compaction call the recording does not hold is answered with its
  worst case (the request's prompt and its output cap, priced at the run's
  prices) and the following steps are sized toward the recorded prompts again
  (the harness's count after a compaction is not checked);
- the recording ends while the harness would go on (the user or the old
  harness ended the conversation): the run ends as recorded. A nudge (or
  another injected message) after the last recorded call is never read, so it
  is not a divergence (a detector firing there still counts as a firing); a
  rejected final answer is, since the model might have repaired it.

**Outcomes.** A run the candidate stops: its harness outcome
(``budget_exhausted:tokens``, ``needs_human:no_progress``...). A run it lets
finish: ``succeeded`` when the source says it was resolved; ``false_success``
when the harness accepted a final answer of an unresolved run;
``succeeded:<reason>`` for an accepted answer the source does not judge
(``succeeded:unverified`` when the candidate's verifier checked it: with no
verdict recorded, the replay accepts it as the old harness did, and nothing
verified it);
``ended:<exit>`` (the source's exit label) when the recording ended without an
accepted answer of a resolved run. ``diverged:<kind>`` in stop mode.

**Calls that are not steps.** sim's own recorded runs hold compaction and
model-grader calls too (``purpose``): a compaction the candidate asks for where
the recording made one is answered with it, a verification with the recorded
grader call's usage; recorded ones the candidate does not ask for are passed
over (and counted).

**Cost** is each recorded call's one price (:mod:`sim.cost.recorded`, the
price every command gives it): its recorded cost where trustworthy (present,
and above $0 or for a call of no tokens); a call recording none, or $0 with
tokens used, is priced at its model's prices fitted to the model's recorded
costs, else the catalogue's, else the scenario's; each run's ``price_basis``
says which. A worst-case compaction is priced at the run's prices
(:func:`~sim.drivers.replay.options.run_params`).

**Prices are the call-level model's** (:func:`price_models`): each call is
charged by the harness (the money budget) and priced at the prices of the
model that answered it (``calls.model``; the run's model only when the call
names none), looked up in the catalogue. A model the catalogue does not know is
never priced silently at the scenario's prices: it is priced from the recorded
costs of its calls (the scenario's price ratios, scaled so that its recorded
calls cost in total what was recorded), and listed; only a model without any
recorded cost falls back to the scenario's prices, listed as such.

**Subagents** (:mod:`sim.drivers.replay.session`): a run whose calls name an
``agent`` (Claude Code's ``subagents/``) is replayed as a session: the parent's
calls and each child's through their own harness loops, all charging the same
shared-budget ledgers (``harness.shared_budgets``), stepped in the recorded
order of the calls, so a session budget stops the call a running sum over
parent and children gives; the row says which call and agent, and the
children's terminal states.
"""

from __future__ import annotations

from sim.drivers.replay.driver import Replay, replay_run
from sim.drivers.replay.options import (
    AFTER_INTERVENTION,
    COMPACTION,
    DIVERGED,
    ENDED,
    NUDGE,
    REPLY_TOOL,
    TOOL_ERROR_KINDS,
    TOOL_RETRY,
    VERIFIER_REJECTION,
    ReplayOptions,
    reply_tool_name,
    run_params,
    stop_reason,
)
from sim.drivers.replay.pricing import ModelPricing, call_model, price_models
from sim.drivers.replay.rows import REPLAY_DTYPES, replay_row, replay_rows, task_record
from sim.drivers.replay.runs import RunReplay, replay_runs

__all__ = [
    "AFTER_INTERVENTION", "COMPACTION", "DIVERGED", "ENDED", "NUDGE", "REPLAY_DTYPES",
    "REPLY_TOOL", "TOOL_ERROR_KINDS", "TOOL_RETRY", "VERIFIER_REJECTION", "ModelPricing",
    "Replay", "ReplayOptions", "RunReplay", "call_model", "price_models", "replay_row",
    "replay_rows", "replay_run", "replay_runs", "reply_tool_name", "run_params", "stop_reason",
    "task_record",
]
