"""``sim live`` when the provider cannot be reached: a batch whose every run
failed at the provider (no network, a wrong --base-url, a refused key) exits
1 with a message saying so, not 0 as if it had measured something."""

from __future__ import annotations

import socket
from pathlib import Path

import yaml
from fake_providers import Fail, FakeProvider, Reply

from sim.cli import main

MODEL = "claude-sonnet-4-20250514"


def tasks_file(folder: Path) -> Path:
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump({"system_prompt": "Be brief.", "tasks": [
        {"id": "one", "instruction": "Say DONE.", "tools": [], "workdir": "."},
        {"id": "two", "instruction": "Say DONE.", "tools": [], "workdir": "."}]}))
    return path


def closed_port() -> int:
    """A local port nothing listens on (connections are refused at once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_every_run_failing_to_reach_the_provider_exits_1_with_a_message(tmp_path, monkeypatch,
                                                                         capsys):
    """Both runs end failed:retries_exhausted (connection refused, no retries
    allowed): the outcomes table is printed, the traces written, and the
    exit status is 1 with one line naming the failure and what to check."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    status = main(["live", str(tasks_file(tmp_path)), "--provider", "anthropic", "--model",
                   MODEL, "--base-url", f"http://127.0.0.1:{closed_port()}", "--out",
                   str(tmp_path / "t"), "--quiet", "--set", "harness.retry.max_attempts=0"])
    captured = capsys.readouterr()
    assert status == 1
    assert "failed:retries_exhausted       2  100.0%" in captured.out
    error = captured.err.strip().splitlines()
    assert len(error) == 1
    assert error[0].startswith("error: every run (2 of 2) failed at the provider "
                               "(failed:retries_exhausted; last error: connection")
    assert "check the network, --base-url and the API key" in error[0]
    assert (tmp_path / "t" / "runs.parquet").is_file()


def test_a_batch_with_one_run_that_reached_the_model_exits_0(tmp_path, monkeypatch, capsys):
    """One run answered, the other refused by the server (HTTP 500 twice:
    failed:model_error): the batch measured something, exit 0, no error line."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    with FakeProvider([Reply([("text", "DONE")], input_tokens=50, output_tokens=2)],
                      default=Fail(500, "boom")) as server:
        status = main(["live", str(tasks_file(tmp_path)), "--provider", "anthropic",
                       "--model", MODEL, "--base-url", server.base_url,
                       "--out", str(tmp_path / "t"), "--quiet"])
    captured = capsys.readouterr()
    assert status == 0
    assert "failed:model_error" in captured.out
    assert "error:" not in captured.err
