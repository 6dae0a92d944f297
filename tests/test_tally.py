"""The tally that adds up one statistic split across pytest-xdist workers
(tests/tally.py): only the part recorded last sees every part, once."""

from __future__ import annotations

import multiprocessing

from tally import run_folder, tally


def test_only_the_last_part_gets_every_count(tmp_path):
    parts = {"a", "b", "c"}
    assert tally(tmp_path, "s", "a", 3, parts) is None
    assert tally(tmp_path, "s", "b", 4, parts) is None
    assert tally(tmp_path, "s", "c", 5, parts) == {"a": 3, "b": 4, "c": 5}
    assert tally(tmp_path, "other", "a", 1, {"a"}) == {"a": 1}  # statistics kept apart


def _record(folder, part):
    return tally(folder, "race", part, 1, {str(i) for i in range(8)})


def test_parts_recorded_at_once_by_processes_are_all_counted_and_checked_once(tmp_path):
    with multiprocessing.get_context("spawn").Pool(4) as pool:
        seen = pool.starmap(_record, [(tmp_path, str(i)) for i in range(8)])
    complete = [s for s in seen if s is not None]
    assert len(complete) == 1 and sum(complete[0].values()) == 8


def test_the_run_folder_is_this_runs(tmp_path_factory, request):
    folder = run_folder(tmp_path_factory, request.config)
    base = tmp_path_factory.getbasetemp()
    assert folder in (base, base.parent) and folder.is_dir()
