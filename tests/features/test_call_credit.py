"""`call_credit` in a real GRPO step: the starting policy plays causal episodes through TRL's tool loop, each call's
tokens carry the advantage of what it and the later calls earned, and what the feature needs is checked."""

from __future__ import annotations

import pytest
import torch

from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from training.algorithms.trajectory import loss_mask
from training.algorithms.turn_advantages import token_turns
from training.features.call_credit import CallCredit, CallCreditError
from training.run_setup.config import ConfigError, StrictGRPOConfig
from training.run_setup.flags import StrictFlags
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR

FLAGS = StrictFlags(force_rate=0.0, assist_warmup=0, rl_disable_forced=True, ppo_record_at_sample=True,
                    strict_traj_keys=True)
EPISODE = dict(max_completion_length=400, max_tool_calling_iterations=6, max_tool_calls_per_episode=6,
               temperature=1.0)


def trainer(tmp_path, **overrides):
    return build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), FLAGS, call_credit=True,
                                        **{**EPISODE, **overrides})


def test_each_turn_carries_its_group_normalised_reward_to_go(tmp_path):
    t = trainer(tmp_path)
    batch = score(t)
    adv, turns = batch["advantages"], token_turns(batch["tool_mask"], batch["completion_mask"])
    assert adv.shape == batch["completion_ids"].shape
    # under the default void_turn_rule (credit) an episode with a void turn (here a final "Done." cut by the budget)
    # stays in the loss, its turns credited like any other
    in_loss = loss_mask(batch).sum(dim=1) > 0
    assert bool(in_loss.all())
    for i in range(adv.size(0)):
        if not in_loss[i]:
            continue
        assert torch.all(adv[i][turns[i] < 0] == 0)  # tool results and padding carry nothing
        for k in range(int(turns[i].max()) + 1):
            values = adv[i][turns[i] == k]
            assert torch.all(values == values[0])  # one advantage per turn
    # the per-call terms the advantages came from are the episode's rewards, call by call
    for env, reward in zip(t.environments, batch["sequence_rewards"], strict=True):
        weights = dict(zip(t.reward_func_names, t.reward_weights.tolist(), strict=True))
        total = sum(w * sum(term[n] for term in env.call_rewards) for n, w in weights.items())
        assert total == pytest.approx(float(reward), abs=1e-5)
    assert adv.abs().sum() > 0  # the starting policy's episodes differ within a group


def test_per_call_terms_that_do_not_sum_to_the_reward_stop_the_step(tmp_path, monkeypatch):
    real = CausalEnv.call_rewards

    def shifted(self):
        return [{**terms, "parent": terms["parent"] + 0.1} for terms in real.fget(self)]

    monkeypatch.setattr(CausalEnv, "call_rewards", property(shifted))
    with pytest.raises(CallCreditError, match="parent's per-call terms sum to"):
        score(trainer(tmp_path))


def test_an_environment_without_per_call_terms_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.delattr(CausalEnv, "call_rewards")
    with pytest.raises(CallCreditError, match="CausalEnv has no `call_rewards`"):
        score(trainer(tmp_path))


def test_call_credit_and_a_value_head_are_refused_together(tmp_path):
    with pytest.raises(ConfigError, match="call_credit=true sets the advantages per call"):
        StrictGRPOConfig(output_dir=str(tmp_path), call_credit=True, advantage_estimator="gae")


class _OneProcess:
    def gather(self, tensor):
        return tensor


def test_refused_calls_turns_are_logged_with_their_advantage_and_token_share():
    # two rollouts, turns 0..2; rollout 0's turn 1 made a refused call (2 of its tokens), rollout 1 none
    adv = torch.tensor([[0.5, -1.0, 0.2], [0.1, 0.3, -0.4]])
    refused = torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    turns = torch.tensor([[0, 1, 1, -1, 2], [0, -1, 1, 2, 2]])
    token_adv = torch.where(turns >= 0, torch.gather(adv, 1, turns.clamp(min=0)), torch.zeros(()))
    metrics = {k: [] for k in ("call_credit/malformed_turns", "call_credit/malformed_turn_advantage",
                               "call_credit/malformed_token_share", "call_credit/malformed_advantage_mass")}
    CallCredit._log_malformed(adv, refused, token_adv, turns, _OneProcess(), metrics)
    assert metrics["call_credit/malformed_turns"] == [1.0]
    assert metrics["call_credit/malformed_turn_advantage"] == [pytest.approx(-1.0)]
    assert metrics["call_credit/malformed_token_share"] == [pytest.approx(2 / 8)]
    assert metrics["call_credit/malformed_advantage_mass"] == [pytest.approx(-2.0 / token_adv.abs().sum().item())]
    first = {k: [] for k in metrics}  # rollout 1's turn 0 (1 token): its tool-result token is not the turn's
    CallCredit._log_malformed(adv, torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]), token_adv, turns, _OneProcess(),
                              first)
    assert first["call_credit/malformed_token_share"] == [pytest.approx(1 / 8)]
    quiet = {k: [] for k in metrics}
    CallCredit._log_malformed(adv, torch.zeros_like(refused), token_adv, turns, _OneProcess(), quiet)
    assert all(v == [] for v in quiet.values())  # nothing refused: nothing logged, no made-up zeros


def test_calls_past_the_budget_are_refused_in_the_turn_that_made_them_and_logged_in_a_real_step(tmp_path):
    t = trainer(tmp_path, max_tool_calls_per_episode=2)  # the starting policy makes 6 calls: the last 4 are refused
    batch = score(t)
    logged = t._metrics["train"]
    assert logged["call_credit/malformed_turns"][-1] >= 1
    assert 0 < logged["call_credit/malformed_token_share"][-1] < 1
    adv, turns = batch["advantages"], token_turns(batch["tool_mask"], batch["completion_mask"])
    late = torch.stack([adv[i][turns[i] == k][0] for i in range(adv.size(0)) for k in range(2, int(turns[i].max()))
                        if (turns[i] == k).any()])
    assert logged["call_credit/malformed_turn_advantage"][-1] == pytest.approx(late.mean().item(), abs=1e-5)
