"""The trace importers on real files that the formats' own tools wrote (taken
from those tools' repositories: ``tests/fixtures/real/README.md`` names each
file's source and licence). Each expectation is counted by hand from the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sim.traces import read_traces
from sim.traces.importer import import_traces

REAL = Path(__file__).parent / "fixtures" / "real"


def test_inspect_json_log_without_sample_ids_is_imported(tmp_path: Path) -> None:
    """An Inspect JSON log written by inspect_ai 0.3.41, whose header has no
    ``eval.dataset.sample_ids`` (inspect_ai's streaming sample reader refuses
    such a log), is read whole: its one sample is one run of one call with the
    usage the file records (66 input, 2 output tokens, no cache), the eval's
    model, and the ``match`` scorer's ``I`` as not resolved."""
    pytest.importorskip("inspect_ai")
    import_traces([REAL / "inspect" / "log_formats.json"], tmp_path / "out")
    runs, calls = read_traces(tmp_path / "out")
    assert runs["run_id"].tolist() == ["FDENXLYYaukMN6EbfnNHvk/1/1"]
    run = runs.iloc[0]
    assert (run["task_id"], run["model"], run["steps"]) == ("1", "ollama/llama3.1", 1)
    assert not run["resolved"]
    assert calls[["input_tokens", "cache_read_tokens", "cache_write_tokens",
                  "output_tokens", "reasoning_tokens"]].values.tolist() == [[66, 0, 0, 2, 0]]
