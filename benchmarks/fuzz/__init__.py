"""The doors of issue 41's generated-input campaign: each command and flag of
the README reached by generated hostile input (``doors.py``), judged by the
detectors of ``checks.py``. ``python -m benchmarks.fuzz_campaign`` runs them
with the older surfaces; ``tests/test_fuzz_doors.py`` runs a few cases of
each in CI.

Which surface reaches each command and flag (``python -m sim --help`` and
each subcommand's ``--help``; surfaces of ``benchmarks/fuzz_campaign.py``):

* any command: ``--version``, ``-h``, ``-v``, ``-vv``: flags;
* ``run``: a SCENARIO file: scenario, cli; a SCENARIO name and ``[tool.sim]``
  ``out``/``scenarios``: project; ``--tasks --seed --out --force --format
  --workers --set --cost-ceiling``: cli; ``--traces --resume --scheduler
  --allow-plugins --quiet``: flags (``--resume`` also faults); ``--otel``:
  otel; ``$SIM_OUT``: sim_out;
* ``sweep``: as ``run`` without ``--otel``: scenario, cli, flags;
* ``cost``: every flag (``--steps --prefix --per-step --output --thinking
  --model --provider --prices --cache --cache-ttl --price-* --format``): cost;
* ``compare``: ``--tasks --out --resamples --alpha --max-share-drop
  --max-cost-rise``: cli; ``--summary-md`` (targets, a full disk): summary_md;
  ``--junit --base-set --candidate-set --pairing --save-results --seed --set
  --allow-plugins --format --force``: flags;
* ``capacity``: ``--target-p95-wait --traces --force`` (the rest as
  ``run``): flags;
* ``traces import``: files of every format: importers (and
  ``benchmarks/fuzz_traces.py``); ``--strict --workers --scheduler --format
  --force --out``: flags, importers; ``traces summary --format``: importers,
  flags;
* ``replay``: ``--set --polling --tool-error-kind --after-intervention
  --format --out --force``: replay; ``--workers --scheduler``: flags;
* ``live``: ``--otel``: otel (against the test suite's fake provider);
  ``--checkpoints --approve --no-stream --format --force``: flags; provider
  misbehaviour: provider;
* ``calibrate``: ``--out --folds --seed --classes --name --evaluations
  --no-ladder --sample``: calibrate; ``--report --by --search-runs --workers
  --scheduler --format``: flags;
* ``tune``: ``--where --candidates --knobs --keep-successes --objective
  --forecast-runs --pooled --out --force``: tune; ``--scenario --seed
  --format``: flags;
* ``scenarios``: ``--format``, headers and names with escapes,
  ``$SIM_SCENARIOS``: scenarios; ``[tool.sim]``: project;
* ``view``: ``--print``, PATH: view.

Not reached: ``--scheduler`` with a running Dask scheduler (the campaign
starts none; an address where none listens is reached), ``live`` against a
real provider, and ``-vv``'s traceback on an error (the flag is given, the
error is drawn at random).
"""
