"""The one pump (sim/harness/pump.py): every driver (direct, DES, replay,
live) drives the harness loop through it, and its observers (the trace
recorder among them) see every effect, its result and the end, in order."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from fake_providers import Fail, FakeProvider, Reply
from recordings import conversation, loose, recorded, tool

from sim.drivers.live import LiveDriver, make_model
from sim.drivers.live.tools import Toolbox
from sim.drivers.replay import ReplayOptions, run_params
from sim.drivers.replay.driver import RunDriver
from sim.engines.des import DesEngine, arrival_schedule
from sim.engines.direct import run_tasks
from sim.harness import effects as fx
from sim.harness.params import Budgets, HarnessParams, RetryPolicy
from sim.harness.pump import drive, steps
from sim.harness.state import new_state
from sim.scenario.model import load_scenario
from sim.sweeps.cells import build_cell, cells_of

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


class Seen:
    """An observer that writes down what passes: ``("effect", e)``,
    ``("result", e, r)`` and ``("end", state)``."""

    def __init__(self) -> None:
        self.log: list[tuple] = []

    def effect(self, effect):
        self.log.append(("effect", effect))

    def result(self, effect, result):
        self.log.append(("result", effect, result))

    def end(self, state):
        self.log.append(("end", state))

    def kinds(self) -> list[str]:
        """The effects seen, as ``Type`` or ``ModelRequest:purpose``, in order."""
        return [type(e).__name__ + (f":{e.purpose}" if isinstance(e, fx.ModelRequest) else "")
                for kind, e, *_ in self.log if kind == "effect"]


def lookup(key: str) -> str:
    """Look up a value by key."""
    return f"the value of {key} is 42"


def toy_loop(log: list):
    """A loop of three effects that logs what it is sent and returns 'done'."""
    for effect in ("a", "b", "c"):
        log.append(("sent", (yield effect)))
    return "done"


def test_the_pump_answers_each_effect_and_tells_observers_in_order():
    """Three effects: each observer sees the effect, then its answer, then
    the end; the loop is sent each answer (None before the first)."""
    sent: list = []
    first, second = Seen(), Seen()
    final = drive(toy_loop(sent), str.upper, (first, second))
    assert final == "done"
    assert sent == [("sent", "A"), ("sent", "B"), ("sent", "C")]
    assert first.log == second.log == [
        ("effect", "a"), ("result", "a", "A"), ("effect", "b"), ("result", "b", "B"),
        ("effect", "c"), ("result", "c", "C"), ("end", "done")]
    one = Seen()
    assert drive(toy_loop([]), str.upper, (one,)) == "done" and one.log == first.log
    assert drive(toy_loop([]), str.upper) == "done"


def test_the_stepped_pump_passes_the_answers_pauses_out_and_their_replies_in():
    """Each answer may pause (yield): the pause goes out of the pump, what the
    caller sends back comes in, and the answer's return value is the result."""
    def answer(effect):
        reply = yield f"pause {effect}"
        return f"{effect}{reply}"

    sent: list = []
    seen = Seen()
    pump = steps(toy_loop(sent), answer, (seen,))
    pauses = [next(pump)]
    try:
        while True:
            pauses.append(pump.send("!"))
    except StopIteration as stop:
        assert stop.value == "done"
    assert pauses == ["pause a", "pause b", "pause c"]
    assert sent == [("sent", "a!"), ("sent", "b!"), ("sent", "c!")]
    assert seen.log[-1] == ("end", "done") and len(seen.log) == 7


def test_the_direct_and_des_engines_drive_the_same_effects_through_the_pump():
    """20 tasks of bounded.yaml, each observed by the pump in the direct
    engine and in the DES with unlimited capacity: the same effects in the
    same order per task, every one answered, and one end per task."""
    loaded = load_scenario(SCENARIOS / "bounded.yaml",
                           ["engine=des", "des.capacity={}", "des.operations=[]",
                            "des.resume={share: 0}", "tasks=20"])
    cell = build_cell(cells_of(loaded)[0])
    seen: dict[str, dict[int, Seen]] = {"direct": {}, "des": {}}

    def tracer(engine):
        def make(index, state, clock):
            observer = seen[engine][index] = Seen()
            return observer
        return make

    run_tasks(cell, range(20), tracer("direct"))
    DesEngine(cell, loaded.des, arrival_schedule(loaded.des, 20, cell.seed),
              tracer("des")).run()
    assert sorted(seen["direct"]) == sorted(seen["des"]) == list(range(20))
    for index in range(20):
        direct, des = seen["direct"][index], seen["des"][index]
        assert direct.kinds() == des.kinds() and len(direct.kinds()) > 3
        assert [entry[0] for entry in direct.log] == (
            ["effect", "result"] * len(direct.kinds()) + ["end"])


def test_the_replay_driver_drives_its_loop_through_the_pump():
    """A recorded run of three calls (search; read and edit; a final text)
    replayed with a harness that does not bind: the observer sees three step
    calls, the three tool calls between them, and the end."""
    run = recorded("r", conversation([[tool("search")], [tool("read"), tool("edit")], []]))
    driver = RunDriver(run, run_params(loose(), run), ReplayOptions())
    seen = Seen()
    replay = driver.drive(None, recorders=(seen,))
    kinds = [k for k in seen.kinds() if k != "Checkpoint"]
    assert kinds == ["ModelRequest:step", "ToolRequest", "ModelRequest:step", "ToolRequest",
                     "ToolRequest", "ModelRequest:step"]
    assert seen.log[-1] == ("end", replay.state) and replay.calls == 3


def test_the_live_driver_drives_its_loop_through_the_pump(tmp_path):
    """A live run against a fake provider (a 429, a tool call, a final
    answer): the observer sees three model calls (the first answered with a
    ModelError, retried after a Wait), one tool call, and the end."""
    box = Toolbox()
    box.function(lookup)
    params = HarnessParams(model="claude-sonnet-4-20250514", provider="anthropic",
                           budgets=Budgets(steps=5), tools=box.specs(), max_output_tokens=1_000,
                           context_window=50_000, model_timeout_s=20.0,
                           retry=RetryPolicy(base_s=0.01, cap_s=0.05)).validate()
    script = [Fail(429, "slow down", headers={"retry-after-ms": "10"}),
              Reply([("tool_use", "c1", "lookup", {"key": "answer"})], "tool_use",
                    input_tokens=40, output_tokens=10),
              Reply([("text", "DONE")], input_tokens=60, output_tokens=5)]
    seen = Seen()
    with FakeProvider(script) as server:
        model = make_model("anthropic", api_key="k", base_url=server.base_url, stream=False)
        driver = LiveDriver(model, box, workdir=tmp_path)
        state = new_state(params.prefix_tokens, params.model, "Look around.")

        async def go():
            try:
                return await driver.run(params, state, "run-1", recorders=(seen,))
            finally:
                await model.aclose()

        began = time.monotonic()
        final = asyncio.run(go())
    assert time.monotonic() - began < 60
    kinds = [k for k in seen.kinds() if k != "Checkpoint"]
    assert kinds == ["ModelRequest:step", "Wait", "ModelRequest:step", "ToolRequest",
                     "ModelRequest:step"]
    results = [r for kind, e, *r in seen.log if kind == "result" and isinstance(e, fx.ModelRequest)]
    assert isinstance(results[0][0], fx.ModelError)
    assert seen.log[-1] == ("end", final) and final.status == "succeeded"
