"""`call_credit`: per-token advantages from the reward each tool call earned (training/algorithms/turn_advantages.py),
in place of GRPO's one advantage per episode.

What it needs from the environment: a property `call_rewards` (a property, not a method: TRL offers public methods
as tools), the rollout's calls in the order the environment answered them, each `{reward function name: term}`,
whose sums over the calls are the episode's rewards. The causal environment gives its four components per call.

How a call finds its turn: the trainer counts the model turns of a generation (`turn_generated` at each of TRL's
generation rounds, `start` at a new batch), and each rollout's `EpisodeTools` notes the turn of every call it passes
on to the environment (`clock`), and of every call it refuses (malformed, over budget): those never reach the
environment and earn nothing, and their turn is credited with its own reward only, not the later calls'
(training/algorithms/turn_advantages.py). Checks, each raising with what differs: every reward function of the run
has terms (a judge or verifier has none per call: not with `call_credit`), the environment answered as many calls as
were passed on, and each function's terms sum to the reward it gave the episode (to 1e-6). A rollout whose reward is
NaN (unscorable, counted by the reward checks) gets no credit, as TRL gives it an advantage of 0.

Groups are the prompts' (all processes' rollouts gathered), as TRL's own advantages. Metrics: `call_credit/turns`
(mean model turns per rollout); on steps where a turn made a call the tools refused (malformed, over budget):
`call_credit/malformed_turns` (how many such turns), `call_credit/malformed_turn_advantage` (their mean advantage),
`call_credit/malformed_token_share` (their share of the model's tokens) and `call_credit/malformed_advantage_mass`
(the sum of their tokens' advantages over the sum of all tokens' |advantage|: above 0, the step pushes the refused
calls' tokens up).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from training.algorithms.turn_advantages import token_advantages, token_turns, turn_advantages


class CallCreditError(RuntimeError):
    """What `call_credit` needs from the environment or the rewards is missing or inconsistent."""


@dataclass
class TurnTable:
    """This process's rollouts by model turn: each turn's weighted reward (B_local, K), whether it exists, whether it
    made a call the tools refused, each completion token's turn (B_local, T; -1 off the model's turns) and the first
    rollout's index among all processes'."""

    rewards: torch.Tensor
    exists: torch.Tensor
    refused: torch.Tensor
    turns: torch.Tensor
    start: int


class CallCredit:
    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.turn = 0

    def start(self) -> None:
        self.turn = 0

    def turn_generated(self) -> None:
        self.turn += 1

    def clock(self) -> int:
        """The model turn whose tool calls run now: the last one generated."""
        return self.turn - 1

    def table(self, batch: dict, environments: list, episode_tools: list, names: list[str], weights: torch.Tensor,
              rewards_per_func: torch.Tensor, accelerator, require_terms: bool = True) -> TurnTable:
        """This process's rollouts' rewards per model turn (module docstring). Without `require_terms` (step credit
        alone) an environment that reports no per-call terms (`call_rewards`) is allowed: a rollout's weighted
        reward is then its last turn's, and no turn counts as refused."""
        if "tool_mask" not in batch:
            raise CallCreditError("call_credit needs multi-turn tool rollouts (the batch has no tool_mask)")
        turns = token_turns(batch["tool_mask"], batch["completion_mask"])
        n_local = turns.size(0)
        if len(environments) != n_local or len(episode_tools) != n_local:
            raise CallCreditError(f"call_credit: {n_local} rollouts but {len(environments)} environments and "
                                  f"{len(episode_tools)} tool sets")
        width = int(accelerator.gather(turns.max().reshape(1) + 1).max().item())
        width = max(width, 1)
        local_rewards = torch.zeros((n_local, width), dtype=torch.float32, device=turns.device)
        start = accelerator.process_index * n_local
        exists = torch.zeros_like(local_rewards)
        refused = torch.zeros_like(local_rewards)
        per_call = require_terms or all(hasattr(type(env), "call_rewards") for env in environments)
        for i, (env, tools) in enumerate(zip(environments, episode_tools, strict=True)):
            if torch.isnan(rewards_per_func[start + i]).any():
                continue  # unscorable (counted by the reward checks): no credit, as TRL gives it advantage 0
            last = int(turns[i].max().item())
            exists[i, : last + 1] = 1.0
            if not per_call:
                local_rewards[i, max(last, 0)] = float((weights * rewards_per_func[start + i]).sum())
                continue
            for turn in tools.refused_turns:
                refused[i, self._turn_index(start + i, turn, width, "a refused call")] = 1.0
            terms = self._terms(env, names)
            if len(terms) != len(tools.forwarded_turns):
                raise CallCreditError(f"rollout {start + i}: the environment answered {len(terms)} calls, the tools "
                                      f"passed on {len(tools.forwarded_turns)}")
            for f, name in enumerate(names):
                total, given = sum(t[name] for t in terms), float(rewards_per_func[start + i, f])
                if not math.isclose(total, given, rel_tol=1e-6, abs_tol=1e-6):
                    raise CallCreditError(f"rollout {start + i}: {name}'s per-call terms sum to {total!r}, the "
                                          f"reward function gave {given!r}")
            for turn, term in zip(tools.forwarded_turns, terms, strict=True):
                local_rewards[i, self._turn_index(start + i, turn, width, "a call")] += sum(float(w) * term[name] for w, name in zip(weights, names, strict=True))
        return TurnTable(local_rewards, exists, refused * exists, turns, start)

    def advantages(self, table: TurnTable, group_size: int, accelerator, metrics: dict) -> torch.Tensor:
        """(B_local, T) advantages of this process's rollouts (module docstring)."""
        all_rewards, all_exists = accelerator.gather(table.rewards), accelerator.gather(table.exists)
        group_ids = torch.arange(all_rewards.size(0), device=table.turns.device) // group_size
        n_local = table.turns.size(0)
        adv = turn_advantages(all_rewards, all_exists, group_ids,
                              accelerator.gather(table.refused))[table.start : table.start + n_local]
        metrics["call_credit/turns"].append(float(all_exists.sum(dim=1).mean().item()))
        token_adv = token_advantages(adv, table.turns)
        self._log_malformed(adv, table.refused, token_adv, table.turns, accelerator, metrics)
        return token_adv

    @staticmethod
    def _turn_index(rollout: int, turn: int, width: int, what: str) -> int:
        if turn >= width:
            raise CallCreditError(f"rollout {rollout}: {what} in model turn {turn}, but the completion has {width} "
                                  "turns")
        return turn

    @staticmethod
    def _log_malformed(adv, refused, token_adv, turns, accelerator, metrics: dict) -> None:
        """Where the refused calls' turns stand in the step's advantages (module docstring)."""
        on_refused = torch.gather(refused, 1, turns.clamp(min=0)) * (turns >= 0)
        sums = torch.stack([refused.sum(), (adv * refused).sum(), on_refused.sum(), (turns >= 0).sum(),
                            (token_adv * on_refused).sum(), token_adv.abs().sum()]).reshape(1, -1).float()
        n, adv_sum, tokens, all_tokens, mass, abs_mass = accelerator.gather(sums).sum(dim=0).tolist()
        if n == 0:
            return
        metrics["call_credit/malformed_turns"].append(n)
        metrics["call_credit/malformed_turn_advantage"].append(adv_sum / n)
        metrics["call_credit/malformed_token_share"].append(tokens / max(all_tokens, 1.0))
        metrics["call_credit/malformed_advantage_mass"].append(mass / abs_mass if abs_mass > 0 else 0.0)

    @staticmethod
    def _terms(env, names: list[str]) -> list[dict[str, float]]:
        if not hasattr(type(env), "call_rewards"):
            raise CallCreditError(f"call_credit: {type(env).__name__} has no `call_rewards` property (per-call "
                                  "reward terms, by reward function name)")
        terms = env.call_rewards
        missing = sorted({n for n in names if any(n not in t for t in terms)})
        if missing:
            raise CallCreditError(f"call_credit: {type(env).__name__}.call_rewards has no terms for the reward "
                                  f"functions {missing}; every reward function of the run needs per-call terms")
        return terms
