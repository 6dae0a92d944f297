"""The results of a what-if replay: the figures a reviewer asks for first.

A replay's results folder has the files and columns of a sweep's
(:mod:`sim.output.results`: ``results.parquet``, ``summary.json``,
``report.md``), so ``python -m sim compare`` reads it like any other. What a
replay adds:

- ``results.parquet`` carries, after the :class:`~sim.task_record.TaskRecord`
  columns, the replay's own per-run columns
  (:func:`sim.drivers.replay.replay_row`): the recording (exit, resolved,
  steps, tokens, cost) and what the candidate did to it (stopped and where,
  diverged and how, detector signals, both cost bounds, prompt fidelity),
  and for runs with subagents the session's columns
  (:func:`sim.drivers.replay.rows.session_columns`; only then: a folder
  without subagents gives the columns it always did);
- each cell of ``summary.json`` has a ``replay`` block (:func:`replay_block`):
  runs stopped by the candidate and why, split by whether the source says the
  run was resolved (a stop that would have cost a success) or not (spend saved
  on a failing run); tokens and dollars saved; detector firings per signal
  with their share on resolved runs; interventions with the cost under both
  assumptions (the run stops at its first intervention: a lower bound; it goes
  on as recorded: an upper bound); and how faithfully the recording could be
  replayed; and, when the traces record subagents, a ``session`` block
  (:func:`session_block`: where the shared budgets stopped sessions, the
  children's terminal states, the concurrency cap);
- ``report.md`` leads with those figures (:func:`replay_markdown`); names from
  the traces (outcomes, models, the traces' path) escaped for Markdown.

Units: tokens are counts, money is USD (each call's one price,
:mod:`sim.cost.recorded`: the source's recorded cost where trustworthy, its
basis counted per run), shares are in [0, 1].
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd

from sim.cost.recorded import BASES, RECORDED, basis_line
from sim.output.results import (
    PARQUET_NAME,
    REPORT_NAME,
    SUMMARY_NAME,
    cell_summary,
    folder_summary,
    report_markdown,
    write_atomic,
    write_json,
    write_parquet,
)
from sim.output.safe_text import md_code, md_text

HTML_NAME = "report.html"


def _judged(rows: pd.DataFrame) -> dict[str, int]:
    """Runs, and how many of them the source says were resolved, unresolved or
    does not say."""
    resolved = rows["recorded_resolved"]
    return {"runs": len(rows), "resolved": int(resolved.eq(True).sum()),
            "unresolved": int(resolved.eq(False).sum()), "unknown": int(resolved.isna().sum())}


def _prompt(rows: pd.DataFrame) -> pd.Series:
    return rows["input_tokens"] + rows["cache_read_tokens"] + rows["cache_write_tokens"]


def _signals(text: str) -> list[str]:
    """The signals of a ``detector_signals`` cell (``"repetition@4;cycle@9"``)."""
    return [part.split("@")[0] for part in text.split(";") if part]


def replay_block(rows: pd.DataFrame, *, traces: str, after_intervention: str,
                 tool_error_kind: str, detector_enabled: bool, text_hashes: bool,
                 unpriced_models: tuple[str, ...] = ()) -> dict[str, Any]:
    """The ``replay`` block of one cell's summary, from the cell's rows.

    ``recorded``: the runs as recorded (counts by resolved, tokens, the cost
    of the runs with a price: each call's one price, its recorded cost where
    trustworthy, :mod:`sim.cost.recorded`; ``price_basis``: runs per basis;
    runs without a price); ``stopped``: runs the candidate ended
    before the recording did, with ``by_outcome``; ``saved``: prompt and output
    tokens and USD saved at the one price (also split by resolved and unresolved runs,
    and at the runs' prices, ``priced_usd``); ``detector``: ``judgeable`` with a
    ``note``, and per signal ``firings``, ``runs``, ``resolved_runs``,
    ``resolved_share``; ``interventions``: runs that diverged, by first kind,
    and ``cost_usd``, ``prompt_tokens`` and ``succeeded_share`` as
    ``{"lower", "upper"}`` (stop at the intervention / continue as recorded);
    ``fidelity``: prompt counts that differ from the recording, text turns,
    unrecorded arguments, verdicts the source does not give. ``unpriced_models``
    are the recorded models the price catalogue does not know (priced at the
    scenario's own prices)."""
    stopped = rows[rows["stopped"]]
    by_outcome = {
        str(outcome): _judged(group)
        for outcome, group in sorted(stopped.groupby("outcome"), key=lambda kv: (
            -len(kv[1]), str(kv[0])))}
    has_cost = rows["recorded_calls_usd"].notna() & (rows["recorded_calls_usd"] != float("inf"))
    bases = (Counter(str(b) for b in rows.loc[has_cost, "price_basis"])
             if "price_basis" in rows else Counter({RECORDED: int(has_cost.sum())}))
    saving = rows["saved_usd"].where(has_cost, 0.0)
    resolved = rows["recorded_resolved"]
    recorded_prompt = int(rows["recorded_prompt_tokens"].sum())
    recorded_usd = float(rows["recorded_calls_usd"].where(has_cost, 0.0).sum())
    saved_usd = float(saving.sum())
    saved = {
        "prompt_tokens": recorded_prompt - int(_prompt(rows).sum()),
        "output_tokens": int(rows["recorded_output_tokens"].sum()
                             - (rows["output_tokens"] + rows["thinking_tokens"]).sum()),
        "cost_usd": saved_usd,
        "cost_usd_on_resolved": float(saving[resolved.eq(True).fillna(False)].sum()),
        "cost_usd_on_unresolved": float(saving[resolved.eq(False).fillna(False)].sum()),
        "cost_share": saved_usd / recorded_usd if recorded_usd else 0.0,
        "prompt_share": ((recorded_prompt - int(_prompt(rows).sum())) / recorded_prompt
                         if recorded_prompt else 0.0),
        "priced_usd": float(rows["saved_priced_usd"].sum()),
    }
    diverged = rows[rows["diverged"]]
    bounds = {
        "cost_usd": {"lower": float(rows["cost_lower_usd"].sum()),
                     "upper": float(rows["cost_upper_usd"].sum())},
        "prompt_tokens": {"lower": int(rows["prompt_tokens_lower"].sum()),
                          "upper": int(rows["prompt_tokens_upper"].sum())},
        "succeeded_share": {"lower": float((rows["outcome_if_stop"] == "succeeded").mean()),
                            "upper": float((rows["outcome_if_continue"] == "succeeded").mean())},
    }
    kinds = Counter(str(k) for k in diverged["divergence"])
    tool_calls = int(rows["recorded_tool_calls"].sum())
    session = session_block(rows)
    return {
        **({} if session is None else {"session": session}),
        "traces": traces, "after_intervention": after_intervention,
        "tool_error_kind": tool_error_kind,
        "recorded": {**_judged(rows), "prompt_tokens": recorded_prompt,
                     "output_tokens": int(rows["recorded_output_tokens"].sum()),
                     "tool_calls": tool_calls, "cost_usd": recorded_usd,
                     "runs_without_cost": int((~has_cost).sum()),
                     "price_basis": {b: bases[b] for b in BASES if bases[b]},
                     "priced_usd": float(rows["recorded_priced_usd"].sum()),
                     "unpriced_models": sorted(unpriced_models)},
        "stopped": {**_judged(stopped), "by_outcome": by_outcome},
        "saved": saved,
        "detector": _detector(rows, detector_enabled, tool_calls),
        "interventions": {**_judged(diverged),
                          "by_kind": dict(sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))),
                          **bounds},
        "fidelity": {
            "prompt_exact_runs": int(rows["prompt_exact"].sum()),
            "prompt_mismatch_runs": int((~rows["prompt_exact"]).sum()),
            "prompt_mismatch_calls": int(rows["prompt_mismatches"].sum()),
            "prompt_max_deviation": int(rows["prompt_max_deviation"].max()),
            "resized_steps": int(rows["resized_steps"].sum()),
            "text_turns": int(rows["text_turns"].sum()), "text_hashes": text_hashes,
            "unrecorded_arguments": int(rows["unrecorded_arguments"].sum()),
            "passed_over_calls": int(rows["passed_over_calls"].sum()),
            "verdicts_unknown": int(rows["verdict_unknown"].sum()),
        },
    }


