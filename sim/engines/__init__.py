"""Engines: perform the harness's effects against the stochastic world."""
