"""Scenarios: the validated YAML schema and its loading (model), and the
field reference generated from it (docs)."""
