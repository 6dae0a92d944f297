"""Every budget, limit and price rule has one home, and no copy elsewhere.

Each rule below is found in source by what its code looks like (a syntax
scan of ``sim/``, no imports): a comparison of the run's prompt tokens, its
output tokens or its spend with something, a budget read from
``params.budgets`` and compared, USD-per-million-token arithmetic, a walk of
the price tiers, and so on. The scan must find each rule in its home, and
nowhere else: a faster copy written out in a driver, an engine or another
harness module fails this file, and the copy is then to be replaced by a
call of the home (speed is bought in the world and the engines, never by a
second copy of a rule). Each detector is also shown to catch a planted copy,
taken from the copies this file replaced (``step_request``'s written-out
token check, ``account``'s written-out price, the loop's step check).

The homes:

- the budgets (steps, prompt tokens, output tokens, money, active and wall
  time, retries, tool errors), checked before a call and after its usage:
  :class:`sim.harness.budgets.Limits`; the one exception a spent budget
  raises: :class:`sim.harness.budgets.LimitExceeded`; budgets shared by
  several runs (a session's, a tenant's window), checked before a call or
  between turns: :class:`sim.harness.scopes.Ledger`;
- a call's worst-case price: :func:`sim.harness.budgets.worst_case_cost`;
- the price of tokens: :meth:`sim.harness.prices.Prices.cost`; the tier a
  prompt reaches: :meth:`sim.harness.prices.Prices.at`; a call's price (the
  two together): :meth:`sim.harness.prices.Prices.call_cost`;
- the prices a model is charged at:
  :meth:`sim.harness.params.HarnessParams.prices_for`;
- a call's usage added to the run's:
  :meth:`sim.harness.state.HarnessState.add_usage`;
- whether a recorded cost is trustworthy (a recorded $0 compared):
  :func:`sim.cost.recorded.trusted`; a recorded call's tokens priced (a
  ``cost``/``call_cost`` of a usage's token counts):
  :func:`sim.cost.recorded.call_cost`: every command prices recorded runs
  through :mod:`sim.cost.recorded`, so one run has one price (and
  ``tests/test_one_price.py`` holds every call of ``Prices.call_cost`` to it);
- a model's prices fitted to its recorded costs (a recorded total over the
  listed prices' total): :func:`sim.cost.recorded.model_price`;
- a recorded call priced at the prices its model is charged at (replay's
  ``priced_usd``, tune's money needs):
  :func:`sim.drivers.replay.pricing.priced_calls`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SIM = Path(__file__).resolve().parent.parent / "sim"

PRICE_FIELDS = frozenset({"input", "output", "cache_read", "cache_write", "thinking"})
PROMPT_COUNTERS = frozenset({"input_tokens", "cache_read_tokens", "cache_write_tokens"})
OUTPUT_COUNTERS = frozenset({"output_tokens", "thinking_tokens"})
USAGE_COUNTERS = PROMPT_COUNTERS | OUTPUT_COUNTERS | {"money_usd"}
TOKEN_FIELDS = PROMPT_COUNTERS | OUTPUT_COUNTERS | {"reasoning_tokens"}
COST_NAMES = frozenset({"cost", "cost_usd"})
TIME_COUNTERS = frozenset({"active_s", "parked_s", "wall_s"})
ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)

BUDGETS = "harness/budgets.py"
SCOPES = "harness/scopes.py"
HOMES: dict[str, set[tuple[str, str]]] = {
    "prompt-token budget": {(BUDGETS, "Limits.check_before_model_call"),
                            (BUDGETS, "Limits.check_usage")},
    "output-token budget": {(BUDGETS, "Limits.check_before_model_call"),
                            (BUDGETS, "Limits.check_usage")},
    "money budget": {(BUDGETS, "Limits.check_before_model_call"),
                     (BUDGETS, "Limits.check_usage"),
                     (SCOPES, "Ledger.reserve"), (SCOPES, "Ledger.spent")},
    "step budget": {(BUDGETS, "Limits.check_before_step")},
    "time budgets": {(BUDGETS, "Limits.check_duration")},
    "retry budget": {(BUDGETS, "Limits.may_retry")},
    "tool-error budget": {(BUDGETS, "Limits.check_before_model_call")},
    "a budget read and compared": set(),  # Limits reads them once, into numbers
    "the budget_exhausted status": {(BUDGETS, "LimitExceeded.__init__"),
                                    ("harness/state.py", "<module>")},
    "price of tokens": {("harness/prices.py", "Prices.cost")},
    "worst-case prices": {(BUDGETS, "worst_case_cost")},
    "tier of a prompt": {("harness/prices.py", "Prices.at")},
    "prices of a model": {("harness/params.py", "HarnessParams.prices_for")},
    "usage added to the run's": {("harness/state.py", "HarnessState.add_usage")},
    "trust of a recorded cost": {("cost/recorded.py", "trusted")},
    "price of a recorded call": {("cost/recorded.py", "call_cost")},
    "prices fitted to recorded costs": {("cost/recorded.py", "model_price")},
    "a recorded call at its model's prices": {("drivers/replay/pricing.py", "priced_calls")},
}
"""Rule -> the (file under sim/, qualified name) where the scan must find it."""

HARNESS_ONLY = frozenset({"step budget", "time budgets", "retry budget", "tool-error budget",
                          "the budget_exhausted status"})
"""Rules whose look (a comparison of ``turns``, ``retries``, a time counter)
is common elsewhere for other reasons (a trace's clock, a DES queue): they are
looked for in ``sim/harness`` only; the other rules in all of ``sim/``."""

ELSEWHERE: dict[tuple[str, str, str], str] = {
    ("worst-case prices", "analysis/overshoot.py", "worst_overshoot"):
        "an analysis of how far a limit can be overshot; to call worst_case_cost",
    ("tier of a prompt", "cost/closed_forms.py", "_bands"):
        "not a copy: the closed form's step ranges per tier, an analytic result",
    ("tier of a prompt", "cost/prices.py", "_prices_at.price"):
        "not a copy: reads genai-prices' own tiers into Prices",
    ("trust of a recorded cost", "traces/summary.py", "flags"):
        "not a copy: counts the $0 recorded with tokens used as a data problem to show",
    ("prices fitted to recorded costs", "calibration/prices.py", "_scaled_catalogue"):
        "not a copy: the simulated world's flat prices, fitted to every run's billed "
        "total (a $0 run is data; least squares when the catalogue lacks the model), "
        "not the price of a recorded call whose cost is missing (test_one_price)",
}
"""Where a rule's look is found outside its home today, each with why: copies
in modules other owners are rewriting (to be replaced by a call of the home,
then removed from here) and two look-alikes that are other concepts. A new
entry is a new copy: replace it by a call of the home instead."""


def _attrs(node: ast.AST) -> set[str]:
    return {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _costly(node: ast.AST) -> bool:
    """Whether ``node`` reads a cost: ``x.cost``, ``cost_usd``, ``frame["cost"]``."""
    return any((isinstance(n, ast.Attribute) and n.attr in COST_NAMES)
               or (isinstance(n, ast.Name) and n.id in COST_NAMES)
               or (isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant)
                   and n.slice.value in COST_NAMES) for n in ast.walk(node))


def _zero(node: ast.AST) -> bool:
    return (isinstance(node, ast.Constant) and not isinstance(node.value, bool)
            and node.value == 0)


def _sums(node: ast.AST) -> Iterator[set[str]]:
    """The attribute names of each outermost chain of additions in ``node``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        yield {n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)}
        return
    for child in ast.iter_child_nodes(node):
        yield from _sums(child)


