"""What a simulation writes: results.parquet, summary.json and report.md
(results), the self-contained report.html (html) and its figures (figures)."""
