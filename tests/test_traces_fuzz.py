"""Generated input for every trace format (issue 25): hypothesis mutates small
sample files of each format (values replaced by JSON nested up to 100,000 deep,
huge and non-finite numbers, negative ones, empty lists, wrong types, years 1
and 9999; values swapped, as out-of-order timestamps are; keys deleted;
sometimes a symlink loop beside the file) and imports them through the CLI.
Every case exits 0 or 2, never with a traceback, within a time limit, and
whatever is written is accepted by every reader (``read_traces``, ``traces
summary``, the replay's reader). The generator is
``benchmarks/fuzz_traces.py``, whose campaign runs thousands of such cases."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.fuzz_traces import (
    REPLACEMENTS,
    inspect_sample,
    json_samples,
    run_case,
    write_case,
)

CASE_SECONDS = 20.0
"""Per-case time limit: a case takes well under a second; this bounds a hang."""

SAMPLES = json_samples()
FORMATS = [*sorted(SAMPLES), "sim", "inspect"]

picks = st.lists(st.tuples(st.sampled_from(("replace", "replace", "swap", "delete")),
                           st.integers(0, 10**6), st.integers(0, 10**6),
                           st.integers(0, 4 * len(REPLACEMENTS))), min_size=1, max_size=3)


@pytest.fixture(scope="module")
def inspect_doc(tmp_path_factory):
    pytest.importorskip("inspect_ai")
    return inspect_sample(tmp_path_factory.mktemp("inspect"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_mutated_files_exit_0_or_2_and_whatever_is_written_reads_back(fmt, request):
    sample = request.getfixturevalue("inspect_doc") if fmt == "inspect" else SAMPLES.get(fmt)

    @settings(max_examples=16, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(picks=picks, loop=st.booleans())
    def check(picks, loop):
        work = Path(tempfile.mkdtemp(prefix="fuzz-"))
        try:
            source = write_case(work, fmt, sample, picks, loop)
            outcome, detail = run_case(source, work, CASE_SECONDS)
        finally:
            shutil.rmtree(work, ignore_errors=True)
        assert outcome in ("ok", "refused"), f"{outcome}: {detail}"

    check()


def test_unmutated_samples_import_cleanly(tmp_path):
    """The generator's samples are valid files of their format (so mutations
    start from something an importer reads)."""
    for fmt in sorted(SAMPLES):
        work = tmp_path / fmt
        assert run_case(write_case(work, fmt, SAMPLES[fmt], [], False), work,
                        CASE_SECONDS) == ("ok", "")
    work = tmp_path / "sim"
    assert run_case(write_case(work, "sim", None, [], False), work, CASE_SECONDS) == ("ok", "")
