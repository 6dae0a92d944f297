"""Drivers outside the harness that perform its effects: replay of recorded runs, and live
runs against provider SDKs (:mod:`sim.drivers.live`)."""
