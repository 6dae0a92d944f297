"""``python -m sim cost``: seed 001's what-if figures, JSON output, bad input."""

from __future__ import annotations

import argparse
import json

import pytest

import sim.cli
from sim.bad_input import InputError
from sim.cli import cost
from sim.cost import cached_run_tokens

SEED_ARGS = ["--steps", "30", "--prefix", "12000", "--per-step", "1500", "--output", "600"]

SEED_TABLE = """\
run: 30 steps, prefix 12,000 tokens, +1,500 history tokens/step, 600 output tokens/step
prices, USD per million tokens (--price-* flags): input 3, output 15, cache read 0.3, \
cache write 3.75, thinking as output
cache: none

                    tokens           USD
input            1,012,500       $3.0375
  prefix           360,000       $1.0800
  history          652,500       $1.9575
output              18,000       $0.2700
total            1,030,500       $3.3075

cost: $3.31 for 1,012,500 input tokens and 18,000 output tokens
"""


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m sim")
    cost.register(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["cost", *argv])


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    args = parse(argv)
    assert args.handler is cost.run
    assert args.handler(args) == 0
    return capsys.readouterr().out


def test_seed001_example_prints_1012500_input_tokens_and_3_31(capsys):
    """The seed 001 example prints 1,012,500 input tokens (prefix 360,000 +
    history 652,500), 18,000 output tokens and $3.0375 + $0.27 = $3.3075,
    rounded to $3.31."""
    out = run([*SEED_ARGS, "--price-in", "3", "--price-out", "15"], capsys)
    assert out == SEED_TABLE


def test_catalogue_model_with_the_seed_prices_gives_the_same_cost(capsys):
    """--model claude-sonnet-4-0 ($3/$15 in the catalogue) costs the same $3.31."""
    out = run([*SEED_ARGS, "--model", "claude-sonnet-4-0"], capsys)
    assert "cost: $3.31 for 1,012,500 input tokens" in out
    assert "(model claude-sonnet-4-0)" in out


def test_json_output_is_only_json_with_the_token_and_cost_split(capsys):
    """--format json prints one JSON object (nothing else) with input tokens,
    the prefix/history split and the cost split in USD."""
    out = run([*SEED_ARGS, "--prices", "seed001", "--format", "json"], capsys)
    data = json.loads(out)
    assert data["tokens"]["input"] == 1_012_500
    assert data["tokens"]["output"] == 18_000
    assert data["tokens"]["prefix"]["tokens"] == 360_000
    assert data["tokens"]["history"]["tokens"] == 652_500
    assert data["cost_usd"]["total"] == pytest.approx(3.3075)
    assert data["cost_usd"]["prefix"] == pytest.approx(1.08)
    assert data["cost_usd"]["history"] == pytest.approx(1.9575)
    assert data["cost_usd"]["output"] == pytest.approx(0.27)
    assert data["prices_usd_per_mtok"]["input"] == 3


@pytest.mark.parametrize("mode", ["append-only", "expired"])
def test_caching_prints_the_cache_read_and_write_split(capsys, mode):
    """With --cache, the JSON and table show cache-read and cache-write tokens
    for prefix and history as the closed forms give them."""
    expected = cached_run_tokens(30, 12_000, 1_500, 600, expired=mode == "expired")
    data = json.loads(run([*SEED_ARGS, "--price-in", "3", "--price-out", "15", "--cache", mode,
                           "--format", "json"], capsys))
    for part in ("prefix", "history"):
        got = data["tokens"][part]
        want = getattr(expected, part)
        assert (got["cache_read"], got["cache_write"], got["uncached"]) == (
            want.cache_read, want.cache_write, want.input)
    table = run([*SEED_ARGS, "--price-in", "3", "--price-out", "15", "--cache", mode], capsys)
    assert "cache read" in table and "cache write" in table
    assert f"{expected.prefix.cache_write:,}" in table


def test_append_only_cache_at_default_multipliers_costs_77_cents(capsys):
    """Without a base price set, cache reads cost 0.1x and writes 1.25x the
    input price: the seed run with an append-only cache costs $0.77."""
    out = run([*SEED_ARGS, "--price-in", "3", "--price-out", "15", "--cache", "append-only"],
              capsys)
    assert "cost: $0.77" in out
    assert "cache read 0.3, cache write 3.75" in out


