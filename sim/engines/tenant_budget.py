"""A money budget shared by the concurrent runs of one tenant (DES engine).

Real gateways check a tenant's (or a session's) budget before each call
against the spend *committed* so far and add a call's cost when it returns;
calls already in flight have been admitted on what they were known to cost
then. :class:`TenantLedger` is that check, as the DES performs it:

- **admit** (before a model call): committed = the cost of every completed
  call of the tenant plus, for every call in flight, the cost of its prompt
  (its input tokens at the uncached input price: what is known before the
  reply). The call is admitted when committed plus its own prompt cost is at
  most the budget; its prompt cost is then committed (in flight);
- **settle** (when the harness has accounted a reply): the in-flight prompt
  cost is replaced by what the call really cost (the run's spend, as the
  harness counts it, went up by that much; a failed call costs nothing).

So the tenant's total can end above its budget by at most what the calls in
flight at the last admission cost beyond their prompts (their output, and any
prompt tokens priced above the input price): the overshoot that concurrency
lets through. A refused call is answered to the harness as a model error of
kind ``tenant_budget`` (HTTP 402), which ends the run as
``failed:model_error``; the ledger counts the refusals. Units: USD.
"""

from __future__ import annotations

from collections.abc import Hashable

from sim.harness.effects import Effect, ModelError, ModelRequest
from sim.harness.params import HarnessParams
from sim.harness.scopes import Ledger, ScopedBudget
from sim.harness.state import HarnessState


class TenantLedger:
    """One tenant's shared money budget (``budget_usd``) and what is
    committed against it (see the module docstring): the harness's shared
    ledger (:class:`~sim.harness.scopes.Ledger`, a hard ``before_call``
    tenant budget that never resets), to which each call's prompt cost is
    reserved and whose spend is settled from the runs' own counters."""

    def __init__(self, budget_usd: float) -> None:
        self.budget_usd = budget_usd
        self.ledger = Ledger(ScopedBudget(scope="tenant", money_usd=budget_usd))
        self.seen: dict[Hashable, float] = {}
        self.peak_in_flight = 0

    @property
    def spent_usd(self) -> float:
        """Spend of the completed calls (USD)."""
        return self.ledger.usd

    @property
    def in_flight(self) -> dict[Hashable, float]:
        """Run -> the prompt cost of its call in flight (USD)."""
        return self.ledger.reserved_usd

    @property
    def refused(self) -> int:
        """Calls refused."""
        return self.ledger.refused

    @property
    def admitted(self) -> int:
        """Calls admitted."""
        return self.ledger.admitted

    @property
    def committed_usd(self) -> float:
        """Completed spend plus the prompt cost of the calls in flight (USD)."""
        return self.ledger.committed_usd()

    @property
    def overshoot_usd(self) -> float:
        """How far the tenant's spend ended above its budget (USD, >= 0)."""
        return max(0.0, self.spent_usd - self.budget_usd)

    def admit(self, run: Hashable, prompt_cost_usd: float) -> bool:
        """Whether run ``run``'s next call (its prompt costing
        ``prompt_cost_usd``) may be made; if so it is committed as in flight
        (the harness's rule: :meth:`~sim.harness.scopes.Ledger.reserve`)."""
        if not self.ledger.reserve(run, 0, prompt_cost_usd, 0.0):
            return False
        self.peak_in_flight = max(self.peak_in_flight, len(self.ledger.reserved_usd))
        return True

    def settle(self, run: Hashable, run_spend_usd: float) -> None:
        """Record run ``run``'s spend so far as the harness counts it: the
        increase since the last settle is spent, and its in-flight prompt
        cost, if any, is released."""
        self.ledger.charge(run, 0, run_spend_usd - self.seen.get(run, 0.0), 0.0)
        self.seen[run] = run_spend_usd

    def summary(self) -> dict[str, float | int]:
        """``{"budget_usd", "spent_usd", "overshoot_usd", "refused_calls",
        "admitted_calls", "peak_in_flight"}``."""
        return {"budget_usd": self.budget_usd, "spent_usd": self.spent_usd,
                "overshoot_usd": self.overshoot_usd, "refused_calls": self.refused,
                "admitted_calls": self.admitted, "peak_in_flight": self.peak_in_flight}


def prompt_cost(params: HarnessParams, model: str, prompt_tokens: int) -> float:
    """The cost in USD of ``prompt_tokens`` sent uncached to ``model``: the
    harness's own rules, the prices it charges that model
    (:meth:`~sim.harness.params.HarnessParams.prices_for`) at the tier the
    prompt reaches (:meth:`~sim.harness.prices.Prices.call_cost`)."""
    return params.prices_for(model).call_cost(prompt_tokens, 0)


def refusal(ledger: TenantLedger, index: Hashable, params: HarnessParams, state: HarnessState,
            effect: Effect) -> ModelError | None:
    """The error that answers run ``index``'s model call ``effect`` when the
    tenant's money budget cannot admit it (None: go ahead, or not a model
    call); settles the run's spend so far first."""
    ledger.settle(index, state.money_usd)
    if type(effect) is ModelRequest and not ledger.admit(
            index, prompt_cost(params, state.model, effect.prompt_tokens)):
        return ModelError("tenant_budget", 402, None, "the tenant's money budget is spent",
                          0.0)
    return None
