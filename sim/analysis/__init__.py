"""Analysis of results: statistics (stats), regression comparisons (compare: the
decision; comparison: its sides, limits and result; significance and bootstrap: the
statistical primitives), capacity measurements (capacity) and capacity sizing (sizing)."""
