"""Metrics as small pure functions: per-period series first, summaries separately."""