def test_tiered_model_shows_its_tiers(capsys):
    """A model with tiered prices lists the tier and prices steps above it higher."""
    out = run(["--steps", "140", "--prefix", "12000", "--per-step", "1500", "--output", "600",
               "--model", "claude-sonnet-4-5"], capsys)
    assert "above 200,000 prompt tokens: input 6" in out


@pytest.mark.parametrize(("argv", "pattern"), [
    (SEED_ARGS, "no prices"),
    ([*SEED_ARGS, "--price-in", "3"], "no prices"),
    (["--steps", "-1", *SEED_ARGS[2:], "--price-in", "3", "--price-out", "15"],
     "--steps must be an integer from 1"),
    (["--steps", "0", *SEED_ARGS[2:], "--price-in", "3", "--price-out", "15"],
     "--steps must be an integer from 1"),
    ([*SEED_ARGS[:2], "--prefix", "10000000000000", *SEED_ARGS[4:], "--price-in", "3",
      "--price-out", "15"], "--prefix must be an integer from 0 to"),
    ([*SEED_ARGS[:6], "--output", "-600", "--price-in", "3", "--price-out", "15"],
     "--output must be"),
    ([*SEED_ARGS, "--price-in", "-3", "--price-out", "15"], "--price-in must be"),
    ([*SEED_ARGS, "--price-in", "3", "--price-out", "nan"], "--price-out must be"),
    ([*SEED_ARGS, "--price-in", "3", "--price-out", "1e308"], "--price-out must be"),
    ([*SEED_ARGS, "--model", "claude-sonnet-4-20250514", "--price-out", "1e308"],
     "--price-out must be a number of USD per million tokens from 0 to 1,000,000"),
    ([*SEED_ARGS, "--model", "claude-sonet-4-5"], "unknown model 'claude-sonet-4-5'"),
    ([*SEED_ARGS, "--model", "in-house-7b", "--price-in", "3"], "in-house-7b"),
    ([*SEED_ARGS, "--prices", "seed999"], "unknown price set"),
])
def test_bad_input_is_an_input_error(argv, pattern):
    """Missing prices, a run of no steps, negative or huge counts, negative
    prices, NaN, unknown models and partial prices for an unknown model are
    InputErrors with a clear message."""
    args = parse(argv)
    with pytest.raises(InputError, match=pattern):
        args.handler(args)


def test_cli_turns_bad_input_into_exit_2_with_one_message(monkeypatch, capsys):
    """Through sim.cli.main, bad input prints one error line and exits 2, and
    the seed example exits 0."""
    monkeypatch.setattr(sim.cli, "COMMANDS", ("cost",))
    assert sim.cli.main(["cost", *SEED_ARGS]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("error: no prices")
    assert sim.cli.main(["cost", *SEED_ARGS, "--price-in", "3", "--price-out", "15"]) == 0
    assert capsys.readouterr().out == SEED_TABLE


def test_missing_run_shape_is_an_argparse_error():
    """--steps is required: argparse exits with status 2."""
    with pytest.raises(SystemExit) as caught:
        parse(["--prefix", "1", "--per-step", "1", "--output", "1"])
    assert caught.value.code == 2


def test_amounts_past_28_digits_and_beyond_a_float_print_without_error(capsys):
    """A run of a trillion steps costs more dollars than Decimal's default 28
    digits hold at four places: printed in full (it raised InvalidOperation),
    and an infinite amount prints as $inf."""
    from sim.api.costing import _usd

    assert _usd(1.5e30, 4) == "$1,500,000,000,000,000,000,000,000,000,000.0000"
    assert _usd(float("inf"), 2) == "$inf" and _usd(0.125, 2) == "$0.13"
    out = run(["--steps", "1000000000000", "--prefix", "0", "--per-step", "1000000",
               "--output", "0", "--prices", "seed001"], capsys)
    assert "cost: $1,499,999,999,998,500,000,000,000.00" in out
