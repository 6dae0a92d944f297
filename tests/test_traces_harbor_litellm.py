"""Harbor's mini-swe-agent ATIF (sim/traces/harbor.py): cache writes in
litellm's ``prompt_tokens_details``.

Harbor's converter (``harbor/agents/installed/mini_swe_agent.py``,
``convert_mini_swe_agent_to_atif``) writes each model reply as an agent step
whose ``metrics`` are litellm's usage: ``prompt_tokens`` (the whole prompt,
cache read and write included), ``completion_tokens``, ``cached_tokens``
(omitted when 0) and, in ``metrics.extra``, litellm's
``prompt_tokens_details`` (for Anthropic ``cache_creation_tokens`` and
``cache_write_tokens``, both the write) and ``completion_tokens_details``.
The steps below are trimmed from such a file (Harbor 0.26.0, an Anthropic
model through litellm)."""

from __future__ import annotations

from pathlib import Path

from sim.traces.harbor import run


def step(step_id: int, prompt: int, completion: int, cached: int, write: int,
         openai: bool = False) -> dict:
    details = {"audio_tokens": None, "cached_tokens": cached, "image_tokens": None,
               "text_tokens": prompt - cached - write, "video_tokens": None}
    if not openai:
        details.update(cache_write_tokens=write, initial_prompt_tokens=None,
                       cache_creation_tokens=write)
    metrics: dict = {"prompt_tokens": prompt, "completion_tokens": completion,
                     "cost_usd": 0.0007,
                     "extra": {"prompt_tokens_details": details,
                               "completion_tokens_details": {"reasoning_tokens": 0,
                                                             "text_tokens": completion}}}
    if cached:
        metrics["cached_tokens"] = cached
    return {"step_id": step_id, "timestamp": f"2026-12-07T02:29:0{step_id}.0+00:00",
            "source": "agent", "model_name": "anthropic/claude-fake-1", "message": "next",
            "reasoning_content": "next",
            "tool_calls": [{"tool_call_id": f"toolu_{step_id}", "function_name": "bash",
                            "arguments": {"command": "ls"}}],
            "metrics": metrics, "llm_call_count": 1}


def trajectory(steps: list[dict]) -> dict:
    return {"schema_version": "ATIF-v1.7", "session_id": "s-A",
            "agent": {"name": "mini-swe-agent", "version": "2.4.6",
                      "model_name": "anthropic/claude-fake-1"},
            "steps": [{"step_id": 1, "source": "system", "message": "You are helpful."},
                      {"step_id": 2, "source": "user", "message": "Print hello"}, *steps],
            "final_metrics": {"total_prompt_tokens": 3705, "total_completion_tokens": 240,
                              "total_cached_tokens": 2180, "total_cost_usd": 0.002223,
                              "total_steps": 5}}


def test_litellm_prompt_tokens_details_give_the_cache_writes(tmp_path: Path):
    """Prompts 1000, 1210, 1495 with reads 0, 990, 1190 and writes 990, 200,
    300: input 35 (was 1525), writes 1490 (was 0), reads 2180, output 240;
    no note that the write is not recorded."""
    doc = trajectory([step(3, 1000, 100, 0, 990), step(4, 1210, 80, 990, 200),
                      step(5, 1495, 60, 1190, 300)])
    record = run(doc, tmp_path / "trajectory.json", "trajectory.json")
    assert [c.usage.input_tokens for c in record.calls] == [10, 20, 5]
    assert [c.usage.cache_write_tokens for c in record.calls] == [990, 200, 300]
    assert sum(c.usage.cache_read_tokens for c in record.calls) == 2180
    assert sum(c.usage.output_tokens for c in record.calls) == 240
    assert record.calls[0].provenance["input_tokens"] == "derived"
    assert "cache_write_tokens" not in record.conventions


def test_an_openai_models_details_without_a_write_mean_none_was_written(tmp_path: Path):
    """An OpenAI model through litellm: prompt_tokens_details has cached_tokens
    only (OpenAI reports no write): 0 written, input = prompt - read."""
    doc = trajectory([step(3, 1000, 100, 0, 0, openai=True),
                      step(4, 1210, 80, 990, 0, openai=True)])
    record = run(doc, tmp_path / "trajectory.json", "trajectory.json")
    assert [(c.usage.input_tokens, c.usage.cache_read_tokens, c.usage.cache_write_tokens)
            for c in record.calls] == [(1000, 0, 0), (220, 990, 0)]
