"""Bundled tasks, one folder each (`larger_number/`, `workspace/`, `causal/`): splits under `data/`, rewards, an
environment, and a `task.py` that builds the task's one `Task` and registers it (training/run_setup/tasks.py; pyproject's
`strict_grpo.tasks` entry points). Generic code never imports a task."""
