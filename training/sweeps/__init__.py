"""Sweeps: the workflow YAML, the grid of runs it expands to, and its report."""
