"""The protocol between the loop and its driver, and what the loop distrusts.

Which result answers which effect is :data:`ANSWERS`; a driver that sends any
other type has a bug, and the loop raises :class:`ProtocolError` naming the
effect and what it got. A result of the right type is still checked before
the loop uses it, because a real provider or tool can send odd things:

- :func:`result_problem`: numbers the harness accounts (token counts,
  seconds) must be finite, non-negative and at most :data:`MAX_TOKENS`
  tokens or :data:`MAX_SECONDS` seconds (an int of 10**400 is not a float a
  counter can add), and every field must have its type; otherwise the run
  fails as ``failed:invalid_response`` with a diagnostic naming the field
  (a budget cannot be enforced on a NaN, and money must never decrease);
- :func:`content_problem`: a model reply whose content is missing or holds
  something other than text, thinking and tool_use blocks is a malformed
  response, handled like a provider's server error (seed 000: retry once,
  then fail with a diagnostic).

A tool call whose arguments are not a JSON object is the model's mistake, not
the driver's: :mod:`sim.harness.policy` sends it back as a validation error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from sim.harness import effects as fx
from sim.harness.messages import TextBlock, ThinkingBlock, ToolUseBlock, Usage

ANSWERS: dict[type, tuple[type, ...]] = {
    fx.ModelRequest: (fx.ModelResponse, fx.ModelError),
    fx.ToolRequest: (fx.ToolResult, fx.ToolError),
    fx.Wait: (type(None), float, int),
    fx.ApprovalRequest: (fx.ApprovalDecision,),
    fx.VerifyRequest: (fx.Verdict,),
    fx.UserTurn: (fx.UserReply,),
    fx.Checkpoint: (type(None),),
    fx.SpawnRequest: (fx.ChildResults,),
    fx.CollectChildren: (fx.ChildResults,),
}
"""The result types a driver may answer each effect with (a Wait: None, or the
seconds that really passed when it was cut short)."""


class ProtocolError(TypeError):
    """A driver answered an effect with a result of a type the protocol does
    not allow for it (a bug in the driver, never a run's outcome)."""

    def __init__(self, effect: fx.Effect, result: object) -> None:
        self.effect = effect
        self.result = result
        allowed = " or ".join("None" if t is type(None) else t.__name__
                              for t in ANSWERS.get(type(effect), ()))
        shown = repr(result)
        if len(shown) > 200:
            shown = shown[:197] + "..."
        super().__init__(f"{type(effect).__name__} must be answered with {allowed}, "
                         f"got {type(result).__name__}: {shown}")


def check_answer(effect: fx.Effect, result: fx.Result) -> None:
    """Raise :class:`ProtocolError` unless ``result`` is of a type allowed to
    answer ``effect``."""
    if not isinstance(result, ANSWERS[type(effect)]):
        raise ProtocolError(effect, result)


# ----------------------------------------------------------- field checks
MAX_TOKENS = 2**40
"""The most tokens one field of one result may hold (about 1.1e12: no call
comes near; sums over a run stay far inside int64 and exact in a float)."""
MAX_SECONDS = 1e9
"""The most seconds one result may report (about 31.7 years)."""
_COUNT = f"an integer in [0, {MAX_TOKENS}] (tokens)"
_SECONDS = f"a number in [0, {MAX_SECONDS:g}] (seconds)"
_MAX_S = MAX_SECONDS
_LIMIT = MAX_TOKENS  # a | b | ... < _LIMIT holds exactly when each count of them does


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < _LIMIT


def _is_seconds(value: object) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and 0.0 <= value <= _MAX_S)  # NaN fails both comparisons


def _is_retry_after(value: object) -> bool:
    """None, or a number of seconds >= 0 below infinity, of any size: a
    server's hint, capped at :data:`~sim.harness.classifier.MAX_WAIT_S` when used."""
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool)
                             and 0.0 <= value < math.inf)


def _is_status(value: object) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool))


def _is_metric(value: object) -> bool:
    return value is None or (isinstance(value, int | float) and not isinstance(value, bool)
                             and -_MAX_METRIC <= value <= _MAX_METRIC)


