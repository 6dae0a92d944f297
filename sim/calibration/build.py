"""The scenario that direct estimates (and the search's adjustments) make.

:func:`scenario_document` turns :class:`~sim.calibration.estimate.Estimates`
and an :class:`Adjustment` into a scenario mapping plus a comment for each
fitted field (what it was fitted from), ready for :func:`render_yaml`. The
harness is the recorded one as far as the traces say: its limits, its
no-progress detector where its stops show one (else none), no harness
retries of tool errors, no verifier, a conversation with the task-giver
when the runs have one, prompt caching when they use the cache. The world
has one task class per estimate (a single class is the world itself), whose
fitted endings wait while its model is in a loop (``ends_in_loop`` false:
the loops' lengths and escapes are fitted as loops, not as endings). Given
a fan-out fit (:mod:`sim.calibration.fanout`: traces whose calls record
subagents), the harness has ``harness.subagents`` (the tool, and the
concurrency the traces show) and the world a ``world.fanout`` block and the
children's task class (``worker``, weight 0: no task of its own is drawn from
it), the classes then written as a class list even when the parents are one
class.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import yaml

from sim.calibration.estimate import ClassEstimate, Estimates
from sim.world.distributions import BaseDistribution, Empirical, Fixed, Lognormal
from sim.world.ranges import MAX_LOG_SD

if TYPE_CHECKING:
    from sim.calibration.fanout import FanoutFit


@dataclass(frozen=True)
class Adjustment:
    """What the simulate-and-compare search changes, for every class alike:
    ``need_shift`` is added to the log of the need (so the need scales by
    ``exp(need_shift)``), the need's log-sd is multiplied by ``sigma_scale``,
    and an unsolvable task's ``need_scale`` by ``unsolvable_scale``. In a
    class with fitted endings (competing risks) the need no longer ends a run:
    the hazards stand as fitted (with the harness's stops censored) and only
    ``sigma_scale`` acts on them, multiplying the frailty variance (none when
    the fit found none)."""

    need_shift: float = 0.0
    sigma_scale: float = 1.0
    unsolvable_scale: float = 1.0


def _dist(d: BaseDistribution) -> dict[str, Any] | int:
    """A size distribution as scenario data (a fixed size as a plain number)."""
    if isinstance(d, Fixed):
        return max(0, round(d.value))
    data = d.model_dump()
    return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in data.items()}


def _first_prompt(values: list[int]) -> dict[str, Any] | None:
    if len(set(values)) == 1:
        return None
    return Empirical(values=tuple(float(v) for v in values)).model_dump()


def _class_sections(c: ClassEstimate, a: Adjustment, stable: int) -> dict[str, Any]:
    sections: dict[str, Any] = {
        "difficulty": {"distribution": "lognormal", "mu": round(c.need_mu + a.need_shift, 6),
                       "sigma": round(min(MAX_LOG_SD, max(0.05, c.need_sigma * a.sigma_scale)),
                                      6), "min": 1},
        "policy": {"loop": round(c.loop, 6), "transient": 0.0,
                   "validation": round(c.validation, 6), "premature": 0.0,
                   "talk": round(c.talk, 6), "self_escape": round(c.self_escape, 6),
                   "self_end": round(c.self_end, 6),
                   "escape_after_nudge": round(c.escape_after_nudge, 6),
                   "ends_in_loop": False},
        "tokens": {"prefix": max(min(c.first_prompts), stable + 1),
                   "output": _dist(c.output_tool), "answer_output": _dist(c.output_text)},
        "user": {"reply": _dist(c.reply), "stop_when_done": 1.0, "accept_claim": 1.0,
                 "give_up": 0.0},
        "faults": {"persistent": round(c.persistent, 8)},
        "unsolvable": {"share": round(c.unsolvable, 6),
                       "need_scale": round(max(0.05, c.need_scale * a.unsolvable_scale), 6)},
        "latency": {"ttft_s": round(c.ttft_s, 6), "decode_tps": round(min(c.decode_tps, 1e9), 4),
                    "prefill_tps": None if c.prefill_tps is None else round(c.prefill_tps, 2)},
    }
    first = _first_prompt(c.first_prompts)
    if first is not None:
        sections["tokens"]["first_prompt"] = first
    if c.run_sigma > 0:
        sections["tokens"]["run_scale"] = Lognormal(median=1.0,
                                                    sigma=round(c.run_sigma, 6)).model_dump()
    if c.output_final is not None:
        sections["tokens"]["final_output"] = _dist(c.output_final)
    if c.thinking is not None:
        sections["tokens"]["thinking"] = _dist(c.thinking)
    if c.by_step is not None:
        sections["tokens"]["by_step"] = c.by_step
    sections["cache"] = {"automatic": c.automatic_cache,
                         "first_prompt_cached": round(c.first_prompt_cached, 6)}
    if c.cache_hits is not None:  # the provider's own hits (the shares then do not apply)
        sections["cache"] = {"automatic": c.automatic_cache, "hits": c.cache_hits}
    elif c.cache_share is not None:
        sections["cache"]["miss"] = round(c.cache_miss, 6)
        sections["cache"]["read_share"] = c.cache_share.model_dump()
    if c.endings is not None:
        sections["endings"] = c.endings.section(frailty_scale=a.sigma_scale)
    if c.reply_latency is not None:
        median, sigma = c.reply_latency
        sections["user"]["latency"] = {"median_s": max(round(median, 6), 1e-6),
                                       "sigma": round(sigma, 6)}
    return sections


def scenario_document(est: Estimates, adjust: Adjustment = Adjustment(), *, name: str,
                      description: str, tasks: int, seed: int, prices_date: str | None = None,
                      fanout: FanoutFit | None = None
                      ) -> tuple[dict[str, Any], dict[str, str]]:
    """``(scenario mapping, comments by dotted path)``; ``fanout``: the
    fitted fan-out (None: the world starts no subagents, no block)."""
    comments: dict[str, str] = {}
    harness = _harness(est, prices_date, comments)
    if fanout is not None:
        harness["subagents"] = fanout.harness()
        comments["harness.subagents"] = (
            "the subagent tool the fitted world's spawns call; max_concurrent: the most "
            "children of one spawn the traces show running at once" if fanout.concurrent
            is not None else "the subagent tool the fitted world's spawns call (the traces "
            "do not time the children: the harness's default concurrency)")
    # the fan-out's spawns call the subagent tool: not a tool of the world's own
    tools = _tools(est, comments, exclude=() if fanout is None else (harness["subagents"]["tool"],))
    world = _world(est, adjust, tools, comments, fanout)
    doc = {"name": name, "description": description, "tasks": tasks, "seed": seed,
           "harness": harness, "world": world}
    return doc, comments


def _harness(est: Estimates, prices_date: str | None, comments: dict[str, str]
             ) -> dict[str, Any]:
    """The harness section: the main class's model and prices, the limits the
    traces state; its comments added to ``comments``."""
    main = est.classes[0]
    prices = {m: {"input": p.input, "output": p.output, "cache_read": p.cache_read,
                  "cache_write": p.cache_write} for m, p in est.prices.items()}
    max_output = int(math.ceil(max(est.max_output, 1) * 1.25 / 256) * 256)
    # a window that holds the largest prompt twice and the largest output
    # after it (traces of outputs past 200,000 tokens must still validate)
    window = max(200_000, 2 * est.max_prompt, est.max_prompt + max_output)
    harness: dict[str, Any] = {
        "model": main.model or "unknown",
        "prices": prices.get(main.model, {"input": 0.0, "output": 0.0, "cache_read": 0.0,
                                          "cache_write": 0.0}),
        "max_output_tokens": max_output,
        "context_window": window,
        "budgets": {"steps": est.step_limit, "tool_errors": est.error_limit,
                    "money_usd": est.cost_limit},
        "detector": {"enabled": False} if est.detector is None else est.detector.section(),
        "retry": {"retry_tool_errors": False},
        "verifier": {"name": "none"},
        "conversation": {"enabled": est.conversation},
        "prompt_cache": "5m" if est.cached else None,
    }
    if prices_date:
        harness["prices_date"] = prices_date
    others = {m: p for m, p in prices.items() if m != harness["model"]}
    if others:
        harness["model_prices"] = others
    comments["harness.prices"] = est.prices[main.model].source if main.model in est.prices \
        else "no prices"
    for m in others:
        comments[f"harness.model_prices.{m}"] = est.prices[m].source
    comments["harness.budgets"] = "; ".join(
        ["the limits the traces state (steps: " + est.notes.get("steps", "the step limit")
         + ")", *(est.notes[k] for k in ("tool_errors", "prompt_tokens", "output_tokens")
           if k in est.notes)])
    if est.context_window is not None:  # the recorded harness failed on an overflow
        harness["context_window"] = est.context_window
        harness["context"] = {"emergency_compaction": False}
        comments["harness.context_window"] = est.notes["context"]
        # an output the recorded window cannot hold: the window bounds the call
        harness["max_output_tokens"] = min(max_output, est.context_window)
    if est.token_limit is not None:
        harness["budgets"]["tokens"] = est.token_limit
    if est.output_limit is not None:
        harness["budgets"]["output_tokens"] = est.output_limit
    comments["harness.detector"] = ("the recorded harness's detector is unknown: off"
                                    if est.detector is None else est.detector.note)
    comments["harness.max_output_tokens"] = f"1.25 x the largest output seen ({est.max_output})"
    return harness


def _tools(est: Estimates, comments: dict[str, str], exclude: tuple[str, ...] = ()
           ) -> list[dict[str, Any]]:
    """The world's tools (weights, durations, result sizes), commented; the
    tools named in ``exclude`` left out (the subagent tool, whose calls the
    fitted fan-out makes), the weights shares of the calls of the rest."""
    kept = [t for t in est.tools if t.name not in exclude]
    total_calls = sum(t.calls for t in kept)
    tools: list[dict[str, Any]] = [
        {"name": t.name, "weight": round(t.calls / max(total_calls, 1), 6),
         "effect": "read", "timeout_s": 1.0e6, "definition_tokens": 0,
         "duration": {"median_s": max(round(t.duration[0], 6), 1e-6),
                      "sigma": round(t.duration[1], 6)},
         "result_tokens": _dist(t.result)} for t in kept]
    if not tools:
        tools = [{"name": "tool", "weight": 1.0, "definition_tokens": 0,
                  "result_tokens": 0}]
    comments["world.tools"] = ("the most called tools: weight = share of calls; result_tokens "
                               "= lognormal MLE of the results of the calls each started; "
                               "duration from the gaps between calls")
    return tools


def _world(est: Estimates, adjust: Adjustment, tools: list[dict[str, Any]],
           comments: dict[str, str], fanout: FanoutFit | None = None) -> dict[str, Any]:
    """The world section: one class's sections inline, or a class list over a
    shared stable prefix (and the children's class of a fan-out, weight 0,
    its need as fitted: the search adjusts the parents'); commented."""
    main = est.classes[0]
    child = None if fanout is None else fanout.child
    every = est.classes + ([child] if child is not None else [])
    stable = max(1, min(min(c.first_prompts) for c in every) - 1)
    world: dict[str, Any] = {"tools": tools}
    sections = [_class_sections(c, adjust, stable) for c in est.classes]
    if len(est.classes) == 1 and fanout is None:
        world.update(sections[0])
        world["tokens"] = {**sections[0]["tokens"], "task": sections[0]["tokens"]["prefix"]
                           - stable}
        _comment_class(comments, "world", main)
        return world
    world["tokens"] = {"prefix": stable + 1, "task": 1}
    world["classes"] = []
    total = sum(c.runs for c in est.classes)
    for c, s in zip(est.classes, sections, strict=True):
        entry: dict[str, Any] = {"name": c.name, "weight": round(c.runs / total, 6),
                                 "model": c.model or None}
        weights = {t: round(n / max(sum(c.tool_calls.values()), 1), 6)
                   for t, n in c.tool_calls.items()}
        entry.update(s)
        if weights:
            entry["tool_weights"] = {t["name"]: weights.get(t["name"], 0.0) for t in tools}
        world["classes"].append(entry)
        _comment_class(comments, f"world.classes[{c.name}]", c)
    if child is not None:
        entry = {"name": child.name, "weight": 0.0, "model": child.model or None}
        entry.update(_class_sections(child, Adjustment(), stable))
        weights = {t: round(n / max(sum(child.tool_calls.values()), 1), 6)
                   for t, n in child.tool_calls.items()}
        if weights:
            entry["tool_weights"] = {t["name"]: weights.get(t["name"], 0.0) for t in tools}
        world["classes"].append(entry)
        _comment_class(comments, f"world.classes[{child.name}]", child)
        comments[f"world.classes[{child.name}]"] = (
            f"the subagents: {child.runs} children's calls fitted as runs of their own (weight "
            f"0: only spawns draw it); no fitted endings (a child's exit is not recorded)")
    if fanout is not None:
        world["fanout"] = fanout.as_world()
        comments["world.fanout"] = fanout.note()
    comments["world.tokens"] = ("the stable prefix every class shares: one less than the "
                                "smallest first prompt")
    return world


def _comment_class(comments: dict[str, str], path: str, c: ClassEstimate) -> None:
    comments[path] = f"{c.runs} fitted runs, mostly {c.model or 'an unknown model'}"
    comments[f"{path}.difficulty"] = c.notes.get("need", "")
    comments[f"{path}.policy"] = c.notes.get("rates", "")
    comments[f"{path}.tokens"] = (c.notes.get("output", "") + "; first prompts: the runs' own; "
                                  + c.notes.get("run_scale", "")
                                  + ("; " + c.notes["by_step"] if "by_step" in c.notes else "")
                                  + ("; " + c.notes["final_output"] if "final_output" in c.notes
                                     else ""))
    comments[f"{path}.unsolvable"] = c.notes.get("exits", "")
    comments[f"{path}.latency"] = "non-negative least squares of call latencies"
    if c.notes.get("cache"):
        comments[f"{path}.cache"] = c.notes["cache"]
    if c.notes.get("endings"):
        comments[f"{path}.endings"] = c.notes["endings"]


# -------------------------------------------------------------------- YAML
def render_yaml(doc: dict[str, Any], comments: dict[str, str], header: list[str]) -> str:
    """The scenario as YAML text, written by the YAML library's safe dumper
    alone (:class:`_Dumper`: block sections, distributions and lists of
    scalars in flow style, no Python-specific tags), then whole comment lines
    put in: the ``header`` lines first (wrapped at 96 characters unless
    indented), and each commented path's comment on the line before its key
    (found by composing the dumped text with the YAML library; a list item's
    path is ``path[name]``). Comment text is escaped (:func:`comment_text`), so
    no character of it can end its line: the document is exactly what the
    dumper wrote, whatever the traces named their models (characters
    outside ASCII are escaped in quoted strings, so lines are only ever broken
    by ``\\n``)."""
    import textwrap

    body = yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=10 ** 9,
                     allow_unicode=False)  # ASCII: "\n" is the only line break
    lines = body.split("\n")[:-1]
    before: dict[int, list[str]] = {}
    root = yaml.compose(body)
    for path, line, column in ([] if root is None else _key_lines(root)):
        text = comments.get(path)
        # only keys that begin their line (block context): never inside a scalar
        if text and lines[line][:column].strip() in ("", "-", "?"):
            before.setdefault(line, []).append(" " * column + "# " + comment_text(text))
    out: list[str] = []
    for raw in header:
        h = comment_text(raw)
        if not h:
            out.append("#")
        elif h.startswith(" "):
            out.append(f"# {h}")
        else:
            out += [f"# {part}" for part in textwrap.wrap(h, 96)]
    for i, dumped in enumerate(lines):
        out.extend(before.get(i, ()))
        out.append(dumped)
    text = "\n".join(out) + "\n"
    if yaml.safe_load(text) != yaml.safe_load(body):  # a comment changed the document
        raise AssertionError("a comment changed the scenario document")
    return text


class _Dumper(yaml.SafeDumper):
    """``yaml.SafeDumper`` (safe types only) with the scenario files' layout:
    sections as block mappings, distributions and lists of numbers or
    strings in flow style, list items indented under their key."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _represent_dict(dumper: yaml.SafeDumper, data: Any) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(),
                                    flow_style="distribution" in data or not data)


def _represent_list(dumper: yaml.SafeDumper, data: Any) -> yaml.Node:
    flat = all(not isinstance(v, dict | list | tuple) for v in data)
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flat)


_Dumper.add_representer(dict, _represent_dict)
_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(tuple, _represent_list)


def comment_text(text: str) -> str:
    """``text`` fit for one comment line: every character that is not
    printable (line breaks of any kind, YAML's NEL, LS and PS included, tabs,
    control characters) written as its Python escape (``\\n``, ``\\x85``)."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii")
                   for ch in str(text))


def _key_lines(node: yaml.Node, path: str = "") -> list[tuple[str, int, int]]:
    """``(dotted path, line, column)`` of every mapping key and named list
    item under ``node`` (lines 0-based in the composed text)."""
    out: list[tuple[str, int, int]] = []
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            dotted = f"{path}.{key.value}" if path else str(key.value)
            out.append((dotted, key.start_mark.line, key.start_mark.column))
            out += _key_lines(value, dotted)
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            if not isinstance(item, yaml.MappingNode):
                continue
            name = next((v.value for k, v in item.value
                         if k.value == "name" and isinstance(v, yaml.ScalarNode)), "")
            item_path = f"{path}[{name}]"
            column = max(0, item.start_mark.column - 2)
            out.append((item_path, item.start_mark.line, column))
            out += _key_lines(item, item_path)
    return out