def _prompt_sum(chain: set[str]) -> bool:
    """Whether a chain of additions (its attribute names) is the run's prompt tokens."""
    return chain >= PROMPT_COUNTERS and not chain & OUTPUT_COUNTERS


class _Scan(ast.NodeVisitor):
    """Finds the rules' looks in one module, by qualified function name."""

    def __init__(self) -> None:
        self.stack: list[str] = []
        self.found: set[tuple[str, str]] = set()
        self.from_budgets: set[str] = set()  # names bound to a value read from .budgets
        self.prompt_sums: set[str] = set()  # names bound to the run's prompt tokens (a sum)

    def _add(self, rule: str) -> None:
        self.found.add((rule, ".".join(self.stack) or "<module>"))

    def _scope(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.stack.append(node.name)
        outer, self.from_budgets = self.from_budgets, set()
        outer_sums, self.prompt_sums = self.prompt_sums, set()
        if not isinstance(node, ast.ClassDef):  # names derived from budgets, to a fixed point
            assigns = [n for n in ast.walk(node) if isinstance(n, ast.Assign)]
            grew = True
            while grew:
                grew = False
                for a in assigns:
                    if "budgets" in _attrs(a.value) or _names(a.value) & self.from_budgets:
                        new = {t.id for t in a.targets if isinstance(t, ast.Name)}
                        if not new <= self.from_budgets:
                            self.from_budgets |= new
                            grew = True
            for a in assigns:  # spent = s.input_tokens + s.cache_read_tokens + ...
                if any(_prompt_sum(chain) for chain in _sums(a.value)):
                    self.prompt_sums |= {t.id for t in a.targets if isinstance(t, ast.Name)}
        self.generic_visit(node)
        self.from_budgets = outer
        self.prompt_sums = outer_sums
        self.stack.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = _scope

    def visit_Compare(self, node: ast.Compare) -> None:
        if any(isinstance(op, ORDER) for op in node.ops):
            attrs = _attrs(node)
            for chain in _sums(node):
                if _prompt_sum(chain):
                    self._add("prompt-token budget")
                if chain >= OUTPUT_COUNTERS and not chain & PROMPT_COUNTERS:
                    self._add("output-token budget")
            if _names(node) & self.prompt_sums:
                self._add("prompt-token budget")
            if "money_usd" in attrs:
                self._add("money budget")
            if "turns" in attrs:
                self._add("step budget")
            if attrs & TIME_COUNTERS:
                self._add("time budgets")
            if "retries" in attrs:
                self._add("retry budget")
            if "tool_errors" in attrs:
                self._add("tool-error budget")
            if "budgets" in attrs or _names(node) & self.from_budgets:
                self._add("a budget read and compared")
        parts = [node.left, *node.comparators]
        if (any(isinstance(op, ast.Eq | ast.NotEq) for op in node.ops)
                and any(_zero(p) for p in parts) and any(_costly(p) for p in parts)):
            self._add("trust of a recorded cost")
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id == "BUDGET_EXHAUSTED":
            self._add("the budget_exhausted status")

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.Div) and any("listed" in name for name in
                                                _attrs(node.right) | _names(node.right)):
            self._add("prices fitted to recorded costs")
        million = isinstance(node.right, ast.Constant) and node.right.value in (1e6, 1_000_000)
        if isinstance(node.op, ast.Div) and million and any(
                isinstance(m, ast.BinOp) and isinstance(m.op, ast.Mult)
                and _attrs(m) & PRICE_FIELDS for m in ast.walk(node.left)):
            self._add("price of tokens")
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        if isinstance(node.func, ast.Name) and node.func.id == "max" and sum(
                isinstance(a, ast.Attribute) and a.attr in PRICE_FIELDS for a in node.args) >= 2:
            self._add("worst-case prices")
        if (isinstance(node.func, ast.Attribute) and node.func.attr in ("cost", "call_cost")
                and any(isinstance(a, ast.Attribute) and a.attr in TOKEN_FIELDS
                        for a in node.args)):
            self._add("price of a recorded call")
        callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(
            node.func, "id", "")
        if callee == "call_cost" and any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                and n.func.attr == "prices_for" for a in node.args for n in ast.walk(a)):
            self._add("a recorded call at its model's prices")
        self.generic_visit(node)

    def visit_For(self, node: ast.For) -> None:
        if isinstance(node.iter, ast.Attribute):
            if node.iter.attr == "tiers" and any(isinstance(n, ast.Compare)
                                                 for n in ast.walk(node)):
                self._add("tier of a prompt")
            if node.iter.attr == "model_prices":
                self._add("prices of a model")
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        if (isinstance(node.op, ast.Add) and isinstance(node.target, ast.Attribute)
                and node.target.attr in USAGE_COUNTERS):
            self._add("usage added to the run's")
        self.generic_visit(node)