def _detector(rows: pd.DataFrame, enabled: bool, tool_calls: int) -> dict[str, Any]:
    if not enabled:
        return {"judgeable": False, "note": "the candidate's detector is off", "signals": {}}
    if tool_calls == 0:
        return {"judgeable": False, "signals": {},
                "note": "the recording has no tool calls, so the detector cannot be judged "
                        "(it sees only the synthetic reply_to_user turns); budgets are "
                        "judged as usual"}
    signals: dict[str, dict[str, Any]] = {}
    resolved = rows["recorded_resolved"]
    for text, judged in zip(rows["detector_signals"], resolved, strict=True):
        counts = Counter(_signals(str(text)))
        for signal, firings in counts.items():
            entry = signals.setdefault(signal, {"firings": 0, "runs": 0, "resolved_runs": 0})
            entry["firings"] += firings
            entry["runs"] += 1
            entry["resolved_runs"] += int(not pd.isna(judged) and bool(judged))
    for entry in signals.values():
        entry["resolved_share"] = entry["resolved_runs"] / entry["runs"]
    return {"judgeable": True, "note": "", "signals": dict(sorted(signals.items()))}


# ------------------------------------------------------------------ report
def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "n/a"


def usd(value: float) -> str:
    """Dollars with four decimals, a rounding residue shown as $0.0000 (never -$0.0000)."""
    return f"${round(value, 9) + 0.0:,.4f}"


