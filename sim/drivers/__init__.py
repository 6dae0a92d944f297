"""Drivers beside the engines: they perform the harness loop's effects without
a simulated world.

:mod:`sim.drivers.replay` answers every effect from a recorded run (a trace
folder read as :class:`sim.traces.model.RunRecord`), so the real harness can be asked what it
would have done to runs that already happened; :mod:`sim.drivers.live` performs
them for real, against the provider SDKs and real tools. The harness does not
change for a driver: it is the same :func:`sim.harness.loop.agent_loop`
generator the engines drive.
"""
