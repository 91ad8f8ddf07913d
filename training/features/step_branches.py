"""`step_branches`: value samples for step credit, sampled by the policy from the states its rollouts passed through
(VinePPO's Monte-Carlo values, arXiv 2410.01679), so that a call alone in its state is still compared with what the
policy does from there.

Per generation batch, up to `step_branches` continuations: each is a rollout replayed to one of its turns after the
first (the environment from the row, the model's own turns as it wrote them, each call run again: the state key must
come out as the rollout's, else `StateKeyError` naming the environment) and played on by the policy to the end,
through the held-out loop (training/evaluation/tool_loop.py: TRL's token handling, the trainer's turn limits and
sampling, its own token stream `branch_seed`). The budget goes one continuation at a time to the state whose step
group pools the fewest returns (ties: the earlier turn, then the earlier rollout). A continuation's return from that
turn on (the same per-call terms and weights as the rollouts') joins its step group's mean
(training/algorithms/step_advantages.py); its tokens never join the batch, so they need no recorded log-probs and
no loss. The rendered prompt must equal the rollout's (else `BranchError`). Metrics: `step_credit/branches` and
`step_credit/branch_generate_s`.
"""

from __future__ import annotations

import time
from collections.abc import Hashable

import torch

from training.evaluation.pairing_seeds import branch_seed
from training.evaluation.tool_loop import Branch, continue_branches
from training.tool_use.state_keys import StateKeyError


class BranchError(RuntimeError):
    """A continuation could not be started where its rollout stood."""


class StepBranches:
    def __init__(self, budget: int, tokenizer, env_factory, settings, turn_end, seed: int):
        if budget and env_factory is None:
            raise BranchError("step_branches needs the run's one environment_factory (none given, or a dict of "
                              "several)")
        self.budget, self.tokenizer, self.env_factory = budget, tokenizer, env_factory
        self.settings, self.tail, self.seed = settings, list(turn_end.tail) if turn_end else [], seed

    def value_samples(self, model, rows: list[dict], batch: dict, turns: torch.Tensor, episode_tools: list,
                      group_ids: list[int], weights: dict[str, float], step: int,
                      metrics: dict) -> dict[tuple[int, Hashable], list[float]]:
        """{(group id, state): returns of the continuations from that state} for this process's rollouts."""
        if not self.budget:
            return {}
        plan = self._plan(turns, episode_tools, group_ids)
        branches = [Branch(i, rows[i], 0, self._turns(batch, turns, i)[:turn], branch_seed(self.seed, step, k))
                    for k, (i, turn) in enumerate(plan)]
        started = time.perf_counter()
        played = continue_branches(model, self.tokenizer, branches, self.env_factory, self.settings)
        metrics["step_credit/branch_generate_s"].append(time.perf_counter() - started)
        metrics["step_credit/branches"].append(float(len(played)))
        out: dict[tuple[int, Hashable], list[float]] = {}
        for (i, turn), ep in zip(plan, played, strict=True):
            self._check(ep, batch, i, turn, episode_tools[i])
            made = ep.episode_tools
            total = sum(sum(w * terms[n] for n, w in weights.items())
                        for u, terms in zip(made.forwarded_turns, ep.env.call_rewards, strict=True) if u >= turn)
            out.setdefault((group_ids[i], episode_tools[i].turn_states[turn]), []).append(float(total))
        return out

    def _plan(self, turns: torch.Tensor, episode_tools: list, group_ids: list[int]) -> list[tuple[int, int]]:
        """(rollout, turn) of each continuation: the budget, one at a time, to the smallest pool (module docstring)."""
        pools: dict[tuple, list[int]] = {}  # (group, state) -> [returns pooled, turn, a rollout that stood there]
        for i, tools in enumerate(episode_tools):
            for turn, key in sorted(tools.turn_states.items()):
                if 1 <= turn <= int(turns[i].max()):
                    pools.setdefault((group_ids[i], key), [0, turn, i])[0] += 1
        plan = []
        for _ in range(self.budget if pools else 0):
            state = min(pools, key=lambda s: tuple(pools[s]))
            plan.append((pools[state][2], pools[state][1]))
            pools[state][0] += 1
        return plan

    def _turns(self, batch: dict, turns: torch.Tensor, i: int) -> tuple[tuple[int, ...], ...]:
        """Rollout i's model turns as the model wrote them: each run of its own tokens, and the template's tail the
        sampler appended after a call (out of the tool mask, training/features/turn_limits.py) where it follows."""
        ids = batch["completion_ids"][i].tolist()
        out = []
        for k in range(int(turns[i].max().item()) + 1):
            where = (turns[i] == k).nonzero().flatten()
            start, end = int(where[0]), int(where[-1]) + 1
            if self.tail and ids[end : end + len(self.tail)] == self.tail:
                end += len(self.tail)
            out.append(tuple(ids[start:end]))
        return tuple(out)

    @staticmethod
    def _check(ep, batch: dict, i: int, turn: int, tools) -> None:
        """The continuation started where rollout i stood: the same prompt, the same states up to `turn`."""
        prompt = batch["prompt_ids"][i][batch["prompt_mask"][i].bool()].tolist()
        if ep.prompt_ids != prompt:
            raise BranchError(f"rollout {i}: the continuation's prompt renders differently from the rollout's")
        for k, state in ep.episode_tools.turn_states.items():
            if k <= turn and state != tools.turn_states.get(k, state):
                raise StateKeyError(f"{type(ep.env).__name__}.state_key differs between a rollout and its replay "
                                    f"of the same turns: {tools.turn_states[k]!r} and {state!r} at turn {k}")
