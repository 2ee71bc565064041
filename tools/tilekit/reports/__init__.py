"""Logs in, reports out, no GPU: records, ratios and verdicts, performance.md, correctness.md,
summary.md, charts, validation, the model check's report. Imports tilekit.runtime only, never
tilekit.testing (tilekit/__init__.py has the map)."""
