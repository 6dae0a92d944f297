"""A misbehaving provider, generated (issue 25, "What to build" item 2): the
local fake servers of ``tests/fake_providers.py`` send scripts drawn from
their misbehaviours (absurd usage, huge or unreadable Retry-After headers,
tool arguments nested far too deep, streams cut short, error statuses) over
each wire. Whatever they send, the live driver returns a final state in one
outcome of the table, raises nothing, waits no longer than the time budget
allows and answers within a time limit.
"""

from __future__ import annotations

import math
import signal
import time

import pytest
from fake_providers import Fail, FakeProvider, RawJSON, Reply
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_live_http import WIRES, drive, params_for, toolbox

from sim.harness import Budgets
from sim.harness.state import OUTCOMES

TIME_LIMIT_S = 60
ACTIVE_BUDGET_S = 30.0
ODD_COUNTS = [1e300, 10**30, 10**400, float("nan"), float("inf"), -5, 2**63, 0, 12, "7", None]
RETRY_AFTER = ["1000000000", "1e308", "-3", "nan", "soon", "Fri, 31 Dec 9999 23:59:59 GMT",
               "0", "0.05"]

USAGE = st.dictionaries(st.sampled_from(["input_tokens", "output_tokens",
                                         "cache_read_input_tokens"]),
                        st.sampled_from(ODD_COUNTS), max_size=2)
CONTENT = st.one_of(
    st.just([("text", "DONE")]),
    st.just([("tool_use", "c1", "lookup", {"key": "k"})]),
    st.sampled_from([50, 5_000, 100_000]).map(
        lambda depth: [("tool_use", "c1", "lookup", RawJSON.nested(depth))]),
    st.just([("tool_use", "c1", "lookup", RawJSON("{not json"))]))
REPLY = st.builds(lambda content, usage, cut: Reply(
    content, "tool_use" if content[0][0] == "tool_use" else "end_turn", usage=usage,
    cut_after=cut), CONTENT, USAGE, st.none() | st.integers(0, 6))
FAIL = st.builds(lambda status, header, value: Fail(status, headers={header: value}),
                 st.sampled_from([429, 500, 529, 400, 401, 413]),
                 st.sampled_from(["retry-after", "retry-after-ms"]),
                 st.sampled_from(RETRY_AFTER))
SCRIPT = st.lists(st.one_of(REPLY, REPLY, FAIL), min_size=1, max_size=5)


class Hang(Exception):
    """The driver did not finish within TIME_LIMIT_S."""


def _alarm(signum, frame):
    raise Hang(f"no answer within {TIME_LIMIT_S} s")


@pytest.mark.slow
@settings(max_examples=30, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(script=SCRIPT, wire=st.sampled_from(WIRES))
def test_whatever_the_provider_sends_the_run_ends_cleanly(tmp_path, script, wire) -> None:
    provider, stream = wire
    box = toolbox()
    params = params_for(provider, box, budgets=Budgets(active_s=ACTIVE_BUDGET_S, steps=6))
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_S)
    start = time.monotonic()
    try:
        with FakeProvider([*script, Reply([("text", "DONE")])], lifetime_s=TIME_LIMIT_S) \
                as server:
            state, _, _ = drive(server, provider, stream, params, box, tmp_path)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert state.status in OUTCOMES and state.reason in OUTCOMES[state.status]
    assert math.isfinite(state.active_s) and state.active_s <= ACTIVE_BUDGET_S
    assert math.isfinite(state.money_usd) and state.input_tokens < 2**63
    assert time.monotonic() - start < ACTIVE_BUDGET_S + 10
