"""Analysis of results: statistics (stats), regression comparisons (compare),
capacity measurements (capacity) and capacity sizing (sizing)."""
