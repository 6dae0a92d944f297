"""Fitting a world to traces: ``python -m sim calibrate TRACES_DIR --out scenario.yaml``.

A trace folder (``runs.parquet`` + ``calls.parquet``, the trace model of
:mod:`sim.traces`) goes in; a scenario whose world behaves like the recorded
agent comes out, with a report of how well it fits, measured on runs the fit
did not see. The stages, one module each:

- :mod:`~sim.calibrate.data`: read and check the folder, derive per-run and
  per-call quantities, split off the held-out runs;
- :mod:`~sim.calibrate.classes`: group runs into task classes (by model, or
  clusters of run features);
- :mod:`~sim.calibrate.estimate`: what can be estimated directly (prefix and
  growth per run by least squares, sizes, rates of errors, loops, messages
  and faults, the exit mix, latencies, prices);
- :mod:`~sim.calibrate.build`: the scenario those estimates make;
- :mod:`~sim.calibrate.simulate`: simulated runs of a scenario as the same
  quantities;
- :mod:`~sim.calibrate.search`: a simulate-and-compare search over the few
  parameters direct estimates cannot give, on common random numbers;
- :mod:`~sim.calibrate.measure`: KS distances with critical values, quantiles,
  exit-mix distance, bootstrap intervals;
- :mod:`~sim.calibrate.report`: the scenario YAML, ``calibration.json``,
  ``calibration.md`` and ``calibration.html``;
- :mod:`~sim.calibrate.pipeline`: all of it, as the command runs it.
"""
