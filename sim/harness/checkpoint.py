"""Checkpoint stores: durable copies of a run's state, one per completed step.

The loop yields :class:`~sim.harness.effects.Checkpoint` after each step; the
driver answers it by saving the state into a store. A run stopped as
``budget_exhausted`` or ``needs_human`` is resumed by loading its latest
checkpoint, calling :func:`sim.harness.state.resume`, and starting the loop
again with extended budgets.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Protocol

from sim.harness.state import HarnessState, from_dict, to_dict


class CheckpointStore(Protocol):
    """Where checkpoints live."""

    def save(self, run_id: str, turn: int, state: HarnessState) -> None:
        """Durably record ``state`` as the checkpoint of ``run_id`` after ``turn`` steps."""

    def load(self, run_id: str) -> HarnessState | None:
        """The latest checkpoint of ``run_id``, or None if there is none."""


class MemoryStore:
    """Checkpoints kept in memory (serialised, so later mutation of the live
    state does not alter them). For tests and simulations."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[int, str]] = {}

    def save(self, run_id: str, turn: int, state: HarnessState) -> None:
        """Record a serialised copy of ``state``."""
        self._data[run_id] = (turn, json.dumps(to_dict(state)))

    def load(self, run_id: str) -> HarnessState | None:
        """The latest checkpoint of ``run_id``, or None."""
        entry = self._data.get(run_id)
        return None if entry is None else from_dict(json.loads(entry[1]))


class SQLiteStore:
    """Checkpoints in an SQLite database (``path`` or ``":memory:"``); every
    save is its own committed transaction, and all steps are kept."""

    def __init__(self, path: str) -> None:
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS checkpoints (run_id TEXT NOT NULL, turn INTEGER NOT NULL,"
            " state TEXT NOT NULL, PRIMARY KEY (run_id, turn))")
        self._db.commit()

    def save(self, run_id: str, turn: int, state: HarnessState) -> None:
        """Record ``state`` for ``(run_id, turn)``, replacing an earlier save of that step."""
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO checkpoints VALUES (?, ?, ?)",
                             (run_id, turn, json.dumps(to_dict(state))))

    def load(self, run_id: str, turn: int | None = None) -> HarnessState | None:
        """The checkpoint of ``run_id`` after ``turn`` steps (default: the latest)."""
        if turn is None:
            row = self._db.execute("SELECT state FROM checkpoints WHERE run_id = ? "
                                   "ORDER BY turn DESC LIMIT 1", (run_id,)).fetchone()
        else:
            row = self._db.execute("SELECT state FROM checkpoints WHERE run_id = ? AND turn = ?",
                                   (run_id, turn)).fetchone()
        return None if row is None else from_dict(json.loads(row[0]))

    def close(self) -> None:
        """Close the database."""
        self._db.close()