def scan(source: str) -> set[tuple[str, str]]:
    """(rule, qualified name) of every rule's look in ``source``."""
    visitor = _Scan()
    visitor.visit(ast.parse(source))
    return visitor.found


def _found() -> dict[str, set[tuple[str, str]]]:
    """Rule -> every (file under sim/, qualified name) where the scan finds it."""
    found: dict[str, set[tuple[str, str]]] = {rule: set() for rule in HOMES}
    for path in sorted(SIM.rglob("*.py")):
        where = path.relative_to(SIM).as_posix()
        for rule, name in scan(path.read_text(encoding="utf-8")):
            if rule in HARNESS_ONLY and not where.startswith("harness/"):
                continue
            found[rule].add((where, name))
    return found


FOUND = _found()


@pytest.mark.parametrize("rule", sorted(HOMES))
def test_each_rule_is_found_in_its_home_and_nowhere_else(rule: str) -> None:
    """The scan finds ``rule`` exactly in its home (plus the listed places
    outside it, each with its reason): a second definition fails here."""
    elsewhere = {(f, n) for (r, f, n) in ELSEWHERE if r == rule}
    assert FOUND[rule] - elsewhere == HOMES[rule]


def test_the_places_listed_outside_the_homes_are_still_there() -> None:
    """Each listed look-alike outside a home is still found (a copy that was
    replaced by a call of its home is taken off the list)."""
    for rule, where, name in ELSEWHERE:
        assert (where, name) in FOUND[rule], (rule, where, name)


