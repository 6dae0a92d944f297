"""Claude Code transcript lines as Claude Code 2.1.x writes them, for the
importer's tests (tests/test_traces_claude_code_*.py).

The shapes are those of real transcripts: the lines Claude Code 2.1.90 wrote
for a session against the fake Anthropic server (tests/fake_providers.py),
one line per content block, each carrying the message's ``id``, ``model``,
``stop_reason`` and ``usage`` (``stop_reason`` null and ``output_tokens`` 1,
the stream's ``message_start`` counts, when the line was written before the
stream ended), and a subagent's ``agent_progress`` lines as Claude Code
2.1.30's source builds them (``toolUseID`` ``agent_<message id>``,
``parentToolUseID`` the Task call, ``data.message`` one normalized message
and ``data.normalizedMessages`` the subagent's messages so far).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SESSION = "4c05ebd0-6641-431c-a6ab-81619fc5df8e"
MODEL = "claude-sonnet-4-5"


def stamp(seconds: float) -> str:
    """An ISO timestamp ``seconds`` after 2026-01-05T10:00:00Z, in milliseconds."""
    whole, frac = divmod(round(seconds * 1000), 1000)
    minutes, sec = divmod(whole, 60)
    return f"2026-01-05T10:{minutes:02d}:{sec:02d}.{frac:03d}Z"


def usage(input_tokens: int, output_tokens: int, cache_read: int = 0,
          cache_write: int = 0) -> dict[str, Any]:
    """A message's ``usage`` as Claude Code writes it."""
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}


def _common(uuid: str, parent: str | None, at: float, agent: str | None,
            session: str) -> dict[str, Any]:
    line: dict[str, Any] = {"parentUuid": parent, "isSidechain": agent is not None}
    if agent is not None:
        line["agentId"] = agent
    return {**line, "uuid": uuid, "timestamp": stamp(at), "userType": "external",
            "entrypoint": "cli", "cwd": "/work", "sessionId": session, "version": "2.1.90",
            "gitBranch": "main"}


def assistant(uuid: str, parent: str | None, at: float, message_id: str,
              block: dict[str, Any], counts: dict[str, Any], *, stop: str | None = None,
              agent: str | None = None, model: str = MODEL,
              session: str = SESSION) -> dict[str, Any]:
    """One line of an assistant message: one content ``block``."""
    return {**_common(uuid, parent, at, agent, session), "type": "assistant",
            "requestId": "req_" + message_id.removeprefix("msg_"),
            "message": {"id": message_id, "type": "message", "role": "assistant",
                        "model": model, "content": [block], "stop_reason": stop,
                        "stop_sequence": None, "usage": counts}}


def user(uuid: str, parent: str | None, at: float, content: Any, *,
         agent: str | None = None, session: str = SESSION, **extra: Any) -> dict[str, Any]:
    """A user line: a prompt (a string) or tool results (a list of blocks)."""
    return {**_common(uuid, parent, at, agent, session), "type": "user",
            "message": {"role": "user", "content": content}, **extra}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(ident: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": ident, "name": name, "input": arguments}


def result(ident: str, value: str, error: bool = False) -> list[dict[str, Any]]:
    return [{"tool_use_id": ident, "type": "tool_result", "content": value,
             "is_error": error}]


def progress(uuid: str, parent: str | None, at: float, agent: str, task: str,
             message: dict[str, Any], so_far: list[dict[str, Any]]) -> dict[str, Any]:
    """An ``agent_progress`` line of the main file: ``message`` (a subagent's
    line, normalized) and the subagent's messages ``so_far``."""
    normalized = [{key: value for key, value in m.items()
                   if key in ("type", "message", "uuid", "timestamp", "requestId")}
                  for m in so_far]
    current = {key: value for key, value in message.items()
               if key in ("type", "message", "uuid", "timestamp", "requestId")}
    return {**_common(uuid, parent, at, None, SESSION), "type": "progress",
            "data": {"message": current, "normalizedMessages": normalized,
                     "type": "agent_progress", "prompt": "Run the tests.", "agentId": agent},
            "toolUseID": f"agent_{message.get('message', {}).get('id', 'msg_prompt')}",
            "parentToolUseID": task}


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    """``lines`` as a JSON Lines file at ``path`` (folders made)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
    return path


def collected(*sources: Path) -> list[Any]:
    """The runs (``RunRecord`` objects, provenance and conventions included)
    the importer's collector assembles from the transcripts at ``sources``
    (files, or folders searched for ``*.jsonl``), read in the order given;
    none of them is a skip."""
    from sim.traces import claude_code
    from sim.traces.skips import Skip

    collector = claude_code.Collector()
    for source in sources:
        for path in sorted(source.rglob("*.jsonl")) if source.is_dir() else [source]:
            lines = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
            collector.add(lines, str(path))
    runs = list(collector.runs())
    assert not [r for r in runs if isinstance(r, Skip)], runs
    return runs