_MAX_METRIC = 1e300


def _is_str(value: object) -> bool:
    return isinstance(value, str)


def _is_bool(value: object) -> bool:
    return isinstance(value, bool)


def _is_child_result(r: object) -> bool:
    """A :class:`~sim.harness.effects.ChildResult` whose outcome is named by
    strings and whose counts, cost and seconds are finite and >= 0."""
    return (isinstance(r, fx.ChildResult) and _is_str(r.status) and _is_str(r.reason)
            and _is_count(r.answer_tokens) and _is_count(r.tokens) and _is_count(r.runs)
            and r.runs >= 1 and _is_seconds(r.duration_s)
            and isinstance(r.cost_usd, int | float) and not isinstance(r.cost_usd, bool)
            and 0.0 <= r.cost_usd < math.inf)


def _is_child_results(value: object) -> bool:
    return isinstance(value, list) and all(_is_child_result(r) for r in value)


_USAGE_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens",
                 "thinking_tokens")
Check = tuple[str, Callable[[object], bool], str]
_FIELDS: dict[type, tuple[Check, ...]] = {
    fx.ModelResponse: (("usage", lambda u: isinstance(u, Usage), "a Usage"),
                    ("latency_s", _is_seconds, _SECONDS)),
    fx.ModelError: (("kind", _is_str, "a string"), ("message", _is_str, "a string"),
                 ("latency_s", _is_seconds, _SECONDS),
                 ("status", _is_status, "None or an integer (HTTP status)"),
                 ("retry_after_s", _is_retry_after, "None or a finite number >= 0 (seconds)")),
    fx.ToolResult: (("output", _is_str, "a string"), ("tokens", _is_count, _COUNT),
                 ("duration_s", _is_seconds, _SECONDS),
                 ("metric", _is_metric, "None or a finite number")),
    fx.ToolError: (("kind", _is_str, "a string"), ("message", _is_str, "a string"),
                ("tokens", _is_count, _COUNT), ("duration_s", _is_seconds, _SECONDS),
                ("status", _is_status, "None or an integer (HTTP status)"),
                ("retry_after_s", _is_retry_after, "None or a finite number >= 0 (seconds)")),
    fx.ApprovalDecision: (("approved", _is_bool, "a bool"), ("waited_s", _is_seconds, _SECONDS),
                       ("timed_out", _is_bool, "a bool"), ("reason", _is_str, "a string")),
    fx.Verdict: (("passed", _is_bool, "a bool"), ("feedback", _is_str, "a string"),
              ("feedback_tokens", _is_count, _COUNT), ("duration_s", _is_seconds, _SECONDS),
              ("usage", lambda u: u is None or isinstance(u, Usage), "None or a Usage")),
    fx.UserReply: (("text", _is_str, "a string"), ("tokens", _is_count, _COUNT),
                ("ended", _is_bool, "a bool"), ("duration_s", _is_seconds, _SECONDS)),
    fx.ChildResults: (("results", _is_child_results,
                       "a list of ChildResult (strings status and reason; counts, cost and "
                       "seconds finite and >= 0; runs >= 1)"),
                      ("duration_s", _is_seconds, _SECONDS)),
}
"""Per result type, each field with the test it must pass and what it must be."""


def _problem(field: str, value: object, expected: str) -> dict[str, str]:
    shown = repr(value)
    return {"field": field, "value": shown if len(shown) <= 100 else shown[:97] + "...",
            "expected": expected}


def _diagnose(result: object) -> dict[str, str] | None:
    """The first field of ``result`` that fails its test in :data:`_FIELDS`
    (a usage field by field), or None: the thorough check behind the quick
    tests of :func:`result_problem`."""
    checks = next((c for kind, c in _FIELDS.items() if isinstance(result, kind)), None)
    if checks is None:
        return None if _is_seconds(result) else _problem("seconds waited", result,
                                                         f"None or {_SECONDS}")
    for name, ok, expected in checks:
        value = getattr(result, name)
        if not ok(value):
            return _problem(name, value, expected)
    usage = getattr(result, "usage", None)
    if usage is not None:
        for name in _USAGE_FIELDS:
            value = getattr(usage, name)
            if not _is_count(value):
                return _problem(f"usage.{name}", value, _COUNT)
    return None


