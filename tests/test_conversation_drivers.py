"""The harness's conversation mode (a task-giver in the loop) belongs to
simulated worlds: replay answers recorded text turns itself and sets it
aside with a note; a live run, which has no task-giver, refuses it up front."""

from __future__ import annotations

from test_calibrate_cli import a_run, write_folder

from sim.cli import main

CHAT = "harness:\n  conversation: {enabled: true}\n  prices: seed001\n"


def test_replay_sets_the_conversation_aside_and_says_so(tmp_path, capsys):
    """Replaying under a conversational harness runs every run (exit 0) and notes it."""
    folder = write_folder(tmp_path / "t", [a_run(i, 4) for i in range(5)])
    scenario = tmp_path / "chat.yaml"
    scenario.write_text(CHAT)
    assert main(["replay", folder, str(scenario), "--out", str(tmp_path / "out")]) == 0
    assert "harness.conversation is not used by replay" in capsys.readouterr().err


def test_live_refuses_a_conversation_before_any_call(tmp_path, capsys):
    """Exit 2 naming the field; no provider is contacted."""
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- instruction: say hello\n")
    scenario = tmp_path / "chat.yaml"
    scenario.write_text(CHAT)
    assert main(["live", str(tasks), "--provider", "anthropic", "--model", "m",
                 "--scenario", str(scenario), "--base-url", "http://127.0.0.1:9"]) == 2
    assert "harness.conversation.enabled" in capsys.readouterr().err
