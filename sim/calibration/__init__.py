"""Fitting a world to traces: ``python -m sim calibrate TRACES_DIR --out scenario.yaml``.

A trace folder (``runs.parquet`` + ``calls.parquet``, the trace model of
:mod:`sim.traces`) goes in; a scenario whose world behaves like the recorded
agent comes out, with a report of how well it fits, judged by k-fold
cross-validation (every run held out once). The Python entry point is
:func:`sim.calibration.pipeline.calibrate`. The stages, one module each:

- :mod:`~sim.calibration.data`: read and check the folder, derive per-run and
  per-call quantities;
- :mod:`~sim.calibration.folds`: the cross-validation folds (stratified,
  seeded) and the seeds derived from the root seed;
- :mod:`~sim.calibration.classes`: group runs into task classes (by model, or
  clusters of run features);
- :mod:`~sim.calibration.estimate`: what can be estimated directly (prefix and
  growth per run by least squares, sizes, rates of errors, loops, messages
  and faults, the exit mix, latencies; the per-value fits of sizes, durations
  and latencies), with :mod:`~sim.calibration.prices` (prices per model);
- :mod:`~sim.calibration.sample`: the fixed-size stratified sample of runs the
  searches and held-out comparisons use, and the search's own sampling error;
- :mod:`~sim.calibration.build`: the scenario those estimates make;
- :mod:`~sim.calibration.fanout`: subagents (``calls.agent``): the spawn
  rate, children per spawn and the children's task class, and their check
  on held-out folds;
- :mod:`~sim.calibration.simulate`: simulated runs of a scenario as the same
  quantities;
- :mod:`~sim.calibration.search`: a simulate-and-compare search over the few
  parameters direct estimates cannot give, on common random numbers;
- :mod:`~sim.calibration.verdict`: KS distances with critical values, quantiles,
  exit-mix distance, bootstrap intervals, and the one cross-validated verdict (one
  family-wise adjustment over the per-run metrics and the exit mix, critical
  values from null replicates of each fold's world that count the fit's own
  error) and the per-fold checks;
- :mod:`~sim.calibration.ladder`: budgets at percentiles of the recorded runs,
  forecast (the fold worlds) against replay (the held-out runs);
- :mod:`~sim.calibration.power`: the verdict's power at the sample's size;
- :mod:`~sim.calibration.accuracy`: the forecast's errors on held-out runs
  beside the sampling floor (the other folds' runs taken as the forecast);
- :mod:`~sim.calibration.structure`: one class, per model or clusters, chosen
  by cross-validated loss;
- :mod:`~sim.calibration.fitting`: one world, and one fold, fitted;
- :mod:`~sim.calibration.jobs`: the folds, the ladder and the final fit as
  jobs for worker processes or Dask;
- :mod:`~sim.calibration.result`: the outcome and ``calibration.json``;
- :mod:`~sim.calibration.pipeline`: all of it, as the command runs it.

The scenario YAML and the report (``calibration.json``, ``calibration.md``,
``calibration.html``) are written by :mod:`sim.api.calibration_report`, above
this package: calibration imports nothing of :mod:`sim.output`.
"""