def result_problem(result: fx.Result) -> dict[str, str] | None:
    """What is impossible about a result of an allowed type, as a diagnostic
    ``{"field", "value", "expected"}`` (the value as its repr), or None when
    the result can be used: token counts must be integers >= 0, seconds
    finite and >= 0, a metric finite, and texts, kinds and flags of their
    types. A Wait's answer must be None or seconds. (A reply's
    ``stop_reason`` and ``model`` are only compared and reported, so any
    value is harmless: an unknown stop reason is an ordinary stop.)

    A well-formed result of one of the exact types the drivers send passes a
    quick test of :data:`WELL_FORMED`; anything else (a subclass, numpy
    numbers, a bad field) gets the thorough field-by-field check, which has
    the last word."""
    if result is None:
        return None
    quick = WELL_FORMED.get(type(result))
    if quick is not None and quick(result):
        return None
    return _diagnose(result)


def _clean_usage(u: object) -> bool:
    """True when ``u`` is exactly a :class:`Usage` of plain int counts >= 0."""
    if type(u) is not Usage:
        return False
    a, b, c = u.input_tokens, u.output_tokens, u.cache_read_tokens  # no tuple for up to 3
    d, e = u.cache_write_tokens, u.thinking_tokens
    # for ints, a | b | ... is negative exactly when one of them is
    return (type(a) is type(b) is type(c) is type(d) is type(e) is int
            and 0 <= (a | b | c | d | e) < _LIMIT)


