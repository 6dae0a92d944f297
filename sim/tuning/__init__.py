"""Choosing a harness's limits from a team's own recorded runs (``python -m sim tune``).

The question users bring is "which limits should I set?". :func:`~sim.tuning.search.tune`
answers it from a trace folder, with the evidence for each number:

- :mod:`~sim.tuning.inforce`: the harness in force (a scenario's, or the
  limits the traces state) and each knob's grid of candidates;
- :mod:`~sim.tuning.knobs`: the limits searched (token, money and step budgets,
  the no-progress detector), a setting as data, and the candidate grid derived
  from what each recorded run needed;
- :mod:`~sim.tuning.evidence`: one candidate's row of the frontier (successes
  kept and lost, mean and p95 cost, time, runs stopped by reason), each with
  its 95% interval;
- :mod:`~sim.tuning.replayed`: candidates that only tighten the harness in
  force, evaluated exactly by replaying the recorded runs;
- :mod:`~sim.tuning.stops`: where each tighter budget stops a run, from one
  replay of it in force (one pass for every candidate);
- :mod:`~sim.tuning.world`: candidates that loosen it or change the detector,
  forecast by the world calibrated to the same traces (its fidelity attached);
- :mod:`~sim.tuning.boundary`: each budget bisected between the last value
  that keeps successes and the first that does not;
- :mod:`~sim.tuning.search`: each knob alone, then jointly around the best;
  the recommendation (ties go to the harness in force), why the next-cheaper
  setting was refused; per model when the models' runs differ;
- :mod:`~sim.tuning.where`: ``--where`` slices of a trace folder (:mod:`sim.traces.where`; any
  ``runs.parquet`` column; usable by any command);
- :mod:`~sim.tuning.models`: whether a folder's models differ;
- :mod:`~sim.tuning.thin`: thin evidence (status 3) and the runs that would decide;
- :mod:`~sim.tuning.report`: the answer in one statement, the recommended
  harness block as scenario YAML (one per model in ``models/``), the
  frontier table, the runs stopped (``stopped_runs.csv``) and the report.

The package is ``sim.tuning`` (not ``sim.tune``) so that ``sim.tune`` stays
the API function of :mod:`sim.api`.
"""
