"""Structural causal models: seeded families, users' own SCMs, checks, the optimum."""