# The quick tests below are written out in one expression each (no helper
# calls): they run for every reply and tool outcome.
def well_formed_response(r: fx.ModelResponse) -> bool:
    u, t = r.usage, r.latency_s
    if type(u) is not Usage:
        return False
    a, b, c = u.input_tokens, u.output_tokens, u.cache_read_tokens
    d, e = u.cache_write_tokens, u.thinking_tokens
    return (type(a) is type(b) is type(c) is type(d) is type(e) is int
            and 0 <= (a | b | c | d | e) < _LIMIT
            and (type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S)


def usable_reply(r: fx.ModelResponse) -> bool:
    """True only for a reply that :func:`well_formed_response` and
    :func:`content_problem` both accept: the loop's quick test of a model's
    answer, written out for the common content of one text or tool_use block
    (anything else is left to :func:`content_problem`). False means "check
    thoroughly", not "bad"."""
    u, t = r.usage, r.latency_s  # well_formed_response(r), written out
    if type(u) is not Usage:
        return False
    a, b, c = u.input_tokens, u.output_tokens, u.cache_read_tokens
    d, e = u.cache_write_tokens, u.thinking_tokens
    if not (type(a) is type(b) is type(c) is type(d) is type(e) is int
            and 0 <= (a | b | c | d | e) < _LIMIT
            and (type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S):
        return False
    content = r.content
    if type(content) is not list or len(content) != 1:
        return content_problem(content) is None
    block = content[0]
    if type(block) is ToolUseBlock:
        size = block.tokens
        return (type(size) is int and 0 <= size < _LIMIT and type(block.id) is str
                and block.id != "" and type(block.name) is str)
    if type(block) is TextBlock:
        size = block.tokens
        return type(size) is int and 0 <= size < _LIMIT and type(block.text) is str
    return content_problem(content) is None


def well_formed_tool_result(r: fx.ToolResult) -> bool:
    t, n, m = r.duration_s, r.tokens, r.metric
    return ((type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S
            and type(r.output) is str and type(n) is int and 0 <= n < _LIMIT
            and (m is None or (type(m) is float and math.isfinite(m))))


def _well_formed_tool_error(r: fx.ToolError) -> bool:
    t, n = r.duration_s, r.tokens
    return ((type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S
            and type(r.kind) is str and type(r.message) is str
            and type(n) is int and 0 <= n < _LIMIT
            and (r.status is None or type(r.status) is int) and r.retry_after_s is None)


def _well_formed_model_error(r: fx.ModelError) -> bool:  # a 429, a server error
    t, after = r.latency_s, r.retry_after_s
    return ((type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S
            and type(r.kind) is str and type(r.message) is str
            and (r.status is None or type(r.status) is int)
            and (after is None or ((type(after) is float or type(after) is int)
                                   and 0.0 <= after < math.inf)))


def _well_formed_verdict(r: fx.Verdict) -> bool:  # once per claimed success
    t, n, u = r.duration_s, r.feedback_tokens, r.usage
    return ((type(t) is float or type(t) is int) and 0.0 <= t <= _MAX_S
            and type(r.passed) is bool and type(r.feedback) is str
            and type(n) is int and 0 <= n < _LIMIT and (u is None or _clean_usage(u)))


WELL_FORMED: dict[type, Callable[[Any], bool]] = {
    fx.ModelResponse: well_formed_response,
    fx.ToolResult: well_formed_tool_result,
    fx.ToolError: _well_formed_tool_error,
    fx.ModelError: _well_formed_model_error,
    fx.Verdict: _well_formed_verdict,
}
"""Per exact result type, a quick test that passes only results the thorough
check (:func:`_diagnose`) would pass; a result that fails it gets that check."""


def content_problem(content: object) -> tuple[str, str] | None:
    """Why a model reply's ``content`` cannot be used, as ``(kind, message)``
    for a :class:`~sim.harness.effects.ModelError` (``"empty"`` when there is
    none, ``"malformed"`` otherwise), or None. Content must be a list of
    text, thinking and tool_use blocks with string texts, sizes that are
    token counts, and tool calls with distinct non-empty string ids and
    string names (their arguments are checked by the policy layer)."""
    if type(content) is list:
        ids = 0
        for block in content:  # the common case, checked fast
            kind = type(block)
            size = block.tokens if kind in _BLOCKS else None
            if type(size) is not int or not 0 <= size < _LIMIT:
                break
            if kind is ToolUseBlock:
                if type(block.id) is not str or not block.id or type(block.name) is not str:
                    break
                ids += 1
            elif kind is TextBlock:
                if type(block.text) is not str:
                    break
            elif type(block.thinking) is not str or type(block.signature) is not str:
                break
        else:
            if ids < 2 or len({b.id for b in content if type(b) is ToolUseBlock}) == ids:
                return None
    return _content_diagnosis(content)


_BLOCKS = frozenset({TextBlock, ThinkingBlock, ToolUseBlock})


def _content_diagnosis(content: object) -> tuple[str, str] | None:
    """The thorough check behind :func:`content_problem`'s fast path."""
    if content is None:
        return "empty", "the reply has no content"
    if not isinstance(content, list):
        return "malformed", f"content is a {type(content).__name__}, not a list of blocks"
    ids: set[str] = set()
    for i, block in enumerate(content):
        if isinstance(block, ToolUseBlock):
            call_id = block.id
            if not isinstance(call_id, str) or not call_id or call_id in ids:
                return "malformed", f"content[{i}] has a missing or repeated id {call_id!r}"
            ids.add(call_id)
            if not isinstance(block.name, str):
                return "malformed", f"content[{i}] names no tool: {block.name!r}"
        elif isinstance(block, TextBlock):
            if not isinstance(block.text, str):
                return "malformed", f"content[{i}] has text {block.text!r}"
        elif isinstance(block, ThinkingBlock):
            if not isinstance(block.thinking, str) or not isinstance(block.signature, str):
                return "malformed", f"content[{i}] is a thinking block without its text"
        else:
            return "malformed", (f"content[{i}] is a {type(block).__name__}, not a text, "
                                 f"thinking or tool_use block")
        if not _is_count(block.tokens):
            return "malformed", f"content[{i}] has size {block.tokens!r}, not a token count"
    return None
