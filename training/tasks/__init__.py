"""Bundled tasks, one folder each (`larger_number/`, `workspace/`, `causal/`): splits under `data/`, rewards, an
environment, and a `registration.py` that plugs the task into the generic registries (pyproject's
`strict_grpo.tasks` entry points). Generic code never imports a task."""
