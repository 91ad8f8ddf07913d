"""Bundled tasks: each ships train and held-out splits under `data/` and a rule verifier."""
