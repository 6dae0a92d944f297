"""Command-line commands, one module each (see :mod:`sim.cli`)."""
