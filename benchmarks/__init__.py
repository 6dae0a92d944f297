"""Speed checks, each a ratio against a baseline measured in the same process."""
