"""One simulated task: the model's behaviour, the tools' behaviour and the
hidden ground truth, answering the harness's effects.

The model decides per call (seed 001's process, see
:class:`~sim.world.params.PolicyParams`) and answers as a real model does:
content blocks with tool_use names and arguments (a doom loop really repeats
one call, so the real detector sees it), usage and a stop_reason. It reads the
history only as a real model could: it notices a nudge in the last message.
The ground truth (``need``, the productive steps the task requires, and
``progress``) is read only by the verifier and the final record.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from math import exp, expm1

from sim.harness import effects as fx
from sim.harness.effects import ModelError, ModelResponse, ToolError, ToolResult
from sim.harness.messages import Block, TextBlock, ThinkingBlock, ToolUseBlock, Usage
from sim.world.difficulty import sample_need
from sim.world.prompt_cache import PromptCache
from sim.world.sizes import TaskSizes
from sim.world.streams import SIZES, USER, Draws
from sim.world.verifiers import Claim, run_check
from sim.world.world import MADE_CALLS, World

PRODUCTIVE, TRANSIENT, VALIDATION, LOOP, SPAWN = 0, 1, 2, 3, 4
NONE, RESOLVE, GIVE_UP, ERROR = 0, 1, 2, 3
"""The endings of a world with ``endings``: none at this step, or its cause."""

_new = object.__new__  # the commonest replies are built field by field (see _response)
_MADE = MADE_CALLS  # the call ids and targets of a run's first calls, made once per process
_CALL_IDS = tuple(f"toolu_{n}" for n in range(_MADE))
_TARGETS = (tuple(f"/work/src/item_{n}" for n in range(_MADE)),
            tuple(f"/work/notes/item_{n}" for n in range(_MADE)))


_LEFT_OF = re.compile(r"\$?([\d,]+(?:\.\d+)?) of \$?([\d,]+(?:\.\d+)?)")
"""``<left> of <total>`` in the harness's budget note."""


def budget_share(note: str) -> float | None:
    """The smallest share left (``left / total``) of the budgets a budget
    note reports (``"Budget: 12,000 of 50,000 prompt tokens left; ..."``),
    or None when it reports none: what a model reading it would take in."""
    shares = [float(left.replace(",", "")) / total
              for left, of in _LEFT_OF.findall(note)
              if (total := float(of.replace(",", ""))) > 0]
    return min(shares) if shares else None


def wrap_up_chance(wrap_up: float, at: float, slope: float | None, share: float) -> float:
    """The chance a call wraps up when ``share`` of a budget is left:
    ``wrap_up`` below ``at`` (0 from it on) without a ``slope``, else the
    logistic ``wrap_up / (1 + exp(slope * (share - at)))``."""
    if slope is None:
        return wrap_up if share < at else 0.0
    z = slope * (share - at)
    return wrap_up / (1.0 + exp(z)) if z < 700.0 else 0.0


