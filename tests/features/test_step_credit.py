"""`step_credit` in a real GRPO step: the causal starting policy plays through TRL's tool loop, the tool layer notes
the state of every call, and each call's tokens carry the outer advantage plus its step group's term; what it
needs from the environment is checked by name."""

from __future__ import annotations

import pytest
import torch

from tests.features.test_call_credit import EPISODE, FLAGS
from tests.tasks.causal.trainer_support import build_sampled_causal_trainer, score
from training.algorithms.step_advantages import step_advantages, step_ids
from training.algorithms.turn_advantages import rewards_to_go, token_advantages
from training.features.step_credit import StepCredit
from training.run_setup.config import ConfigError, StrictGRPOConfig
from training.tasks.causal.env import CausalEnv
from training.tasks.causal.starting_policy import STARTING_POLICY_DIR
from training.tasks.workspace.env import WorkspaceEnv
from training.tool_use.state_keys import StateKeyError


def trainer(tmp_path, **overrides):
    return build_sampled_causal_trainer(str(tmp_path), str(STARTING_POLICY_DIR), FLAGS, step_credit=True,
                                        **{**EPISODE, **overrides})


def captured(t, monkeypatch) -> dict:
    """What the trainer hands `StepCredit.advantages`, and what it returns."""
    seen = {}
    real = StepCredit.advantages

    def spy(self, outer, table, episode_tools, *args):
        seen.update(outer=outer.clone(), table=table, tools=episode_tools)
        seen["result"] = real(self, outer, table, episode_tools, *args)
        return seen["result"]

    monkeypatch.setattr(StepCredit, "advantages", spy)
    seen["batch"] = score(t)
    return seen


@pytest.mark.parametrize("call_credit", [False, True])
def test_each_call_carries_the_outer_advantage_plus_its_step_groups_term(tmp_path, monkeypatch, call_credit):
    t = trainer(tmp_path, call_credit=call_credit)
    seen = captured(t, monkeypatch)
    batch, table = seen["batch"], seen["table"]
    assert torch.equal(batch["advantages"], seen["result"])
    keys = [[tools.turn_states.get(k) for k in range(table.rewards.size(1))] for tools in seen["tools"]]
    assert all(k[0] == (0, keys[0][0][1]) for k in keys[:4])  # a group starts in one state: its row's reset
    groups = torch.arange(table.rewards.size(0)) // t.num_generations
    steps = torch.where(table.exists.bool(), step_ids(groups.tolist(), keys), -1)
    returns = torch.where(table.refused.bool(), table.rewards * table.exists, rewards_to_go(table.rewards * table.exists))
    step = token_advantages(step_advantages(returns, steps, groups), table.turns)
    outer = seen["outer"] if call_credit else torch.where(table.turns >= 0, seen["outer"].unsqueeze(1), 0.0)
    assert torch.allclose(batch["advantages"], outer + step, atol=1e-6)
    assert step.abs().sum() > 0  # the group's rollouts made different calls from a shared state
    metrics = t._metrics["train"]
    assert metrics["step_credit/group_size"][-1] >= 1.0
    assert 0.0 <= metrics["step_credit/singleton_share"][-1] < 1.0
    model_tokens = table.turns >= 0
    share = float((batch["advantages"] != 0)[model_tokens].float().mean())
    assert metrics["step_credit/nonzero_advantage_share"][-1] == pytest.approx(share)


def test_a_key_that_differs_between_rollouts_with_the_same_calls_stops_the_step(tmp_path, monkeypatch):
    monkeypatch.setattr(CausalEnv, "state_key", property(lambda self: (self._state, id(self))))
    with pytest.raises(StateKeyError, match="CausalEnv.state_key differs between two rollouts that made the same "
                                            "calls"):
        score(trainer(tmp_path))


def test_an_environment_that_names_no_state_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.delattr(CausalEnv, "state_key")
    with pytest.raises(StateKeyError, match="step_credit: CausalEnv has no `state_key` property"):
        score(trainer(tmp_path))


def test_step_credit_and_a_value_head_are_refused_together(tmp_path):
    with pytest.raises(ConfigError, match="step_credit=true sets the advantages per call"):
        StrictGRPOConfig(output_dir=str(tmp_path), step_credit=True, advantage_estimator="hybrid")


def test_the_workspace_names_its_state_by_what_its_calls_changed():
    a, b = WorkspaceEnv(), WorkspaceEnv()
    row = {"task": "post_message", "goal_json": '{"channel": "eng", "text": "hi"}'}
    a.reset(**row), b.reset(**row)
    assert a.state_key == b.state_key and hash(a.state_key) == hash(b.state_key)
    a.read_channel("eng")  # a read changes nothing
    assert a.state_key == b.state_key
    a.send_slack_message("eng", "hi")
    assert a.state_key != b.state_key
    b.send_slack_message("#eng", "hi")  # the same message by another spelling of the channel
    assert a.state_key == b.state_key
