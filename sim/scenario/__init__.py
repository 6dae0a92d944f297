"""Scenarios: the validated YAML schema (schema, built on the harness's own
parameter dataclasses), reading and validating files (loading, validation,
messages), the sweep's grid (grid), the components and parameters of a cell
(compilation), and the field reference generated from the schema
(docs). :mod:`sim.scenario.model` gathers the names the rest of sim imports."""