PLANTED = {
    "prompt-token budget": '''
def step_request(run):
    cap = run.token_cap
    if state.input_tokens + state.cache_read_tokens + state.cache_write_tokens + prompt > cap:
        stop(BUDGET_EXHAUSTED, "tokens")  # check_budgets' short way, written out
''',
    "prompt-token budget (a name)": '''
def replay_touched(budget, replay):
    state = replay.state
    spent = state.input_tokens + state.cache_read_tokens + state.cache_write_tokens
    return spent + max([state.context_tokens, *replay.prompt_counts]) > budget.value
''',
    "output-token budget": '''
def f(s, b, out):
    return s.output_tokens + s.thinking_tokens + out > b
''',
    "money budget": '''
def f(state, limit):
    return state.money_usd > limit
''',
    "step budget": '''
def agent_loop(params, state):
    max_steps = _limit(params.budgets.steps)
    if state.turns >= max_steps:
        stop(BUDGET_EXHAUSTED, "steps")
''',
    "time budgets": '''
def f(state, seconds, wall):
    return state.active_s + state.parked_s + seconds > wall
''',
    "retry budget": '''
def f(params, state):
    return state.retries >= params.budgets.retries
''',
    "tool-error budget": '''
def f(state, b):
    return state.tool_errors >= b.tool_errors
''',
    "a budget read and compared": '''
def agent_loop(params, state):
    budgets = params.budgets
    max_steps = _limit(budgets.steps)
    if state.turns >= max_steps:
        pass
''',
    "the budget_exhausted status": '''
def f():
    stop(BUDGET_EXHAUSTED, "tokens")
''',
    "price of tokens": '''
def account(run, uncached, output):
    prices = run.flat_prices
    run.state.money_usd += (uncached * prices.input + output * prices.output) / 1e6
''',
    "worst-case prices": '''
def f(p):
    return max(p.input, p.cache_read, p.cache_write)
''',
    "tier of a prompt": '''
def f(prices, prompt):
    for start, tier in prices.tiers:
        if prompt > start:
            prices = tier
''',
    "prices of a model": '''
def prices_of(params, model):
    for name, prices in params.model_prices:
        if name == model:
            return prices
''',
    "usage added to the run's": '''
def account(state, usage):
    state.input_tokens += usage.input_tokens
''',
    "trust of a recorded cost": '''
def unrecorded(traces):
    runs = traces.runs
    used = (runs["prompt"] + runs["output"] + runs["reasoning"]).to_numpy() > 0
    return (runs["cost"].to_numpy(float) == 0.0) & used
''',
    "prices fitted to recorded costs": '''
def scale(calls, prices):
    paid = sum(c.cost_usd for c in calls)
    listed_usd = sum(prices.call_cost(c.input_tokens, c.output_tokens) for c in calls)
    return paid / listed_usd
''',
    "a recorded call at its model's prices": '''
def __init__(self, run, params):
    self.priced_calls = [call_cost(params.prices_for(c.model or params.model), c)
                         for c in run.calls]
''',
    "price of a recorded call": '''
def call_cost(prices, call):
    u = call.usage
    return prices.call_cost(u.input_tokens, u.output_tokens, u.cache_read_tokens,
                            u.cache_write_tokens, u.thinking_tokens)
''',
}


@pytest.mark.parametrize("plant", sorted(PLANTED))
def test_each_detector_catches_a_planted_copy(plant: str) -> None:
    """A copy of a rule written out in some function is found (the scan can
    fail): the copies this file replaced are among the plants (``rule (how)``:
    another way of writing the rule's copy, such as ``reach.replay_touched``'s
    prompt tokens summed into a name, then compared)."""
    rule = plant.split(" (")[0]
    assert rule in HOMES
    assert rule in {r for r, _ in scan(PLANTED[plant])}
