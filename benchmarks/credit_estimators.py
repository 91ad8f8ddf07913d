"""The advantage estimators the credit diagnostics compare (`benchmarks.credit_correctness`,
`benchmarks.gradient_snr`), each from the functions the trainer runs, on one table of a batch's turns.

`episode`: GRPO's (TRL's with `scale_rewards="group"`); `turn`: `call_credit`'s (training/algorithms/
turn_advantages.py); `state`: GRPO's plus the step group's term (training/algorithms/step_advantages.py, what
`step_credit` adds); `state_std`: the same with GiGPO's std within each step group; `turn+state`: `call_credit`'s plus
the step term; `state+branch`, `turn+state+branch`: the step groups pooled with value samples (returns of
continuations the policy sampled from their states).
"""

from __future__ import annotations

import torch

from training.algorithms.step_advantages import episode_advantages, step_advantages, step_ids
from training.algorithms.turn_advantages import rewards_to_go, turn_advantages

ESTIMATORS = ("episode", "turn", "state", "state_std", "turn+state", "state+branch", "turn+state+branch")


def estimates(t: dict, value_samples: dict[int, list[float]]) -> dict[str, torch.Tensor]:
    """(B, K) advantages of each estimator from a table `t` (B, K tensors `rewards`, `exists`, `refused`; (B,)
    `group_ids`; `keys[i][t]` each turn's state key or None), and `value_samples` {step id: returns}."""
    returns = rewards_to_go(t["rewards"] * t["exists"])
    returns = torch.where(t["refused"].bool(), t["rewards"] * t["exists"], returns)
    steps = table_steps(t)
    episode = episode_advantages(returns[:, 0], t["group_ids"]).unsqueeze(1) * t["exists"]
    turn = turn_advantages(t["rewards"], t["exists"], t["group_ids"], t["refused"])
    step = step_advantages(returns, steps, t["group_ids"])
    branched = step_advantages(returns, steps, t["group_ids"], value_samples)
    return {"episode": episode, "turn": turn, "state": episode + step,
            "state_std": episode + step_advantages(returns, steps, t["group_ids"], scale="step_group"),
            "turn+state": turn + step, "state+branch": episode + branched, "turn+state+branch": turn + branched}


def table_steps(t: dict) -> torch.Tensor:
    """(B, K) the table's step ids (-1 where a turn does not exist or made no call)."""
    return torch.where(t["exists"].bool(), step_ids(t["group_ids"].tolist(), t["keys"]), -1)
