"""The doors of issue 41's generated-input campaign: each command and flag of
the README reached by generated hostile input (``doors.py``), judged by the
detectors of ``checks.py``. ``python -m benchmarks.fuzz_campaign`` runs them
with the older surfaces; ``tests/test_fuzz_doors.py`` runs a few cases of
each in CI."""
