"""Per-episode metrics of tool environments, logged as batch means.

An environment class may define a property `episode_metrics` (a property, not a method: TRL exposes every public
method as a tool) returning `{metric name: value}` for the rollout it just played, e.g. the causal environment's
`causal/regret`. After each sampling round the mean of every name over the batch's rollouts (all processes) joins
the step's metrics. A value that is not a finite number is refused, naming the environment and the metric.
"""

from __future__ import annotations

import math

import torch
from accelerate.utils import gather_object


class EnvironmentMetrics:
    def log(self, environments: list | None, accelerator, metrics: dict) -> None:
        if not environments or not hasattr(type(environments[0]), "episode_metrics"):
            return
        values: dict[str, list[float]] = {}
        for env in environments:
            for name, value in env.episode_metrics.items():
                if not isinstance(value, (int, float)) or not math.isfinite(value):
                    raise ValueError(f"{type(env).__name__}.episode_metrics[{name!r}] = {value!r}: not a finite number")
                values.setdefault(name, []).append(float(value))
        for name in sorted(set(gather_object(list(values)))):  # the same order on every process
            local = values.get(name, [])
            stats = torch.tensor([sum(local), len(local)], dtype=torch.float64, device=accelerator.device)
            total, count = accelerator.gather(stats).view(-1, 2).sum(dim=0).tolist()
            metrics[name].append(total / count)
