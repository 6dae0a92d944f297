"""The suite's scheduling aids in tests/conftest.py: the costliest scopes it
runs first exist, and collection puts them first, in the order listed."""

from __future__ import annotations

import ast
from pathlib import Path

from conftest import COSTLIEST, _cost_rank

ROOT = Path(__file__).resolve().parent.parent


def test_every_listed_scope_names_a_test_file_and_class():
    for scope in COSTLIEST:
        path, _, cls = scope.partition("::")
        assert (ROOT / path).is_file(), scope
        if cls:
            tree = ast.parse((ROOT / path).read_text(encoding="utf-8"))
            classes = {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
            assert cls in classes, scope
    assert len(set(COSTLIEST)) == len(COSTLIEST)


def test_listed_scopes_rank_in_order_and_the_rest_after():
    ranks = [_cost_rank(f"{scope}::test_x[a]") for scope in COSTLIEST]
    assert ranks == sorted(ranks) == list(range(len(COSTLIEST)))
    assert _cost_rank("tests/test_stats.py::test_x") == len(COSTLIEST)