class SimulatedTask(TaskSizes):
    """The world as one task sees it. ``respond``, ``execute``, ``verify``,
    ``approve`` and ``reply`` answer the kinds of effect that reach the world,
    each called as ``method(request, now)`` (the engines' dispatch table,
    :mod:`sim.engines.perform`); only ``respond`` reads ``now`` (seconds).

    A task of a world with classes first picks its class (one uniform draw of
    the difficulty stream) and then behaves as that class's world. Per-run
    draws (class, need, unsolvable, first prompt, size multiplier) come from
    the difficulty stream, each only when the world uses it; per-call sizes
    from the sizes stream; the task-giver's decisions from the user stream.
    """

    __slots__ = ("world", "model", "tools", "latency", "sizes", "user", "need", "progress",
                 "premature_at", "stuck", "loop_call", "kinds", "calls", "answer_correct",
                 "solvable", "scale", "task_tokens", "answer_tokens", "claim", "failing_turn",
                 "cache", "frailty",
                 "ending_turn", "ending", "fanout", "spawned", "top")

    def __init__(self, world: World, streams: tuple[Draws, ...], *, child: bool = False
                 ) -> None:
        difficulty, self.model, self.tools, self.latency = streams[:4]
        self.sizes, self.user = streams[SIZES], streams[USER]
        self.top = world  # the cell's world (its fanout, its classes)
        self.fanout = None if child else world.fanout  # children never spawn
        self.spawned = 0
        if world.classes:
            world = world.pick_class(difficulty.uniform())
        self.world = world
        self.need = sample_need(world.params.difficulty, difficulty)
        self.solvable = True
        if world.unsolvable_share and difficulty.uniform() < world.unsolvable_share:
            self.solvable = False
            self.need = max(1, round(self.need * world.unsolvable_scale))
        self.task_tokens = world.task_tokens
        if world.first_prompt is not None:
            first = round(world.first_prompt.sample(difficulty))
            self.task_tokens = max(1, first - world.stable_prefix_tokens)
        self.scale = 1.0 if world.run_scale is None else world.run_scale.sample(difficulty)
        self.frailty = 1.0 if world.frailty is None else world.frailty.sample(difficulty)
        if world.size_link and self.scale != 1.0:  # endings.size_link: no draw of its own
            self.frailty *= self.scale ** world.size_link
        self.ending_turn = -1
        self.ending = NONE
        self.progress = 0
        self.premature_at = int(self.need * world.premature_after)
        self.stuck = False
        self.loop_call: ToolUseBlock | None = None
        self.kinds: dict[str, int] = {}
        self.calls = 0
        self.answer_correct = False
        self.answer_tokens = 0
        self.claim: bool | None = None
        self.failing_turn = -1
        self.cache: PromptCache | None = None  # the prompt cache's entry, once a call caches

    @property
    def model_id(self) -> str | None:
        """The model of the task's class (None: the harness's model)."""
        return self.world.model

    # ------------------------------------------------------------- the model
    def respond(self, request: fx.ModelRequest, now: float = 0.0) -> ModelResponse | ModelError:
        """The model's answer to one request sent at time ``now`` (seconds; it
        matters only for the prompt cache's lifetime)."""
        w = self.world
        if request.purpose != "step":
            if request.purpose == "finalize":
                return self._response(request, [self._final_answer()], False, now)
            return self._summary(request)
        if w.plain:  # no endings and no faults: the decision is the first draw
            if self.stuck:
                return self._response(request, self._decide(request), False, now)
            r = self.model.uniform()  # _decide's draw and bands, inline
            content: list[Block] = [self._faulty_call(r) if r < w.c_validation
                                    else self._onward(r)]
            if self.fanout is not None:
                self._maybe_spawn(request, content)
            return self._response(request, content, False, now)
        truncated = False
        if w.endings and request.turn != self.ending_turn:
            self.ending_turn = request.turn
            self.ending = self._draw_ending(request.turn + 1)
            if self.ending == ERROR:
                self.failing_turn = request.turn
        if request.turn == self.failing_turn:  # a persistent fault: every retry fails
            return self._persistent_fault()
        if w.any_faults:
            u = self.model.uniform()
            if u < w.f_rate_limit:
                return ModelError("rate_limit", 429, w.retry_after_s, "rate limit exceeded",
                                  w.ttft_s)
            if u < w.f_server:
                return ModelError("server", 500, None, "internal server error", w.ttft_s)
            truncated = u < w.f_max_tokens
            if not truncated and u < w.f_persistent:
                self.failing_turn = request.turn
                return self._persistent_fault()
        if w.visible is not None and self._wraps_up(request):
            return self._response(request, [self._answer(
                self.solvable and self.model.uniform() < w.visible.wrap_up_success)],
                truncated, now)
        content = self._decide(request)
        if self.fanout is not None:
            self._maybe_spawn(request, content)
        return self._response(request, content, truncated, now)

    def _wraps_up(self, request: fx.ModelRequest) -> bool:
        """Whether the model wraps up at this call (``world.visible_budget``):
        the budget note ends the last message and one uniform of the model
        stream falls below :func:`wrap_up_chance` of the smallest share it
        reports (drawn only when that chance is positive)."""
        visible = self.world.visible
        if visible is None or not visible.wrap_up:
            return False
        last = request.messages[-1].content[-1]
        if last.type != "text" or last.origin != "budget":
            return False
        share = budget_share(last.text)
        if share is None:
            return False
        p = wrap_up_chance(visible.wrap_up, visible.wrap_up_at, visible.wrap_up_slope, share)
        return p > 0.0 and self.model.uniform() < p

    def _final_answer(self) -> TextBlock:
        """The answer to the harness's finalize call (tool_choice none): right
        with ``world.visible_budget.finalize_success`` (one uniform of the
        model stream), never without that block (the work is not done)."""
        visible = self.world.visible
        right = (visible is not None and self.solvable
                 and self.model.uniform() < visible.finalize_success)
        return self._answer(right)

    def _maybe_spawn(self, request: fx.ModelRequest, content: list[Block]) -> None:
        """Turn the reply's productive call into a call of the subagent tool
        with the chance ``world.fanout`` gives its step (two uniforms of the
        model stream: spawn or not, then how many children); the spawn counts
        as one productive step. Called only when the world has a fanout."""
        fanout = self.fanout
        block = content[-1]
        if (fanout is None or block.type != "tool_use"
                or self.kinds.get(block.id) != PRODUCTIVE):
            return
        p = fanout.spawn_at(request.turn + 1)
        if p <= 0.0 or self.model.uniform() >= p:
            return
        k = fanout.children(self.model.uniform())
        tasks = [f"subtask {self.spawned + j + 1}" for j in range(k)]
        self.spawned += k
        self.kinds[block.id] = SPAWN
        self.progress += 1
        content[-1] = ToolUseBlock(block.id, fanout.tool, {"tasks": tasks}, block.tokens)

    def _persistent_fault(self) -> ModelError:
        """The server error of a call that fails on every retry (a fault drawn
        from ``faults.persistent``, or a fitted ending by error)."""
        return ModelError("server", 500, None, "internal server error (persistent)",
                          self.world.ttft_s)

    def _draw_ending(self, step: int) -> int:
        """Whether the run ends at its ``step``-th model call and by which cause
        (one uniform of the model stream): the bin's total hazard times the
        run's frailty gives the chance, the hazards' shares the cause."""
        w = self.world
        b = w.end_bin(step)
        total = w.end_total[b] * self.frailty
        if total <= 0.0:
            return NONE
        p = -expm1(-total)
        u = self.model.uniform()
        if u >= p:
            return NONE
        share = u / p
        return RESOLVE if share < w.end_resolve[b] else GIVE_UP if share < w.end_give_up[b] \
            else ERROR

    def _decide(self, request: fx.ModelRequest) -> list[Block]:
        """The reply's content: the model's decision at this call (one uniform
        of the model stream, after a stuck model's escape draw)."""
        w = self.world
        ending = self.ending != NONE  # RESOLVE or GIVE_UP: a final answer (in a loop: if it may)
        if self.stuck and not (ending and w.ends_in_loop) and self._stays_stuck(request):
            return [self._repeat_loop_call()]
        self.stuck = False
        if ending:
            return [self._answer(self.ending == RESOLVE)]
        r = self.model.uniform()
        if r < w.c_validation:
            return [self._faulty_call(r)]
        return [self._onward(r)]

    def _stays_stuck(self, request: fx.ModelRequest) -> bool:
        """Whether a stuck model repeats its call again: after a nudge (the
        last block) it escapes with ``escape``, else with ``self_escape``."""
        w = self.world
        blocks = request.messages[-1].content
        last = blocks[-1]
        if last.type == "text" and last.origin == "budget" and len(blocks) > 1:
            last = blocks[-2]  # the budget note follows the observations
        if last.type == "text" and last.origin == "nudge":
            return self.model.uniform() >= w.escape
        return not w.self_escape or self.model.uniform() >= w.self_escape

    def _faulty_call(self, r: float) -> ToolUseBlock:
        """A call of the loop, transient or validation band of ``r``."""
        w = self.world
        if r < w.c_loop:
            self.stuck = True
            self.loop_call = call = self._new_call(LOOP, r / w.c_loop)
            return call
        if r < w.c_transient:
            return self._new_call(TRANSIENT, (r - w.c_loop) / (w.c_transient - w.c_loop))
        return self._new_call(VALIDATION,
                              (r - w.c_transient) / (w.c_validation - w.c_transient))

    def _onward(self, r: float) -> TextBlock | ToolUseBlock:
        """Past the faulty bands: a premature claim (once allowed), a message
        to the task-giver, the final answer or a productive call."""
        w = self.world
        premature_allowed = self.progress >= self.premature_at
        if r < w.c_premature and premature_allowed:
            return self._answer(self.solvable and self.progress >= self.need
                                and not w.endings)
        if w.talk and w.c_premature <= r < w.c_talk:
            return self._message()
        if self.progress + 1 >= self.need and not w.endings:
            return self._answer(self.solvable)
        if not w.talk:
            low = w.c_premature if premature_allowed else w.c_validation  # the productive band
            return self._new_call(PRODUCTIVE, (r - low) / (1.0 - low))
        if r >= w.c_talk:
            return self._new_call(PRODUCTIVE, (r - w.c_talk) / (1.0 - w.c_talk))
        return self._new_call(PRODUCTIVE,  # the premature band, before premature claims
                              (r - w.c_validation) / (w.c_premature - w.c_validation))

    def _new_call(self, kind: int, u: float) -> ToolUseBlock:
        """The run's next tool call, of tool ``u`` picks. In a world of fixed
        sizes the first calls' blocks are made once per world and shared by
        every run (blocks are values: nothing alters one once made)."""
        w = self.world
        self.calls = n = self.calls + 1
        tool = bisect_right(w.tool_cumulative, u)  # pick_tool
        if tool > w.last_tool:  # u rounded up to 1.0
            tool = w.last_tool
        loop = kind == LOOP
        made = w.made_calls
        if n < _MADE:
            call_id = _CALL_IDS[n]
            self.kinds[call_id] = kind
            if made is not None:
                slot = (2 * n + loop) * w.n_tools + tool
                block = made[slot]
                if block is None:
                    block = made[slot] = ToolUseBlock(call_id, w.tool_names[tool],
                                                      {"target": _TARGETS[loop][n]},
                                                      w.fixed_output)
                return block
            arg = _TARGETS[loop][n]
        else:
            call_id, arg = f"toolu_{n}", f"/work/{'notes' if loop else 'src'}/item_{n}"
            self.kinds[call_id] = kind
        return ToolUseBlock(call_id, w.tool_names[tool], {"target": arg},
                            w.fixed_output if made is not None else self._output())

    def _repeat_loop_call(self) -> ToolUseBlock:
        self.calls += 1
        n = self.calls
        call_id = _CALL_IDS[n] if n < _MADE else f"toolu_{n}"
        self.kinds[call_id] = LOOP
        loop = self.loop_call
        assert loop is not None  # set with ``stuck``
        return ToolUseBlock(call_id, loop.name, loop.input, loop.tokens)

    def _answer(self, correct: bool) -> TextBlock:
        """A claim that the task is done (``correct``: it truly is). In a
        conversation it is a report to the task-giver, or with ``self_end`` the
        model's own end (its end marker)."""
        w = self.world
        self.answer_correct = correct
        tokens = self.answer_tokens = self._final_size()
        if w.end_marker is None or (w.self_end and self.model.uniform() < w.self_end):
            text = "The task is complete." if w.end_marker is None else (
                f"The task is complete. {w.end_marker}")
            return TextBlock(text, tokens)
        self.claim = correct
        return TextBlock("I have done what you asked.", tokens)

    def _message(self) -> TextBlock:
        """A message to the task-giver that does not claim success (a question)."""
        self.claim = None
        return TextBlock("Could you give me more details?", self._answer_size())

    def _response(self, request: fx.ModelRequest, content: list[Block], truncated: bool, now: float
                  ) -> ModelResponse:
        w = self.world
        cap = request.max_output_tokens  # output plus thinking, as providers count it
        thinking = 0
        if request.thinking_budget:
            drawn = w.fixed.thinking if w.fixed else self._size(
                w.thinking_tokens, w.thinking_dist, 0)
            thinking = min(drawn, request.thinking_budget, cap)
        output = cap - thinking if truncated else content[-1].tokens
        if output + thinking > cap:  # the answer does not fit: cut at max_tokens
            output, truncated = cap - thinking, True
        if thinking:
            content.insert(0, ThinkingBlock("...", thinking))
        latency = (w.ttft_s + (output + thinking) * w.decode_s_per_token
                   + request.prompt_tokens * w.prefill_s_per_token)
        stop = "max_tokens" if truncated else (
            "tool_use" if content[-1].type == "tool_use" else "end_turn")
        ttl = request.cache_ttl_s  # asked for: written; else automatic caching: plain input
        if ttl is not None or w.cache_automatic:
            cache = self.cache
            if cache is None:
                cache = self.cache = PromptCache()
            usage = cache.usage(w, self.sizes, request, now, output, thinking,
                                w.cache_ttl_s if ttl is None else ttl, ttl is not None, latency)
        else:  # Usage(prompt, output, 0, 0, thinking), field by field
            usage = _new(Usage)
            usage.input_tokens, usage.output_tokens, usage.thinking_tokens = (
                request.prompt_tokens, output, thinking)
            usage.cache_read_tokens = usage.cache_write_tokens = 0
        # ModelResponse(content, usage, stop, latency, model), field by field (a
        # dataclass's __init__ is a slow call in CPython 3.11)
        reply: ModelResponse = _new(ModelResponse)
        reply.content, reply.usage, reply.stop_reason = content, usage, stop
        reply.latency_s, reply.model = latency, request.model
        return reply

    def _summary(self, request: fx.ModelRequest) -> ModelResponse:
        w = self.world
        compacted = request.prompt_tokens
        tokens = max(1, min(request.max_output_tokens, int(compacted * w.summary_ratio)))
        latency = w.ttft_s + tokens * w.decode_s_per_token
        return ModelResponse([TextBlock("(summary of earlier steps)", tokens)],
                             Usage(request.prompt_tokens, tokens), "end_turn", latency,
                             request.model)

    # ------------------------------------------------------------- the tools
    def execute(self, request: fx.ToolRequest, now: float = 0.0) -> ToolResult | ToolError:
        """Run one tool call: a result or an error, with its size and duration."""
        w = self.world
        call = request.call
        name = call.name
        lognormal = w.tool_lognormal[name]
        duration = (exp(lognormal[0] + lognormal[1] * self.latency.normal())  # Lognormal.sample
                    if lognormal is not None else w.tool_draw[name](self.latency))
        fixed = w.fixed
        size = fixed.results[name] if fixed is not None else self._result_size(name, request.turn)
        if duration > request.timeout_s:
            return ToolError("timeout", f"{name} timed out after {request.timeout_s:g} s",
                             size, request.timeout_s)
        kind = self.kinds.get(call.id, LOOP)
        if kind == PRODUCTIVE:
            self.progress += 1
            outcome = "ok"
        elif kind == LOOP:
            outcome = "same as before"
        elif kind == TRANSIENT and request.attempt > 0 and self.tools.uniform() < w.retry_success:
            self.progress += 1
            outcome = "ok"
        elif kind == TRANSIENT:
            return ToolError("transient", f"503 Service Unavailable ({call.id})",
                             size, duration, 503)
        else:
            return ToolError("validation", f"{call.input['target']} is not a valid target "
                             f"for {call.name}", size, duration, 400)
        result: ToolResult = _new(ToolResult)  # ToolResult(output, size, duration), by field
        result.output = f"{name} {call.input['target']}: {outcome}"
        result.tokens, result.duration_s, result.metric = size, duration, None
        return result

    # ------------------------------------------------------------ the task-giver
    def reply(self, request: fx.UserTurn, now: float = 0.0) -> fx.UserReply:
        """The task-giver's answer to the model's message: it ends the run (a
        report of finished work with ``stop_when_done``, a wrong claim with
        ``accept_claim``, a question with ``give_up``) or replies (a reply of
        ``user.reply`` tokens)."""
        w = self.world
        claim = self.claim
        p = w.give_up if claim is None else w.stop_when_done if claim else w.accept_claim
        duration = 0.0 if w.reply_latency is None else w.reply_latency.sample(self.latency)
        if p and self.user.uniform() < p:
            return fx.UserReply(ended=True, duration_s=duration)
        tokens = self._size(w.reply_tokens, w.reply_dist, 0, self._step_scale(request.turn))
        return fx.UserReply("(the task-giver's reply)", tokens, False, duration)

    # ------------------------------------------------------- verifier, humans
    def verify(self, request: fx.VerifyRequest, now: float = 0.0) -> fx.Verdict:
        """The verifier's decision on the latest claim (reads the ground truth),
        with the usage and duration of the check when it costs any (a model
        grader; see :func:`~sim.world.verifiers.run_check`). The answer's size
        is the model's output per call."""
        w = self.world
        claim = Claim(self.answer_correct, request.answer, self.answer_tokens, request.turn)
        check = run_check(w.verifier, claim, self.tools, w)
        if check.passed:
            return fx.Verdict(True, duration_s=check.duration_s, usage=check.usage)
        return fx.Verdict(False, "Verification failed: the checks do not pass yet. Continue "
                          "working on the task.", w.feedback_tokens, check.duration_s, check.usage)

    def approve(self, request: fx.ApprovalRequest, now: float = 0.0) -> fx.ApprovalDecision:
        """A human's decision after a delay (lognormal by default); a delay past
        the timeout times out."""
        w = self.world
        delay = w.approval_delay.sample(self.latency)
        if delay > request.timeout_s:
            return fx.ApprovalDecision(False, request.timeout_s, True, "no decision in time")
        approved = self.tools.uniform() < w.approve
        why = "" if approved else "refused by reviewer"
        return fx.ApprovalDecision(approved, delay, False, why)
