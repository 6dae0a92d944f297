"""The doors of issue 41's generated-input campaign: each command and flag of
the README reached by generated hostile input (``doors.py``), judged by the
detectors of ``checks.py``. ``python -m benchmarks.fuzz_campaign`` runs them
with the older surfaces; ``tests/test_fuzz_doors.py`` runs a few cases of
each in CI.

Which surface reaches each command and flag (``python -m sim --help`` and
each subcommand's ``--help``; surfaces of ``benchmarks/fuzz_campaign.py``):

| command | flags | surfaces |
|---|---|---|
| (any) | ``--version``, ``-h``, ``-v``, ``-vv`` | flags |
| ``run`` | SCENARIO file | scenario, cli |
| ``run`` | SCENARIO name, ``[tool.sim]`` ``out``/``scenarios`` | project |
| ``run`` | ``--tasks --seed --out --force --format --workers --set --cost-ceiling`` | cli |
| ``run`` | ``--traces --resume --scheduler --allow-plugins --quiet`` | flags, faults (``--resume``) |
| ``run`` | ``--otel`` | otel |
| ``run`` | ``$SIM_OUT`` | sim_out |
| ``sweep`` | as ``run`` (no ``--otel``) | cli, scenario, flags |
| ``cost`` | every flag (``--steps --prefix --per-step --output --thinking --model --provider --prices --cache --cache-ttl --price-*``, ``--format``) | cost |
| ``compare`` | ``--tasks --out --resamples --alpha --max-share-drop --max-cost-rise`` | cli |
| ``compare`` | ``--summary-md`` (targets, a full disk) | summary_md |
| ``compare`` | ``--junit --base-set --candidate-set --pairing --save-results --seed --set --allow-plugins --format --force`` | flags |
| ``capacity`` | ``--target-p95-wait --traces --force`` (the rest as ``run``) | flags |
| ``traces import`` | files of every format | importers (and ``benchmarks/fuzz_traces.py``) |
| ``traces import`` | ``--strict --workers --scheduler --format --force --out`` | flags, importers |
| ``traces summary`` | ``--format`` | importers, flags |
| ``replay`` | ``--set --polling --tool-error-kind --after-intervention --format --out --force`` | replay |
| ``replay`` | ``--workers --scheduler`` | flags |
| ``live`` | ``--otel`` | otel (against the test suite's fake provider) |
| ``live`` | ``--checkpoints --approve --no-stream --format --force`` | flags |
| ``live`` | provider misbehaviour | provider |
| ``calibrate`` | ``--out --folds --seed --classes --name --evaluations --no-ladder --sample`` | calibrate |
| ``calibrate`` | ``--report --by --search-runs --workers --scheduler --format`` | flags |
| ``tune`` | ``--where --candidates --knobs --keep-successes --objective --forecast-runs --pooled --out --force`` | tune |
| ``tune`` | ``--scenario --seed --format`` | flags |
| ``scenarios`` | ``--format``, headers and names with escapes, ``$SIM_SCENARIOS`` | scenarios |
| ``scenarios`` | ``[tool.sim]`` | project |
| ``view`` | ``--print``, PATH | view |

Not reached: ``--scheduler`` with a running Dask scheduler (the campaign
starts none; an address where none listens is reached), ``live`` against a
real provider, and ``-vv``'s traceback on an error (the flag is given, the
error is drawn at random).
"""
