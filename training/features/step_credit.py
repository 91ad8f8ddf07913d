"""`step_credit`: each call also compared with the calls its group made from the same state (GiGPO's step groups;
the maths in training/algorithms/step_advantages.py), added to the advantage the step already has (GRPO's per
episode, or `call_credit`'s per turn).

What it needs from the environment: a `state_key` property (training/tool_use/state_keys.py), read by the tool layer
just before each call (`EpisodeTools.turn_states`). A call's state is the key with the number of calls the rollout
had attempted before it (the tool layer's budget left is part of what the policy faces). Returns: each turn's
reward-to-go of the environment's per-call terms (`call_rewards`, the table `call_credit` builds), or, for an
environment that reports none, the episode's reward. Refused turns keep `call_credit`'s rule (their own reward only).

Checks, each raising `StateKeyError` with the environment's name: a key that is not hashable (at the call), and two
rollouts of a group that made the same calls but report different keys. Metrics, over all processes:
`step_credit/group_size` (per call, the returns its step group pools), `step_credit/singleton_share` (the calls whose
step group has one return: they keep the outer advantage only) and `step_credit/nonzero_advantage_share` (the model's
tokens whose advantage is not 0).
"""

from __future__ import annotations

import torch
from accelerate.utils import gather_object

from training.algorithms.step_advantages import step_advantages, step_group_sizes, step_ids
from training.algorithms.turn_advantages import rewards_to_go, token_advantages
from training.features.call_credit import TurnTable
from training.features.step_branches import StepBranches
from training.tool_use.state_keys import StateKeyError, check_replays, names_state, state_reader


class StepCredit:
    def __init__(self, enabled: bool, weight: float, branches: StepBranches | None = None):
        self.enabled = enabled
        self.weight = weight
        self.branches = branches

    def value_samples(self, model, rows: list[dict], batch: dict, table: TurnTable, episode_tools: list,
                      group_size: int, weights: dict[str, float], step: int, metrics: dict) -> dict:
        """This process's continuations' returns by (group, state) (`step_branches`); {} without branching."""
        if self.branches is None:
            return {}
        group_ids = [(table.start + i) // group_size for i in range(table.turns.size(0))]
        return self.branches.value_samples(model, rows, batch, table.turns, episode_tools, group_ids, weights, step,
                                           metrics)

    def state_readers(self, environments: list) -> list | None:
        """Per rollout, what reads its environment's state key (`EpisodeTools`' `state`); None when off. Raises
        naming the environment where it names no state."""
        if not self.enabled:
            return None
        missing = sorted({type(env).__name__ for env in environments if not names_state(env)})
        if missing:
            raise StateKeyError(f"step_credit: {', '.join(missing)} has no `state_key` property (a hashable name for "
                                "the state a call is made in; training/tool_use/state_keys.py)")
        return [state_reader(env) for env in environments]

    def advantages(self, outer: torch.Tensor, table: TurnTable, episode_tools: list, environments: list,
                   group_size: int, accelerator, metrics: dict, value_samples: dict | None = None) -> torch.Tensor:
        """(B_local, T): the outer advantage ((B_local,) per episode or (B_local, T) per token) on the model's tokens,
        plus `weight` times each turn's step advantage; `value_samples` ({(group, state): returns}, this process's)
        join their step groups."""
        turns = table.turns
        if outer.dim() == 1:
            outer = torch.where(turns >= 0, outer.unsqueeze(1), torch.zeros((), dtype=outer.dtype, device=outer.device))
        keys = gather_object([self._turn_keys(tools, table.rewards.size(1)) for tools in episode_tools])
        histories = gather_object([tools.turn_histories for tools in episode_tools])
        all_rewards, all_exists = accelerator.gather(table.rewards), accelerator.gather(table.exists)
        refused = accelerator.gather(table.refused)
        group_ids = torch.arange(all_rewards.size(0), device=turns.device) // group_size
        self._check_replays(type(environments[0]).__name__ if environments else "environment", keys, histories,
                            group_ids)
        returns = rewards_to_go(all_rewards * all_exists)
        returns = torch.where(refused.bool(), all_rewards * all_exists, returns)
        steps = torch.where(all_exists.bool(), step_ids(group_ids.tolist(), keys).to(turns.device), -1)
        samples = self._by_step(steps, group_ids, keys, gather_object([value_samples or {}]))
        step_adv = step_advantages(returns, steps, group_ids, samples)
        n_local = turns.size(0)
        local = step_adv[table.start : table.start + n_local]
        token_adv = outer + self.weight * token_advantages(local, turns)
        self._log(steps, samples, token_adv, turns, accelerator, metrics)
        return token_adv

    @staticmethod
    def _by_step(steps: torch.Tensor, group_ids: torch.Tensor, keys: list, gathered: list[dict]) -> dict:
        """{step id: returns} of every process's continuations, by the step id of the (group, state) they left."""
        where = {(int(group_ids[i]), keys[i][t]): int(steps[i, t]) for i in range(steps.size(0))
                 for t in range(steps.size(1)) if steps[i, t] >= 0}
        out: dict[int, list[float]] = {}
        for samples in gathered:
            for state, returns in samples.items():
                out.setdefault(where[state], []).extend(returns)
        return out

    @staticmethod
    def _turn_keys(tools, width: int) -> list:
        """Per model turn, the state its first call was made in (None: the turn made no call)."""
        return [tools.turn_states.get(t) for t in range(width)]

    @staticmethod
    def _check_replays(env_name: str, keys: list, histories: list, group_ids: torch.Tensor) -> None:
        """Within each group: the same calls before a turn, the same state key."""
        for group in torch.unique(group_ids).tolist():
            seen, states = [], []
            for i in torch.nonzero(group_ids == group).flatten().tolist():
                for turn, history in histories[i].items():
                    seen.append(history)
                    states.append(keys[i][turn][1])
            check_replays(env_name, seen, states)

    @staticmethod
    def _log(steps: torch.Tensor, samples: dict, token_adv: torch.Tensor, turns: torch.Tensor, accelerator,
             metrics: dict) -> None:
        sizes = step_group_sizes(steps, samples)
        model = turns >= 0
        counts = torch.tensor([[float((token_adv != 0)[model].sum()), float(model.sum())]], device=token_adv.device)
        nonzero, tokens = accelerator.gather(counts).sum(dim=0).tolist()
        if sizes:
            metrics["step_credit/group_size"].append(sum(sizes) / len(sizes))
            metrics["step_credit/singleton_share"].append(sum(s == 1 for s in sizes) / len(sizes))
        metrics["step_credit/nonzero_advantage_share"].append(nonzero / tokens if tokens else 0.0)
