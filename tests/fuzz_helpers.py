"""The fuzzer of tests/test_traces_fuzz.py (benchmarks/fuzz_traces.py) as the
importers' tests use it on their own valid samples: the mutations to draw,
and one case imported through the CLI in a folder of its own."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from benchmarks.fuzz_traces import REPLACEMENTS, run_case, write_case

MUTATIONS = st.lists(st.tuples(st.sampled_from(("replace", "replace", "swap", "delete")),
                               st.integers(0, 10**6), st.integers(0, 10**6),
                               st.integers(0, 4 * len(REPLACEMENTS))), min_size=1, max_size=3)
"""Up to three mutations of a document: a value replaced (deep nesting, huge
or non-finite numbers, wrong types), two values swapped, or one deleted."""

TIMEOUT_S = 20.0
"""How long one case may take before it counts as a hang (seconds)."""


def outcome_of_sample(fmt: str, sample: Any, picks: list) -> tuple[str, str]:
    """``(outcome, detail)`` of importing ``sample`` (a document of the
    fuzzer's format ``fmt``) mutated by ``picks``, in a temporary folder."""
    work = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        return run_case(write_case(work, fmt, sample, picks, False), work, TIMEOUT_S)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def outcome_of_text(name: str, text: str) -> tuple[str, str]:
    """``(outcome, detail)`` of importing a file ``name`` holding ``text``, in
    a temporary folder."""
    work = Path(tempfile.mkdtemp(prefix="fuzz-"))
    try:
        (work / "in").mkdir()
        (work / "in" / name).write_text(text)
        return run_case(work / "in", work, TIMEOUT_S)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def check_mutations(fmt: str, sample: Any, tmp_path: Path) -> None:
    """``sample`` (a valid document of the fuzzer's format ``fmt``) imports
    cleanly, and 16 of its mutations each import (exit 0, tables every reader
    accepts) or are refused (exit 2 with a message): never a traceback or a
    hang."""
    from hypothesis import HealthCheck, given, settings

    assert run_case(write_case(tmp_path, fmt, sample, [], False), tmp_path,
                    TIMEOUT_S) == ("ok", "")

    @settings(max_examples=16, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(picks=MUTATIONS)
    def check(picks: list) -> None:
        outcome, detail = outcome_of_sample(fmt, sample, picks)
        assert outcome in ("ok", "refused"), f"{outcome}: {detail}"

    check()
