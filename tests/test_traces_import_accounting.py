"""Every input of an import is accounted for in import.json
(sim/traces/importer.py, sim/traces/import_report.py): each file ends up
exactly one of imported (it names a run), skipped (with a reason), ignored,
a companion, or merged (its records belong to runs another file begins);
none vanishes, as a tau2 results file with ``"simulations": []`` did."""

from __future__ import annotations

import json
from pathlib import Path

from sim.traces import import_traces

SIMULATION = {
    "id": "s1", "task_id": "7", "termination_reason": "agent_stop",
    "messages": [{"role": "assistant", "content": "hi",
                  "usage": {"prompt_tokens": 100, "completion_tokens": 8}}]}

T0, T1 = "2025-01-01T00:00:00.000000", "2025-01-01T00:00:02.000000"
ROOT = {"id": "r1", "trace_id": "r1", "run_type": "chain", "name": "agent",
        "start_time": T0, "dotted_order": "20250101T000000000000Zr1"}
LLM = {"id": "l1", "trace_id": "r1", "parent_run_id": "r1", "run_type": "llm",
       "name": "ChatOpenAI", "start_time": T0,
       "dotted_order": "20250101T000000000000Zr1.20250101T000000000000Zl1"}
LLM_PATCH = {"id": "l1", "trace_id": "r1", "end_time": T1,
             "outputs": {"usage_metadata": {"input_tokens": 40, "output_tokens": 5,
                                            "total_tokens": 45}}}


def mixed_folder(folder: Path) -> dict[str, str]:
    """A folder of seven files, by name -> the category each must end in."""
    files = {
        "a_tau2.json": ({"simulations": [SIMULATION]}, "imported"),
        "b_tau2_empty.json": ({"simulations": []}, "skipped"),
        "c_langsmith_post.json": ({"post": [ROOT, LLM]}, "imported"),
        "d_langsmith_patch.json": ({"patch": [LLM_PATCH]}, "merged"),
        "e_preds.json": ({"i1": {"model_patch": "diff"}}, "companion"),
        "f_unknown.json": ({"foo": 1}, "skipped"),
        "g_notes.txt": ("just notes", "ignored"),
    }
    folder.mkdir()
    for name, (content, _) in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (folder / name).write_text(text)
    return {str(folder / name): category for name, (_, category) in files.items()}


def categories(report) -> dict[str, list[str]]:
    return {"imported": sorted(report.run_files), "skipped": sorted(report.skipped_files()),
            "ignored": sorted(report.ignored), "companion": sorted(report.companions),
            "merged": sorted(report.merged)}


def test_every_file_of_a_mixed_folder_is_in_exactly_one_category(tmp_path):
    """7 files: 2 imported (tau2, LangSmith post), 2 skipped (tau2 with no
    simulations: no runs; an unknown JSON object), 1 ignored (.txt), 1
    companion (predictions), 1 merged (a LangSmith patch of a run the post
    file began); the patch's usage reaches the run."""
    expected = mixed_folder(tmp_path / "in")
    report = import_traces([tmp_path / "in"], tmp_path / "out")
    found = categories(report)
    placed = [file for files in found.values() for file in files]
    assert sorted(placed) == sorted(expected)  # each file once, none missing
    for category, files in found.items():
        assert files == sorted(f for f, c in expected.items() if c == category), category
    assert report.runs == 2 and report.inputs == 7
    written = json.loads((tmp_path / "out" / "import.json").read_text())
    assert written["inputs"] == 7
    assert written["merged_files"] == [str(tmp_path / "in" / "d_langsmith_patch.json")]
    reasons = {Path(f["file"]).name: f["reason"] for f in written["skipped_files"]["files"]}
    assert reasons == {"b_tau2_empty.json": "no runs", "f_unknown.json": "unknown format"}
    assert (written["files_imported"] + written["skipped_files"]["count"]
            + len(written["ignored"]) + len(written["companions"])
            + len(written["merged_files"])) == written["inputs"]


def test_an_empty_tau2_results_file_named_alone_is_a_skipped_file(tmp_path):
    """``"simulations": []`` beside a usable file: that file skipped as
    ``no runs``, with a detail saying why."""
    empty, good = tmp_path / "empty.json", tmp_path / "good.json"
    empty.write_text(json.dumps({"simulations": []}))
    good.write_text(json.dumps({"simulations": [SIMULATION]}))
    report = import_traces([empty, good], tmp_path / "out")
    assert report.skipped_files() == {str(empty): "no runs"}
    [skip] = report.skips
    assert "simulations" in skip.detail and skip.run is None

