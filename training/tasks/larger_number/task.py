"""The larger-number task, as one `Task` (training/run_setup/tasks.py): its two rule verifiers by short name. Its
evaluation is the generic one of prompts scored by the reward functions. Listed in pyproject.toml's
`strict_grpo.tasks` entry points."""

from __future__ import annotations

from training.run_setup.tasks import Task, register
from training.tasks.larger_number.rewards import answer_format_reward, exact_answer_reward

register(Task(
    name="larger_number",
    description="say which of two numbers is larger, scored by rule verifiers (the default recipe's task)",
    rewards={"exact_answer_reward": exact_answer_reward, "answer_format_reward": answer_format_reward},
))
