"""The resolved scenario in words, for the head of a report.

A report's settings come from its provenance (:mod:`sim.output.provenance`),
that is from the scenario as it ran, after ``--set``: ``--set
harness.budgets.tokens=500000`` makes the report say "500 k prompt-token
budget", whatever the scenario file's description says. The overrides are
listed as given. Every value taken from the scenario or the recorded runs
(names, models, overrides, sweep axes) is escaped for Markdown
(:mod:`sim.output.safe_text`).
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from typing import Any

from sim.harness.params import Budgets
from sim.output.safe_text import md_code, md_text


def amount(n: float) -> str:
    """A count as people write it: ``2 M``, ``500 k``, ``1,234,567``, ``50``."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g} M"
    if n >= 10_000 and n % 1_000 == 0:
        return f"{n / 1_000:g} k"
    return f"{n:,}" if float(n).is_integer() else f"{n:,g}"


def budgets_text(b: Mapping[str, Any], cls: type = Budgets) -> str:
    """The set budgets of ``b`` (a scenario's ``harness.budgets`` as plain data)
    in words, one per field of the budgets dataclass ``cls`` in its order, as
    the field's metadata says (``report``; else its name and value)."""
    parts = []
    for f in dataclasses.fields(cls):
        value = b.get(f.metadata.get("alias", f.name))
        if value is not None:
            text = f.metadata.get("report") or f"`{f.name}` {{}}"
            parts.append(text.format(amount(value)))
    return ", ".join(parts) if parts else "no budgets"


def _detector(d: Mapping[str, Any]) -> str:
    if not d.get("enabled", True):
        return "no-progress detector off"
    nudges = d.get("nudges", 0)
    then = (f"{nudges} nudge{'s' if nudges != 1 else ''} then stop" if nudges
            else "stop on the first detection")
    return (f"detector {md_text(d.get('name'))} ({d.get('repeat_threshold')} identical calls; "
            f"{then})")


def _retries(r: Mapping[str, Any]) -> str:
    tool = r.get("tool_max_attempts")
    text = f"up to {r.get('max_attempts')} retries of a model call"
    if tool is not None:
        text += f" and {tool} of a tool call"
    if not r.get("retry_tool_errors", True):
        text += " (transient tool errors go to the model)"
    return text


def _prices(h: Mapping[str, Any]) -> str:
    prices = h.get("prices")
    if prices is None:
        return "catalogue prices"
    if isinstance(prices, str):
        return f"prices {md_text(prices)}"
    return "overridden prices"


def _des(des: Mapping[str, Any]) -> str:
    tenants = des.get("tenants") or []
    arrivals = (des.get("arrivals") or {}).get("kind", "poisson")
    text = f"{arrivals} arrivals from {len(tenants)} tenant{'s' if len(tenants) != 1 else ''}"
    if arrivals == "poisson":
        text += f" ({amount(sum(t.get('rate_per_hour', 0) for t in tenants))} tasks/h)"
    capacity = des.get("capacity") or {}
    pools = [f"{capacity[k]} {label}" for k, label in (("sandboxes", "sandboxes"),
                                                       ("model_slots", "model slots"))
             if capacity.get(k) is not None]
    return text + (f", {', '.join(pools)}" if pools else ", unlimited capacity")


def settings_sentence(scenario: Mapping[str, Any]) -> str:
    """The resolved scenario (a plain ``Scenario.model_dump(mode="json")``) in
    one sentence: engine, tasks and seed, model and prices, budgets,
    detector, verifier, retries, context, caching, capacity and sweep axes."""
    h = scenario.get("harness") or {}
    context = h.get("context") or {}
    verifier = (h.get("verifier") or {}).get("name", "none")
    parts = [f"engine {scenario.get('engine')}, {amount(scenario.get('tasks', 0))} tasks per "
             f"cell, seed {scenario.get('seed')}",
             f"model {md_text(h.get('model'))} with {_prices(h)}",
             budgets_text(h.get("budgets") or {}),
             _detector(h.get("detector") or {}),
             "no verifier" if verifier == "none" else f"verifier {md_text(verifier)}",
             _retries(h.get("retry") or {}),
             f"context window {amount(h.get('context_window', 0))} tokens"
             + (f", compaction above {amount(context['compact_at_tokens'])} tokens"
                if context.get("compact_at_tokens") else "")]
    if h.get("prompt_cache"):
        parts.append(f"prompt caching ({md_text(h['prompt_cache'])})")
    if h.get("approval_required"):
        parts.append(f"approval of {', '.join(map(md_text, h['approval_required']))} calls")
    if scenario.get("engine") == "des":
        parts.append(_des(scenario.get("des") or {}))
    sweep = scenario.get("sweep") or {}
    if sweep:
        parts.append("swept: " + ", ".join(f"{md_code(k)} ({len(v)} values)"
                                           for k, v in sweep.items()))
    return "; ".join(parts) + "."


def with_params(scenario: Mapping[str, Any], params: Mapping[str, Any] | None
                ) -> dict[str, Any]:
    """A copy of the plain scenario with a cell's parameters (``dotted.path``:
    value, as summary.json records them) set: what that cell ran with."""
    out = copy.deepcopy(dict(scenario))
    for key, value in (params or {}).items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                break
            node = child
        else:
            node[leaf] = value
    return out


def replay_sentence(replay: Mapping[str, Any]) -> str:
    """What a replay ran on: its recorded runs and their models."""
    models = list(replay.get("models") or [])
    shown = ", ".join(map(md_code, models[:6])) + (
        f" and {len(models) - 6} more" if len(models) > 6 else "")
    return (f"{replay['runs']:,} recorded runs of {len(models)} model"
            f"{'s' if len(models) != 1 else ''}{f' ({shown})' if models else ''}, replayed "
            f"under the candidate harness (the scenario's tasks, seed and world are not used)")


def provenance_lines(provenance: Mapping[str, Any] | None,
                     params: Mapping[str, Any] | None = None) -> list[str]:
    """Markdown lines for a report's settings: the settings (with ``params``,
    a single cell's own parameters, applied; a replay's recorded runs and
    models in place of tasks and model), the overrides and the recorded
    version and prices date; none without a provenance."""
    if not provenance or "scenario" not in provenance:
        return []
    overrides = provenance.get("overrides") or []
    shown = ", ".join(map(md_code, overrides)) if overrides else "none"
    sentence = settings_sentence(with_params(provenance["scenario"], params))
    replay = provenance.get("replayed")
    if replay:
        harness = sentence.split("; ", 2)[2] if sentence.count("; ") >= 2 else sentence
        sentence = f"{replay_sentence(replay)}; {harness}"
    return [f"**Settings** (as run, after overrides): {sentence}",
            "",
            f"**Overrides**: {shown}. Recorded by sim {md_text(provenance.get('sim_version'))}, "
            f"catalogue prices as of {md_text(provenance.get('prices_date'))}; the resolved "
            "scenario "
            "is in summary.json (`provenance`)."]