def changes_text(block: Mapping[str, Any]) -> str | None:
    """What the replayed harness changes from the one in force in the
    recorded runs, in one line (dotted fields, both values), as far as the
    runs state it; None for a block without the comparison."""
    found = block.get("changes")
    if found is None:
        return None
    if not found["known"] and not found["changes"]:
        return ("Changed from the recorded harness: unknown (the recorded runs state no "
                "limits)")
    if not found["changes"]:
        return ("Changed from the recorded harness: nothing in "
                + ", ".join(found["known"]) + " (the limits the runs state)")
    return ("Changed from the recorded harness: "
            + "; ".join(f"{c['path']}: {c['recorded']} -> {c['replayed']}"
                        for c in found["changes"])
            + " (the runs state " + (", ".join(found["known"]) or "no limit") + ")")


SESSION_DTYPES: dict[str, str] = {
    "children": "int64", "children_states": "string", "session_stopped_by": "string",
    "session_stopped_call": "Int64", "session_agent_call": "Int64",
    "session_running_tokens": "Int64", "session_stop": "string",
    "max_running_children": "int64", "children_delayed": "int64",
}
"""pandas dtype of every session column of a replay's rows
(:func:`sim.drivers.replay.rows.session_columns`)."""


def session_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` with the session columns typed (:data:`SESSION_DTYPES`; a run
    without children in a frame that has some: no child, nothing stopped);
    unchanged when no run has children."""
    if "children" not in rows:
        return rows
    out = rows.copy()
    for name in ("children", "max_running_children", "children_delayed"):
        out[name] = out[name].fillna(0)
    for name in ("children_states", "session_stopped_by", "session_stop"):
        out[name] = out[name].fillna("")
    return out.astype(SESSION_DTYPES)


def session_block(rows: pd.DataFrame) -> dict[str, Any] | None:
    """The ``session`` block of a cell whose traces record subagents (None
    otherwise): ``runs`` with children and ``children`` in all;
    ``stopped``: sessions a shared budget stopped, ``by_parent`` and
    ``by_child`` (whose call it refused first), and ``stops``: each such
    run's id and where (``stopped by the session budget at child a3's call 4
    (running sum 51,200 > 50,000)``; call numbers from 0, among the agent's
    calls); ``saved_tokens`` and ``saved_usd``: what these sessions (parent
    and children) did not spend (tokens: prompt plus output and thinking;
    USD at the one price); ``children_states``: children per terminal
    ``status:reason``;
    ``children_delayed``: children whose start the cap
    (``harness.subagents.max_concurrent``) delayed (their calls replayed
    later, :mod:`sim.drivers.replay.session`), ``max_running_children`` the
    most running at once as recorded."""
    if "children" not in rows:
        return None
    rows = session_rows(rows)
    with_children = rows[rows["children"] > 0]
    by = with_children["session_stopped_by"]
    stopped = with_children[by != ""]
    states: Counter[str] = Counter()
    for text in with_children["children_states"]:
        states.update(item.split("=", 1)[1] for item in str(text).split(";") if "=" in item)
    return {
        "runs": len(with_children), "children": int(with_children["children"].sum()),
        "stopped": len(stopped), "by_parent": int((by == "parent").sum()),
        "by_child": int(((by != "") & (by != "parent")).sum()),
        "stops": [{"run_id": str(r), "where": str(w)}
                  for r, w in zip(stopped["run_id"], stopped["session_stop"], strict=True)],
        "saved_tokens": int(with_children["recorded_prompt_tokens"].sum()
                            + with_children["recorded_output_tokens"].sum()
                            - _prompt(with_children).sum()
                            - (with_children["output_tokens"]
                               + with_children["thinking_tokens"]).sum()),
        "saved_usd": float(with_children["saved_usd"].sum()),
        "children_states": dict(sorted(states.items(), key=lambda kv: (-kv[1], kv[0]))),
        "children_delayed": int(with_children["children_delayed"].sum()),
        "max_running_children": int(with_children["max_running_children"].max()
                                    if len(with_children) else 0),
    }


STOPS_SHOWN = 10
"""The most session stops the report lists one by one."""


def session_markdown(block: Mapping[str, Any]) -> list[str]:
    """The report's lines on subagents and the session budget."""
    n = block["runs"]
    lines = ["", "### Subagents and the session budget", "",
             f"{n:,} recorded sessions with {block['children']:,} subagents were replayed "
             "with parent and children charging one session ledger in the recorded order "
             f"of their calls. The session budget stopped {block['stopped']:,} of them "
             f"({block['by_parent']:,} at a parent's call, {block['by_child']:,} at a "
             f"child's), saving {block['saved_tokens']:,} tokens and "
             f"{usd(block['saved_usd'])} over parents and children."]
    for stop in block["stops"][:STOPS_SHOWN]:
        lines.append(f"- {md_code(stop['run_id'])}: {md_text(stop['where'])}")
    if len(block["stops"]) > STOPS_SHOWN:
        lines.append(f"- and {len(block['stops']) - STOPS_SHOWN:,} more")
    if block["children_states"]:
        states = ", ".join(f"{md_code(k)} {v:,}" for k, v in block["children_states"].items())
        lines += ["", f"Children ended: {states}."]
    lines += ["", f"At most {block['max_running_children']:,} children ran at once as "
                  f"recorded; {block['children_delayed']:,} were delayed by the concurrency "
                  "cap (their calls replayed once a running child ended, in the order the "
                  "session budget saw them)."]
    return lines


def replay_markdown(block: Mapping[str, Any], cell: str = "") -> str:
    """The report's lead section for one cell's replay block: stops and why,
    savings, detector firings, interventions with both bounds, fidelity."""
    rec, st, sv = block["recorded"], block["stopped"], block["saved"]
    n = rec["runs"]
    mode = block["after_intervention"]
    assumption = ("each diverged run goes on as recorded: an upper bound on cost"
                  if mode == "continue" else
                  "each diverged run ends at its first intervention: a lower bound on cost")
    name = f" ({md_text(cell)})" if cell else ""
    changed = changes_text(block)
    lines = [
        f"## What the candidate would have done to {n:,} recorded runs{name}",
        "",
        *([f"**{md_text(changed)}**", ""] if changed else []),
        f"Traces: {md_code(block['traces'])}; {rec['resolved']:,} resolved, {rec['unresolved']:,} "
        f"unresolved, {rec['unknown']:,} not judged by the source. After an intervention: "
        f"**{mode}** ({assumption}). Recorded tool errors are replayed as "
        f"{md_code(block['tool_error_kind'])} errors.",
        "",
        f"**Stopped by the candidate: {st['runs']:,} of {n:,} runs ({_pct(st['runs'], n)})**: "
        f"{st['resolved']:,} resolved (stops that would have cost a success), "
        f"{st['unresolved']:,} unresolved (spend saved on runs that failed anyway), "
        f"{st['unknown']:,} not judged.",
    ]
    if st["by_outcome"]:
        lines += ["", "| why | runs | resolved | unresolved | not judged |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {md_code(outcome)} | {c['runs']:,} | {c['resolved']:,} | {c['unresolved']:,} "
                  f"| {c['unknown']:,} |" for outcome, c in st["by_outcome"].items()]
    lines += [
        "",
        f"**Saved**: {sv['prompt_tokens']:,} prompt tokens "
        f"({_pct(sv['prompt_tokens'], rec['prompt_tokens'])} of {rec['prompt_tokens']:,} "
        f"recorded) and {sv['output_tokens']:,} output tokens; "
        f"**{usd(sv['cost_usd'])}** of {usd(rec['cost_usd'])} recorded "
        f"({_pct(sv['cost_usd'], rec['cost_usd'])}): {usd(sv['cost_usd_on_resolved'])} on "
        f"resolved runs, {usd(sv['cost_usd_on_unresolved'])} on unresolved ones. At the "
        f"runs' prices (what a money budget sees): {usd(sv['priced_usd'])} of "
        f"{usd(rec['priced_usd'])}.",
    ]
    if rec.get("price_basis"):
        lines.append(basis_line(rec["price_basis"]).capitalize() + ".")
    if rec["unpriced_models"]:
        lines.append(f"Models not in the price catalogue, priced at the scenario's prices: "
                     f"{', '.join(map(md_code, rec['unpriced_models']))}.")
    if rec["runs_without_cost"]:
        lines.append(f"{rec['runs_without_cost']:,} runs have no price: their savings count "
                     "only at the runs' prices.")
    det = block["detector"]
    lines += ["", "### Detector firings", ""]
    if not det["judgeable"]:
        lines.append(f"Not judged: {md_text(det['note'])}.")
    elif not det["signals"]:
        lines.append("The detector did not fire on any run.")
    else:
        lines += ["| signal | firings | runs | on resolved runs | share on resolved runs |",
                  "|---|---:|---:|---:|---:|"]
        lines += [f"| {md_text(signal)} | {e['firings']:,} | {e['runs']:,} "
                  f"| {e['resolved_runs']:,} | {100 * e['resolved_share']:.1f}% |"
                  for signal, e in det["signals"].items()]
        lines += ["", "A firing on a resolved run is a false positive on these runs: the run "
                      "succeeded without the intervention."]
    iv = block["interventions"]
    lines += ["", "### Interventions the recording cannot answer", ""]
    if not iv["runs"]:
        lines.append("None: every run is exact up to where it ended.")
    else:
        kinds = ", ".join(f"{md_text(kind)} {count:,}" for kind, count in iv["by_kind"].items())
        cost, share = iv["cost_usd"], iv["succeeded_share"]
        lines.append(
            f"{iv['runs']:,} runs diverged (first intervention: {kinds}; {iv['resolved']:,} of "
            f"them resolved). Total cost {usd(cost['lower'])} if each stops at its first "
            f"intervention, {usd(cost['upper'])} if it continues as recorded; succeeded "
            f"share {100 * share['lower']:.1f}% and {100 * share['upper']:.1f}%.")
    if "session" in block:
        lines += session_markdown(block["session"])
    fi = block["fidelity"]
    lines += ["", "### Fidelity", ""]
    exact = (f"The harness's own count of every prompt equals the recorded one in "
             f"{fi['prompt_exact_runs']:,} of {n:,} runs")
    if fi["prompt_mismatch_runs"]:
        exact += (f"; in {fi['prompt_mismatch_runs']:,} runs {fi['prompt_mismatch_calls']:,} "
                  f"calls differ (by up to {fi['prompt_max_deviation']:,} tokens), where the "
                  "recorded prompt grew less than the previous call's output (reasoning or "
                  "thinking not kept in the history, or the source compacted); later steps "
                  "return to the recorded count as soon as their growth allows.")
    else:
        exact += "."
    lines.append(exact)
    if fi["text_turns"]:
        how = ("by the recorded text hashes, so only identical messages repeat"
               if fi["text_hashes"] else
               "the traces hold no text hashes, so each counts as a distinct message")
        lines.append(f"{fi['text_turns']:,} text-only turns in the middle of a run were "
                     f"replayed as `reply_to_user` calls ({how}).")
    if fi["unrecorded_arguments"]:
        lines.append(f"{fi['unrecorded_arguments']:,} tool calls record no arguments; each "
                     "is taken as distinct, so the detector cannot see them repeat.")
    if fi["passed_over_calls"]:
        lines.append(f"{fi['passed_over_calls']:,} recorded compaction or grader calls were "
                     "not made by the candidate (their cost counts as saved).")
    if fi["verdicts_unknown"]:
        lines.append(f"{fi['verdicts_unknown']:,} final answers were checked by a verifier "
                     "the source gives no verdict for: accepted, as when recorded.")
    return "\n".join(lines)


def write_replay_results(out_dir: str | os.PathLike, rows_by_cell: Mapping[str, pd.DataFrame],
                         params_by_cell: Mapping[str, dict], blocks: Mapping[str, dict], *,
                         title: str, description: str = "",
                         provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Write a replay's ``results.parquet`` (every cell's rows, in order),
    ``summary.json`` (:func:`sim.output.results.cell_summary` of each cell plus
    its ``replay`` block), ``report.md`` (led by :func:`replay_markdown` of
    each cell) and ``report.html`` into ``out_dir``, each atomically; return
    the summary. ``provenance`` (:mod:`sim.output.provenance`) goes into the
    summary, the Parquet metadata and the report."""
    from sim.output.html import markdown_to_html

    cells = []
    for name, rows in rows_by_cell.items():
        cell = cell_summary(name, params_by_cell[name], rows)
        cell["replay"] = blocks[name]
        cells.append(cell)
    if provenance is not None:
        first = next(iter(rows_by_cell.values()), None)
        models = [] if first is None or "model" not in first else sorted(
            {str(m) for m in first["model"] if isinstance(m, str) and m})
        replayed = {"runs": 0 if first is None else len(first), "models": models}
        provenance = {**provenance, "replayed": replayed}
    summary = folder_summary(cells, description, provenance)
    lead = "\n\n".join(replay_markdown(c["replay"], c["name"] if len(cells) > 1 else "")
                       for c in cells)
    markdown = report_markdown(summary, title, lead)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_parquet(out / PARQUET_NAME, pd.concat([session_rows(r) for r in rows_by_cell.values()],
                                                ignore_index=True),
                  summary.get("provenance"))
    write_json(out / SUMMARY_NAME, summary)
    write_atomic(out / REPORT_NAME, markdown.encode("utf-8"))
    write_atomic(out / HTML_NAME, markdown_to_html(markdown, {}, title=title).encode("utf-8"))
    return summary
